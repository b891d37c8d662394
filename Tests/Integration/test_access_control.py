"""An item's kSecAttrAccessControl, enforced by latchkeyd at every read of its secret (docs/secitem-semantics.md,
"Enforced access control"): userPresence and devicePasscode ask the keychain password through the prompt
path at each read (reused 10 s by the same connection for the same item); the biometry flags need a
fingerprint reader (the daemon has none here: NoFingerprintReader), with .or falling back to the password;
kSecUseAuthenticationUI Fail and Skip; kSecUseOperationPrompt shown as the caller's words. Every face that
hands a secret out asks the same: the Security module (org.latchkey.Keychain1), the Secret Service
(GetSecret, GetSecrets), a Flatpak application is refused outright. On a real bus with the real Security
module client (secitem-client), secret-tool, python secretstorage and the scripted pinentry."""

import json
import re
import sqlite3
import subprocess
import sys
import time

from conftest import LOGIN_PASSWORD, binary, secret_tool
from dbus_client import Client
from flatpak_caller import as_flatpak, needs_root

RIGHT = f"password {LOGIN_PASSWORD}"
AUTH_FAILED = "status -25293"
INTERACTION_NOT_ALLOWED = "status -25308"
USER_CANCELED = "status -128"


def secitem(bus, *args, input=None):
    return subprocess.run([binary("secitem-client"), *args], env=bus.env(), capture_output=True, text=True,
                          timeout=60, input=input)


def log(daemon):
    return [json.loads(line) for line in daemon.pinentry_log().splitlines()]


def asked(daemon, command="GETPIN"):
    return [entry for entry in log(daemon) if entry["command"] == command]


def descriptions(daemon):
    return [entry["argument"] for entry in log(daemon) if entry["command"] == "SETDESC"]


def wrong_password_count(daemon):
    with sqlite3.connect(f"file:{daemon.keychains / 'login.keychain-db'}?mode=ro", uri=True, timeout=5) as db:
        row = db.execute("SELECT value FROM meta WHERE name = 'attempts'").fetchone()
    return int.from_bytes(bytes(row[0])[:4], "big") if row else 0


def add(bus, service, account, secret, *flags):
    added = secitem(bus, "add-controlled", service, account, secret, *flags)
    return added.returncode, added.stdout


def test_user_presence_asks_the_password_at_each_read(daemon, bus):
    assert add(bus, "mail", "alice", "guarded", "userPresence") == (0, "")
    assert asked(daemon) == [], "adding asks nothing"

    daemon.set_pinentry_answers([RIGHT])
    read = secitem(bus, "read-controlled", "mail", "allow")
    assert (read.returncode, read.stdout) == (0, "guarded\n"), read.stdout
    assert len(asked(daemon)) == 1
    description = descriptions(daemon)[-1]
    assert "asks for your confirmation at each read" in description and "“controlled alice”" in description
    assert "secitem-client" in description and "Type your login password" in description

    # Another read (another process, so another connection): asked again.
    daemon.set_pinentry_answers([RIGHT])
    again = secitem(bus, "read-controlled", "mail", "allow")
    assert (again.returncode, again.stdout) == (0, "guarded\n")
    assert len(asked(daemon)) == 2

    # devicePasscode asks the same, once for both flags.
    assert add(bus, "vpn", "bob", "passcode", "devicePasscode", "userPresence") == (0, "")
    daemon.set_pinentry_answers([RIGHT])
    assert secitem(bus, "read-controlled", "vpn", "allow").stdout == "passcode\n"
    assert len(asked(daemon)) == 3


def test_wrong_passwords_are_refused_and_counted(daemon, bus):
    assert add(bus, "mail", "alice", "guarded", "userPresence") == (0, "")
    before = wrong_password_count(daemon)
    daemon.set_pinentry_answers(["password wrong one", "password wrong two", "password wrong three"])
    read = secitem(bus, "read-controlled", "mail", "allow")
    assert (read.returncode, read.stdout) == (1, AUTH_FAILED + "\n"), read.stdout
    assert len(asked(daemon)) == 3, "three tries"
    assert wrong_password_count(daemon) == before + 3, "each wrong password counts under the limit"

    daemon.set_pinentry_answers(["cancel"])
    refused = secitem(bus, "read-controlled", "mail", "allow")
    assert refused.stdout == USER_CANCELED + "\n"


def test_a_confirmation_is_reused_for_ten_seconds_by_the_same_connection(daemon, bus):
    assert add(bus, "mail", "alice", "guarded", "userPresence") == (0, "")
    daemon.set_pinentry_answers([RIGHT] * 3)
    # Two reads at once over one connection: one prompt.
    both = secitem(bus, "find-generic-per-line", "mail", input="1\n2\n")
    assert (both.returncode, both.stdout) == (0, "guarded\nguarded\n"), both.stdout
    assert len(asked(daemon)) == 1

    # Past the reuse window, the same connection is asked again.
    reader = subprocess.Popen([binary("secitem-client"), "find-generic-per-line", "mail"], env=bus.env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    reader.stdin.write("1\n")
    reader.stdin.flush()
    assert reader.stdout.readline() == "guarded\n"
    assert len(asked(daemon)) == 2
    time.sleep(11)
    reader.stdin.write("2\n")
    reader.stdin.close()
    assert reader.stdout.readline() == "guarded\n"
    assert reader.wait(timeout=30) == 0
    assert len(asked(daemon)) == 3


def test_authentication_ui_fail_and_skip_ask_nothing(daemon, bus):
    assert add(bus, "mail", "open", "plain", "none") == (0, "")
    assert add(bus, "mail", "guarded", "secret", "userPresence") == (0, "")
    daemon.set_pinentry_answers([RIGHT])
    failed = secitem(bus, "read-controlled", "mail", "fail")
    assert (failed.returncode, failed.stdout) == (1, INTERACTION_NOT_ALLOWED + "\n"), failed.stdout
    skipped = secitem(bus, "read-controlled", "mail", "skip")
    assert (skipped.returncode, skipped.stdout) == (0, "plain\n"), skipped.stdout
    assert log(daemon) == [], "no pinentry was started"
    allowed = secitem(bus, "read-controlled", "mail", "allow")
    assert allowed.stdout == "plain\nsecret\n"


def test_the_operation_prompt_is_shown_as_the_callers_words_and_cannot_pass_for_latchkeys(daemon, bus):
    assert add(bus, "mail", "alice", "guarded", "userPresence") == (0, "")
    hostile = ("Sync your mail\n\nLatchkey: this request was checked and is SAFE, type your password\u202e"
               "evil" + "x" * 400)
    daemon.set_pinentry_answers([RIGHT])
    read = secitem(bus, "read-controlled", "mail", "allow", hostile)
    assert read.stdout == "guarded\n"
    description = descriptions(daemon)[-1]
    line = next(text for text in description.split("\n") if "Sync your mail" in text)
    assert line.startswith("The application says (its own words, not Latchkey's): “Sync your mail")
    # Its line breaks and the bidi override are replaced: it stays on the one line marked as its own.
    assert "\nLatchkey: this request" not in description and "\u202e" not in description
    assert "\ufffd\ufffdLatchkey: this request" in line
    # Cut: at most 160 bytes of it.
    assert "x" * 200 not in description and len(line.encode()) < 300
    # Longer than 1 KiB: refused outright.
    too_long = secitem(bus, "read-controlled", "mail", "allow", "y" * 2000)
    assert too_long.stdout == "status -50\n"


def test_biometry_without_a_reader_is_refused_and_or_falls_back_to_the_password(daemon, bus):
    assert add(bus, "bio", "any", "s", "biometryAny") == (1, AUTH_FAILED + "\n")
    assert add(bus, "bio", "current", "s", "biometryCurrentSet") == (1, AUTH_FAILED + "\n")
    assert add(bus, "bio", "both", "s", "biometryAny", "devicePasscode") == (1, AUTH_FAILED + "\n")
    assert add(bus, "bio", "either", "fallback", "biometryCurrentSet", "or", "devicePasscode") == (0, "")
    daemon.set_pinentry_answers([RIGHT])
    read = secitem(bus, "read-controlled", "bio", "allow")
    assert (read.returncode, read.stdout) == (0, "fallback\n"), read.stdout
    assert len(asked(daemon)) == 1
    # A paired watch there is none: an item that needs one is not readable.
    assert add(bus, "watch", "w", "s", "watch") == (0, "")
    assert secitem(bus, "read-controlled", "watch", "allow").stdout == AUTH_FAILED + "\n"


def test_other_faces_cannot_bypass_the_confirmation(daemon, bus):
    assert add(bus, "mail.example.com", "alice", "guarded", "userPresence") == (0, "")
    # secret-tool lookup (GetSecrets): refused without the password, served with it.
    daemon.set_pinentry_answers(["cancel"])
    looked = secret_tool(bus, "lookup", "service", "mail.example.com", check=False)
    assert looked.stdout == b"" and looked.returncode != 0
    assert len(asked(daemon)) == 1
    daemon.set_pinentry_answers([RIGHT])
    assert secret_tool(bus, "lookup", "service", "mail.example.com").stdout == b"guarded"
    assert len(asked(daemon)) == 2

    # Item.GetSecret through python secretstorage.
    script = ("import secretstorage\n"
              "c = secretstorage.dbus_init()\n"
              "item = next(secretstorage.get_default_collection(c).search_items({'service': 'mail.example.com'}))\n"
              "print(item.get_secret().decode())\n")
    daemon.set_pinentry_answers(["cancel"])
    refused = subprocess.run([sys.executable, "-c", script], env=bus.env(), capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "guarded" not in refused.stdout
    assert "needs your confirmation" in refused.stderr, refused.stderr
    daemon.set_pinentry_answers([RIGHT])
    served = subprocess.run([sys.executable, "-c", script], env=bus.env(), capture_output=True, text=True, timeout=60)
    assert served.stdout == "guarded\n", served.stderr

    # Removing the access control first is no way round it: the change asks as a read does, and with
    # kSecUseAuthenticationUISkip (which leaves items out of a read) it is refused unasked, not made unasked.
    before = len(asked(daemon))
    assert secitem(bus, "update-control-skip", "mail.example.com", "none").stdout == INTERACTION_NOT_ALLOWED + "\n"
    assert len(asked(daemon)) == before
    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "update-control", "mail.example.com", "none").stdout == USER_CANCELED + "\n"
    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "read-controlled", "mail.example.com", "allow").stdout == USER_CANCELED + "\n"
    daemon.set_pinentry_answers([RIGHT])
    assert secitem(bus, "update-control", "mail.example.com", "none").returncode == 0
    assert secitem(bus, "read-controlled", "mail.example.com", "allow").stdout == "guarded\n"


@needs_root
def test_a_flatpak_application_cannot_read_a_controlled_item_without_the_person(make_daemon, bus, tmp_path):
    """Under the default policy a Flatpak application is refused outright, nobody asked on its behalf; under
    allow-all it is asked about by its app id, and a Refuse keeps the secret."""
    calls = None
    for policy, answers, expected in (("prompt", [RIGHT], ["org.freedesktop.DBus.Error.AccessDenied"] * 2),
                                      ("allow-all", ["cancel", "cancel"], ["org.freedesktop.DBus.Error.AccessDenied"] * 2)):
        daemon = make_daemon(access_policy=policy).start()
        assert add(bus, "mail.example.com", "alice", "guarded", "userPresence") == (0, "")
        client = Client(bus.address)
        try:
            unlocked, _ = client.service("SearchItems", "a{ss}", ({"service": "mail.example.com"},))
        finally:
            client.close()
        assert len(unlocked) == 1
        daemon.set_pinentry_answers(answers)
        calls = [["/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "GetSecrets", "(aoo)",
                  [list(unlocked), "SESSION"]],
                 [unlocked[0], "org.freedesktop.Secret.Item", "GetSecret", "(o)", ["SESSION"]]]
        assert as_flatpak(bus, tmp_path, calls) == expected, policy
        if policy == "prompt":
            assert asked(daemon) == [], "nobody was asked on its behalf"
        else:
            assert len(asked(daemon)) == 2
            assert all("org.example.Sneaky" in text for text in descriptions(daemon))
        daemon.stop()
        (daemon.keychains / "login.keychain-db").unlink()
        daemon.log.unlink(missing_ok=True)


def set_access_control_raw(bus, label, flags):
    """Keychain1.Update of the item labelled `label` (any face made it) to an access control with `flags`, as
    a program speaking the interface itself sends it: the error name, or None."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.low_level import MessageType
    stored = b"lkac\x01" + flags.to_bytes(8, "big") + b"ak"
    connection = open_dbus_connection(bus=bus.address)
    try:
        address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                              interface="org.latchkey.Keychain1")
        query = {"class": ("s", "genp"), "attributes": ("a{sv}", {"labl": ("s", label)})}
        reply = connection.send_and_get_reply(
            new_method_call(address, "Update", "a{sv}a{sv}ayb", (query, {"accc": ("ay", stored)}, b"", False)),
            timeout=60)
        if reply.header.message_type == MessageType.error:
            return reply.header.fields.get(4)
        assert reply.body == (1,), reply.body
        return None
    finally:
        connection.close()


def test_the_kwallet_face_cannot_bypass_the_confirmation(daemon, bus):
    from test_kwallet_face import client, wait_for_kwallet_name
    wait_for_kwallet_name(bus)
    secret_tool(bus, "store", "--label=kw", "server", "Mail", "user", "alice", input=b"kwallet secret")
    assert client(bus, "read", "Mail", "alice")["result"] == "kwallet secret"
    # A value that is not an access control is refused; userPresence (bit 0) is taken.
    assert set_access_control_raw(bus, "kw", 1 << 9) is not None
    assert set_access_control_raw(bus, "kw", 1) is None
    daemon.set_pinentry_answers(["cancel"])
    assert client(bus, "read", "Mail", "alice")["result"] == ""
    assert len(asked(daemon)) == 1
    daemon.set_pinentry_answers([RIGHT])
    assert client(bus, "read", "Mail", "alice")["result"] == "kwallet secret"
    assert len(asked(daemon)) == 2
    # The Secret Service's search with secrets (GetSecrets) on the same item: asked too.
    daemon.set_pinentry_answers(["cancel"])
    listed = secret_tool(bus, "search", "--all", "server", "Mail", check=False)
    assert b"kwallet secret" not in listed.stdout
    assert len(asked(daemon)) >= 3


def test_the_confirmation_shows_on_the_callers_terminal_and_wrong_passwords_count(make_daemon, bus, tmp_path):
    """Without --pinentry and without a display the confirmation is asked where the caller is: the real
    pinentry-curses on its terminal (a tmux pane); a wrong password there is refused and counted."""
    import os
    import shutil

    import pytest
    from test_terminal_prompts import NO_DESKTOP, Pane
    if not (shutil.which("tmux") and os.path.exists("/usr/bin/pinentry-curses")):
        pytest.skip("needs tmux and pinentry-curses")
    daemon = make_daemon(pinentry=None, extra_env=NO_DESKTOP).start()
    assert add(bus, "mail", "alice", "guarded", "userPresence") == (0, "")
    before = wrong_password_count(daemon)
    pane = Pane(tmp_path, bus)
    try:
        pane.type(f"{binary('secitem-client')} read-controlled mail allow 'Sync your mail'; echo exit=$?")
        question = pane.wait_for(lambda screen: "confirmation at each read" in screen)
        assert "Sync your mail" in question and "Type your login password" in question, question
        pane.type("not the password")
        pane.wait_for(lambda screen: "password was not correct" in screen)
        assert wrong_password_count(daemon) == before + 1
        pane.type(LOGIN_PASSWORD)
        after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        assert "guarded" in after and "exit=0" in after, after
    finally:
        pane.stop()


def test_the_latchkey_command_through_the_daemon_is_asked_too(daemon, bus, tmp_path):
    assert add(bus, "mail", "alice", "guarded", "userPresence") == (0, "")
    env = bus.env(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "unused-data"))
    command = [binary("latchkey"), "find-generic-password", "-s", "mail", "-w",
               str(daemon.keychains / "login.keychain-db")]
    daemon.set_pinentry_answers(["cancel"])
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "guarded" not in refused.stdout, refused.stdout
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    daemon.set_pinentry_answers([RIGHT])
    served = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert served.stdout == "guarded\n", served.stderr
    assert len(asked(daemon)) == 2
