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
    subprocess.run(["true"])
