"""Key slots (docs/key-slots.md) end to end: the latchkey command on keychain files and latchkeyd at a login
that brought no password, with a real software TPM (swtpm) and the scripted pinentry."""

import json
import os
import pty
import re
import select
import time

import control_client as control
import secretstorage
from conftest import LOGIN_PASSWORD, binary, secret_tool
from test_cli import Cli, run_in_terminal

RECOVERY_KEY = re.compile(r"^([0-9a-hjkmnp-tv-z]{5}-){6}[0-9a-hjkmnp-tv-z]{5}$")


class SlotCli(Cli):
    """The command with LATCHKEY_TPM_TCTI pointing at a software TPM."""

    def __init__(self, tmp_path, tpm, bus=None):
        super().__init__(tmp_path, bus)
        self.tpm = tpm

    def env(self):
        env = super().env()
        env["LATCHKEY_TPM_TCTI"] = self.tpm.tcti
        return env

    def slots(self, keychain):
        return json.loads(self.ok("list-slots", "--json", keychain).stdout)


def one_line_failure(result, words):
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


def test_slot_verbs_on_a_keychain_file(tmp_path, make_tpm):
    cli = SlotCli(tmp_path, make_tpm())
    cli.ok("create-keychain", "--stdin", "work", input="old pw\n")
    cli.set_answers(["password old pw"])
    cli.ok("add-generic-password", "-a", "me", "-s", "there", "--stdin", "work", input="in work")
    listed = cli.slots("work")
    assert [s["type"] for s in listed["slots"]] == ["password"] and listed["check"] == "unverified"

    # A tpm2 slot without a PIN: the file opens with no password asked (no pinentry answer is left).
    cli.ok("add-slot", "tpm2", "--stdin", "work", input="old pw\n")
    cli.set_answers([])
    assert cli.ok("find-generic-password", "-s", "there", "-w", "work").stdout == "in work\n"
    assert cli.pinentry_asks() == 1

    # The recovery key is printed once, and opens the keychain; a mistyped one and another keychain's do not.
    key = cli.ok("add-slot", "recovery", "--stdout", "--stdin", "work", input="old pw\n").stdout.strip()
    assert RECOVERY_KEY.match(key), key
    cli.ok("create-keychain", "--stdin", "other", input="other pw\n")
    other_key = cli.ok("add-slot", "recovery", "--stdout", "--stdin", "other", input="other pw\n").stdout.strip()
    right = cli.ok("unlock-keychain", "--recovery", "--stdin", "work", input=key + "\n")
    assert "the recovery key is right" in right.stderr
    one_line_failure(cli.run("unlock-keychain", "--recovery", "--stdin", "work", input=other_key + "\n"),
                     "opens no slot")
    typo = key[:3] + ("a" if key[3] != "a" else "b") + key[4:]
    one_line_failure(cli.run("unlock-keychain", "--recovery", "--stdin", "work", input=typo + "\n"), "typo")
    listed = cli.slots("work")
    assert [(s["id"], s["type"]) for s in listed["slots"]] == [(0, "password"), (1, "tpm2"), (2, "recovery")]
    assert listed["slots"][1]["pin"] is False and listed["slots"][1]["pcrs"] == []
    assert json.loads(cli.ok("list-slots", "--json", "--unlock", "--stdin", "work", input="old pw\n").stdout)[
        "check"] == "verified"
    info = cli.ok("show-keychain-info", "work").stdout
    assert "slot 1 tpm2 no-pin no-pcrs" in info and "slot 2 recovery" in info

    # A password change re-wraps only the password slot: the tpm2 and recovery slots still open it.
    cli.ok("set-keychain-password", "--stdin", "work", input="old pw\nnew pw\n")
    one_line_failure(cli.run("unlock-keychain", "--stdin", "work", input="old pw\n"), "")
    cli.ok("unlock-keychain", "--stdin", "work", input="new pw\n")
    cli.ok("unlock-keychain", "--recovery", "--stdin", "work", input=key + "\n")
    cli.set_answers([])
    assert cli.ok("find-generic-password", "-s", "there", "-w", "work").stdout == "in work\n"

    # The password slot may go while the recovery slot stays; the last of them may not.
    cli.ok("remove-slot", "password", "--stdin", "work", input="new pw\n")
    assert [s["type"] for s in cli.slots("work")["slots"]] == ["tpm2", "recovery"]
    one_line_failure(cli.run("remove-slot", "recovery", "--stdin", "work", input=key + "\n"),
                     "last password or recovery slot")
    assert [s["type"] for s in cli.slots("work")["slots"]] == ["tpm2", "recovery"]
    cli.ok("remove-slot", "1", "--stdin", "work", input=key + "\n")
    assert [s["type"] for s in cli.slots("work")["slots"]] == ["recovery"]

    # Bad input: one line, status 1, nothing changed.
    one_line_failure(cli.run("add-slot", "bogus", "work"), "tpm2, fido2 or recovery")
    one_line_failure(cli.run("add-slot", "tpm2", "--pcrs", "7,99", "work"), "0 to 23")
    one_line_failure(cli.run("remove-slot", "9", "work"), "no slot 9")
    one_line_failure(cli.run("add-slot", "recovery", "work"), "terminal")


def test_a_keychain_copied_to_another_tpm_does_not_open_from_its_tpm2_slot(tmp_path, make_tpm):
    cli = SlotCli(tmp_path, make_tpm())
    cli.ok("create-keychain", "--stdin", "work", input="pw\n")
    cli.set_answers(["password pw"])
    cli.ok("add-generic-password", "-a", "me", "-s", "there", "--stdin", "work", input="secret")
    cli.ok("add-slot", "tpm2", "--stdin", "work", input="pw\n")
    # The same file on another machine: another TPM. The slot does not open; the password is asked.
    cli.tpm = make_tpm()
    cli.set_answers(["cancel"])
    refused = cli.run("find-generic-password", "-s", "there", "-w", "work")
    assert refused.returncode == 1 and cli.pinentry_asks() == 2
    # tpm2-tss's own error lines stay quiet: the command says what happened in one line.
    assert refused.stderr.count("\n") == 1 and "esys" not in refused.stderr.lower(), refused.stderr
    cli.set_answers(["password pw"])
    assert cli.ok("find-generic-password", "-s", "there", "-w", "work").stdout == "secret\n"


def control_socket(daemon):
    return str(daemon.runtime / "latchkey" / "control")


def with_tpm2_slot(tmp_path, bus, make_daemon, make_tpm, *slot_options, slot_input=LOGIN_PASSWORD + "\n",
                   while_held=None):
    """A login keychain holding the item "mail", given a tpm2 slot (`add-slot tpm2 *slot_options`) while a
    daemon held it; `while_held(daemon)` runs before that daemon stops. The software TPM, the command and the
    environment a daemon needs to reach the TPM."""
    tpm = make_tpm()
    cli = SlotCli(tmp_path, tpm, bus)
    environment = {"LATCHKEY_TPM_TCTI": tpm.tcti}
    daemon = make_daemon(keychains=cli.keychains, extra_env=environment).start()
    secret_tool(bus, "store", "--label=mail", "service", "mail", input=b"s3cret")
    cli.ok("add-slot", "tpm2", *slot_options, "--stdin", input=slot_input)
    if while_held:
        while_held(daemon)
    daemon.stop()
    return tpm, cli, environment


def autologin(make_daemon, cli, environment, answers=(), **daemon_options):
    """latchkeyd as pam_latchkey starts it after a login that brought no password (a hand-over with none), its
    pinentry answering `answers`: the daemon and the hand-over's reply (status, message)."""
    started = make_daemon(keychains=cli.keychains, extra_env=environment, **daemon_options)
    started.set_pinentry_answers(list(answers))
    started.start(unlock=False)
    return started, control.hand_over(control_socket(started))


def test_a_login_without_a_password_unlocks_from_the_tpm2_slot(tmp_path, bus, make_daemon, make_tpm):
    def change_password(daemon):
        # A password change through the daemon (as pam_latchkey's re-key on passwd) re-wraps only the password
        # slot.
        status, message = control.change_password(control_socket(daemon), LOGIN_PASSWORD, "changed login password")
        assert status == "ok", message

    tpm, cli, environment = with_tpm2_slot(tmp_path, bus, make_daemon, make_tpm, while_held=change_password)
    # (On the file, with no bus: a bus with no latchkeyd on it would activate another Secret Service.)
    assert SlotCli(tmp_path, tpm).run("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n").returncode == 1

    # As pam_latchkey after an autologin: a hand-over with no password.
    later, (status, message) = autologin(make_daemon, cli, environment, password="changed login password")
    assert status == "ok", message
    found = secret_tool(bus, "lookup", "service", "mail")
    assert found.stdout == b"s3cret"
    assert "GETPIN" not in later.pinentry_log()


def test_a_login_without_a_password_asks_the_tpm2_pin(tmp_path, bus, make_daemon, make_tpm):
    _, cli, environment = with_tpm2_slot(tmp_path, bus, make_daemon, make_tpm, "--pin",
                                         slot_input=LOGIN_PASSWORD + "\n4711\n")
    later, (status, message) = autologin(make_daemon, cli, environment, ["password 1234", "password 4711"])
    assert status == "ok" and "PIN" in message, message
    # The first request that needs a secret asks for the PIN: a wrong one is asked again, the right one unlocks.
    found = secret_tool(bus, "lookup", "service", "mail")
    assert found.stdout == b"s3cret", found.stderr
    log = [json.loads(line) for line in later.pinentry_log().splitlines()]
    assert sum(1 for entry in log if entry["command"] == "GETPIN") == 2
    assert any(entry["command"] == "SETPROMPT" and entry["argument"] == "PIN:" for entry in log)
    assert any(entry["command"] == "SETERROR" and "Wrong PIN" in entry["argument"] for entry in log)


def test_a_tpm2_slot_bound_to_changed_pcrs_is_sealed_again_once_the_password_opened_the_keychain(
        tmp_path, bus, make_daemon, make_tpm):
    """Autologin with a tpm2 slot bound to PCR 16; then a firmware update (PCR 16 extended): the TPM refuses,
    the password is asked once, and the daemon seals the slot again to the PCR values the machine has now, so
    that the next autologin opens the keychain from the TPM again, asking nothing."""
    tpm, cli, environment = with_tpm2_slot(tmp_path, bus, make_daemon, make_tpm, "--pcrs", "16")
    login = str(cli.keychains / "login.keychain-db")

    def tpm2_slots():
        return [slot for slot in cli.slots(login)["slots"] if slot["type"] == "tpm2"]

    [before] = tpm2_slots()
    tpm.extend_pcr(16)

    def reading_after_autologin(answers):
        """Autologin, then a lookup: the daemon and how many passwords or PINs the lookup was asked for."""
        started, (status, message) = autologin(make_daemon, cli, environment, answers)
        assert status == "ok", message
        asked = started.pinentry_log().count('"GETPIN"')
        assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
        return started, started.pinentry_log().count('"GETPIN"') - asked

    def wait_for_slots(ids, daemon):
        deadline = time.monotonic() + 30
        while [slot["id"] for slot in tpm2_slots()] != ids:
            assert time.monotonic() < deadline, f"tpm2 slots {tpm2_slots()}, not {ids}: {daemon.stderr.read_text()}"
            time.sleep(0.1)

    def wait_for_line(text, daemon):
        """The worker logs its line after it changed the file: it may come a moment after the slots did."""
        deadline = time.monotonic() + 30
        while text not in daemon.stderr.read_text():
            assert time.monotonic() < deadline, daemon.stderr.read_text()
            time.sleep(0.1)

    later, asked = reading_after_autologin(["password " + LOGIN_PASSWORD])
    assert asked == 1, "the TPM should refuse a slot bound to PCRs that changed"
    # A slot sealed to the present values is added; the old one stays until the new one has opened.
    wait_for_slots([before["id"], before["id"] + 1], later)
    assert all(slot["pcrs"] == [16] and slot["pin"] is False for slot in tpm2_slots())
    wait_for_line("sealed again", later)
    later.stop()

    # The next autologin opens from the TPM, asking nothing, and the outdated slot goes.
    latest, asked = reading_after_autologin([])
    assert asked == 0
    wait_for_slots([before["id"] + 1], latest)
    wait_for_line("removed the login keychain's tpm2 slot", latest)


def test_the_login_keychain_takes_its_recovery_key_at_the_password_prompt(tmp_path, bus, make_daemon, make_tpm):
    cli = SlotCli(tmp_path, make_tpm(), bus)
    daemon = make_daemon(keychains=cli.keychains).start()
    secret_tool(bus, "store", "--label=mail", "service", "mail", input=b"s3cret")
    key = cli.ok("add-slot", "recovery", "--stdout", "--stdin", input=LOGIN_PASSWORD + "\n").stdout.strip()
    daemon.stop()
    later = make_daemon(keychains=cli.keychains)
    later.set_pinentry_answers(["password " + key])
    later.start(unlock=False)
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    # Through the command too: unlock-keychain --recovery sends it to the daemon, which tries the login
    # keychain's recovery slots.
    cli.ok("lock-keychain")
    later.set_pinentry_answers([])
    cli.ok("unlock-keychain", "--recovery", "--stdin", input=key + "\n")
    assert secret_tool(bus, "lookup", "service", "mail").stdout == b"s3cret"
    assert later.pinentry_log().count("GETPIN") == 1


def test_a_keychain_with_its_own_password_held_by_the_daemon_takes_its_recovery_key(
        tmp_path, bus, session_env, make_daemon, make_tpm):
    """A keychain with a password of its own that latchkeyd holds: `unlock-keychain --recovery` sends the
    recovery key to the daemon, which opens the keychain with it (as it does for the login keychain), and its
    unlock prompt takes it too."""
    cli = SlotCli(tmp_path, make_tpm(), bus)
    cli.ok("create-keychain", "--stdin", "work", input="work pw\n")
    key = cli.ok("add-slot", "recovery", "--stdout", "--stdin", "work", input="work pw\n").stdout.strip()
    daemon = make_daemon(keychains=cli.keychains)
    daemon.own_passwords.append("work pw")
    daemon.start()
    [work] = [k for k in cli.json("list-keychains") if k["path"].endswith("/work.keychain-db")]
    assert work["daemon"]["protection"] == "password", work
    cli.ok("lock-keychain", "work")
    assert cli.json("show-keychain-info", "work")["locked"] is True

    wrong = cli.run("unlock-keychain", "--recovery", "--stdin", "work", input="not-a-recovery-key\n")
    assert wrong.returncode == 1 and cli.json("show-keychain-info", "work")["locked"] is True
    cli.ok("unlock-keychain", "--recovery", "--stdin", "work", input=key + "\n")
    assert cli.json("show-keychain-info", "work")["locked"] is False

    # The daemon's own unlock prompt for that keychain (a Secret Service client unlocking the collection)
    # takes the recovery key as well.
    cli.ok("lock-keychain", "work")
    daemon.set_pinentry_answers(["password " + key])
    connection = secretstorage.dbus_init()
    try:
        collection = secretstorage.Collection(connection, "/org/freedesktop/secrets/collection/work")
        assert collection.is_locked()
        assert collection.unlock() is False, "the prompt was dismissed"
        assert not collection.is_locked()
    finally:
        connection.close()
    assert "GETPIN" in daemon.pinentry_log()


def test_the_pin_prompt_falls_back_to_the_password(tmp_path, bus, make_daemon, make_tpm):
    _, cli, environment = with_tpm2_slot(tmp_path, bus, make_daemon, make_tpm, "--pin",
                                         slot_input=LOGIN_PASSWORD + "\n4711\n")
    # Three wrong PINs (a forgotten PIN): the password is asked next, and opens the keychain.
    later, _ = autologin(make_daemon, cli, environment,
                         ["password 1", "password 2", "password 3", "password " + LOGIN_PASSWORD])
    found = secret_tool(bus, "lookup", "service", "mail")
    assert found.stdout == b"s3cret", found.stderr
    log = [json.loads(line) for line in later.pinentry_log().splitlines()]
    prompts = [entry["argument"] for entry in log if entry["command"] == "SETPROMPT"]
    assert prompts == ["PIN:"] * 3 + ["Password:"], prompts
    assert any(entry["command"] == "SETERROR" and "3 wrong PINs" in entry["argument"] for entry in log)


def test_the_recovery_key_is_shown_on_the_terminal_and_typed_back(tmp_path, make_tpm):
    cli = SlotCli(tmp_path, make_tpm())
    cli.ok("create-keychain", "--stdin", "tty", input="pw\n")
    status, shown = run_in_terminal(
        cli, ["add-slot", "tpm2", "--pin", "tty"],
        [("password to unlock", "pw\n"), ("new PIN for the tpm2 slot: ", "4711\n"), ("retype the PIN: ", "4711\n")])
    assert status == 0 and "4711" not in shown, shown

    # The key is shown once; a key typed back wrong saves nothing.
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(binary("latchkey"), ["latchkey", "add-slot", "recovery", "tty"], cli.env())
    shown = read_terminal_until(fd, b"password to unlock")
    os.write(fd, b"pw\n")
    shown = read_terminal_until(fd, b"type the recovery key back: ")
    key = RECOVERY_KEY_IN_TEXT.search(shown.decode()).group(0)
    os.write(fd, (key[:-1] + ("0" if key[-1] != "0" else "1") + "\n").encode())
    read_terminal_until(fd, b"\0never")
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 1
    os.close(fd)
    assert [s["type"] for s in cli.slots("tty")["slots"]] == ["password", "tpm2"]

    pid, fd = pty.fork()
    if pid == 0:
        os.execve(binary("latchkey"), ["latchkey", "add-slot", "recovery", "tty"], cli.env())
    read_terminal_until(fd, b"password to unlock")
    os.write(fd, b"pw\n")
    shown = read_terminal_until(fd, b"type the recovery key back: ")
    key = RECOVERY_KEY_IN_TEXT.search(shown.decode()).group(0)
    os.write(fd, (key.upper().replace("-", " ") + "\n").encode())
    read_terminal_until(fd, b"\0never")
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    os.close(fd)
    assert [s["type"] for s in cli.slots("tty")["slots"]] == ["password", "tpm2", "recovery"]
    cli.ok("unlock-keychain", "--recovery", "--stdin", "tty", input=key + "\n")


RECOVERY_KEY_IN_TEXT = re.compile(r"([0-9a-hjkmnp-tv-z]{5}-){6}[0-9a-hjkmnp-tv-z]{5}")


def read_terminal_until(fd, marker, timeout=30):
    """What the pseudo-terminal `fd` shows until `marker` (or its end, or the timeout)."""
    shown = b""
    deadline = time.monotonic() + timeout
    while marker not in shown and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    return shown
