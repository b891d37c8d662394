"""Items with a password of their own (kSecAccessControlApplicationPassword, docs/secitem-semantics.md, "An item's
own password"): latchkeyd asks the person for the item's password when it is added (with its confirmation, in one
dialog) and at each read, through every face that hands the secret out; the secret is stored sealed under a key
scrypt derives from that password, so that neither the keychain's key nor a copy of the envelope onto another item
gives it. On a real bus with the real Security module client (secitem-client), secret-tool, the latchkey command and
the scripted pinentry."""

import re
import subprocess
import time

from conftest import LOGIN_PASSWORD, binary, secret_tool
from test_access_control import (AUTH_FAILED, INTERACTION_NOT_ALLOWED, RIGHT, USER_CANCELED, add, asked,
                                 descriptions, log, secitem, wrong_password_count)

ITEM = "password item pass phrase"


def repeats(daemon):
    return [entry for entry in log(daemon) if entry["command"] == "SETREPEAT"]


def test_adding_asks_the_items_password_and_each_read_asks_it_again(daemon, bus):
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    # One dialog with its confirmation field (SETREPEAT), naming the program and the item.
    assert len(asked(daemon)) == 1 and len(repeats(daemon)) == 1
    assert "secitem-client" in descriptions(daemon)[-1] and "“controlled alice”" in descriptions(daemon)[-1]

    daemon.set_pinentry_answers([ITEM])
    read = secitem(bus, "read-controlled", "mail", "allow")
    assert (read.returncode, read.stdout) == (0, "guarded\n"), (read.stdout, read.stderr)
    assert len(asked(daemon)) == 2
    description = descriptions(daemon)[-1]
    assert "secitem-client" in description and "has a password of its own" in description
    assert "Type the password of item “controlled alice”" in description

    # No reuse: the same connection reading twice in a row is asked twice.
    daemon.set_pinentry_answers([ITEM, ITEM])
    both = secitem(bus, "find-generic-per-line", "mail", input="1\n2\n")
    assert (both.returncode, both.stdout) == (0, "guarded\nguarded\n"), both.stdout
    assert len(asked(daemon)) == 4


def test_nobody_to_ask_adds_nothing(make_daemon, bus, tmp_path):
    make_daemon(pinentry=tmp_path / "no-such-pinentry").start()
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (1, INTERACTION_NOT_ALLOWED + "\n")
    assert secitem(bus, "find-generic", "mail").stdout == "status -25300\n", "nothing was added"


def test_cancel_at_add_adds_nothing_and_a_duplicate_asks_nothing(make_daemon, bus):
    daemon = make_daemon().start()
    daemon.set_pinentry_answers(["cancel"])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (1, USER_CANCELED + "\n")
    assert secitem(bus, "find-generic", "mail").stdout == "status -25300\n", "nothing was added"
    # An add that cannot be made (the item exists) is refused before anyone chooses a password.
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    before = len(asked(daemon))
    assert add(bus, "mail", "alice", "again", "applicationPassword") == (1, "status -25299\n")
    assert len(asked(daemon)) == before


def test_wrong_item_passwords_are_refused_and_counted_and_cancel_refuses(daemon, bus):
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    before = wrong_password_count(daemon)
    # The keychain's own password is not the item's.
    daemon.set_pinentry_answers([RIGHT, "password wrong two", "password wrong three"])
    read = secitem(bus, "read-controlled", "mail", "allow")
    assert (read.returncode, read.stdout) == (1, AUTH_FAILED + "\n"), read.stdout
    assert len(asked(daemon)) == 4, "three tries"
    assert wrong_password_count(daemon) == before + 3, "each wrong item password counts under the limit"

    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == USER_CANCELED + "\n"
    # Fail and Skip ask nothing.
    assert secitem(bus, "read-controlled", "mail", "fail").stdout == INTERACTION_NOT_ALLOWED + "\n"
    assert secitem(bus, "read-controlled", "mail", "skip").stdout == "status -25300\n"
    assert len(asked(daemon)) == 5


def test_the_stored_secret_is_not_the_secret_with_the_keychain_password_alone(make_daemon, bus, tmp_path):
    daemon = make_daemon().start()
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    daemon.stop()
    # The latchkey command opening the file itself, with the keychain's password: it does not check the flags,
    # and what it finds is the envelope, not the secret.
    answers = tmp_path / "cli-answers"
    answers.write_text(f"password {LOGIN_PASSWORD}\n")
    env = bus.env(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "unused-data"),
                  DBUS_SESSION_BUS_ADDRESS=f"unix:path={tmp_path}/no-bus", PINENTRY=str(daemon.pinentry),
                  SCRIPTED_PINENTRY_ANSWERS=str(answers), SCRIPTED_PINENTRY_LOG=str(tmp_path / "cli-log"))
    found = subprocess.run([binary("latchkey"), "find-generic-password", "-s", "mail", "-w",
                            str(daemon.keychains / "login.keychain-db")], env=env, capture_output=True,
                           timeout=60)
    assert found.returncode == 0, found.stderr
    assert b"guarded" not in found.stdout
    # Printed as hex, since it is not text: the envelope's magic, "lkip".
    assert found.stdout.lower().startswith(b"0x6c6b6970"), found.stdout


def test_secret_tool_and_the_secret_service_ask_the_items_password(daemon, bus):
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail.example.com", "alice", "guarded", "applicationPassword") == (0, "")
    daemon.set_pinentry_answers(["cancel"])
    refused = secret_tool(bus, "lookup", "service", "mail.example.com", check=False)
    assert refused.stdout == b"" and refused.returncode != 0
    daemon.set_pinentry_answers([ITEM])
    assert secret_tool(bus, "lookup", "service", "mail.example.com").stdout == b"guarded"
    assert "has a password of its own" in descriptions(daemon)[-1]
    # Replacing its secret through the Secret Service (CreateItem with replace) would store it unsealed: refused.
    stored = secret_tool(bus, "store", "--label=x", "service", "mail.example.com", "account", "alice",
                         input=b"plain", check=False)
    assert stored.returncode != 0 and b"password of its own" in stored.stderr, stored.stderr
    daemon.set_pinentry_answers([ITEM])
    assert secret_tool(bus, "lookup", "service", "mail.example.com").stdout == b"guarded"


def test_an_envelope_copied_onto_another_item_does_not_open(make_daemon, bus):
    """Someone with the keychain's password and the file copies one item's stored secret (its envelope) onto
    another item with the same item password: the envelope is bound to its item, so the other item's read fails
    with the right password, and the first item still opens."""
    daemon = make_daemon().start()
    daemon.set_pinentry_answers([ITEM, ITEM])
    assert add(bus, "mail", "alice", "alice's", "applicationPassword") == (0, "")
    assert add(bus, "mail", "bob", "bob's", "applicationPassword") == (0, "")
    daemon.stop()
    subprocess.run([binary("keychain-writer"), str(daemon.keychains / "login.keychain-db"), "--copy-secret", "mail",
                    "alice", "bob"], input=LOGIN_PASSWORD.encode(), check=True, timeout=60)
    daemon.start()
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "find-generic", "mail", "alice").stdout == "alice's\n"
    daemon.set_pinentry_answers([ITEM] * 3)
    copied = secitem(bus, "find-generic", "mail", "bob")
    assert (copied.returncode, copied.stdout) == (1, AUTH_FAILED + "\n"), copied.stdout
    assert "alice's" not in copied.stdout


def test_new_data_asks_the_items_password_and_is_sealed_under_it_again(daemon, bus):
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "update-generic", "mail", "renewed").stdout == USER_CANCELED + "\n"
    daemon.set_pinentry_answers(["password not it"] * 3)
    assert secitem(bus, "update-generic", "mail", "renewed").stdout == AUTH_FAILED + "\n"
    # Three wrong passwords make the next try wait 2 s (the keychain's wrong-password limit).
    time.sleep(2.5)
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n", "nothing changed"
    daemon.set_pinentry_answers([ITEM])
    updated = secitem(bus, "update-generic", "mail", "renewed")
    assert updated.returncode == 0, updated.stdout
    assert "has a password of its own" in descriptions(daemon)[-1]
    # Sealed under the same password: it asks it, and the wrong one does not open it.
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "renewed\n"
    daemon.set_pinentry_answers(["password not it"] * 3)
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == AUTH_FAILED + "\n"


def test_the_password_is_taken_away_and_given_by_an_update_of_the_access_control(daemon, bus):
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    # Fail and Skip: refused unasked, as for the other flags.
    before = len(asked(daemon))
    assert secitem(bus, "update-control-skip", "mail", "none").stdout == INTERACTION_NOT_ALLOWED + "\n"
    assert len(asked(daemon)) == before
    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "update-control", "mail", "none").stdout == USER_CANCELED + "\n"
    # Taken away with its password: the plain secret, read with nothing asked.
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "update-control", "mail", "none").returncode == 0
    before = len(asked(daemon))
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n"
    assert len(asked(daemon)) == before

    # Given by an update: the person chooses it (one dialog with its confirmation), then each read asks it.
    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "update-control", "mail", "applicationPassword").stdout == USER_CANCELED + "\n"
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n", "nothing changed"
    daemon.set_pinentry_answers(["password another one"])
    assert secitem(bus, "update-control", "mail", "applicationPassword").returncode == 0
    assert len(repeats(daemon)) == 3
    daemon.set_pinentry_answers(["password another one"])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n"
    assert "has a password of its own" in descriptions(daemon)[-1]


def test_with_other_constraints_the_items_password_is_needed_besides_even_with_or(daemon, bus):
    """Apple: applicationPassword "may be specified in addition to any constraints"; it is a key, not a
    constraint .or could offer instead: the keychain password (userPresence) first, then the item's."""
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "userPresence", "or", "applicationPassword") == (0, "")
    daemon.set_pinentry_answers([RIGHT, "cancel"])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == USER_CANCELED + "\n"
    daemon.set_pinentry_answers([RIGHT, ITEM])
    before = len(asked(daemon))
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n"
    assert len(asked(daemon)) == before + 2
    assert "Type your login password" in descriptions(daemon)[-2]
    assert "has a password of its own" in descriptions(daemon)[-1]


def test_the_kwallet_face_asks_the_items_password(daemon, bus):
    from test_access_control import set_access_control_raw
    from test_kwallet_face import client, wait_for_kwallet_name
    wait_for_kwallet_name(bus)
    secret_tool(bus, "store", "--label=kw", "server", "Mail", "user", "alice", input=b"kwallet secret")
    # Given a password of its own by a program speaking Keychain1 itself: the person chooses it.
    daemon.set_pinentry_answers([ITEM])
    assert set_access_control_raw(bus, "kw", 1 << 31) is None
    assert len(repeats(daemon)) == 1
    daemon.set_pinentry_answers(["cancel"])
    assert client(bus, "read", "Mail", "alice")["result"] == ""
    daemon.set_pinentry_answers([ITEM])
    assert client(bus, "read", "Mail", "alice")["result"] == "kwallet secret"
    assert "has a password of its own" in descriptions(daemon)[-1]


def test_the_items_password_is_asked_on_the_callers_terminal(make_daemon, bus, tmp_path):
    """Without --pinentry and without a display, the new item's password (with its confirmation) and each read's
    are asked where the caller is: the real pinentry-curses on its terminal (a tmux pane)."""
    import os
    import shutil

    import pytest
    from test_terminal_prompts import NO_DESKTOP, Pane
    if not (shutil.which("tmux") and os.path.exists("/usr/bin/pinentry-curses")):
        pytest.skip("needs tmux and pinentry-curses")
    make_daemon(pinentry=None, extra_env=NO_DESKTOP).start()
    pane = Pane(tmp_path, bus)
    client = binary("secitem-client")
    try:
        pane.type(f"{client} add-controlled mail alice guarded applicationPassword; echo added=$?")
        pane.wait_for(lambda screen: "Choose the item's password" in screen)
        pane.type("on the terminal")
        pane.wait_for(lambda screen: "Confirm" in screen)
        pane.type("on the terminal")
        # The command line itself may wrap before "added=$?": the status is a digit after "added=".
        added = pane.wait_for(lambda screen: re.search(r"added=\d", screen) is not None)
        assert "added=0" in added, added
        pane.type(f"{client} read-controlled mail allow; echo read=$?")
        question = pane.wait_for(lambda screen: "has a password of its own" in screen)
        assert "secitem-client" in question, question
        pane.type("on the terminal")
        after = pane.wait_for(lambda screen: re.search(r"read=\d", screen) is not None)
        assert "guarded" in after and "read=0" in after, after
    finally:
        pane.stop()


def test_an_item_flagged_while_the_flag_was_recorded_only_reads_as_then_until_given_a_password(make_daemon, bus):
    """Before the flag was enforced it was recorded with the secret stored as it was: such an item is read as
    then (no password of its own to ask), and an update of its access control gives it one."""
    daemon = make_daemon().start()
    assert add(bus, "mail", "alice", "guarded", "none") == (0, "")
    daemon.stop()
    subprocess.run([binary("keychain-writer"), str(daemon.keychains / "login.keychain-db"), "--set-access-control",
                    "mail", "alice", str(1 << 31)], input=LOGIN_PASSWORD.encode(), check=True, timeout=60)
    daemon.start()
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n"
    assert asked(daemon) == []
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "update-control", "mail", "applicationPassword").returncode == 0
    assert len(repeats(daemon)) == 1
    daemon.set_pinentry_answers(["cancel"])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == USER_CANCELED + "\n"
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n"


def test_an_update_that_gives_a_password_asks_for_access_first_and_a_refused_caller_no_password(
        make_daemon, bus, tmp_path):
    """Another program updating an item it may not change, to give it a password of its own: the access question
    comes first; refused there, it is never asked for the item's new password (the person never chooses one for
    a change that will not be made)."""
    import shutil
    daemon = make_daemon(access_policy="prompt").start()
    assert add(bus, "mail", "alice", "guarded", "none") == (0, "")
    other = tmp_path / "other-client"
    shutil.copy(binary("secitem-client"), other)
    daemon.set_pinentry_answers(["cancel", ITEM])
    updated = subprocess.run([str(other), "update-control", "mail", "applicationPassword"], env=bus.env(),
                             capture_output=True, text=True, timeout=60)
    assert updated.stdout == USER_CANCELED + "\n", (updated.stdout, updated.stderr)
    assert repeats(daemon) == [] and asked(daemon) == [], log(daemon)
    assert "other-client" in descriptions(daemon)[0]
    assert secitem(bus, "read-controlled", "mail", "allow").stdout == "guarded\n", "nothing changed"


def test_an_update_of_the_secret_over_an_item_with_a_password_and_one_gaining_it_changes_both(daemon, bus):
    """One update giving a new secret and an access control with a password of its own to two items: one has a
    password already (the person types it, and the new secret is sealed under it), the other gains one (the
    person chooses it). Once the person typed both, the update is made: the first password's opened key is kept
    for it through the second dialog."""
    daemon.set_pinentry_answers([ITEM])
    assert add(bus, "mail", "alice", "guarded", "applicationPassword") == (0, "")
    assert add(bus, "mail", "bob", "plain", "none") == (0, "")
    daemon.set_pinentry_answers([ITEM, "password of bob"])
    updated = secitem(bus, "update-secret-control", "mail", "renewed", "applicationPassword")
    assert (updated.returncode, updated.stdout) == (0, ""), (updated.stdout, updated.stderr)
    assert "has a password of its own" in descriptions(daemon)[-2], "alice's password first"
    assert len(repeats(daemon)) == 2, "then bob's new one, with its confirmation"
    # Each holds the new secret under its own password: the other's does not open it.
    daemon.set_pinentry_answers([ITEM])
    assert secitem(bus, "find-generic", "mail", "alice").stdout == "renewed\n"
    daemon.set_pinentry_answers(["password of bob"])
    assert secitem(bus, "find-generic", "mail", "bob").stdout == "renewed\n"
    daemon.set_pinentry_answers([ITEM] * 3)
    assert secitem(bus, "find-generic", "mail", "bob").stdout == AUTH_FAILED + "\n"
