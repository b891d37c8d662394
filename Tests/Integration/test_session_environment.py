"""Where prompts show. latchkeyd started before the desktop (by pam_latchkey at login, or by the bus) has no
DISPLAY or WAYLAND_DISPLAY, so a graphical pinentry cannot show a window and every request that needs the
person is denied. The session hands its variables over with `latchkey update-environment` (the package's
autostart entry runs it), and the prompts shown from then on use them: the display, the language and the
session's PINENTRY. The daemon here is started with none of them, without --pinentry, on a real bus; the
pinentry is the scripted one behaving as pinentry-gnome3 does without a display (it falls back to curses and
fails with no terminal)."""

import json
import os
import subprocess

import pytest

from conftest import SCRIPTED_PINENTRY, binary, secret_tool
from flatpak_caller import as_flatpak, needs_root

NO_DESKTOP = {"DISPLAY": None, "WAYLAND_DISPLAY": None, "XAUTHORITY": None, "PINENTRY": None}


@pytest.fixture
def desktop_pinentry(tmp_path):
    """A graphical pinentry: it needs DISPLAY or WAYLAND_DISPLAY."""
    wrapper = tmp_path / "desktop-pinentry"
    wrapper.write_text(f"#!/bin/sh\nSCRIPTED_PINENTRY_NEEDS_DISPLAY=1 exec {SCRIPTED_PINENTRY} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture
def before_the_desktop(make_daemon, bus):
    """latchkeyd as pam_latchkey starts it: no display, no pinentry named; its keychain asks (policy prompt).
    An item secret-tool made, which the latchkey command is not trusted to read."""
    daemon = make_daemon(access_policy="prompt", pinentry=None, extra_env=NO_DESKTOP).start()
    stored = secret_tool(bus, "store", "--label=Mail", "service", "mail", input=b"the secret", check=False)
    assert stored.returncode == 0, stored.stderr
    return daemon


def latchkey(bus, *args, **env):
    """The latchkey command in a session whose variables are `env` (None: unset)."""
    environment = {name: value for name, value in bus.env(**{**NO_DESKTOP, **env}).items() if value is not None}
    # A session of its own: no controlling terminal, where the daemon would show its prompt instead of the
    # desktop when the tests run in one (docs/prompts-in-terminals.md).
    return subprocess.run([binary("latchkey"), *args], env=environment, capture_output=True, text=True, timeout=60,
                          start_new_session=True)


def read_secret(daemon):
    return latchkey(daemon.bus, "find-generic-password", "-s", "mail", "-w", str(daemon.keychains / "login.keychain-db"))


def shown_with(daemon):
    """The variables of each pinentry the daemon ran, in order."""
    entries = [json.loads(line) for line in daemon.pinentry_log().splitlines()]
    return [entry["argument"] for entry in entries if entry["command"] == "ENVIRONMENT"]


def test_prompts_show_on_the_display_the_session_hands_over(before_the_desktop, bus, desktop_pinentry):
    daemon = before_the_desktop
    daemon.set_pinentry_answers(["ok", "ok"])
    # Before the session says where it is: no pinentry can show, so the read is denied at once.
    denied = read_secret(daemon)
    assert denied.returncode == 1 and denied.stdout == ""
    assert "no way to ask" in denied.stderr and len(denied.stderr.splitlines()) == 1, denied.stderr

    # The session hands over its display, language and pinentry: the same read is asked about and allowed.
    handed = latchkey(bus, "update-environment", DISPLAY=":77", LANG="C.UTF-8", PINENTRY=str(desktop_pinentry))
    assert handed.returncode == 0 and handed.stderr == "", handed.stderr
    allowed = read_secret(daemon)
    assert allowed.returncode == 0 and allowed.stdout == "the secret\n", allowed.stderr
    shown = shown_with(daemon)[-1]
    assert shown["DISPLAY"] == ":77" and shown["LANG"] == "C.UTF-8"
    assert shown["DBUS_SESSION_BUS_ADDRESS"] == bus.address

    # A session that has no display any more (its variables sent again, DISPLAY unset): denied again, no
    # pinentry started (the caller has no terminal either: docs/prompts-in-terminals.md), the answer left in
    # the script not taken, and the error says what to do.
    assert latchkey(bus, "update-environment", PINENTRY=str(desktop_pinentry)).returncode == 0
    shown_before = len(shown_with(daemon))
    again = read_secret(daemon)
    assert again.returncode == 1 and "no way to ask" in again.stderr
    assert "no prompt can be shown to this program (no display, no terminal)" in again.stderr, again.stderr
    assert len(shown_with(daemon)) == shown_before

    # One variable at a time: WAYLAND_DISPLAY alone is a display too.
    assert latchkey(bus, "update-environment", "WAYLAND_DISPLAY=wayland-1").returncode == 0
    assert read_secret(daemon).stdout == "the secret\n"
    assert shown_with(daemon)[-1]["WAYLAND_DISPLAY"] == "wayland-1"


def test_a_name_prompts_do_not_use_is_refused_and_nothing_changes(before_the_desktop, bus, desktop_pinentry):
    daemon = before_the_desktop
    daemon.set_pinentry_answers(["ok"])
    refused = latchkey(bus, "update-environment", "DISPLAY=:5", f"PINENTRY={desktop_pinentry}", "LD_PRELOAD=/x.so")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "LD_PRELOAD" in refused.stderr
    # The display that came with it was not taken either.
    denied = read_secret(daemon)
    assert denied.returncode == 1 and "no way to ask" in denied.stderr

    # The D-Bus method answers with the standard error for a bad argument; a control character is refused.
    for variables in ("LD_PRELOAD,/x.so", "DISPLAY,:5%0A"):
        sent = subprocess.run(
            ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/latchkey/keychain",
             "org.latchkey.Keychain1.UpdateEnvironment", f"dict:string:string:{variables}".replace("%0A", "\n")],
            env=bus.env(), capture_output=True, text=True, timeout=30)
        assert sent.returncode != 0 and "org.freedesktop.DBus.Error.InvalidArgs" in sent.stderr, sent.stderr
    assert read_secret(daemon).returncode == 1
    assert daemon.process.poll() is None


def test_without_a_daemon_the_command_says_so(bus):
    result = latchkey(bus, "update-environment", DISPLAY=":1")
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("latchkey: ")


def writable_directory(path, mode):
    """A directory anyone can write (mode 0777, or 01777 as /tmp)."""
    path.mkdir()
    os.chmod(path, mode)
    return path


def test_a_pinentry_a_user_process_could_have_written_is_refused(before_the_desktop, bus, desktop_pinentry, tmp_path):
    """PINENTRY runs outside any sandbox and reads the passwords typed into it: the session may name only a
    program that only root can change."""
    daemon = before_the_desktop
    daemon.set_pinentry_answers(["ok"])
    planted = writable_directory(tmp_path / "shared", 0o777) / "pinentry"
    planted.write_bytes(desktop_pinentry.read_bytes())
    planted.chmod(0o755)
    owned_by_nobody = tmp_path / "nobody-pinentry"
    owned_by_nobody.write_bytes(desktop_pinentry.read_bytes())
    owned_by_nobody.chmod(0o755)
    os.chown(owned_by_nobody, 65534, 65534)
    for program in (planted, owned_by_nobody, "relative/pinentry", "no-such-pinentry-program"):
        refused = latchkey(bus, "update-environment", "DISPLAY=:5", f"PINENTRY={program}")
        assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
        assert "PINENTRY must be a program only root can change" in refused.stderr, refused.stderr
    denied = read_secret(daemon)
    assert denied.returncode == 1 and "no way to ask" in denied.stderr, denied.stderr
    # A program only root can change (the one in the test's root-owned directory) is taken.
    assert latchkey(bus, "update-environment", "DISPLAY=:5", f"PINENTRY={desktop_pinentry}").returncode == 0
    assert read_secret(daemon).stdout == "the secret\n"


@needs_root
def test_a_flatpak_application_cannot_choose_where_prompts_show(before_the_desktop, bus, tmp_path):
    calls = [["/org/latchkey/keychain", "org.latchkey.Keychain1", "UpdateEnvironment", "(a{ss})",
              [{"DISPLAY": ":66"}]]]
    assert as_flatpak(bus, tmp_path, calls) == ["org.freedesktop.DBus.Error.AccessDenied"]
    # Nothing changed: no prompt can show.
    denied = read_secret(before_the_desktop)
    assert denied.returncode == 1 and "no way to ask" in denied.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the link and the script must belong to another user (lchown)")
def test_a_symlink_repointed_after_it_was_handed_over_runs_only_what_was_checked(
        before_the_desktop, bus, desktop_pinentry, tmp_path):
    """The session names a symlink its owner can repoint, in a directory anyone can write (as /tmp), pointing at
    a program only root can change. The daemon resolves it once, when it is handed over, and runs what it was
    checked to be: the link repointed later at a script of the link's owner changes nothing."""
    daemon = before_the_desktop
    daemon.set_pinentry_answers(["ok"])
    shared = writable_directory(tmp_path / "shared-tmp", 0o1777)
    link = shared / "pinentry"
    link.symlink_to(desktop_pinentry)
    os.lchown(link, 65534, 65534)
    handed = latchkey(bus, "update-environment", "DISPLAY=:5", f"PINENTRY={link}")
    assert handed.returncode == 0, handed.stderr

    marker = tmp_path / "planted-pinentry-ran"
    planted = shared / "planted"
    planted.write_text(f"#!/bin/sh\ntouch {marker}\nexec {desktop_pinentry} \"$@\"\n")
    planted.chmod(0o755)
    os.chown(planted, 65534, 65534)
    link.unlink()
    link.symlink_to(planted)
    os.lchown(link, 65534, 65534)

    allowed = read_secret(daemon)
    assert allowed.returncode == 0 and allowed.stdout == "the secret\n", allowed.stderr
    assert not marker.exists(), "the repointed link's script ran as the pinentry"
