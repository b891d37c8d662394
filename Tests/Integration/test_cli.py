"""The latchkey command: every verb against latchkeyd on a private bus and
against a keychain file with no daemon, exit statuses, --json, and the
no-echo prompts through a pseudo-terminal."""

import json
import os
import pathlib
import pty
import select
import subprocess
import time

import pytest

from conftest import LOGIN_PASSWORD, SCRIPTED_PINENTRY, Bus, binary, secret_tool, set_access_policy

FILE_PASSWORD = "file password"


class Cli:
    """Runs `latchkey` with a throwaway home, data and config directory, without a controlling terminal
    (so keychain passwords are asked through the scripted pinentry)."""

    def __init__(self, tmp_path, bus=None):
        self.root = tmp_path
        self.data = tmp_path / "data"
        self.keychains = self.data / "latchkey" / "keychains"
        self.answers = tmp_path / "cli-pinentry-answers"
        self.log = tmp_path / "cli-pinentry-log"
        self.bus = bus
        self.set_answers([])

    def set_answers(self, answers):
        self.answers.write_text("".join(a + "\n" for a in answers))
        pos = self.answers.with_name(self.answers.name + ".pos")
        if pos.exists():
            pos.unlink()

    def env(self):
        env = dict(os.environ)
        env.update(HOME=str(self.root / "home"), XDG_DATA_HOME=str(self.data),
                   XDG_CONFIG_HOME=str(self.root / "config"), PINENTRY=str(SCRIPTED_PINENTRY),
                   SCRIPTED_PINENTRY_ANSWERS=str(self.answers), SCRIPTED_PINENTRY_LOG=str(self.log))
        if self.bus:
            env["DBUS_SESSION_BUS_ADDRESS"] = self.bus.address
        else:
            # No daemon: a bus address where nothing listens.
            env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={self.root}/no-bus"
        return env

    def run(self, *args, input=None):
        return subprocess.run([binary("latchkey"), *args], env=self.env(), input=input, capture_output=True,
                              text=True, timeout=60, start_new_session=True)

    def ok(self, *args, input=None):
        result = self.run(*args, input=input)
        assert result.returncode == 0, f"latchkey {args} exited {result.returncode}: {result.stderr}"
        return result

    def json(self, *args):
        return json.loads(self.ok(*args, "--json").stdout)

    def pinentry_asks(self):
        if not self.log.exists():
            return 0
        return sum(1 for line in self.log.read_text().splitlines() if json.loads(line)["command"] == "GETPIN")


@pytest.fixture(params=["daemon", "file"])
def cli(request, tmp_path, bus, make_daemon):
    """A latchkey command whose default (login) keychain is held by latchkeyd, or is a file with no daemon."""
    if request.param == "daemon":
        c = Cli(tmp_path, bus)
        c.daemon = make_daemon(keychains=c.keychains).start()
    else:
        c = Cli(tmp_path)
        c.ok("create-keychain", "--stdin", "login", input=FILE_PASSWORD + "\n")
        c.set_answers([f"password {FILE_PASSWORD}"] * 40)
    c.mode = request.param
    return c


def test_generic_password_round_trip(cli):
    cli.ok("add-generic-password", "-a", "alice", "-s", "backup.example", "-l", "Backup", "-D", "app password",
           "-j", "a comment", "-G", "generic", "-c", "abcd", "-C", "wxyz", "-T", "/bin/sh", "-A", "--stdin",
           input="s3cret\n")
    found = cli.ok("find-generic-password", "-s", "backup.example", "-g")
    lines = found.stdout.splitlines()
    assert lines[0] == f'keychain: "{cli.keychains}/login.keychain-db"'
    assert lines[2] == 'class: "genp"'
    for expected in ['    0x00000007 <blob>="Backup"', '    "acct"<blob>="alice"', '    "svce"<blob>="backup.example"',
                     '    "desc"<blob>="app password"', '    "icmt"<blob>="a comment"', '    "gena"<blob>="generic"',
                     '    "crtr"<uint32>="abcd"', '    "type"<uint32>="wxyz"']:
        assert expected in lines
    assert any(line.startswith('    "cdat"<timedate>=0x') and line.endswith('Z\\000"') for line in lines)
    assert "s3cret" not in found.stdout
    assert found.stderr.strip() == 'password: "s3cret"'

    assert cli.ok("find-generic-password", "-a", "alice", "-w").stdout == "s3cret\n"
    document = cli.json("find-generic-password", "-s", "backup.example")
    assert document["class"] == "genp"
    assert document["attributes"]["acct"] == "alice"
    assert document["attributes"]["labl"] == "Backup"
    assert document["attributes"]["crtr"] == int.from_bytes(b"abcd", "big")
    shell = os.path.realpath("/bin/sh")
    assert document["attributes"]["lk:trusted-apps"] == f"{shell}\t{sha256_of(shell)}"
    assert document["attributes"]["lk:any-app"] == "1"
    assert "password" not in document
    assert cli.json("find-generic-password", "-s", "backup.example", "-w")["password"] == "s3cret"


def sha256_of(path):
    import hashlib
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def test_access_lists_from_the_command_line(cli, tmp_path):
    """-T names programs by their real path and the SHA-256 of their file (relative paths and links resolved),
    a script with the interpreter its #! line names, flatpak:APP-ID as it is; -A opens an item to any application; list-access shows the lists (--json too);
    remove-access takes an application (or "any application") off them; bad names get one line and status 1."""
    tool = tmp_path / "bin" / "sync-tool"
    tool.parent.mkdir()
    tool.write_bytes(b"#!/bin/sh\necho sync\n")
    link = tmp_path / "tool-link"
    link.symlink_to(tool)
    cli.ok("add-generic-password", "-a", "me", "-s", "backup.example", "-T", str(link), "-T", "/bin/sh",
           "-T", "flatpak:org.example.Notes", "--stdin", input="one\n")
    cli.ok("add-generic-password", "-a", "me", "-s", "shared.example", "-A", "--stdin", input="two\n")
    cli.ok("add-generic-password", "-a", "me", "-s", "plain.example", "--stdin", input="three\n")
    shell = os.path.realpath("/bin/sh")
    # The script, as the daemon names it running: with its interpreter.
    script_name = f"{shell} {tool}"
    listing = {entry["service"]: entry for entry in cli.json("list-access")}
    assert listing["backup.example"]["anyApplication"] is False
    assert listing["backup.example"]["trusted"] == [
        {"name": script_name, "sha256": sha256_of(tool)}, {"name": shell, "sha256": sha256_of(shell)},
        {"name": "flatpak:org.example.Notes", "sha256": None}]
    assert listing["shared.example"]["anyApplication"] is True and listing["shared.example"]["trusted"] == []
    # With no -T or -A, latchkeyd trusts the program that made the item: latchkey, when the daemon can read
    # its /proc entry (latchkey is not dumpable, so only a daemon running as root can: the tests run as
    # root). A file keychain records nobody.
    creator_recorded = cli.bus is not None and os.geteuid() == 0
    latchkey = os.path.realpath(binary("latchkey"))
    assert listing["plain.example"]["anyApplication"] is False
    assert listing["plain.example"]["trusted"] == (
        [{"name": latchkey, "sha256": sha256_of(latchkey)}] if creator_recorded else [])
    text = cli.ok("list-access").stdout
    assert f"    {script_name}  sha256:{sha256_of(tool)[:16]}" in text
    assert "    any application" in text
    assert ("(no list: every application is asked)" in text) != creator_recorded

    # Revoked by any name that resolves to it, only where asked.
    cli.ok("remove-access", "-s", "backup.example", str(link))
    listing = {entry["service"]: entry for entry in cli.json("list-access")}
    assert [entry["name"] for entry in listing["backup.example"]["trusted"]] == [shell, "flatpak:org.example.Notes"]
    cli.ok("remove-access", "flatpak:org.example.Notes")
    cli.ok("remove-access", "-A")
    listing = {entry["service"]: entry for entry in cli.json("list-access")}
    assert [entry["name"] for entry in listing["backup.example"]["trusted"]] == [shell]
    assert listing["shared.example"]["anyApplication"] is False
    # The secrets are untouched.
    assert cli.ok("find-generic-password", "-s", "backup.example", "-w").stdout == "one\n"

    missing = cli.run("remove-access", "/usr/bin/nothing-trusts-this")
    assert missing.returncode == 44 and missing.stderr.count("\n") == 1
    for bad in (["-T", str(tmp_path / "no-such-program")], ["-T", "flatpak:"]):
        refused = cli.run("add-generic-password", "-a", "x", "-s", "bad.example", *bad, "--stdin", input="x\n")
        assert refused.returncode == 1 and refused.stderr.startswith("latchkey: ") and refused.stderr.count("\n") == 1
    assert cli.run("find-generic-password", "-s", "bad.example").returncode == 44
    assert cli.run("remove-access").returncode == 1


def test_label_defaults_to_service_and_binary_password_in_hex(cli):
    cli.ok("add-generic-password", "-a", "bob", "-s", "svc", "-X", "00ff41")
    found = cli.ok("find-generic-password", "-a", "bob", "-g")
    assert '    0x00000007 <blob>="svc"' in found.stdout.splitlines()
    assert found.stderr.strip() == 'password: 0x00FF41  "\\000\\377A"'
    assert cli.ok("find-generic-password", "-a", "bob", "-w").stdout == "0x00FF41\n"


def test_duplicate_refused_unless_update(cli):
    cli.ok("add-generic-password", "-a", "alice", "-s", "svc", "--stdin", input="one")
    again = cli.run("add-generic-password", "-a", "alice", "-s", "svc", "--stdin", input="two")
    assert again.returncode == 1
    assert len(again.stderr.strip().splitlines()) == 1 and "already exists" in again.stderr
    assert cli.ok("find-generic-password", "-s", "svc", "-w").stdout == "one\n"
    cli.ok("add-generic-password", "-a", "alice", "-s", "svc", "-j", "updated", "-U", "--stdin", input="two")
    assert cli.ok("find-generic-password", "-s", "svc", "-w").stdout == "two\n"
    items = cli.json("dump-keychain")
    assert [i["attributes"].get("icmt") for i in items if i["attributes"].get("svce") == "svc"] == ["updated"]
    # -U with nothing to update adds.
    cli.ok("add-generic-password", "-a", "carol", "-s", "svc", "-U", "--stdin", input="three")
    assert cli.ok("find-generic-password", "-a", "carol", "-w").stdout == "three\n"


def test_not_found_is_44_and_delete(cli):
    for verb in ("find-generic-password", "delete-generic-password", "find-internet-password",
                 "delete-internet-password"):
        result = cli.run(verb, "-s", "nothing.example")
        assert result.returncode == 44, (verb, result.stderr)
        assert result.stderr.strip() == "latchkey: The specified item could not be found in the keychain."
    cli.ok("add-generic-password", "-a", "alice", "-s", "gone", "--stdin", input="x")
    cli.ok("add-generic-password", "-a", "alice", "-s", "kept", "--stdin", input="y")
    deleted = cli.ok("delete-generic-password", "-s", "gone")
    assert '    "svce"<blob>="gone"' in deleted.stdout.splitlines()
    assert deleted.stdout.splitlines()[-1] == "password has been deleted."
    assert cli.run("find-generic-password", "-s", "gone").returncode == 44
    assert cli.ok("find-generic-password", "-s", "kept", "-w").stdout == "y\n"


def test_internet_password_round_trip(cli):
    added = cli.run("add-internet-password", "-a", "alice", "-s", "git.example", "-r", "htps", "-P", "8443",
                    "-p", "/org/repo", "-d", "realm", "-t", "form", "-w", "tok en")
    assert added.returncode == 0, added.stderr
    assert "warning" in added.stderr and "visible to other users" in added.stderr
    found = cli.json("find-internet-password", "-s", "git.example", "-r", "htps", "-P", "8443", "-w")
    attributes = found["attributes"]
    assert found["class"] == "inet"
    assert (attributes["srvr"], attributes["port"], attributes["path"], attributes["sdmn"]) == \
        ("git.example", 8443, "/org/repo", "realm")
    assert attributes["ptcl"] == "htps" and attributes["atyp"] == "form"
    assert found["password"] == "tok en"
    text = cli.ok("find-internet-password", "-s", "git.example").stdout.splitlines()
    assert '    "port"<uint32>=0x000020FB' in text and '    "ptcl"<uint32>="htps"' in text
    assert cli.run("find-internet-password", "-s", "git.example", "-P", "443").returncode == 44
    assert cli.run("find-generic-password", "-s", "git.example").returncode == 44
    cli.ok("delete-internet-password", "-s", "git.example", "-a", "alice")
    assert cli.run("find-internet-password", "-s", "git.example").returncode == 44


def test_a_hex_password_on_the_command_line_is_warned_about(cli):
    added = cli.run("add-generic-password", "-a", "alice", "-s", "hex.example", "-X", "0x6869")
    assert added.returncode == 0, added.stderr
    assert "warning" in added.stderr and "-X is visible to other users" in added.stderr
    assert cli.ok("find-generic-password", "-s", "hex.example", "-w").stdout == "hi\n"
    quiet = cli.run("add-generic-password", "-a", "bob", "-s", "hex.example", "--stdin", input="x")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr


def test_dump_keychain_and_secrets_after_confirmation(cli):
    cli.ok("add-generic-password", "-a", "alice", "-s", "one", "--stdin", input="first secret")
    cli.ok("add-internet-password", "-a", "bob", "-s", "two.example", "--stdin", input="second secret")
    items = cli.json("dump-keychain")
    assert sorted((i["class"], i["attributes"]["acct"]) for i in items) == [("genp", "alice"), ("inet", "bob")]
    assert all("password" not in i for i in items)
    text = cli.ok("dump-keychain").stdout
    assert text.count("keychain: ") == 2 and "first secret" not in text

    answers = [] if cli.mode == "daemon" else [f"password {FILE_PASSWORD}"]
    cli.set_answers(answers + ["deny"])
    refused = cli.run("dump-keychain", "-d")
    assert refused.returncode == 1 and "not confirmed" in refused.stderr
    assert "first secret" not in refused.stdout
    cli.set_answers(answers + ["confirm"])
    shown = cli.ok("dump-keychain", "-d").stdout
    assert 'data:\n"first secret"' in shown and 'data:\n"second secret"' in shown


def test_bad_input_gets_one_line_and_status_1(cli):
    for args in (["find-internet-password", "-P", "port"], ["add-generic-password", "-c", "toolong"],
                 ["add-internet-password", "-r", "https!"], ["no-such-verb"],
                 ["add-generic-password", "-s", "x", "-w", "a", "--stdin"]):
        result = cli.run(*args, input="")
        assert result.returncode == 1, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("latchkey: "), result.stderr
    assert cli.run("find-generic-password", "-s", "x", "nonexistent-keychain").returncode == 1


def test_show_and_set_keychain_settings(cli):
    login = f"{cli.keychains}/login.keychain-db"
    # The daemon holds the login keychain unlocked and checks the policy (the fixture set allow-all, as a user
    # would who wants gnome-keyring's behaviour); a file is read locked, unchecked.
    policy = "access-policy=allow-all" if cli.mode == "daemon" else "access-policy=prompt,unchecked"
    assert cli.ok("show-keychain-info").stdout.strip() == f'Keychain "{login}" no-timeout {policy}'
    cli.ok("set-keychain-settings", "-l", "-t", "600")
    assert cli.ok("show-keychain-info").stdout.strip() == f'Keychain "{login}" lock-on-sleep timeout=600s {policy}'
    # Through the daemon, settings that lock less (lock-on-sleep off here, then no timeout) are confirmed by
    # the person in the daemon's prompt; locking more asked nothing.
    if cli.mode == "daemon":
        assert "CONFIRM" not in cli.daemon.pinentry_log()
        cli.daemon.set_pinentry_answers(["confirm", "confirm"])
    cli.ok("set-keychain-settings", "-u")
    info = cli.json("show-keychain-info")
    assert (info["lockTimeout"], info["lockOnSleep"], info["heldByDaemon"]) == (300, False, cli.mode == "daemon")
    cli.ok("set-keychain-settings")
    assert cli.json("show-keychain-info")["lockTimeout"] is None
    if cli.mode == "daemon":
        assert cli.daemon.pinentry_log().count('"CONFIRM"') == 2


def test_keychain_files_with_no_daemon(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "work", input="old pw\n")
    work = cli.keychains / "work.keychain-db"
    assert work.exists() and (work.stat().st_mode & 0o777) == 0o600
    assert cli.run("create-keychain", "--stdin", "work", input="x\n").returncode == 1
    assert cli.ok("list-keychains").stdout == f'    "{work}"\n'
    assert cli.ok("login-keychain").stdout == f'    "{cli.keychains}/login.keychain-db"\n'
    cli.ok("default-keychain", "-s", "work")
    assert cli.json("default-keychain")["path"] == str(work)
    assert [k["default"] for k in cli.json("list-keychains")] == [True]

    cli.set_answers(["password old pw"] * 4)
    cli.ok("add-generic-password", "-a", "me", "-s", "there", "--stdin", input="in work")
    assert cli.ok("find-generic-password", "-s", "there", "-w", str(work)).stdout == "in work\n"

    assert cli.ok("unlock-keychain", "--stdin", input="old pw\n").stderr.startswith("latchkey: no daemon holds")
    assert cli.run("unlock-keychain", "--stdin", input="wrong\n").returncode == 1
    cli.ok("set-keychain-password", "--stdin", "work", input="old pw\nnew pw\n")
    assert cli.run("unlock-keychain", "--stdin", "work", input="old pw\n").returncode == 1
    cli.ok("unlock-keychain", "--stdin", "work", input="new pw\n")

    # Three wrong passwords through pinentry: status 1, nothing changed.
    cli.set_answers(["password a", "password b", "password c"])
    wrong = cli.run("find-generic-password", "-s", "there")
    assert wrong.returncode == 1 and "three wrong passwords" in wrong.stderr
    # Four wrong passwords in a row: the count kept in the file makes the command wait before trying more.
    cli.set_answers(["password new pw"])
    refused = cli.run("find-generic-password", "-s", "there", "-w")
    assert refused.returncode == 45 and "too many wrong passwords" in refused.stderr, refused.stderr

    def found():
        cli.set_answers(["password new pw"])
        return cli.run("find-generic-password", "-s", "there", "-w").stdout == "in work\n"
    assert wait_until(found)
    assert cli.ok("lock-keychain").stderr.startswith("latchkey: no daemon runs")

    cli.ok("delete-keychain", "work")
    assert not work.exists()
    assert cli.json("default-keychain")["path"] == f"{cli.keychains}/login.keychain-db"


def wait_until(predicate, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_daemon_keychain_verbs(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains).start()
    login = f"{cli.keychains}/login.keychain-db"
    [held] = cli.json("list-keychains")
    assert held["path"] == login and held["daemon"]["collection"] == "login" and not held["daemon"]["locked"]

    # Both faces: secret-tool and latchkey see each other's items.
    secret_tool(bus, "store", "--label=From secret-tool", "service", "st", "account", "you", input=b"via st")
    assert cli.ok("find-generic-password", "-s", "st", "-w").stdout == "via st\n"
    cli.ok("add-generic-password", "-a", "me", "-s", "cli", "--stdin", input="via cli")
    assert secret_tool(bus, "lookup", "service", "cli").stdout == b"via cli"

    cli.ok("lock-keychain")
    assert cli.json("show-keychain-info")["locked"] is True
    assert secret_tool(bus, "lookup", "service", "cli", check=False).stdout == b""
    wrong = cli.run("unlock-keychain", "--stdin", input="not it\n")
    assert wrong.returncode == 1 and "latchkey: " in wrong.stderr
    assert cli.json("show-keychain-info")["locked"] is True
    cli.ok("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n")
    assert secret_tool(bus, "lookup", "service", "cli").stdout == b"via cli"

    # A verb on a locked keychain asks for its password (pinentry here) and unlocks it in the daemon.
    cli.ok("lock-keychain", "-a")
    cli.set_answers([f"password {LOGIN_PASSWORD}"])
    assert cli.ok("find-generic-password", "-s", "cli", "-w").stdout == "via cli\n"
    assert cli.pinentry_asks() == 1
    assert cli.json("show-keychain-info")["locked"] is False

    # The daemon applies a lock timeout at once.
    cli.ok("set-keychain-settings", "-t", "1")
    assert wait_until(lambda: cli.json("show-keychain-info")["locked"])
    # Settings are authenticated under the keychain key: changing them on a locked keychain unlocks it first.
    # (Locking on sleep too locks more: nothing is asked. Locking less is confirmed by the person in the
    # daemon's prompt, test_show_and_set_keychain_settings; here the 1 s timeout could lock the keychain again
    # while the prompt shows, and the change would then fail for want of the key.)
    cli.set_answers([f"password {LOGIN_PASSWORD}"])
    cli.ok("set-keychain-settings", "-l", "-t", "1")
    assert cli.pinentry_asks() == 2
    info = cli.json("show-keychain-info")
    assert (info["lockOnSleep"], info["lockTimeout"]) == (True, 1), info
    assert "CONFIRM" not in daemon.pinentry_log()

    cli.ok("set-keychain-password", "--stdin", input=f"{LOGIN_PASSWORD}\nnew login\n")
    cli.ok("lock-keychain")
    assert cli.run("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n").returncode == 1
    cli.ok("unlock-keychain", "--stdin", input="new login\n")

    refused = cli.run("delete-keychain", "login")
    assert refused.returncode == 1 and "cannot be deleted" in refused.stderr
    assert (cli.keychains / "login.keychain-db").exists()


def test_delete_a_collection_the_daemon_holds(tmp_path, bus, make_daemon, session_env):
    import secretstorage
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains).start()
    connection = secretstorage.dbus_init()
    collection = secretstorage.create_collection(connection, "Work")
    collection.create_item("w", {"service": "work"}, b"work secret")
    # Not a test of access prompts: the new keychain lets latchkey read what this script made.
    set_access_policy(cli.keychains, "allow-all")
    [work] = [k for k in cli.json("list-keychains") if k.get("daemon", {}).get("label") == "Work"]
    assert work["daemon"]["protection"] == "login-keychain"
    assert cli.ok("find-generic-password", "-s", "work", "-w", work["path"]).stdout == "work secret\n"
    # The daemon deletes a collection once the person confirmed it (test_access_writes.py).
    daemon.set_pinentry_answers(["ok"])
    cli.ok("delete-keychain", work["path"])
    assert "DELETE the keychain “Work”" in daemon.pinentry_log()
    assert not os.path.exists(work["path"])
    assert "Work" not in [c.get_label() for c in secretstorage.get_all_collections(connection)]


class Logind:
    """Stands in for systemd-logind on a private bus playing the system bus (no logind runs in CI): owns
    org.freedesktop.login1 and sends PrepareForSleep as logind does before a suspend."""

    def __init__(self, system_bus):
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.bus_messages import message_bus
        self.connection = open_dbus_connection(bus=system_bus.address)
        reply = self.connection.send_and_get_reply(message_bus.RequestName("org.freedesktop.login1"))
        assert reply.body == (1,)  # primary owner

    def prepare_for_sleep(self, starting, destination=None, connection=None):
        from jeepney import DBusAddress, new_signal
        from jeepney.low_level import HeaderFields
        message = new_signal(DBusAddress("/org/freedesktop/login1", interface="org.freedesktop.login1.Manager"),
                             "PrepareForSleep", "b", (starting,))
        if destination:
            message.header.fields[HeaderFields.destination] = destination
        (connection or self.connection).send(message)

    def lock_session(self, path, destination=None, connection=None):
        """Session.Lock on `path`, as `loginctl lock-session` makes logind send."""
        from jeepney import DBusAddress, new_signal
        from jeepney.low_level import HeaderFields
        message = new_signal(DBusAddress(path, interface="org.freedesktop.login1.Session"), "Lock")
        if destination:
            message.header.fields[HeaderFields.destination] = destination
        (connection or self.connection).send(message)

    def answer_session_user(self, sessions, timeout=10):
        """Answers the next Properties.Get(Session, User) as logind does: `sessions` maps a session path to its
        uid. Returns the path asked about."""
        from jeepney import new_method_return
        from jeepney.low_level import HeaderFields, MessageType
        deadline = time.monotonic() + timeout
        while True:
            message = self.connection.receive(timeout=max(0.1, deadline - time.monotonic()))
            fields = message.header.fields
            if message.header.message_type == MessageType.method_call and fields.get(HeaderFields.member) == "Get":
                path = fields[HeaderFields.path]
                assert message.body == ("org.freedesktop.login1.Session", "User")
                self.connection.send(new_method_return(
                    message, "v", (("(uo)", (sessions[path], f"/org/freedesktop/login1/user/_{sessions[path]}")),)))
                return path

    @staticmethod
    def ping(connection, destination):
        """A call to the daemon's system bus connection: its reply comes after everything this connection sent
        before it has been read. Returns the error name (the daemon serves nothing there)."""
        from jeepney import DBusAddress, new_method_call
        from jeepney.low_level import HeaderFields, MessageType
        reply = connection.send_and_get_reply(new_method_call(
            DBusAddress("/", bus_name=destination, interface="org.freedesktop.DBus.Peer"), "Ping"), timeout=10)
        assert reply.header.message_type == MessageType.error
        return reply.header.fields[HeaderFields.error_name]


def test_lock_on_sleep(tmp_path, bus, make_daemon, session_env):
    """set-keychain-settings -l: logind's PrepareForSleep(true) on the system bus locks that keychain and no
    other; PrepareForSleep(false) (the resume) and the same signal sent by a process that is not logind change
    nothing."""
    import secretstorage
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.bus_messages import message_bus
    system_bus = Bus()
    try:
        cli = Cli(tmp_path, bus)
        make_daemon(keychains=cli.keychains, system_bus=system_bus).start()
        cli.ok("set-keychain-settings", "-l")
        assert cli.json("show-keychain-info")["lockOnSleep"] is True
        work = secretstorage.create_collection(secretstorage.dbus_init(), "Work")
        logind = Logind(system_bus)
        stranger = open_dbus_connection(bus=system_bus.address)
        (names,) = logind.connection.send_and_get_reply(message_bus.ListNames()).body
        [daemon_name] = [n for n in names if n.startswith(":") and n not in
                         (logind.connection.unique_name, stranger.unique_name)]

        # A forged announcement sent straight to the daemon by a process that does not own the name.
        logind.prepare_for_sleep(True, destination=daemon_name, connection=stranger)
        assert Logind.ping(stranger, daemon_name) == "org.freedesktop.DBus.Error.UnknownMethod"
        assert cli.json("show-keychain-info")["locked"] is False

        # The resume.
        logind.prepare_for_sleep(False)
        Logind.ping(logind.connection, daemon_name)
        assert cli.json("show-keychain-info")["locked"] is False

        # The suspend: the login keychain (-l) locks, the Work keychain (no -l) stays open.
        logind.prepare_for_sleep(True)
        Logind.ping(logind.connection, daemon_name)
        assert cli.json("show-keychain-info")["locked"] is True
        assert work.is_locked() is False
        stranger.close()
        logind.connection.close()
    finally:
        system_bus.stop()


class ScreenSaver:
    """Stands in for GNOME Shell's screen shield on the session bus: owns org.gnome.ScreenSaver and sends
    ActiveChanged as gnome-shell does when the screen locks."""

    def __init__(self, bus, name="org.gnome.ScreenSaver"):
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.bus_messages import message_bus
        self.name = name
        self.connection = open_dbus_connection(bus=bus.address)
        reply = self.connection.send_and_get_reply(message_bus.RequestName(name))
        assert reply.body == (1,)  # primary owner

    def active_changed(self, active, connection=None):
        from jeepney import DBusAddress, new_signal
        message = new_signal(DBusAddress("/org/gnome/ScreenSaver", interface=self.name), "ActiveChanged", "b",
                             (active,))
        (connection or self.connection).send(message)


def test_lock_on_screen_lock(tmp_path, bus, make_daemon, session_env):
    """set-keychain-settings -s: the screen saver's ActiveChanged(true) on the session bus, and logind's Lock
    for one of the user's sessions on the system bus, lock that keychain and no other; the same signals from
    a process that does not own the name, a deactivation, and a Lock for another user's session change
    nothing."""
    import secretstorage
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.bus_messages import message_bus
    system_bus = Bus()
    try:
        cli = Cli(tmp_path, bus)
        screen_saver = ScreenSaver(bus)  # owns the name before the daemon starts: told by GetNameOwner
        make_daemon(keychains=cli.keychains, system_bus=system_bus).start()
        cli.ok("set-keychain-settings", "-s")
        info = cli.json("show-keychain-info")
        assert info["lockOnScreenLock"] is True and info["lockOnSleep"] is False
        assert "lock-on-screen-lock" in cli.ok("show-keychain-info").stdout
        work = secretstorage.create_collection(secretstorage.dbus_init(), "Work")
        stranger = open_dbus_connection(bus=bus.address)

        def daemon_name(connection, *others):
            (names,) = connection.send_and_get_reply(message_bus.ListNames()).body
            [name] = [n for n in names if n.startswith(":") and n not in others]
            return name

        # The screen saver's activation, forged by a client that does not own the name; then its deactivation.
        screen_saver.active_changed(True, connection=stranger)
        screen_saver.active_changed(False)
        for connection in (stranger, screen_saver.connection):  # read by the daemon before it answers these
            connection.send_and_get_reply(new_method_call(
                DBusAddress("/", bus_name="org.freedesktop.secrets", interface="org.freedesktop.DBus.Peer"), "Ping"))
        assert cli.json("show-keychain-info")["locked"] is False
        # The screen locks: the login keychain (-s) locks, the Work keychain (no -s) stays open.
        screen_saver.active_changed(True)
        assert wait_until(lambda: cli.json("show-keychain-info")["locked"] is True)
        assert work.is_locked() is False

        cli.ok("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n")
        assert cli.json("show-keychain-info")["locked"] is False

        # logind on the system bus: a Lock forged by a stranger, and a Lock for another user's session.
        logind = Logind(system_bus)
        system_stranger = open_dbus_connection(bus=system_bus.address)
        daemon_on_system = daemon_name(logind.connection, logind.connection.unique_name,
                                       system_stranger.unique_name)
        mine, theirs = "/org/freedesktop/login1/session/_31", "/org/freedesktop/login1/session/_32"
        sessions = {mine: os.getuid(), theirs: os.getuid() + 4242}
        logind.lock_session(mine, destination=daemon_on_system, connection=system_stranger)
        logind.lock_session(theirs)
        assert logind.answer_session_user(sessions) == theirs
        Logind.ping(logind.connection, daemon_on_system)
        assert cli.json("show-keychain-info")["locked"] is False
        # `loginctl lock-session` for the user's own session.
        logind.lock_session(mine)
        assert logind.answer_session_user(sessions) == mine
        assert wait_until(lambda: cli.json("show-keychain-info")["locked"] is True)
        assert work.is_locked() is False
        for connection in (stranger, system_stranger, logind.connection, screen_saver.connection):
            connection.close()
    finally:
        system_bus.stop()


def test_daemon_without_a_system_bus_serves_and_says_so(daemon):
    """No system bus (a container): the daemon serves, and says once that keychains will not lock on sleep."""
    assert wait_until(lambda: "will not lock on sleep or with logind's session lock: no system bus" in daemon.stderr.read_text())
    assert secret_tool(daemon.bus, "store", "--label=x", "a", "b", input=b"s").returncode == 0
    assert secret_tool(daemon.bus, "lookup", "a", "b").stdout == b"s"


def run_in_terminal(cli, args, typed):
    """Runs latchkey on a pseudo-terminal; `typed` is a list of (expected prompt, text to type).
    Returns (exit status, everything the terminal showed)."""
    return run_on_terminal(binary("latchkey"), ["latchkey", *args], cli.env(), typed)


def run_on_terminal(path, argv, env, typed, timeout=30):
    """Runs the program at `path` (with `argv` and `env`) on a pseudo-terminal, its controlling terminal;
    `typed` is a list of (expected prompt, text to type). Returns (exit status, everything the terminal
    showed)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(path, argv, env)
    shown = b""
    seen = 0
    deadline = time.monotonic() + timeout

    def read_until(marker):
        nonlocal shown, seen
        while marker not in shown[seen:] and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    return
                if not chunk:
                    return
                shown += chunk

    for prompt, text in typed:
        read_until(prompt.encode())
        assert prompt.encode() in shown[seen:], shown
        seen = shown.index(prompt.encode(), seen) + len(prompt)
        os.write(fd, text.encode())
    read_until(b"\0never")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_trailing_w_prompts_without_echo(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "login", input=FILE_PASSWORD + "\n")
    status, shown = run_in_terminal(
        cli, ["add-generic-password", "-a", "alice", "-s", "tty.example", "-w"],
        [("password data for new item: ", "typed secret\n"), ("password to unlock", FILE_PASSWORD + "\n")])
    assert status == 0, shown
    assert "typed secret" not in shown and FILE_PASSWORD not in shown
    cli.set_answers([f"password {FILE_PASSWORD}"])
    assert cli.ok("find-generic-password", "-s", "tty.example", "-w").stdout == "typed secret\n"

    # Ctrl-C at the prompt cancels: status 1, nothing added.
    status, shown = run_in_terminal(
        cli, ["add-generic-password", "-a", "bob", "-s", "cancelled.example", "-w"],
        [("password data for new item: ", "\x03")])
    assert status == 1 and "cancelled" in shown
    cli.set_answers([f"password {FILE_PASSWORD}"])
    assert cli.run("find-generic-password", "-s", "cancelled.example").returncode == 44


def test_new_keychain_password_asked_twice_on_the_terminal(tmp_path):
    cli = Cli(tmp_path)
    status, shown = run_in_terminal(
        cli, ["create-keychain", "tty"],
        [("new password for", "abc\n"), ("retype new password for", "abd\n"), ("do not match", ""),
         ("new password for", "right one\n"), ("retype new password for", "right one\n")])
    assert status == 0, shown
    assert "right one" not in shown
    assert cli.ok("unlock-keychain", "--stdin", "tty", input="right one\n").returncode == 0


def test_wrong_passwords_sent_to_the_daemon_count_against_the_login_limit(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    make_daemon(keychains=cli.keychains).start()
    cli.ok("lock-keychain")
    for _ in range(3):
        wrong = cli.run("unlock-keychain", "--stdin", input="not it\n")
        assert wrong.returncode == 1 and "too many" not in wrong.stderr
    refused = cli.run("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n")
    # Its own exit status (45), and the daemon's own error name behind it.
    assert refused.returncode == 45 and "too many wrong passwords; not tried" in refused.stderr
    assert cli.json("show-keychain-info")["locked"] is True
    assert wait_until(lambda: cli.run("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n").returncode == 0)
    assert cli.json("show-keychain-info")["locked"] is False


def test_collection_opened_with_the_login_keychain_when_no_daemon_runs(tmp_path, bus, make_daemon, session_env):
    import secretstorage
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains).start()
    connection = secretstorage.dbus_init()
    secretstorage.create_collection(connection, "Work").create_item("w", {"service": "work"}, b"work secret")
    [work] = [k["path"] for k in cli.json("list-keychains") if k.get("daemon", {}).get("label") == "Work"]
    daemon.stop()
    offline = Cli(tmp_path)
    offline.set_answers([f"password {LOGIN_PASSWORD}"])
    assert offline.ok("find-generic-password", "-s", "work", "-w", work).stdout == "work secret\n"
    assert offline.pinentry_asks() == 1
    assert f"{cli.keychains}/login.keychain-db" in offline.log.read_text()


FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "KeychainStoreTests" / "Fixtures"


def test_an_older_sealed_secret_put_back_is_refused(tmp_path):
    """Rollback of one item: the sealed secret an item had before its last change, put back in its row with
    sqlite3, gives one clear line and a non-zero exit, not the old password."""
    import sqlite3
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "work", input=FILE_PASSWORD + "\n")
    cli.set_answers([f"password {FILE_PASSWORD}"] * 10)
    cli.ok("add-generic-password", "-s", "roll.example", "-a", "me", "--stdin", "work", input="first password")
    path = cli.keychains / "work.keychain-db"
    with sqlite3.connect(path) as db:
        (old,) = db.execute("SELECT secret FROM items").fetchone()
    db.close()
    cli.ok("add-generic-password", "-U", "-s", "roll.example", "-a", "me", "--stdin", "work", input="second password")
    assert cli.ok("find-generic-password", "-s", "roll.example", "-w", "work").stdout == "second password\n"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE items SET secret = ?", (old,))
    db.close()
    result = cli.run("find-generic-password", "-s", "roll.example", "-w", "work")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("latchkey: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "failed authentication" in result.stderr and "first password" not in result.stderr


def test_a_damaged_secret_can_be_replaced_by_an_update(tmp_path):
    """An update that replaces an item's secret does not decrypt the old one: an item whose sealed secret was
    damaged in the file (sqlite3) still takes a new password through `add-generic-password -U`, which then
    reads back; the damaged one never opened."""
    import sqlite3
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "work", input=FILE_PASSWORD + "\n")
    cli.set_answers([f"password {FILE_PASSWORD}"] * 10)
    cli.ok("add-generic-password", "-s", "damaged.example", "-a", "me", "--stdin", "work", input="first password")
    path = cli.keychains / "work.keychain-db"
    with sqlite3.connect(path) as db:
        (sealed,) = db.execute("SELECT secret FROM items").fetchone()
        db.execute("UPDATE items SET secret = ?", (sealed[:-1] + bytes([sealed[-1] ^ 1]),))
    db.close()
    damaged = cli.run("find-generic-password", "-s", "damaged.example", "-w", "work")
    assert damaged.returncode == 1 and "failed authentication" in damaged.stderr
    cli.ok("add-generic-password", "-U", "-s", "damaged.example", "-a", "me", "--stdin", "work", input="new password")
    assert cli.ok("find-generic-password", "-s", "damaged.example", "-w", "work").stdout == "new password\n"


def test_a_format_1_file_still_opens(tmp_path):
    """A keychain file written before format 2 (Tests/KeychainStoreTests/Fixtures) opens, is upgraded at its
    first unlock, and keeps its items and settings."""
    import shutil
    import sqlite3
    cli = Cli(tmp_path)
    cli.keychains.mkdir(parents=True)
    path = cli.keychains / "old.keychain-db"
    shutil.copy(FIXTURES / "format1.keychain-db", path)
    assert cli.ok("show-keychain-info", "old").stdout.strip() == f'Keychain "{path}" lock-on-sleep timeout=600s access-policy=prompt,unchecked'
    cli.set_answers(["password fixture password"] * 5)
    assert cli.ok("find-generic-password", "-s", "one.example", "-w", "old").stdout == "secret one\n"
    assert cli.ok("find-internet-password", "-s", "web.example", "-w", "old").stdout == "web secret\n"
    with sqlite3.connect(path) as db:
        # Formats 2 and 3 (class keys, issue 27) are reached at the same first unlock.
        assert db.execute("PRAGMA user_version").fetchone() == (3,)
    db.close()
    assert cli.ok("show-keychain-info", "old").stdout.strip() == f'Keychain "{path}" lock-on-sleep timeout=600s access-policy=prompt,unchecked'


def test_crafted_kdf_parameters_are_refused_before_any_allocation(tmp_path):
    """A file whose KDF row asks for 16 GiB of scrypt (log2 N = 22, r = 32, p = 16): under a 512 MiB address
    space limit the command fails at once with errSecInvalidKeychain's reason, before asking for a password."""
    import sqlite3
    cli = Cli(tmp_path)
    cli.ok("create-keychain", "--stdin", "crafted", input=FILE_PASSWORD + "\n")
    path = cli.keychains / "crafted.keychain-db"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE name = 'kdf'", (bytes([1, 22, 0, 0, 0, 32, 0, 0, 0, 16]),))
    db.close()
    cli.set_answers([f"password {FILE_PASSWORD}"] * 3)
    started = time.monotonic()
    result = subprocess.run(["sh", "-c", 'ulimit -v 524288 && exec "$0" "$@"', binary("latchkey"),
                             "find-generic-password", "-s", "x", "-w", str(path)],
                            env=cli.env(), capture_output=True, text=True, timeout=60, start_new_session=True)
    assert time.monotonic() - started < 5
    assert result.returncode == 1, result.stderr
    assert "KDF parameters" in result.stderr and "out of range" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert cli.pinentry_asks() == 0
