"""latchkey import-gnome-keyring and migration-status on keyrings that Debian's real
gnome-keyring-daemon made (gnome_keyring.py): each keyring becomes a collection of its own
(login.keyring the login collection) and the keyring gnome-keyring's `default` names the target of
the default alias; every field of every item compared through the Secret Service, served by
gnome-keyring before and by latchkeyd after; a second import adds nothing; a wrong password imports
nothing and says so; --dry-run changes nothing."""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import time

import jeepney
import pytest
import secretstorage
from jeepney.io.blocking import open_dbus_connection

import control_client as control
import gnome_keyring
from conftest import LOGIN_PASSWORD, SCRIPTED_PINENTRY, Bus, allow_all_held_keychains, binary
from flatpak_caller import as_flatpak, needs_root

pytestmark = pytest.mark.skipif(shutil.which("gnome-keyring-daemon") is None,
                                reason="gnome-keyring is not installed (.ci/packages lists it)")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Keyring files made once by gnome-keyring-daemon, and its items as it served them."""
    root = tmp_path_factory.mktemp("gnome-keyring")
    bus = Bus()
    keyring = gnome_keyring.GnomeKeyring(bus.address, root / "home", data=root / "data")
    try:
        keyring.start()
        items = gnome_keyring.populate(keyring)
        # The user made "second" the default keyring: gnome-keyring writes its name into `default`.
        gnome_keyring.set_default(keyring, "second")
        keyring.stop()
        # Started again, gnome-keyring serves what its files hold: that is what clients saw before the
        # switch (an item made without xdg:schema shows the schema of its item type from then on).
        keyring.start()
        served = gnome_keyring.served(keyring)
    finally:
        keyring.stop()
        bus.stop()
    assert sorted(items) == ["login", "open", "second"]
    # gnome-keyring writes a plain-text keyring's secret unescaped, so a multi-line secret makes
    # open.keyring unreadable to gnome-keyring itself: after its restart that keyring is gone. The
    # import reads it; its items are compared with what gnome-keyring served before the restart.
    assert "Login" in served and "second" in served
    served.setdefault("open", items["open"])
    files = sorted(p.name for p in keyring.keyrings.glob("*.keyring"))
    assert files == ["login.keyring", "open.keyring", "second.keyring"]
    assert (keyring.keyrings / "default").read_text() == "second"
    return {"keyrings": keyring.keyrings, "items": served}


@pytest.fixture
def home(tmp_path, made):
    """A user's data directory holding a copy of gnome-keyring's files."""
    data = tmp_path / "data"
    shutil.copytree(made["keyrings"], data / "keyrings")
    return data


def start_daemon(make_daemon, home, bus):
    """latchkeyd holding the login keychain under `home`, once it has made and unlocked it (the
    keychain is created on the daemon's worker after the bus name is claimed)."""
    daemon = make_daemon(keychains=home / "latchkey" / "keychains").start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        connection = open_dbus_connection(bus=bus.address)
        try:
            if not secretstorage.get_default_collection(connection).is_locked():
                return daemon
        except secretstorage.exceptions.SecretStorageException:
            pass
        finally:
            connection.close()
        time.sleep(0.05)
    raise AssertionError("latchkeyd did not unlock its login keychain")


def latchkey(bus, tmp_path, *args, input=None):
    answers = tmp_path / "pinentry-answers"
    if not answers.exists():
        answers.write_text("password file password\n" * 5)
    env = bus.env(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"),
                  XDG_CONFIG_HOME=str(tmp_path / "config"), PINENTRY=str(SCRIPTED_PINENTRY),
                  SCRIPTED_PINENTRY_ANSWERS=str(answers), SCRIPTED_PINENTRY_LOG=str(tmp_path / "pinentry-log"))
    return subprocess.run([binary("latchkey"), *args], env=env, input=input, capture_output=True, text=True,
                          timeout=120, start_new_session=True)


def passwords(*lines):
    return "".join(line + "\n" for line in lines)


LOGIN_PATH = "/org/freedesktop/secrets/collection/login"


def allowing_all(bus, read):
    """`read()`, once every keychain the daemon holds lets any application read it: imported items trust no
    application yet, which is not what these tests are about (again when an import made another keychain
    meanwhile)."""
    deadline = time.monotonic() + 30
    while True:
        allow_all_held_keychains(bus, gnome_keyring.LOGIN_PASSWORD)
        try:
            return read()
        except jeepney.wrappers.DBusErrorResponse as error:
            if error.name != "org.freedesktop.DBus.Error.AccessDenied" or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def login_items(bus):
    def read():
        connection = open_dbus_connection(bus=bus.address)
        try:
            return gnome_keyring.read_items(secretstorage.Collection(connection, LOGIN_PATH))
        finally:
            connection.close()
    return allowing_all(bus, read)


def collections(bus):
    """Every collection latchkeyd serves but the session one, by label: its items, every field."""
    def read():
        connection = open_dbus_connection(bus=bus.address)
        try:
            return {c.get_label(): gnome_keyring.read_items(c)
                    for c in secretstorage.get_all_collections(connection)
                    if not c.collection_path.endswith("/session")}
        finally:
            connection.close()
    return allowing_all(bus, read)


def alias(bus, name):
    connection = open_dbus_connection(bus=bus.address)
    try:
        service = jeepney.DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                                      interface="org.freedesktop.Secret.Service")
        return connection.send_and_get_reply(jeepney.new_method_call(service, "ReadAlias", "s", (name,))).body[0]
    finally:
        connection.close()


def path_of(bus, label):
    connection = open_dbus_connection(bus=bus.address)
    try:
        return next(c.collection_path for c in secretstorage.get_all_collections(connection)
                    if c.get_label() == label)
    finally:
        connection.close()


def file_bytes(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*"))}


def test_import_keeps_every_field_and_a_second_import_adds_nothing(bus, make_daemon, tmp_path, home, made):
    daemon = start_daemon(make_daemon, home, bus)
    # The daemon imports each keyring once the person allowed it (three), and making "second" the default moves
    # the alias away from the login collection: the person confirms that too.
    daemon.set_pinentry_answers(["confirm"] * 4)
    before = file_bytes(home / "keyrings")
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin",
                      input=passwords(LOGIN_PASSWORD, gnome_keyring.LOGIN_PASSWORD, gnome_keyring.SECOND_PASSWORD))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    keychains = home / "latchkey" / "keychains"
    assert lines == [
        f'imported 8 items of keyring "Login" from {home}/keyrings/login.keyring into {keychains}/login.keychain-db',
        f'imported 3 items of keyring "open" from {home}/keyrings/open.keyring into {keychains}/open.keychain-db',
        f'imported 2 items of keyring "second" from {home}/keyrings/second.keyring into {keychains}/second.keychain-db',
        f"the default collection is now {keychains}/second.keychain-db"], result.stdout

    # login.keyring went into the login collection, each other keyring into a collection of its own
    # labelled with its name: every field of every item, as gnome-keyring served it.
    assert sorted(made["items"]) == ["Login", "open", "second"]
    assert collections(bus) == made["items"]
    assert len(login_items(bus)) == 8
    # gnome-keyring's `default` named "second": so does the default alias.
    assert alias(bus, "default") == path_of(bus, "second")
    assert alias(bus, "login") == LOGIN_PATH

    # The files are untouched; a second import adds nothing and makes no collection.
    assert file_bytes(home / "keyrings") == before
    again = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin", input=passwords(LOGIN_PASSWORD))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already imported") == 3
    assert collections(bus) == made["items"]

    status = latchkey(bus, tmp_path, "migration-status")
    assert status.returncode == 0, status.stderr
    assert status.stdout.count("imported ") == 3 and "left" not in status.stdout
    assert 'keyring "second", 2 items added) into collection "second"' in status.stdout, status.stdout
    assert 'keyring "Login", 8 items added) into collection "Login"' in status.stdout, status.stdout


def test_wrong_password_imports_nothing_and_says_so(bus, make_daemon, tmp_path, home):
    start_daemon(make_daemon, home, bus)
    second = str(home / "keyrings" / "second.keyring")
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin", second,
                      input=passwords(LOGIN_PASSWORD, "not the password"))
    assert result.returncode == 1
    assert f"{second}: wrong password; nothing imported from it" in result.stderr
    assert collections(bus) == {"Login": []}
    status = latchkey(bus, tmp_path, "migration-status", "--json")
    assert status.returncode == 0, status.stderr
    assert '"reason" : "not imported"' in status.stdout or '"reason": "not imported"' in status.stdout
    assert status.stdout.count("not imported") == 3


def test_dry_run_lists_and_changes_nothing(bus, make_daemon, tmp_path, home):
    start_daemon(make_daemon, home, bus)
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--dry-run", "--stdin",
                      input=passwords(gnome_keyring.LOGIN_PASSWORD, gnome_keyring.SECOND_PASSWORD))
    assert result.returncode == 0, result.stderr
    assert 'would import 8 items of keyring "Login"' in result.stdout
    assert '"Chrome Safe Storage" chrome_libsecret_os_crypt_password_v2' in result.stdout
    assert 'would import 2 items of keyring "second"' in result.stdout
    assert 'into a new collection "second"' in result.stdout
    assert collections(bus) == {"Login": []}


def test_a_damaged_keyring_is_named_and_the_others_are_imported(bus, make_daemon, tmp_path, home, made):
    start_daemon(make_daemon, home, bus).set_pinentry_answers(["confirm"] * 3)
    login = home / "keyrings" / "login.keyring"
    login.write_bytes(login.read_bytes()[:200])
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin",
                      input=passwords(LOGIN_PASSWORD, gnome_keyring.LOGIN_PASSWORD, gnome_keyring.SECOND_PASSWORD))
    assert result.returncode == 1
    assert f"{login}: the file is truncated" in result.stderr
    assert collections(bus) == {"Login": [], "second": made["items"]["second"], "open": made["items"]["open"]}


def test_import_into_a_keychain_file_with_no_daemon(tmp_path, home, made):
    nobody = Bus.__new__(Bus)
    nobody.address = f"unix:path={tmp_path}/no-bus"
    created = latchkey(nobody, tmp_path, "create-keychain", "--stdin", "login", input="file password\n")
    assert created.returncode == 0, created.stderr
    result = latchkey(nobody, tmp_path, "import-gnome-keyring", "--stdin",
                      input=passwords(gnome_keyring.LOGIN_PASSWORD, gnome_keyring.SECOND_PASSWORD, "file password"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("imported ") == 3
    # The keychain's password for find-generic-password comes through the scripted pinentry.
    found = latchkey(nobody, tmp_path, "find-generic-password", "-s", "backup.example", "-w")
    assert found.returncode == 0 and found.stdout == "s3cret\n", found.stderr
    # The other keyrings became collections beside it, protected by its key; "second" is the default.
    keychains = tmp_path / "data" / "latchkey" / "keychains"
    assert sorted(p.name for p in keychains.glob("*.keychain-db")) == [
        "login.keychain-db", "open.keychain-db", "second.keychain-db"]
    assert "default=second\n" in (keychains / "aliases").read_text()
    found = latchkey(nobody, tmp_path, "find-generic-password", "-l", "Second keyring item", "-w",
                     str(keychains / "second.keychain-db"))
    # Not printable (a tab): shown in hex, as security(1) does.
    assert found.returncode == 0 and found.stdout == "0x" + "ünïcødé\tsecret".encode().hex().upper() + "\n", found.stderr
    status = latchkey(nobody, tmp_path, "migration-status")
    assert status.stdout.count("imported ") == 3 and "left" not in status.stdout
    assert 'into collection "open"' in status.stdout


def test_a_logins_hand_over_imports_the_keyrings_gnome_keyring_unlocked(bus, make_daemon, tmp_path, home, made):
    """At the first login the daemon imports login.keyring with the login password, then the keyrings
    whose passwords gnome-keyring kept in it, and those without one; a later login adds nothing."""
    # gnome-keyring keeps a keyring's password in the login keyring when the user asks it to unlock it
    # automatically: make that item for "second" with gnome-keyring itself.
    other = Bus()
    keyring = gnome_keyring.GnomeKeyring(other.address, tmp_path / "gk-home", data=home)
    try:
        keyring.start()
        connection = keyring.connect()
        login = next(c for c in secretstorage.get_all_collections(connection) if c.collection_path.endswith("/login"))
        login.create_item("Unlock password for: second", {"keyring": "LOCAL:/keyrings/second.keyring"},
                          gnome_keyring.SECOND_PASSWORD.encode())
        connection.close()
    finally:
        keyring.stop()
        other.stop()
    before = file_bytes(home / "keyrings")

    daemon = make_daemon(keychains=home / "latchkey" / "keychains", extra_env={"XDG_DATA_HOME": str(home)},
                         password=gnome_keyring.LOGIN_PASSWORD)
    daemon.start(unlock=False)
    path = daemon.runtime / "latchkey" / "control"
    assert control.hand_over(path, gnome_keyring.LOGIN_PASSWORD) == ("ok", "creating the login keychain")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(map(len, collections(bus).values())) < 14:
        time.sleep(0.2)
    found = collections(bus)
    kept = [i for i in found["Login"] if i["label"] == "Unlock password for: second"]
    assert len(kept) == 1
    found["Login"].remove(kept[0])
    assert found == made["items"]
    assert alias(bus, "default") == path_of(bus, "second")
    assert file_bytes(home / "keyrings") == before

    # A later login finds everything imported already.
    daemon.stop()
    daemon.start(unlock=False)
    assert control.hand_over(path, gnome_keyring.LOGIN_PASSWORD)[0] == "ok"
    time.sleep(1)
    assert sum(map(len, collections(bus).values())) == 14
    assert sorted(collections(bus)) == ["Login", "open", "second"]
    status = latchkey(bus, tmp_path, "migration-status")
    assert status.stdout.count("imported ") == 3 and "left" not in status.stdout, status.stdout
    assert 'into collection "second"' in status.stdout


def test_import_unlocks_a_locked_daemon_to_make_the_collections(bus, make_daemon, tmp_path, home, made):
    """The daemon holds the login keychain locked: the command opens it with the keychain password it
    was given, so that CreateCollection can protect the new collections with its key."""
    daemon = start_daemon(make_daemon, home, bus)
    # Each keyring's import, and "second" made the default (the alias moves): confirmed.
    daemon.set_pinentry_answers(["confirm"] * 4)
    connection = open_dbus_connection(bus=bus.address)
    try:
        secretstorage.Collection(connection, LOGIN_PATH).lock()
    finally:
        connection.close()
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin",
                      input=passwords(gnome_keyring.LOGIN_PASSWORD, gnome_keyring.SECOND_PASSWORD, LOGIN_PASSWORD))
    assert result.returncode == 0, result.stderr
    assert collections(bus) == made["items"]




# Through the daemon: `Keychain1.ImportKeyring` (docs/export-import.md, "gnome-keyring through the daemon").

KEYCHAIN1 = "org.latchkey.Keychain1"
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"
STATUS_ERROR = "org.latchkey.Keychain1.Error.Status"
LOGIN_KEYCHAIN1 = "/org/latchkey/keychain/login"


def import_keyring(bus, path, password=b"", file=None, dry_run=False, session=True):
    """`ImportKeyring` of the keyring file at `path` (or the bytes `file`) from a client of its own: the reply."""
    from dbus_client import Client
    from test_keychain_sessions import open_dh, sealed
    client = Client(bus.address)
    try:
        data = file if file is not None else path.read_bytes()
        if session:
            dh, _ = open_dh(client)
            data, password = sealed(dh, data), sealed(dh, password)
        return client.call(LOGIN_KEYCHAIN1, KEYCHAIN1, "ImportKeyring", "ayaystb",
                           (data, password, str(path), 0, dry_run), timeout=60)
    finally:
        client.close()


def test_through_a_daemon_holding_the_keychain_unlocked_no_keychain_password_is_needed(
        bus, make_daemon, tmp_path, home, made):
    """The daemon holds the login keychain unlocked: the command reads the keyring files, opens them with their
    own passwords and hands them to the daemon, which imports each (asked of the person) with the record the
    first-login import reads. Standard input holds no line that is the keychain's password."""
    daemon = start_daemon(make_daemon, home, bus)
    daemon.set_pinentry_answers(["confirm"] * 4)
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin",
                      input=passwords(gnome_keyring.LOGIN_PASSWORD, gnome_keyring.SECOND_PASSWORD))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("imported ") == 3, result.stdout
    assert collections(bus) == made["items"]
    assert alias(bus, "default") == path_of(bus, "second")
    # The person was asked about each keyring by name (and the alias), and never for a password.
    log = daemon.pinentry_log()
    assert "GETPIN" not in log
    asked = [json.loads(line)["argument"] for line in log.splitlines() if json.loads(line)["command"] == "SETDESC"]
    assert sum("gnome-keyring keyring" in text for text in asked) == 3, asked
    assert any("“second.keyring”" in text and "2 items" in text for text in asked), asked
    # The records the first-login import reads: every keyring imported, none left.
    status = latchkey(bus, tmp_path, "migration-status")
    assert status.stdout.count("imported ") == 3 and "left" not in status.stdout, status.stdout
    # Again: nothing to do; and the daemon itself, given the same file, reports its items as duplicates and
    # writes nothing, asking nobody.
    again = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin", input=passwords(gnome_keyring.LOGIN_PASSWORD))
    assert again.returncode == 0 and again.stdout.count("already imported") == 3, again.stdout + again.stderr
    daemon.set_pinentry_answers([])
    reply = import_keyring(bus, home / "keyrings" / "login.keyring", gnome_keyring.LOGIN_PASSWORD.encode())
    assert not reply.is_error, reply.body
    summary = reply.body[0]
    assert summary["Added"] == ("u", 0) and len(summary["Duplicates"][1]) == 8, summary
    assert collections(bus) == made["items"]
    status = latchkey(bus, tmp_path, "migration-status")
    assert status.stdout.count("imported ") == 3, status.stdout


def test_a_login_after_the_command_through_the_daemon_does_not_import_the_keyrings_again(
        bus, make_daemon, tmp_path, home):
    """The records ImportKeyring writes are the first-login import's: a login's hand-over afterwards imports
    only a keyring file it has no record of (`zzz.keyring`, a copy of open.keyring at another path, sorted
    last so that its record marks the end of that import), never open.keyring again."""
    daemon = start_daemon(make_daemon, home, bus)
    daemon.set_pinentry_answers(["confirm"])
    opened = home / "keyrings" / "open.keyring"
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin", str(opened), input="")
    assert result.returncode == 0 and result.stdout.startswith("imported 3 items"), result.stdout + result.stderr
    daemon.stop()
    shutil.copy(opened, home / "keyrings" / "zzz.keyring")
    later = make_daemon(keychains=home / "latchkey" / "keychains", extra_env={"XDG_DATA_HOME": str(home)})
    later.start(unlock=False)
    assert control.hand_over(later.runtime / "latchkey" / "control", LOGIN_PASSWORD)[0] == "ok"

    def imported():
        status = latchkey(bus, tmp_path, "migration-status", "--json")
        assert status.returncode == 0, status.stderr
        return {entry["path"]: entry["keychain"] for entry in json.loads(status.stdout)["imported"]}
    zzz = str(home / "keyrings" / "zzz.keyring")
    deadline = time.monotonic() + 30
    while zzz not in imported() and time.monotonic() < deadline:
        time.sleep(0.1)
    keychains = home / "latchkey" / "keychains"
    # open.keyring: the command's record, in the collection the command made for it; no other.
    assert imported() == {str(opened): str(keychains / "open.keychain-db"), zzz: imported()[zzz]}
    assert imported()[zzz] != str(keychains / "open.keychain-db")
    assert len(list(keychains.glob("*.keychain-db"))) == 3


def test_a_hostile_keyring_file_through_the_daemon_is_one_error_and_nothing_written(bus, make_daemon, tmp_path, home):
    daemon = start_daemon(make_daemon, home, bus)
    daemon.set_pinentry_answers(["confirm"] * 8)
    login = (home / "keyrings" / "login.keyring").read_bytes()
    magic = b"GnomeKeyring\n\r\x00\n"
    for hostile, password in [(login[:200], gnome_keyring.LOGIN_PASSWORD.encode()),
                              (login, b"not the password"),
                              (magic + b"\x00\x00\x00\x00" + b"\xff" * 64, b""),
                              (magic + bytes([0, 0, 0, 0]) + b"\x7f\xff\xff\xff" * 1000, b"x"),
                              (b"\xff\xfe\x00garbage", b"")]:
        reply = import_keyring(bus, tmp_path / "hostile.keyring", password, file=hostile)
        assert reply.is_error and reply.error_name == STATUS_ERROR, (hostile[:20], reply.body)
        assert "\n" not in reply.body[0] and "hostile.keyring" in reply.body[0], reply.body
    # A path that is not one line, and a file in a plain session: refused before anything is read.
    reply = import_keyring(bus, pathlib.Path("/x/a\nb.keyring"), file=b"")
    assert reply.is_error and reply.error_name == "org.freedesktop.DBus.Error.InvalidArgs", reply.body
    reply = import_keyring(bus, home / "keyrings" / "open.keyring", session=False)
    assert reply.is_error and reply.error_name == ACCESS_DENIED and "Keychain1 session" in reply.body[0], reply.body
    assert daemon.alive()
    assert collections(bus) == {"Login": []}
    assert "CONFIRM" not in daemon.pinentry_log()
    status = latchkey(bus, tmp_path, "migration-status")
    assert "imported " not in status.stdout, status.stdout


@needs_root
def test_a_flatpak_application_cannot_import_a_keyring_through_the_daemon(bus, make_daemon, tmp_path, home):
    daemon = start_daemon(make_daemon, home, bus)
    daemon.set_pinentry_answers(["confirm"] * 2)
    calls = [[LOGIN_KEYCHAIN1, KEYCHAIN1, "ImportKeyring", "(ayaystb)",
              [{"bytes": (home / "keyrings" / "open.keyring").read_text()}, {"bytes": ""},
               str(home / "keyrings" / "open.keyring"), 0, False]]]
    # Refused for what it is, before its arguments are looked at (a path on two lines is InvalidArgs to others).
    calls.append([LOGIN_KEYCHAIN1, KEYCHAIN1, "ImportKeyring", "(ayaystb)",
                  [{"bytes": ""}, {"bytes": ""}, "not/absolute\n", 0, False]])
    assert as_flatpak(bus, tmp_path, calls) == [ACCESS_DENIED, ACCESS_DENIED]
    assert "CONFIRM" not in daemon.pinentry_log()
    assert collections(bus) == {"Login": []}


@pytest.fixture(scope="module")
def flatpak(tmp_path_factory):
    """A login keyring holding the key gnome-keyring's Secret portal made for a Flatpak app, and that
    app's libsecret file (format version 1) written by the real libsecret with that key; with the
    items as libsecret reads them back."""
    root = tmp_path_factory.mktemp("flatpak")
    bus = Bus()
    keyring = gnome_keyring.GnomeKeyring(bus.address, root / "home", data=root / "data")
    try:
        keyring.start()
        app, secret = gnome_keyring.portal_secret(keyring, "org.example.App")
    finally:
        keyring.stop()
        bus.stop()
    path = root / "home" / ".var" / "app" / app / "data" / "keyrings" / "default.keyring"
    # Text secrets: libsecret's introspected Secret.Value takes a string.
    items = gnome_keyring.libsecret_file(path, secret, [
        {"label": "Flatpak token", "attributes": {"xdg:schema": "org.example.App.Token", "account": "alice"},
         "secret": "tökén\nline two".encode()},
        {"label": "Second ✓", "attributes": {"xdg:schema": "org.example.App.Key", "id": "1", "kind": "a = b"},
         "secret": b"  spaced  "},
    ])
    assert len(items) == 2 and path.read_bytes()[16:18] == b"\x01\x00"
    expected = sorted((dict(i, content_type="text/plain") for i in items), key=lambda i: (i["label"], i["secret"]))
    return {"root": root, "file": path, "app": app, "expected": expected}


def copy_flatpak_home(flatpak, tmp_path):
    shutil.copytree(flatpak["root"] / "home", tmp_path / "home", dirs_exist_ok=True)
    shutil.copytree(flatpak["root"] / "data", tmp_path / "data", dirs_exist_ok=True)
    return tmp_path / "home" / ".var" / "app" / flatpak["app"] / "data" / "keyrings" / "default.keyring"


def test_a_login_imports_a_flatpak_apps_libsecret_file_with_the_portal_key(bus, make_daemon, tmp_path, flatpak):
    file = copy_flatpak_home(flatpak, tmp_path)
    before = file.read_bytes()
    daemon = make_daemon(keychains=tmp_path / "data" / "latchkey" / "keychains",
                         extra_env={"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")},
                         password=gnome_keyring.LOGIN_PASSWORD)
    daemon.start(unlock=False)
    assert control.hand_over(daemon.runtime / "latchkey" / "control", gnome_keyring.LOGIN_PASSWORD)[0] == "ok"
    deadline = time.monotonic() + 30
    app = flatpak["app"]
    while time.monotonic() < deadline and app not in collections(bus):
        time.sleep(0.2)
    found = collections(bus)
    # The app's items, every field as libsecret read them from the app's file, in a collection named after it.
    assert found[app] == flatpak["expected"]
    # The portal's key came along in the login collection, as gnome-keyring kept it.
    assert app in [i["attributes"].get("app_id") for i in found["Login"]]
    assert file.read_bytes() == before

    daemon.stop()
    daemon.start(unlock=False)
    assert control.hand_over(daemon.runtime / "latchkey" / "control", gnome_keyring.LOGIN_PASSWORD)[0] == "ok"
    time.sleep(1)
    assert collections(bus) == found


def test_import_command_opens_a_flatpak_file_with_the_portal_key_it_read(bus, make_daemon, tmp_path, flatpak):
    copy_flatpak_home(flatpak, tmp_path)
    start_daemon(make_daemon, tmp_path / "data", bus).set_pinentry_answers(["confirm"] * 2)
    dry = latchkey(bus, tmp_path, "import-gnome-keyring", "--dry-run", "--stdin",
                   input=passwords(gnome_keyring.LOGIN_PASSWORD))
    assert dry.returncode == 0, dry.stderr
    assert f'would import 2 items of keyring "{flatpak["app"]}"' in dry.stdout
    result = latchkey(bus, tmp_path, "import-gnome-keyring", "--stdin",
                      input=passwords(LOGIN_PASSWORD, gnome_keyring.LOGIN_PASSWORD))
    assert result.returncode == 0, result.stderr
    assert collections(bus)[flatpak["app"]] == flatpak["expected"]

    # Without the login keyring (so without the portal's key) it is named, not prompted for.
    again = latchkey(bus, tmp_path, "import-gnome-keyring", str(copy_flatpak_home(flatpak, tmp_path)))
    assert "already imported" in again.stdout, again.stdout + again.stderr
    other = tmp_path / "elsewhere" / ".var" / "app" / "org.other.App" / "data" / "keyrings" / "default.keyring"
    other.parent.mkdir(parents=True)
    shutil.copy(flatpak["file"], other)
    refused = latchkey(bus, tmp_path, "import-gnome-keyring", str(other))
    assert refused.returncode == 1
    assert f"{other}: cannot read it: its key, the Secret portal's secret for the app, is in no keyring read" \
        in refused.stderr


def release_fifo(path):
    """Opens the FIFO at `path` for writing and closes it, so that a reader blocked in its open (a daemon
    without the fix) gets end of file and can stop."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.parametrize("planted", ["keyrings/planted.keyring", "keyrings/default", "flatpak"])
def test_a_fifo_among_the_keyrings_neither_wedges_the_import_nor_later_unlocks(bus, make_daemon, tmp_path, flatpak,
                                                                              planted):
    """A FIFO where the login import reads a file: a `*.keyring` (or gnome-keyring's `default`) in the user's
    keyring directory, or a Flatpak app's own libsecret file, which the app can make inside its sandbox.
    Opened as a file it would block the reader until someone writes to it: the import would never end, and
    every unlock after it (each waits for the key-derivation worker) would hang. The FIFO is skipped: the
    import of the rest completes, and a later unlock with the password is answered at once."""
    file = copy_flatpak_home(flatpak, tmp_path)
    fifo = file if planted == "flatpak" else tmp_path / "data" / planted
    if fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)
    daemon = make_daemon(keychains=tmp_path / "data" / "latchkey" / "keychains",
                         extra_env={"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")},
                         password=gnome_keyring.LOGIN_PASSWORD)
    try:
        daemon.start(unlock=False)
        control_path = daemon.runtime / "latchkey" / "control"
        assert control.hand_over(control_path, gnome_keyring.LOGIN_PASSWORD)[0] == "ok"
        # The import ends: the portal's key from login.keyring arrives in the login collection.
        deadline = time.monotonic() + 20
        keys = []
        while time.monotonic() < deadline and not keys:
            keys = [i for i in collections(bus).get("Login", []) if i["attributes"].get("app_id") == flatpak["app"]]
            time.sleep(0.2)
        assert keys, f"the login import did not end: {daemon.stderr.read_text()[-2000:]}"
        # A later unlock goes through the worker the import used: answered promptly.
        connection = open_dbus_connection(bus=bus.address)
        try:
            secretstorage.Collection(connection, LOGIN_PATH).lock()
        finally:
            connection.close()
        started = time.monotonic()
        assert control.hand_over(control_path, gnome_keyring.LOGIN_PASSWORD)[0] == "ok"
        assert time.monotonic() - started < 5
        connection = open_dbus_connection(bus=bus.address)
        try:
            assert not secretstorage.Collection(connection, LOGIN_PATH).is_locked()
        finally:
            connection.close()
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        release_fifo(fifo)
