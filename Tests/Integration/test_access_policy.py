"""`latchkey set-access-policy` and the policy in `show-keychain-info`: on a keychain file with no daemon, and
through latchkeyd, whose switch to allow-all waits for the user's confirmation in its (scripted) pinentry;
the policy's rows are authenticated, so an edit of the file is an error, never allow-all."""

import json
import sqlite3

from test_cli import FILE_PASSWORD, Cli


def confirmations(log_text):
    """The CONFIRM exchanges a pinentry log holds, each as the SETDESC shown before it."""
    shown, described = [], None
    for line in log_text.splitlines():
        entry = json.loads(line)
        if entry["command"] == "SETDESC":
            described = entry["argument"]
        if entry["command"] == "CONFIRM":
            shown.append(described)
    return shown


def info(cli):
    return cli.json("show-keychain-info")


def test_on_a_file_the_password_is_the_confirmation(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "login", input=FILE_PASSWORD + "\n")
    assert (info(cli)["accessPolicy"], info(cli)["accessPolicyChecked"]) == ("prompt", False)

    cli.set_answers([f"password {FILE_PASSWORD}"])
    cli.ok("set-access-policy", "allow-all")
    assert cli.pinentry_asks() == 1, "the file is unlocked with its password to authenticate the policy"
    assert info(cli)["accessPolicy"] == "allow-all"
    assert "access-policy=allow-all,unchecked" in cli.ok("show-keychain-info").stdout

    cli.set_answers(["cancel"])
    result = cli.run("set-access-policy", "prompt")
    assert result.returncode == 1 and result.stderr.startswith("latchkey: "), result.stderr
    assert info(cli)["accessPolicy"] == "allow-all", "no password, no change"

    result = cli.run("set-access-policy", "everybody")
    assert result.returncode != 0 and "everybody" in result.stderr


def test_a_policy_edited_in_the_file_is_an_error_not_allow_all(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "login", input=FILE_PASSWORD + "\n")
    cli.set_answers([f"password {FILE_PASSWORD}"] * 4)
    cli.ok("set-access-policy", "prompt")
    with sqlite3.connect(cli.keychains / "login.keychain-db") as db:
        db.execute("UPDATE meta SET value = CAST('allow-all' AS BLOB) WHERE name = 'x-access-policy'")
    db.close()
    # Locked, the name is shown as stored and said to be unchecked; the check comes with the key.
    assert (info(cli)["accessPolicy"], info(cli)["accessPolicyChecked"]) == ("allow-all", False)
    with sqlite3.connect(cli.keychains / "login.keychain-db") as db:
        db.execute("DELETE FROM meta WHERE name = 'access_policy_mac'")
    db.close()
    result = cli.run("show-keychain-info")
    assert result.returncode == 1 and "altered" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_through_the_daemon_allow_all_waits_for_the_users_confirmation(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains, access_policy="prompt").start()
    login = str(cli.keychains / "login.keychain-db")
    assert (info(cli)["accessPolicy"], info(cli)["accessPolicyChecked"], info(cli)["heldByDaemon"]) == (
        "prompt", True, True)

    # Cancel and "not confirmed" both leave the policy as it was.
    for answer in ("cancel", "deny"):
        daemon.set_pinentry_answers([answer])
        result = cli.run("set-access-policy", "allow-all")
        assert result.returncode == 1 and "did not confirm" in result.stderr, result.stderr
        assert info(cli)["accessPolicy"] == "prompt"
    asked = confirmations(daemon.pinentry_log())
    assert len(asked) == 2 and all("every application" in text and login in text for text in asked), asked

    daemon.set_pinentry_answers(["confirm"])
    cli.ok("set-access-policy", "allow-all")
    assert (info(cli)["accessPolicy"], info(cli)["accessPolicyChecked"]) == ("allow-all", True)
    assert f'Keychain "{login}" no-timeout access-policy=allow-all' == cli.ok("show-keychain-info").stdout.strip()
    assert len(confirmations(daemon.pinentry_log())) == 3

    # Back to asking, and allow-all again while it already is: no prompt.
    daemon.set_pinentry_answers([])
    cli.ok("set-access-policy", "allow-all")
    cli.ok("set-access-policy", "prompt")
    assert info(cli)["accessPolicy"] == "prompt"
    assert len(confirmations(daemon.pinentry_log())) == 3

    # The daemon wrote the authenticated rows: the file read on its own agrees.
    with sqlite3.connect(login) as db:
        rows = dict(db.execute("SELECT name, value FROM meta WHERE name LIKE '%policy%'").fetchall())
    db.close()
    assert bytes(rows["x-access-policy"]) == b"prompt" and len(rows["access_policy_mac"]) == 28


def test_through_the_daemon_with_no_way_to_ask_allow_all_is_refused(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    # The pinentry exits without answering, as one with no display and no terminal does.
    daemon = make_daemon(keychains=cli.keychains, answers=["exit"], access_policy="prompt").start()
    result = cli.run("set-access-policy", "allow-all")
    assert result.returncode == 1 and "no prompt could be shown" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert info(cli)["accessPolicy"] == "prompt"
    assert daemon.alive()


def test_through_the_daemon_an_altered_policy_is_reported(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    make_daemon(keychains=cli.keychains).start()
    cli.ok("set-access-policy", "prompt")
    with sqlite3.connect(cli.keychains / "login.keychain-db") as db:
        db.execute("UPDATE meta SET value = CAST('allow-all' AS BLOB) WHERE name = 'x-access-policy'")
    db.close()
    result = cli.run("show-keychain-info")
    assert result.returncode == 1 and "altered" in result.stderr, result.stderr
