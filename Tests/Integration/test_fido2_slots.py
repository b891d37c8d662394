"""FIDO2 key slots (docs/key-slots.md, "FIDO2 security key slot") end to end: the latchkey command and latchkeyd
with the real libfido2 talking to Tests/Support/soft-fido2 (a software CTAP2 authenticator on a unix socket,
named by LATCHKEY_FIDO2_DEVICE=unix:PATH) and the scripted pinentry."""

import json
import re
import sqlite3
import subprocess
import time

import control_client as control
import pytest
from conftest import LOGIN_PASSWORD, secret_tool
from soft_fido2 import SoftFido2
from test_cli import Cli
from test_key_slots import one_line_failure

class SoftKey(SoftFido2):
    """A software security key whose control file a test sets whole, and whose AAGUID it reads."""

    def set_control(self, **switches):
        self.control = dict(switches)
        self._write_control()

    def aaguid(self):
        with open(self.state_path) as state:
            return json.load(state).get("aaguid")


@pytest.fixture
def make_key(tmp_path, request):
    """Starts software keys, each a key of its own, stopped at the end of the test."""
    keys = []

    def make(*arguments):
        key = SoftKey(tmp_path / f"key{len(keys)}", *arguments)
        keys.append(key)
        request.addfinalizer(key.stop)
        return key
    return make


class KeyCli(Cli):
    """The command with LATCHKEY_FIDO2_DEVICE naming one software key (None: no variable, no key plugged in)."""

    def __init__(self, tmp_path, key=None, bus=None, **extra):
        super().__init__(tmp_path, bus)
        self.key = key
        self.extra = extra

    def env(self):
        env = super().env()
        env.pop("SSH_CONNECTION", None)
        env.pop("LATCHKEY_FIDO2_DEVICE", None)
        if self.key is not None:
            env["LATCHKEY_FIDO2_DEVICE"] = self.key.device
        env.update(self.extra)
        return env

    def slots(self, keychain):
        return self.json("list-slots", keychain)


def keychain_with_item(cli, name="work", password="pw"):
    cli.ok("create-keychain", "--stdin", name, input=password + "\n")
    cli.set_answers([f"password {password}"])
    cli.ok("add-generic-password", "-a", "me", "-s", "there", "--stdin", name, input="touched")


def test_enrolling_listing_and_removing_security_keys(tmp_path, make_key):
    plain, with_pin = make_key(), make_key("--set-pin", "1234")
    cli = KeyCli(tmp_path, plain)
    keychain_with_item(cli)

    added = cli.ok("add-slot", "fido2", "--stdin", "work", input="pw\n")
    assert added.stderr.count("touch your security key") == 2, added.stderr
    # One slot per key: the probe finds this keychain's credential on it, and nothing is asked of the key.
    one_line_failure(cli.run("add-slot", "fido2", "--stdin", "work", input="pw\n"), "holds slot 1")

    # Another key, with its PIN (the second line of standard input); named with --device.
    cli.key = None
    cli.ok("add-slot", "fido2", "--pin", "--device", with_pin.device, "--stdin", "work", input="pw\n1234\n")
    listed = cli.slots("work")
    fido2 = [s for s in listed["slots"] if s["type"] == "fido2"]
    assert [(s["id"], s["pin"]) for s in fido2] == [(1, False), (2, True)], listed
    # list-slots tells the keys apart: each one's AAGUID, and its product name.
    assert all(s["product"] for s in fido2)
    for slot, key in zip(fido2, [plain, with_pin]):
        assert slot["aaguid"].replace("-", "") == key.aaguid().replace("-", ""), (slot, key.aaguid())
    text = cli.ok("list-slots", "work").stdout
    assert "1 fido2 no-pin aaguid=" in text and "2 fido2 pin aaguid=" in text, text

    # remove-slot: by type only when there is one of it; by id; never the last password-like slot.
    one_line_failure(cli.run("remove-slot", "fido2", "--stdin", "work", input="pw\n"), "2 fido2 slots")
    cli.ok("remove-slot", "1", "--stdin", "work", input="pw\n")
    cli.ok("remove-slot", "fido2", "--stdin", "work", input="pw\n")
    assert [s["type"] for s in cli.slots("work")["slots"]] == ["password"]

    # Bad input: one line, status 1.
    one_line_failure(cli.run("add-slot", "fido2", "--pcrs", "7", "work"), "--pcrs is for a tpm2 slot")
    one_line_failure(cli.run("add-slot", "tpm2", "--device", plain.device, "work"), "--device is for a fido2")
    one_line_failure(cli.run("add-slot", "bogus", "work"), "tpm2, fido2 or recovery")


def test_a_file_opens_with_a_touch_and_falls_back_to_its_password(tmp_path, make_key):
    key = make_key()
    cli = KeyCli(tmp_path, key)
    keychain_with_item(cli)
    cli.ok("add-slot", "fido2", "--stdin", "work", input="pw\n")

    # The key plugged in holds the slot: a touch opens the file; no password is asked.
    cli.set_answers([])
    asks = cli.pinentry_asks()
    opened = cli.ok("find-generic-password", "-s", "there", "-w", "work")
    assert opened.stdout == "touched\n" and "touch your security key" in opened.stderr
    assert cli.pinentry_asks() == asks

    # Nobody touches it: one line says so and the password is asked.
    key.set_control(touch=False)
    cli.set_answers(["password pw"])
    fallen = cli.ok("find-generic-password", "-s", "there", "-w", "work")
    assert fallen.stdout == "touched\n" and "not touched in time" in fallen.stderr, fallen.stderr
    assert cli.pinentry_asks() == asks + 1

    # The key was reset (every credential gone): another key as far as the slot goes; the password is asked.
    key.set_control()
    key.restart("--reset")
    cli.set_answers(["password pw"])
    reset = cli.ok("find-generic-password", "-s", "there", "-w", "work")
    assert "not one of this keychain's" in reset.stderr, reset.stderr

    # No key at all over SSH: one line says it cannot be reached, then the password.
    remote = KeyCli(tmp_path, None, SSH_CONNECTION="192.0.2.1 5000 192.0.2.2 22")
    remote.set_answers(["password pw"])
    over_ssh = remote.ok("find-generic-password", "-s", "there", "-w", "work")
    assert "no security key is reachable over SSH" in over_ssh.stderr, over_ssh.stderr


def test_an_altered_slot_row_and_another_key_do_not_open_the_file(tmp_path, make_key):
    """Abuse: someone who can write the file edits the slot's parameters (here its salt), and another key of the
    same user (one never enrolled) is tried: neither opens the keychain, and the password still does."""
    key, other = make_key(), make_key()
    cli = KeyCli(tmp_path, key)
    keychain_with_item(cli)
    cli.ok("add-slot", "fido2", "--stdin", "work", input="pw\n")
    path = cli.keychains / "work.keychain-db"

    # Another key: the probe finds no credential of this keychain on it; the touch is never asked for.
    cli.key = other
    cli.set_answers(["password pw"])
    asks = cli.pinentry_asks()
    refused = cli.ok("find-generic-password", "-s", "there", "-w", "work")
    assert "not one of this keychain's" in refused.stderr and "touch" not in refused.stderr, refused.stderr

    # The row with one byte of its salt flipped (row: version, kind, created, length, then the parameters:
    # version, flags, salt…): the key still holds the credential, but the wrap no longer opens.
    with sqlite3.connect(path) as db:
        row = bytearray(db.execute("SELECT value FROM meta WHERE name = 'slot-1'").fetchone()[0])
        row[14 + 2] ^= 0x01
        db.execute("UPDATE meta SET value = ? WHERE name = 'slot-1'", (bytes(row),))
    cli.key = key
    cli.set_answers(["password pw"])
    altered = cli.ok("find-generic-password", "-s", "there", "-w", "work")
    assert "does not open" in altered.stderr, altered.stderr
    assert cli.pinentry_asks() == asks + 2
    assert json.loads(cli.ok("list-slots", "--json", "--unlock", "--stdin", "work", input="pw\n").stdout)[
        "check"] == "altered"


def test_the_touch_timeout_variable_only_moves_when_the_wait_gives_up(tmp_path, make_key):
    """Abuse: LATCHKEY_FIDO2_TOUCH_TIMEOUT outside 1-120 s, or not a number, is ignored (the 30 s default
    holds: 0 or -1 is not "no wait" nor "wait for ever"); within bounds it only moves when the wait for a touch
    gives up, and a touch is needed whatever it says."""
    key = make_key()
    cli = KeyCli(tmp_path, key)
    keychain_with_item(cli)
    cli.ok("add-slot", "fido2", "--stdin", "work", input="pw\n")
    # The touch comes after 1.2 s.
    key.set_control(touch=True, touch_delay=1.2)
    cli.extra = {"LATCHKEY_FIDO2_TOUCH_TIMEOUT": "1"}
    cli.set_answers(["cancel"])
    started = time.monotonic()
    given_up = cli.run("find-generic-password", "-s", "there", "-w", "work")
    assert given_up.returncode == 1 and "not touched in time" in given_up.stderr, given_up.stderr
    assert time.monotonic() - started < 10
    for value in ["0", "abc", "99999999999999999999", "121"]:
        cli.extra = {"LATCHKEY_FIDO2_TOUCH_TIMEOUT": value}
        cli.set_answers([])
        touched = cli.run("find-generic-password", "-s", "there", "-w", "work")
        assert touched.returncode == 0 and touched.stdout == "touched\n", (value, touched.stderr)
    # Nobody touches: no value opens anything.
    key.set_control(touch=False)
    cli.extra = {"LATCHKEY_FIDO2_TOUCH_TIMEOUT": "120"}
    cli.set_answers(["cancel"])
    assert "not touched in time" in cli.run("find-generic-password", "-s", "there", "-w", "work").stderr


def control_socket(daemon):
    return str(daemon.runtime / "latchkey" / "control")


def login_with_fido2_slots(tmp_path, bus, make_daemon, keys, pins=()):
    """A login keychain holding the item "mail", with a fido2 slot for each of `keys` (with `--pin` for those in
    `pins`, whose PIN is 1234), added while a daemon held it; then that daemon stops."""
    cli = KeyCli(tmp_path, None, bus)
    daemon = make_daemon(keychains=cli.keychains).start()
    secret_tool(bus, "store", "--label=mail", "service", "mail", input=b"s3cret")
    for key in keys:
        options = ["--pin"] if key in pins else []
        lines = LOGIN_PASSWORD + "\n" + ("1234\n" if key in pins else "")
        cli.ok("add-slot", "fido2", *options, "--device", key.device, "--stdin", input=lines)
    daemon.stop()
    return cli


def autologin(make_daemon, cli, key, answers):
    """latchkeyd after a login that brought no password, the security key `key` reachable, its pinentry
    answering `answers`."""
    started = make_daemon(keychains=cli.keychains, extra_env={"LATCHKEY_FIDO2_DEVICE": key.device})
    started.set_pinentry_answers(list(answers))
    # Its own pinentry log (the directory is the test's, shared by the daemons one test starts in turn).
    started.log.unlink(missing_ok=True)
    started.start(unlock=False)
    status, message = control.hand_over(control_socket(started))
    assert status == "ok", message
    return started


def pinentry_log(daemon):
    return [json.loads(line) for line in daemon.pinentry_log().splitlines()]


def asked(daemon, command):
    return [entry["argument"] for entry in pinentry_log(daemon) if entry["command"] == command]


def test_a_login_without_a_password_unlocks_with_a_touch_at_the_first_request(tmp_path, bus, make_daemon, make_key):
    key = make_key()
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [key])
    # The touch comes after 1.5 s; the touch prompt shows after 0.5 s ("hang": it stays until the key answers,
    # and the daemon ends it then).
    key.set_control(touch=True, touch_delay=1.5)
    later = autologin(make_daemon, cli, key, ["hang"])
    # Nothing happened at the login: a touch is never taken silently.
    assert "GETPIN" not in later.pinentry_log() and "CONFIRM" not in later.pinentry_log()
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert any("Touch your security key to unlock the keychain" in d for d in asked(later, "SETDESC"))
    assert "GETPIN" not in later.pinentry_log()
    assert "waiting for a touch of the security key" in later.stderr.read_text()


def test_the_right_one_of_two_keys_is_found_and_a_wrong_pin_is_counted(tmp_path, bus, make_daemon, make_key):
    first, second = make_key(), make_key("--set-pin", "1234")
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [first, second], pins=[second])
    # The second key is the one plugged in: the probe finds its slot (2), its PIN is asked; a wrong PIN is
    # asked again with the tries the key has left.
    # (The key answers at once: the touch prompt, which shows after 0.5 s, never does.)
    later = autologin(make_daemon, cli, second, ["password 9999", "password 1234"])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    errors = asked(later, "SETERROR")
    assert any("Wrong PIN: 7 tries left" in e for e in errors), errors
    assert len(asked(later, "GETPIN")) == 2


class PluggedIn:
    """Several software keys plugged in at once: LATCHKEY_FIDO2_DEVICE names them all, comma-separated."""

    def __init__(self, *keys):
        self.device = ",".join(key.device for key in keys)


def test_of_two_keys_plugged_in_at_once_the_one_holding_the_slot_opens(tmp_path, bus, make_daemon, make_key):
    stranger, enrolled = make_key(), make_key()
    both = PluggedIn(stranger, enrolled)
    # The command does not guess which of two keys to enroll: one line, name it with --device.
    cli = KeyCli(tmp_path, both)
    keychain_with_item(cli)
    one_line_failure(cli.run("add-slot", "fido2", "--stdin", "work", input="pw\n"), "2 security keys are plugged in")
    # The daemon probes both without a touch: the key that holds the slot is the second one named.
    (tmp_path / "login").mkdir()
    login = login_with_fido2_slots(tmp_path / "login", bus, make_daemon, [enrolled])
    enrolled.set_control(touch=True)
    stranger.set_control(touch=False)
    later = autologin(make_daemon, login, both, ["hang"])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert "GETPIN" not in later.pinentry_log()


def pin_retries(key):
    """The PIN tries the software key has left (its state file)."""
    with open(key.state_path) as state:
        return json.load(state)["pin_retries"]


def test_the_pin_goes_only_to_a_key_that_could_hold_the_slot(tmp_path, bus, make_daemon, make_key):
    stranger, no_pin, enrolled = make_key("--set-pin", "5678"), make_key(), make_key("--set-pin", "1234")
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [enrolled], pins=[enrolled])
    # An unrelated key with a PIN of its own is named first: the PIN never reaches it (another model, AAGUID),
    # so it counts no wrong PIN and the slot's key opens the keychain.
    later = autologin(make_daemon, cli, PluggedIn(stranger, enrolled), ["password 1234"])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert (pin_retries(stranger), pin_retries(enrolled)) == (8, 8)
    assert len(asked(later, "GETPIN")) == 1
    later.stop()
    # A key with no PIN set named first does not end the search.
    later = autologin(make_daemon, cli, PluggedIn(no_pin, enrolled), ["password 1234"])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert pin_retries(enrolled) == 8


def test_a_wrong_pin_at_add_slot_costs_the_key_one_try(tmp_path, make_key):
    first, second, third = (make_key("--set-pin", "1234") for _ in range(3))
    cli = KeyCli(tmp_path, None)
    keychain_with_item(cli)
    for key in (first, second):
        cli.ok("add-slot", "fido2", "--pin", "--device", key.device, "--stdin", "work", input="pw\n1234\n")
    # Two slots with a PIN to check the third key against: a typo is reported once, counted once.
    failed = cli.run("add-slot", "fido2", "--pin", "--device", third.device, "--stdin", "work", input="pw\n9999\n")
    one_line_failure(failed, "wrong PIN")
    assert pin_retries(third) == 7
    assert len(cli.slots("work")["slots"]) == 3


def test_a_reset_key_no_touch_and_a_cancelled_touch_fall_back_to_the_password(
        tmp_path, bus, make_daemon, make_key):
    key = make_key()
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [key])

    # Nobody touches the key: the password prompt follows, saying why.
    key.set_control(touch=False, no_touch_delay=1.5)
    later = autologin(make_daemon, cli, key, ["hang", "password " + LOGIN_PASSWORD])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert any("not touched in time" in e for e in asked(later, "SETERROR")), later.pinentry_log()
    later.stop()

    # The person cancels the touch prompt: the password prompt follows, and the key is told to stop waiting
    # (CTAPHID CANCEL) rather than blink on for the 20 s it would wait.
    key.set_control(touch=True, touch_delay=20)
    later = autologin(make_daemon, cli, key, ["cancel", "password " + LOGIN_PASSWORD])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert any("touch was cancelled" in e for e in asked(later, "SETERROR")), later.pinentry_log()
    deadline = time.monotonic() + 5
    while "cancelled" not in key.events() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert key.events() == ["cancelled"], key.events()
    later.stop()

    # The key was reset: its credential is gone, no touch is asked, the password prompt says why.
    key.set_control()
    key.restart("--reset")
    later = autologin(make_daemon, cli, key, ["password " + LOGIN_PASSWORD])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert any("not one of this keychain's" in e for e in asked(later, "SETERROR")), later.pinentry_log()
    assert "CONFIRM" not in later.pinentry_log()


def test_a_request_that_joined_a_cancelled_touch_prompt_gets_the_password_prompt_too(
        tmp_path, bus, make_daemon, make_key):
    key = make_key()
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [key])
    key.set_control(touch=True, touch_delay=20)
    # The touch prompt stays 3 s (a second application's request joins it meanwhile), then the person dismisses it
    # and types the password once: both requests get their secret.
    later = autologin(make_daemon, cli, key, ["wait 3 cancel", "password " + LOGIN_PASSWORD])
    first = subprocess.Popen(["secret-tool", "lookup", "service", "mail"], env=bus.env(), stdout=subprocess.PIPE)
    time.sleep(1.5)
    second = subprocess.Popen(["secret-tool", "lookup", "service", "mail"], env=bus.env(), stdout=subprocess.PIPE)
    assert first.communicate(timeout=30)[0] == b"s3cret"
    assert second.communicate(timeout=30)[0] == b"s3cret"
    assert len(asked(later, "CONFIRM")) == 1 and len(asked(later, "GETPIN")) == 1, later.pinentry_log()


def test_a_blocked_pin_falls_back_to_the_password_in_words(tmp_path, bus, make_daemon, make_key):
    key = make_key("--set-pin", "1234")
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [key], pins=[key])

    # Three wrong PINs in a row: the key refuses every PIN until it is re-inserted; the prompt says so and the
    # password follows.
    # (A PIN no key takes, "12", is asked again without counting.)
    later = autologin(make_daemon, cli, key, ["password 12", "password 0001", "password 0002", "password 0003",
                                              "password " + LOGIN_PASSWORD])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    errors = asked(later, "SETERROR")
    assert any("That is not a PIN" in e for e in errors) and any("Wrong PIN: 6 tries left" in e for e in errors), errors
    assert any("unplug it and plug it in again" in e or "3 wrong PINs" in e for e in errors), errors
    later.stop()

    # The key's PIN blocked for good: the slot is dead, the password opens the keychain, and the prompt says why.
    key.restart("--block-pin")
    later = autologin(make_daemon, cli, key, ["password 1234", "password " + LOGIN_PASSWORD])
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert any("blocked for good" in e for e in asked(later, "SETERROR")), later.pinentry_log()


def test_the_touch_is_asked_on_the_callers_terminal_and_not_over_ssh(tmp_path, bus, make_daemon, make_key):
    """The terminal prompt of docs/prompts-in-terminals.md: a lookup typed in a terminal is told on that terminal
    to touch the key (the touch comes after 1 s); typed in an SSH session, the password is asked there at once,
    saying the key is not reachable."""
    from test_terminal_prompts import NO_DESKTOP, Pane, lock_login
    key = make_key()
    key.set_control(touch=True, touch_delay=1.0)
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [key])
    daemon = make_daemon(keychains=cli.keychains, extra_env={"LATCHKEY_FIDO2_DEVICE": key.device, **NO_DESKTOP},
                         pinentry=None)
    daemon.start(unlock=False)
    status, message = control.hand_over(control_socket(daemon))
    assert status == "ok", message
    pane = Pane(tmp_path, bus, name="tmux-touch")
    try:
        pane.type("secret-tool lookup service mail; echo exit=$?")
        told = pane.wait_for(lambda screen: "touch your security key" in screen)
        assert "Latchkey: touch your security key within 30 s to unlock your login keychain." in told, told
        after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        assert "s3cret" in after and "exit=0" in after, after

        lock_login(bus)
        pane.type("clear; export SSH_CONNECTION='192.0.2.1 5000 192.0.2.2 22'")
        pane.type("secret-tool lookup service mail; echo exit=$?")
        prompt = pane.wait_for(lambda screen: "Enter your login password" in screen)
        assert "reachable over SSH" in prompt, prompt
        pane.type(LOGIN_PASSWORD)
        assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    finally:
        pane.stop()


def test_a_pin_slots_pin_and_touch_are_asked_on_the_callers_terminal(tmp_path, bus, make_daemon, make_key):
    """A slot with a PIN, a lookup typed in a terminal: the key's PIN is asked there (the real pinentry-curses),
    a wrong one again with the tries left, then the touch line."""
    from test_terminal_prompts import NO_DESKTOP, Pane
    key = make_key("--set-pin", "1234")
    key.set_control(touch=True, touch_delay=1.0)
    cli = login_with_fido2_slots(tmp_path, bus, make_daemon, [key], pins=[key])
    daemon = make_daemon(keychains=cli.keychains, extra_env={"LATCHKEY_FIDO2_DEVICE": key.device, **NO_DESKTOP},
                         pinentry=None)
    daemon.start(unlock=False)
    status, message = control.hand_over(control_socket(daemon))
    assert status == "ok", message
    pane = Pane(tmp_path, bus, name="tmux-pin")
    try:
        pane.type("secret-tool lookup service mail; echo exit=$?")
        pane.wait_for(lambda screen: "security key's PIN" in screen)
        pane.type("9999")
        retried = pane.wait_for(lambda screen: "tries left" in screen)
        assert "Wrong PIN: 7 tries left" in retried, retried
        pane.type("1234")
        told = pane.wait_for(lambda screen: "touch your security key" in screen)
        assert "Latchkey: touch your security key within 30 s to unlock your login keychain." in told, told
        after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        assert "s3cret" in after and "exit=0" in after, after
    finally:
        pane.stop()


def test_a_keychain_with_its_own_password_held_by_the_daemon_opens_with_a_touch(
        tmp_path, bus, session_env, make_daemon, make_key):
    """The unlock prompt of a keychain with a password of its own (a Secret Service client unlocking the
    collection) asks for the touch too, and the password when the key is not touched."""
    import secretstorage
    key = make_key()
    cli = KeyCli(tmp_path, key, bus)
    cli.ok("create-keychain", "--stdin", "work", input="work pw\n")
    cli.ok("add-slot", "fido2", "--stdin", "work", input="work pw\n")
    daemon = make_daemon(keychains=cli.keychains, extra_env={"LATCHKEY_FIDO2_DEVICE": key.device})
    daemon.own_passwords.append("work pw")
    daemon.start()

    def unlock_through_the_daemon(answers):
        cli.ok("lock-keychain", "work")
        daemon.set_pinentry_answers(answers)
        daemon.log.unlink(missing_ok=True)
        connection = secretstorage.dbus_init()
        try:
            collection = secretstorage.Collection(connection, "/org/freedesktop/secrets/collection/work")
            assert collection.is_locked()
            collection.unlock()
            assert not collection.is_locked()
        finally:
            connection.close()

    key.set_control(touch=True, touch_delay=1.0)
    unlock_through_the_daemon(["hang"])
    assert any("Touch your security key" in d for d in asked(daemon, "SETDESC")), daemon.pinentry_log()
    assert "GETPIN" not in daemon.pinentry_log()

    key.set_control(touch=False, no_touch_delay=1.0)
    unlock_through_the_daemon(["hang", "password work pw"])
    assert any("not touched in time" in e for e in asked(daemon, "SETERROR")), daemon.pinentry_log()
