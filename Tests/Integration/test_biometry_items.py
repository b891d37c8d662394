"""Biometry items end to end: latchkeyd with the real fprintd from Debian, the real polkitd and libfprint's virtual
reader on a private system bus (fprintd_system.py), items made and read through the Security module
(`secitem-client add-controlled` / `read-controlled`), the `.or` alternative's password through the scripted
pinentry. The daemon runs as the test's user (root here; the polkit rule of fprintd_system allows it), so the
fingers are enrolled for that user. docs/secitem-semantics.md ("Biometry items end to end") and
docs/fingerprint.md say what these mean."""

import getpass
import re
import subprocess
import threading
import time

import pytest

from conftest import binary, secret_tool
from fprintd_system import FAKE_OWNER_POLICY, FprintdSystem, fprintd_system  # noqa: F401 (the fixture)
from test_access_control import AUTH_FAILED, RIGHT, add, asked, secitem

USER = getpass.getuser()
TOUCH = "fprintd waits for a finger"


@pytest.fixture
def biometry_daemon(make_daemon, fprintd_system):
    """latchkeyd whose system bus is the private one with fprintd on it."""
    daemon = make_daemon(system_bus=fprintd_system).start()
    yield daemon
    assert daemon.alive(), f"latchkeyd died: {daemon.stderr.read_text()}"


def touches(daemon):
    return daemon.stderr.read_text(errors="replace").count(TOUCH)


def wait_for_touch_request(daemon, before, timeout=15):
    """Waits until latchkeyd logs that fprintd waits for a finger (the `before`+1-th time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if touches(daemon) > before:
            return True
        time.sleep(0.01)
    return False


def read_with_finger(daemon, bus, service, commands, ui="allow"):
    """`read-controlled SERVICE` while the virtual reader gets `commands` once fprintd waits for the finger:
    (returncode, stdout, seconds from the first command to the answer, whether a finger was asked for)."""
    before = touches(daemon)
    asked_at = time.monotonic()
    reader = subprocess.Popen([binary("secitem-client"), "read-controlled", service, ui], env=bus.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waited = wait_for_touch_request(daemon, before)
        started = time.monotonic()
        # From the client's start to the daemon's "touch the reader" (claim and VerifyStart included).
        daemon.touch_asked_after = started - asked_at
        if waited:
            for command in commands:
                daemon.fprintd.device_command(command)
        out, _ = reader.communicate(timeout=60)
        return reader.returncode, out, time.monotonic() - started, waited
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()


@pytest.fixture
def daemon_and_reader(biometry_daemon, fprintd_system):
    biometry_daemon.fprintd = fprintd_system
    return biometry_daemon


def test_a_biometry_any_item_is_read_with_a_matching_finger_only(daemon_and_reader, bus):
    daemon = daemon_and_reader
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "bio", "any", "fingered", "biometryAny") == (0, "")

    code, out, seconds, waited = read_with_finger(daemon, bus, "bio", ["SCAN print-a"])
    assert waited, "latchkeyd did not say that fprintd waits for a finger"
    assert (code, out) == (0, "fingered\n"), out
    assert seconds < 3, f"{seconds:.2f} s from the scan to the secret"
    print(f"client start to touch request: {daemon.touch_asked_after:.3f} s; scan to secret: {seconds:.3f} s")

    code, out, _, waited = read_with_finger(daemon, bus, "bio", ["SCAN print-b"])
    assert waited
    assert (code, out) == (1, AUTH_FAILED + "\n"), out
    assert asked(daemon) == [], "no password was asked for"
    log = daemon.stderr.read_text()
    assert "asking fprintd (up to 20 s for a finger)" in log and "the finger did not match" in log, log

    # The reader was released each time: the next read claims it again.
    assert read_with_finger(daemon, bus, "bio", ["SCAN print-a"])[:2] == (0, "fingered\n")


def test_biometry_current_set_is_voided_by_a_change_of_the_enrolled_fingers(daemon_and_reader, bus):
    daemon = daemon_and_reader
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "current", "c", "current secret", "biometryCurrentSet") == (0, "")
    assert add(bus, "any", "a", "any secret", "biometryAny") == (0, "")
    assert read_with_finger(daemon, bus, "current", ["SCAN print-a"])[:2] == (0, "current secret\n")

    daemon.fprintd.enroll(USER, "left-thumb", "print-b")
    code, out, _, waited = read_with_finger(daemon, bus, "current", ["SCAN print-a"])
    assert (code, out) == (1, AUTH_FAILED + "\n"), out
    assert not waited, "no finger is asked for an item that cannot be read any more"
    assert "the enrolled fingers changed" in daemon.stderr.read_text()
    # biometryAny takes any enrolled finger, the new one too.
    assert read_with_finger(daemon, bus, "any", ["SCAN print-b"])[:2] == (0, "any secret\n")

    # Deleting the new finger brings back the set the item was made under; deleting another one voids it.
    daemon.fprintd.delete(USER, "left-thumb")
    assert read_with_finger(daemon, bus, "current", ["SCAN print-a"])[:2] == (0, "current secret\n")
    daemon.fprintd.enroll(USER, "left-thumb", "print-b")
    daemon.fprintd.delete(USER, "right-index-finger")
    assert read_with_finger(daemon, bus, "current", ["SCAN print-b"])[:2] == (1, AUTH_FAILED + "\n")
    assert read_with_finger(daemon, bus, "any", ["SCAN print-b"])[:2] == (0, "any secret\n")


def test_adding_a_biometry_item_with_no_enrolled_finger_is_refused(daemon_and_reader, bus):
    daemon = daemon_and_reader
    assert daemon.fprintd.enrolled(USER) == []
    assert add(bus, "bio", "any", "s", "biometryAny") == (1, AUTH_FAILED + "\n")
    assert add(bus, "bio", "current", "s", "biometryCurrentSet") == (1, AUTH_FAILED + "\n")
    # With .or and the password it is made, and read with the password.
    assert add(bus, "bio", "either", "fallback", "biometryAny", "or", "devicePasscode") == (0, "")
    daemon.set_pinentry_answers([RIGHT])
    code, out, _, waited = read_with_finger(daemon, bus, "bio", [])
    assert (code, out) == (0, "fallback\n"), out
    assert not waited and len(asked(daemon)) == 1
    # Once a finger is enrolled, biometryAny is made.
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "bio2", "any", "s", "biometryAny") == (0, "")


def test_or_falls_back_to_the_password_when_no_finger_comes_in_time(daemon_and_reader, bus):
    daemon = daemon_and_reader
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "bio", "either", "fallback", "biometryAny", "or", "devicePasscode") == (0, "")
    # A matching finger: no password asked.
    assert read_with_finger(daemon, bus, "bio", ["SCAN print-a"])[:2] == (0, "fallback\n")
    assert asked(daemon) == []
    # Nobody touches the reader (it sleeps a minute): after the 20 s of the check, the password, which the
    # person takes 8 s to type: the client waits for both (28 s, more than the 25 s of an ordinary call).
    daemon.set_pinentry_answers([f"wait 8 {RIGHT}"])
    code, out, seconds, waited = read_with_finger(daemon, bus, "bio", ["SLEEP 60000"])
    assert waited
    assert (code, out) == (0, "fallback\n"), out
    assert 27 < seconds < 40, seconds
    print(f"no finger, password typed in 8 s: {seconds:.3f} s from the reader's wait to the secret")
    assert len(asked(daemon)) == 1
    assert "no finger on the reader within 20 s" in daemon.stderr.read_text()


def test_two_biometry_reads_at_once_do_not_stall_the_daemon(daemon_and_reader, bus):
    """Abuse: a second read while the first one holds the reader is refused at once (fprintd's AlreadyInUse),
    and the daemon keeps serving other clients while a read waits for a finger."""
    daemon = daemon_and_reader
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "bio", "any", "fingered", "biometryAny") == (0, "")
    secret_tool(bus, "store", "--label=plain", "service", "plain", input=b"plain secret")

    before = touches(daemon)
    first = subprocess.Popen([binary("secitem-client"), "read-controlled", "bio", "allow"], env=bus.env(),
                             stdout=subprocess.PIPE, text=True)
    try:
        assert wait_for_touch_request(daemon, before)
        started = time.monotonic()
        second = secitem(bus, "read-controlled", "bio", "allow")
        assert (second.returncode, second.stdout) == (1, AUTH_FAILED + "\n"), second.stdout
        assert time.monotonic() - started < 5
        assert "the fingerprint reader is in use" in daemon.stderr.read_text()

        started = time.monotonic()
        looked = secret_tool(bus, "lookup", "service", "plain")
        lookup_seconds = time.monotonic() - started
        assert looked.stdout == b"plain secret"
        assert lookup_seconds < 2, f"a plain lookup took {lookup_seconds:.2f} s during a pending biometry read"
        print(f"plain lookup during a pending biometry read: {lookup_seconds:.3f} s")
        # The first read still waits for its finger, and gets it (the virtual reader gives up on a verify left
        # waiting too long: the scan is sent as soon as the lookup is back).
        daemon.fprintd.device_command("SCAN print-a")
        out, _ = first.communicate(timeout=30)
        assert (first.returncode, out) == (0, "fingered\n"), out
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_a_forged_match_from_the_same_user_does_not_open_the_item(daemon_and_reader, bus):
    """Abuse: a program of the daemon's own user sends fprintd's VerifyStatus("verify-match", done) as from the
    reader's path, broadcast and to every connection, while the daemon waits for a finger; the read waits on
    for the real reader, which then reads a finger that does not match."""
    daemon = daemon_and_reader
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "bio", "any", "fingered", "biometryAny") == (0, "")
    daemon.fprintd.start_fake("forge", user=USER)
    code, out, seconds, waited = read_with_finger(daemon, bus, "bio", ["SLEEP 2000", "SCAN print-b"])
    assert waited
    assert (code, out) == (1, AUTH_FAILED + "\n"), out
    assert seconds > 1.5, "the forged match ended the read before the real reader did"


def test_a_fingerprint_service_not_owned_by_root_is_not_believed(make_daemon, bus):
    """Abuse: on a bus that lets anyone own net.reactivated.Fprint, a service of another user that answers every
    verify with a match is not fprintd: no biometry item is made or read through it; the same fake as root is
    believed (what refuses it is its owner)."""
    with FprintdSystem(fprintd=False, polkit=False, extra_policy=FAKE_OWNER_POLICY) as system:
        system.start_fake("match", user="nobody")
        daemon = make_daemon(system_bus=system).start()
        assert add(bus, "bio", "any", "s", "biometryAny") == (1, AUTH_FAILED + "\n")
        assert add(bus, "bio", "either", "fallback", "biometryAny", "or", "devicePasscode") == (0, "")
        daemon.set_pinentry_answers(["cancel"])
        assert secitem(bus, "read-controlled", "bio", "allow").stdout == "status -128\n"
        daemon.stop()
    with FprintdSystem(fprintd=False, polkit=False) as system:
        system.start_fake("match")
        daemon = make_daemon(system_bus=system).start()
        assert add(bus, "bio2", "any", "believed", "biometryAny") == (0, "")
        assert secitem(bus, "read-controlled", "bio2", "allow").stdout == "believed\n"


def terminal_daemon(make_daemon, fprintd_system):
    """latchkeyd that chooses where prompts show (no --pinentry, no desktop): a caller's terminal."""
    import os
    import shutil
    if not (shutil.which("tmux") and os.path.exists("/usr/bin/pinentry-curses")):
        pytest.skip("needs tmux and pinentry-curses")
    from test_terminal_prompts import NO_DESKTOP
    daemon = make_daemon(pinentry=None, extra_env=NO_DESKTOP, system_bus=fprintd_system).start()
    daemon.fprintd = fprintd_system
    return daemon


def test_the_person_is_told_on_the_callers_terminal_to_touch_the_reader(make_daemon, fprintd_system, bus, tmp_path):
    from test_terminal_prompts import Pane
    daemon = terminal_daemon(make_daemon, fprintd_system)
    daemon.fprintd.enroll(USER, "right-index-finger", "print-a")
    assert add(bus, "bio", "any", "fingered", "biometryAny") == (0, "")
    pane = Pane(tmp_path, bus)
    try:
        pane.type(f"{binary('secitem-client')} read-controlled bio allow; echo exit=$?")
        told = pane.wait_for(lambda screen: "touch the fingerprint reader" in screen)
        assert "Latchkey: touch the fingerprint reader within 20 s to allow the read of “controlled any”" in told
        daemon.fprintd.device_command("SCAN print-a")
        after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        assert "fingered" in after and "exit=0" in after, after
    finally:
        pane.stop()
    assert TOUCH in daemon.stderr.read_text()


def test_the_password_of_or_is_asked_on_the_callers_terminal_after_the_fingerprint_stage(make_daemon, fprintd_system,
                                                                                           bus, tmp_path):
    """The password of `.or` is asked once the fingerprint stage is over, after the request was served: it
    still shows where the caller is (its terminal), not on a desktop there is none of."""
    from test_terminal_prompts import Pane
    daemon = terminal_daemon(make_daemon, fprintd_system)
    assert add(bus, "bio", "either", "fallback", "biometryAny", "or", "devicePasscode") == (0, "")
    pane = Pane(tmp_path, bus)
    try:
        pane.type(f"{binary('secitem-client')} read-controlled bio allow; echo exit=$?")
        question = pane.wait_for(lambda screen: "confirmation at each read" in screen)
        assert "Type your login password" in question, question
        from conftest import LOGIN_PASSWORD
        pane.type(LOGIN_PASSWORD)
        after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        assert "fallback" in after and "exit=0" in after, after
    finally:
        pane.stop()
