"""Accessibility classes (kSecAttrAccessible) against the real daemon on a real bus (issue 27): an AfterFirstUnlock
item stays readable while its collection is locked (explicit lock, screen lock), reads as unlocked through the
Secret Service, through org.latchkey.Keychain1 (the latchkey command) and is still guarded by its access list; a
logout, `lock-keychain --all-classes` and a daemon restart make it unreadable until the next unlock
(docs/dbus-mapping.md, "Accessibility classes")."""

import subprocess
import time

import control_client as control
from conftest import LOGIN_PASSWORD, secret_tool
from dbus_client import Client, DEFAULT
from test_cli import Cli, ScreenSaver

LOGIN = "/org/freedesktop/secrets/collection/login"
ITEM = "org.freedesktop.Secret.Item"
COLLECTION = "org.freedesktop.Secret.Collection"
PROPERTIES = "org.freedesktop.DBus.Properties"
IS_LOCKED = "org.freedesktop.Secret.Error.IsLocked"
INVALID_ARGS = "org.freedesktop.DBus.Error.InvalidArgs"


def create(client, session, attributes, secret, accessible=None, replace=False):
    if accessible is not None:
        attributes = dict(attributes, **{"lk:accessible": accessible})
    return client.create_item(session, attributes, secret, collection=LOGIN, replace=replace)


def locked(client, path):
    return client.ok(path, PROPERTIES, "Get", "ss", (ITEM if "/" in path[len(LOGIN):] else COLLECTION, "Locked"))[0][1]


def secrets(client, session, paths):
    (found,) = client.service("GetSecrets", "aoo", (paths, session))
    return {path: bytes(value[2]) for path, value in found.items()}


def search(client, attributes):
    unlocked, locked_paths = client.service("SearchItems", "a{ss}", (attributes,))
    return set(unlocked), set(locked_paths)


def lock(client):
    client.service("Lock", "ao", ([LOGIN],))


def started(make_daemon, cli, **kwargs):
    daemon = make_daemon(keychains=cli.keychains, **kwargs).start()
    client = Client(daemon.bus.address)
    return daemon, client, client.open_plain()


def test_after_first_unlock_reads_while_locked_through_every_face(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    daemon, client, session = started(make_daemon, cli)
    afu = create(client, session, {"app": "mail", "kind": "afu"}, b"afu secret", accessible="AfterFirstUnlock")
    plain = create(client, session, {"app": "mail", "kind": "plain"}, b"plain secret")
    afu_tdo = create(client, session, {"app": "mail", "kind": "cku"}, b"cku secret", accessible="cku")
    lock(client)

    assert locked(client, LOGIN) is True
    assert locked(client, afu) is False and locked(client, afu_tdo) is False
    assert locked(client, plain) is True
    # GetSecrets leaves out the locked item only; GetSecret of it is IsLocked.
    assert secrets(client, session, [afu, plain, afu_tdo]) == {afu: b"afu secret", afu_tdo: b"cku secret"}
    assert bytes(client.ok(afu, ITEM, "GetSecret", "o", (session,))[0][2]) == b"afu secret"
    assert client.call(plain, ITEM, "GetSecret", "o", (session,)).error_name == IS_LOCKED
    # SearchItems puts it among the unlocked results; its attributes read (it was never shown locked).
    assert search(client, {"app": "mail"}) == ({afu, afu_tdo}, {plain})
    attributes = client.ok(afu, PROPERTIES, "Get", "ss", (ITEM, "Attributes"))[0][1]
    assert attributes == {"app": "mail", "kind": "afu"}
    # secret-tool (libsecret) reads it with no unlock prompt; the locked one it cannot.
    assert secret_tool(bus, "lookup", "kind", "afu").stdout == b"afu secret"
    # org.latchkey.Keychain1 (the latchkey command through the daemon): the same, and dump-keychain names the class.
    found = cli.run("find-generic-password", "-w", "--accessible", "AfterFirstUnlock")
    assert found.returncode == 0 and found.stdout.strip() == "afu secret", found.stderr
    # Writes still need the keychain unlocked.
    reply = client.call(afu, ITEM, "SetSecret", "(oayays)", ((session, b"", b"new", "text/plain"),))
    assert reply.error_name == IS_LOCKED

    # lock-keychain --all-classes wipes AfterFirstUnlock's key too.
    cli.ok("lock-keychain", "--all-classes")
    assert locked(client, afu) is True
    assert secrets(client, session, [afu, plain]) == {}
    assert search(client, {"app": "mail"}) == (set(), {afu, plain, afu_tdo})
    assert cli.run("find-generic-password", "-w", "--accessible", "AfterFirstUnlock").returncode != 0

    cli.ok("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n")
    assert secrets(client, session, [afu, plain]) == {afu: b"afu secret", plain: b"plain secret"}
    dump = cli.ok("dump-keychain").stdout
    assert "accessible: AfterFirstUnlock" in dump and "accessible: WhenUnlocked" in dump
    assert "accessible: AfterFirstUnlockThisDeviceOnly" in dump


def test_screen_lock_keeps_after_first_unlock_and_logout_ends_it(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    screen_saver = ScreenSaver(bus)
    daemon, client, session = started(make_daemon, cli)
    cli.ok("set-keychain-settings", "-s")
    afu = create(client, session, {"kind": "afu"}, b"afu secret", accessible="ck")
    plain = create(client, session, {"kind": "plain"}, b"plain secret")
    screen_saver.active_changed(True)
    deadline = time.monotonic() + 10
    while locked(client, LOGIN) is not True and time.monotonic() < deadline:
        time.sleep(0.05)
    assert locked(client, LOGIN) is True
    assert secrets(client, session, [afu, plain]) == {afu: b"afu secret"}

    # The user's last session closes (pam_latchkey as root): every class key goes.
    path = daemon.runtime / "latchkey" / "control"
    assert control.open_session(path)[0] == "ok"
    assert control.close_session(path, lock_if_last=True) == ("ok", "last session closed; login keychain locked")
    assert locked(client, afu) is True
    assert secrets(client, session, [afu, plain]) == {}
    assert client.call(afu, ITEM, "GetSecret", "o", (session,)).error_name == IS_LOCKED


def test_a_restarted_daemon_reads_after_first_unlock_only_after_an_unlock(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    daemon, client, session = started(make_daemon, cli)
    create(client, session, {"kind": "afu"}, b"afu secret", accessible="AfterFirstUnlock")
    client.close()
    daemon.stop()
    again = make_daemon(keychains=cli.keychains).start(unlock=False)
    client = Client(bus.address)
    session = client.open_plain()
    unlocked, locked_paths = search(client, {"kind": "afu"})
    assert unlocked == set() and len(locked_paths) == 1
    (afu,) = locked_paths
    assert client.call(afu, ITEM, "GetSecret", "o", (session,)).error_name == IS_LOCKED
    cli.ok("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n")
    lock(client)
    assert secrets(client, session, [afu]) == {afu: b"afu secret"}
    assert again.alive()


def test_lk_accessible_is_checked_and_taken_by_create_item_only(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    daemon, client, session = started(make_daemon, cli)
    for bad in ["", "sometimes", "AfterFirstUnlockX", "ak "]:
        properties = {"org.freedesktop.Secret.Item.Label": ("s", "L"),
                      "org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"k": "v", "lk:accessible": bad})}
        reply = client.call(LOGIN, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                            (properties, (session, b"", b"s", "text/plain"), False))
        assert reply.error_name == INVALID_ARGS, (bad, reply.body)
        assert bad in reply.body[0] or bad == ""
    assert search(client, {"k": "v"}) == (set(), set()), "nothing was stored"
    item = create(client, session, {"k": "v"}, b"s", accessible="kSecAttrAccessibleAfterFirstUnlock")
    # Not an attribute clients see, nor one they set afterwards.
    assert client.ok(item, PROPERTIES, "Get", "ss", (ITEM, "Attributes"))[0][1] == {"k": "v"}
    reply = client.call(item, PROPERTIES, "Set", "ssv", (ITEM, "Attributes", ("a{ss}", {"lk:accessible": "ak"})))
    assert reply.error_name == INVALID_ARGS
    # CreateItem with replace moves the replaced item to the class given.
    create(client, session, {"k": "v"}, b"s2", accessible="WhenUnlocked", replace=True)
    lock(client)
    assert locked(client, item) is True
    assert daemon.alive()


def test_access_lists_still_guard_after_first_unlock_items_while_locked(tmp_path, bus, make_daemon):
    """Another program of the same user (secret-tool) reading an item made by this one (pytest) while the keychain
    is locked: the item trusts its creator only, so the daemon asks the person (pinentry CONFIRM), and a denial
    gives nothing."""
    cli = Cli(tmp_path, bus)
    daemon, client, session = started(make_daemon, cli, access_policy="prompt", answers=["deny"])
    create(client, session, {"kind": "afu"}, b"afu secret", accessible="AfterFirstUnlock")
    lock(client)
    result = secret_tool(bus, "lookup", "kind", "afu", check=False)
    assert result.returncode != 0 and b"afu secret" not in result.stdout
    assert "CONFIRM" in daemon.pinentry_log()
    # Its creator still reads it without a prompt.
    asks = daemon.pinentry_log().count("CONFIRM")
    unlocked, _ = search(client, {"kind": "afu"})
    assert secrets(client, session, list(unlocked)) == {next(iter(unlocked)): b"afu secret"}
    assert daemon.pinentry_log().count("CONFIRM") == asks



# org.latchkey.Keychain1 from a python3 script (an application of its own, by its path): Add of a generic password
# (WhenUnlocked), Search of it with its secret, Update of its class to AfterFirstUnlock (pdmn "ck"), or Lock.
KEYCHAIN1_SCRIPT = """
import sys
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
connection = open_dbus_connection(bus="SESSION", auth_timeout=30)
address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                      interface="org.latchkey.Keychain1")
attributes = {"acct": ("s", "alice"), "svce": ("s", "backup.example")}
query = {"class": ("s", "genp"), "attributes": ("a{sv}", attributes), "synchronizable": ("s", "any"),
         "limit": ("x", 0), "returning": ("u", 1 | 2)}
method = sys.argv[1]
if method == "Add":
    call = new_method_call(address, "Add", "sa{sv}ayb", ("genp", attributes, b"backup secret", True))
elif method == "Search":
    call = new_method_call(address, "Search", "a{sv}", (query,))
elif method == "Update":
    call = new_method_call(address, "Update", "a{sv}a{sv}ayb", (query, {"pdmn": ("s", "ck")}, b"", False))
else:
    call = new_method_call(address, "Lock", "", ())
reply = connection.send_and_get_reply(call, timeout=60)
if reply.header.message_type.name == "error":
    print("ERROR", reply.body, file=sys.stderr)
    sys.exit(2)
if method == "Search":
    for item in reply.body[0]:
        print(bytes(item["secret"][1]).decode())
"""


def test_another_program_cannot_move_an_item_to_after_first_unlock(tmp_path, bus, make_daemon):
    """Abuse: a same-user program moving another application's WhenUnlocked item to AfterFirstUnlock (so that it
    would be readable while the screen is locked) needs the change access the item's list grants: asked, and
    refused when the person cancels, the class unchanged. The item's own application may move it, and then reads
    it while locked unasked; the other program is still asked."""
    import sys
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains, access_policy="prompt").start()
    creator, other = tmp_path / "creator.py", tmp_path / "other.py"
    creator.write_text(KEYCHAIN1_SCRIPT)
    other.write_text(KEYCHAIN1_SCRIPT)

    def run(script, method):
        return subprocess.run([sys.executable, str(script), method], env=bus.env(), capture_output=True,
                              text=True, timeout=60)

    assert run(creator, "Add").returncode == 0
    daemon.set_pinentry_answers(["cancel"])
    moved = run(other, "Update")
    assert moved.returncode == 2 and "-128" in moved.stderr, moved.stdout + moved.stderr
    assert "CONFIRM" in daemon.pinentry_log()
    assert run(creator, "Lock").returncode == 0
    locked_read = run(creator, "Search")
    assert locked_read.returncode == 2 and "-25308" in locked_read.stderr, "still WhenUnlocked: not readable locked"

    cli.ok("unlock-keychain", "--stdin", input=LOGIN_PASSWORD + "\n")
    assert run(creator, "Update").returncode == 0
    assert run(creator, "Lock").returncode == 0
    read = run(creator, "Search")
    assert read.returncode == 0 and read.stdout == "backup secret\n", read.stderr
    asks = daemon.pinentry_log().count("CONFIRM")
    daemon.set_pinentry_answers(["cancel"])
    stolen = run(other, "Search")
    assert stolen.returncode == 2 and "backup secret" not in stolen.stdout
    assert daemon.pinentry_log().count("CONFIRM") == asks + 1


class Systemd:
    """Stands in for systemd's manager on the private bus playing the system bus (no systemd runs in CI): owns
    org.freedesktop.systemd1 and answers ListJobs with the job logind started for a sleep, as systemd does while
    the sleep's target is starting."""

    def __init__(self, system_bus, unit):
        import threading
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.bus_messages import message_bus
        self.connection = open_dbus_connection(bus=system_bus.address, auth_timeout=30)
        assert self.connection.send_and_get_reply(message_bus.RequestName("org.freedesktop.systemd1")).body == (1,)
        self.unit = unit
        self.asked = 0
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        from jeepney import new_method_return
        from jeepney.low_level import HeaderFields, MessageType
        while self.running:
            try:
                message = self.connection.receive(timeout=0.2)
            except TimeoutError:
                continue
            except Exception:
                return
            fields = message.header.fields
            if message.header.message_type == MessageType.method_call and fields.get(HeaderFields.member) == "ListJobs":
                self.asked += 1
                job = (7, self.unit, "start", "running", "/org/freedesktop/systemd1/job/7",
                       "/org/freedesktop/systemd1/unit/" + self.unit.replace(".", "_2e").replace("-", "_2d"))
                self.connection.send(new_method_return(message, "a(usssoo)", ([job],)))

    def stop(self):
        self.running = False
        self.thread.join(timeout=5)
        self.connection.close()


def sleep_with(tmp_path, bus, make_daemon, unit):
    """The login keychain (lock on sleep) with an AfterFirstUnlock and a WhenUnlocked item, then logind's
    PrepareForSleep(true) while systemd runs `unit`'s job: whether the AfterFirstUnlock item is still read."""
    from conftest import Bus
    from test_cli import Logind
    system_bus = Bus()
    systemd = None
    try:
        cli = Cli(tmp_path, bus)
        daemon, client, session = started(make_daemon, cli, system_bus=system_bus)
        cli.ok("set-keychain-settings", "-l")
        afu = create(client, session, {"kind": "afu"}, b"afu secret", accessible="AfterFirstUnlock")
        plain = create(client, session, {"kind": "plain"}, b"plain secret")
        logind = Logind(system_bus)
        systemd = Systemd(system_bus, unit)
        logind.prepare_for_sleep(True)
        deadline = time.monotonic() + 10
        while (locked(client, LOGIN) is not True or systemd.asked == 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert systemd.asked == 1, "the daemon should ask systemd which sleep it started"
        # The answer is read in the daemon's next turn: a ping on the system bus comes after it.
        (names,) = logind.connection.send_and_get_reply(
            __import__("jeepney.bus_messages", fromlist=["message_bus"]).message_bus.ListNames()).body
        [daemon_name] = [n for n in names if n.startswith(":") and n not in
                         (logind.connection.unique_name, systemd.connection.unique_name)]
        Logind.ping(logind.connection, daemon_name)
        assert locked(client, LOGIN) is True
        read = secrets(client, session, [afu, plain])
        logind.connection.close()
        return read, afu, daemon
    finally:
        if systemd:
            systemd.stop()
        system_bus.stop()


def test_a_suspend_keeps_after_first_unlock_items(tmp_path, bus, make_daemon):
    read, afu, daemon = sleep_with(tmp_path, bus, make_daemon, "suspend.target")
    assert read == {afu: b"afu secret"}


def test_a_hibernation_ends_after_first_unlock_until_the_next_unlock(tmp_path, bus, make_daemon):
    """The keys that outlast a lock would be written to disk with the daemon's memory: a hibernation wipes them
    (docs/secitem-semantics.md, "Accessibility classes"); the next unlock brings the items back."""
    read, afu, daemon = sleep_with(tmp_path, bus, make_daemon, "hibernate.target")
    assert read == {}
    assert "hibernat" in daemon.stderr.read_text()
