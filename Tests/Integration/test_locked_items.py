"""What clients see of a locked collection's items, and after its unlock, when they run no main loop.

libsecret before 0.21 (Debian 12 has 0.20.5) makes a search's item objects before it unlocks
(secret_service_search_sync; fixed by libsecret 7387774, "sync-search: unlock keyring before getting secret
attributes", libsecret#6), and a client without a main loop (git-credential-libsecret, most C tools) never takes
in the PropertiesChanged and ItemChanged that latchkeyd sends at the unlock: those objects keep what they read
while locked. latchkeyd therefore shows, while a collection is locked, what its items showed when it locked
(kept in memory, never read from the file, where it is sealed), as gnome-keyring does; a collection the daemon
never held unlocked shows nothing (docs/threat-model.md, "Item labels while locked")."""

import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import LOGIN_PASSWORD, secret_tool
from dbus_client import Client
from test_libsecret_c import compile_libsecret_program
from test_cli import Cli
from test_gnome_keyring_private import LOGIN, DHSession

HELPER_SOURCE = pathlib.Path("/usr/share/doc/git/contrib/credential/libsecret")
CLIENT_SOURCE = pathlib.Path(__file__).with_name("libsecret_locked_client.c")
IS_LOCKED = "org.freedesktop.Secret.Error.IsLocked"
ITEM = "org.freedesktop.Secret.Item"
PROPERTIES = "org.freedesktop.DBus.Properties"


@pytest.fixture(scope="module")
def git_helper(tmp_path_factory):
    """git's libsecret credential helper, built from the source Debian's git ships (make; gcc, libsecret-1-dev and
    libglib2.0-dev: .ci/packages)."""
    if not (HELPER_SOURCE / "Makefile").exists() or shutil.which("make") is None:
        pytest.skip("git's contrib/credential/libsecret or make is not installed (see .ci/packages)")
    directory = tmp_path_factory.mktemp("git-credential-libsecret")
    for source in HELPER_SOURCE.iterdir():
        shutil.copy(source, directory)
    subprocess.run(["make", "-s"], cwd=directory, check=True, capture_output=True, timeout=120)
    return str(directory / "git-credential-libsecret")


@pytest.fixture(scope="module")
def locked_client(tmp_path_factory):
    return compile_libsecret_program(CLIENT_SOURCE, tmp_path_factory)


def store_git_credential(bus):
    secret_tool(bus, "store", "--label=Git: https://example.com/", "xdg:schema", "org.gnome.keyring.NetworkPassword",
                "protocol", "https", "server", "example.com", "user", "alice", input=b"s3cret")


def lock_login(bus):
    subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                    "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
                    "array:objpath:/org/freedesktop/secrets/collection/login"], env=bus.env(), check=True,
                   capture_output=True)


def git_get(helper, daemon, bus):
    return subprocess.run([helper, "get"], input=b"protocol=https\nhost=example.com\n\n", capture_output=True,
                          timeout=60, env=bus.env(SCRIPTED_PINENTRY_ANSWERS=str(daemon.answers),
                                                  SCRIPTED_PINENTRY_LOG=str(daemon.log)))


def test_git_credential_libsecret_run_while_locked_prints_username_and_password(git_helper, make_daemon, bus):
    """The issue's case: the keychain locked (idle, screen lock, `latchkey lock`) after being used; git's helper
    searches, the prompt unlocks, and it prints the username (an attribute it read while locked) and the
    password."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    store_git_credential(bus)
    lock_login(bus)
    result = git_get(git_helper, daemon, bus)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == "username=alice\npassword=s3cret\n", result.stdout
    assert "GETPIN" in daemon.pinentry_log()


def test_git_credential_libsecret_on_a_daemon_started_locked_prints_the_password(git_helper, make_daemon, bus):
    """The daemon started without the password (D-Bus activation after a key-based SSH login) has never seen the
    items: their labels and attributes are sealed in the file until the unlock. The helper unlocks through the
    prompt and prints the password; its username it read while locked, from libsecret 0.20's item objects
    made before the unlock, so it has one only with libsecret 0.21 or later (gnome-keyring alike: its locked
    items show hashed attributes then)."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    store_git_credential(bus)
    daemon.stop()
    daemon.start(unlock=False)
    result = git_get(git_helper, daemon, bus)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().endswith("password=s3cret\n"), result.stdout
    version = subprocess.run(["pkg-config", "--modversion", "libsecret-1"], capture_output=True, text=True).stdout
    if tuple(int(part) for part in version.strip().split(".")[:2]) >= (0, 21):
        assert result.stdout.decode().startswith("username=alice\n"), result.stdout


def test_a_c_client_that_read_items_while_locked_sees_label_and_attributes_after_the_unlock(locked_client,
                                                                                            make_daemon, bus):
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    store_git_credential(bus)
    lock_login(bus)
    result = subprocess.run([locked_client], capture_output=True, text=True, timeout=60,
                            env=bus.env(SCRIPTED_PINENTRY_ANSWERS=str(daemon.answers),
                                        SCRIPTED_PINENTRY_LOG=str(daemon.log)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "before label='Git: https://example.com/' user='alice'",
        "unlocked 1",
        "after label='Git: https://example.com/' user='alice'",
    ], result.stdout


def test_a_locked_item_shows_what_it_showed_when_it_locked_never_its_secret(make_daemon, bus):
    """Abuse: any client of the user on the bus reads a locked item's label and attributes (as it could while it
    was unlocked), never its secret; a daemon that never held the keychain unlocked shows nothing of it (the file
    keeps them sealed), and a changed item shows its new values after the next lock."""
    daemon = make_daemon().start()
    store_git_credential(bus)
    [path] = search_paths(bus, {"server": "example.com"})[0]
    # Locked and unlocked once (the unlock reads what the items show, kept for the next lock if nothing is
    # written before it), then changed: the next lock shows the change.
    session = DHSession(bus)
    try:
        session.lock(LOGIN)
        assert not session.unlock(LOGIN, LOGIN_PASSWORD).is_error
    finally:
        session.close()
    set_label(bus, path, "Renamed")
    lock_login(bus)
    assert search_paths(bus, {"server": "example.com"}) == ([], [path])
    properties = item_properties(bus, path)
    assert properties["Label"] == "Renamed" and properties["Attributes"]["user"] == "alice", properties
    assert properties["Locked"] is True and properties["Created"] > 0, properties
    session = DHSession(bus)
    try:
        reply = session.client.call(path, ITEM, "GetSecret", "o", (session.path,))
        assert reply.error_name == IS_LOCKED, reply.body
        [secrets] = session.client.service("GetSecrets", "aoo", ([path], session.path))
        assert secrets == {}, secrets
    finally:
        session.close()
    daemon.stop()
    daemon.start(unlock=False)
    properties = item_properties(bus, path)
    assert (properties["Label"], properties["Attributes"], properties["Created"]) == ("", {}, 0), properties


def search_paths(bus, attributes):
    client = Client(bus.address)
    try:
        return tuple(client.service("SearchItems", "a{ss}", (attributes,)))
    finally:
        client.close()


def item_properties(bus, path):
    client = Client(bus.address)
    try:
        [properties] = client.ok(path, PROPERTIES, "GetAll", "s", (ITEM,))
        return {name: value for name, (_, value) in properties.items()}
    finally:
        client.close()


def set_label(bus, path, label):
    client = Client(bus.address)
    try:
        client.ok(path, PROPERTIES, "Set", "ssv", (ITEM, "Label", ("s", label)))
    finally:
        client.close()


def fill_login(bus, count):
    """`count` items in the login keychain, made through CreateItem (one connection)."""
    client = Client(bus.address)
    try:
        session = client.open_plain()
        return [client.create_item(session, {"service": "many.example", "user": f"user{number}"}, b"s",
                                   label=f"Item {number}", collection=LOGIN) for number in range(count)]
    finally:
        client.close()


def wait_for_log(daemon, text, timeout=60):
    deadline = time.monotonic() + timeout
    while text not in daemon.stderr.read_text():
        assert time.monotonic() < deadline, f"no {text!r} in: {daemon.stderr.read_text()}"
        time.sleep(0.1)


def test_a_lock_after_writes_reads_again_only_the_items_it_has_not_seen(make_daemon, bus):
    """Robustness: a lock holds the serving thread, so it must not read every item of a big collection again
    (docs/robustness.md). What the items show is kept up to date by each write through the daemon, and read
    in the background for a collection the daemon started with unlocked; the lock then reads none again, and
    the items show the writes while locked. The daemon logs what each lock read."""
    count = 2000
    daemon = make_daemon().start()
    paths = fill_login(bus, count)
    set_label(bus, paths[0], "Renamed")
    client = Client(bus.address)
    try:
        client.ok(paths[1], ITEM, "Delete")
    finally:
        client.close()
    [added] = fill_login(bus, 1)
    lock_login(bus)
    assert f"login: kept what {count} items show while locked, 0 read" in daemon.stderr.read_text()
    assert item_properties(bus, paths[0])["Label"] == "Renamed"
    assert item_properties(bus, added)["Attributes"]["user"] == "user0"
    assert search_paths(bus, {"service": "many.example", "user": "user1"}) == ([], [])

    # Started unlocked with the items in the file: they are read on the worker, not by the lock.
    daemon.stop()
    daemon.start()
    wait_for_log(daemon, f"login: read what {count} items show, in the background")
    set_label(bus, paths[2], "Renamed too")
    lock_login(bus)
    assert f"login: kept what {count} items show while locked, 0 read" in daemon.stderr.read_text()
    assert item_properties(bus, paths[2])["Label"] == "Renamed too"


def test_a_lock_reads_again_the_items_written_around_the_secret_service(tmp_path, make_daemon, bus):
    """An item written other than through a Secret Service face (the `latchkey` command, through
    org.latchkey.Keychain1) moves its version: the lock reads that one item again, and it shows while locked."""
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains).start()
    fill_login(bus, 300)
    cli.ok("add-generic-password", "-a", "me", "-s", "cli.example", "-l", "From the command", "--stdin",
           input="pw\n")
    lock_login(bus)
    assert "login: kept what 301 items show while locked, 1 read" in daemon.stderr.read_text()
    [path] = search_paths(bus, {"service": "cli.example"})[1]
    assert item_properties(bus, path)["Label"] == "From the command"


def test_a_lock_of_thousands_of_items_lets_another_clients_call_through_before_its_item_signals(make_daemon,
                                                                                                 bus):
    """Robustness: a lock announces `Locked` on each of its items. Built and sent all at once on the serving
    thread, 3,000 of them held a call another client made meanwhile behind every one; sent a batch at a time
    between the clients' calls, the call is answered after a batch or two. Seen by a bus monitor, in the order
    the bus passed the messages on: how many of the lock's item signals came before the other client's reply."""
    from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call
    from jeepney.io.blocking import open_dbus_connection
    import threading

    count = 3000
    make_daemon().start()
    fill_login(bus, count)
    monitor = open_dbus_connection(bus=bus.address)
    monitor.send_and_get_reply(new_method_call(
        DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus",
                    interface="org.freedesktop.DBus.Monitoring"), "BecomeMonitor", "asu", ([], 0)))
    item_prefix = LOGIN + "/"
    first_item_signal = threading.Event()
    seen = []  # ("item", None) for each item's PropertiesChanged, ("reply", destination) for latchkeyd's replies

    stop = threading.Event()

    def watch():
        while not stop.is_set():
            try:
                message = monitor.receive(timeout=0.2)
            except TimeoutError:
                continue
            fields = message.header.fields
            if (message.header.message_type == MessageType.signal
                    and fields.get(HeaderFields.member) == "PropertiesChanged"
                    and str(fields.get(HeaderFields.path, "")).startswith(item_prefix)):
                seen.append(("item", None))
                first_item_signal.set()
            elif (message.header.message_type == MessageType.method_return
                  and fields.get(HeaderFields.sender) != "org.freedesktop.DBus"):
                seen.append(("reply", fields.get(HeaderFields.destination)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    locker, other = Client(bus.address), Client(bus.address)
    try:
        locker.connection.send(new_method_call(
            DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                        interface="org.freedesktop.Secret.Service"), "Lock", "ao", ([LOGIN],)))
        assert first_item_signal.wait(60), "the lock sent no item signal"
        started = time.monotonic()
        other.ok("/org/freedesktop/secrets", PROPERTIES, "Get", "ss", ("org.freedesktop.Secret.Service",
                                                                       "Collections"))
        waited = time.monotonic() - started
        deadline = time.monotonic() + 120
        while sum(1 for kind, _ in seen if kind == "item") < count and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        watcher.join(5)
        items = sum(1 for kind, _ in seen if kind == "item")
        assert items == count, seen[-5:]
        before = next(index for index, entry in enumerate(seen) if entry == ("reply", other.unique_name))
        items_before = sum(1 for kind, _ in seen[:before] if kind == "item")
        print(f"the other client's call: answered in {waited * 1000:.0f} ms, after {items_before} of {count} "
              f"item signals")
        assert items_before < count // 4, (items_before, waited)
    finally:
        stop.set()
        watcher.join(5)
        locker.close()
        other.close()
        monitor.close()


def rss_mib(daemon):
    status = pathlib.Path(f"/proc/{daemon.process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def test_items_with_huge_attributes_do_not_grow_the_daemon_with_what_they_show_while_locked(make_daemon, bus):
    """Robustness: what a locked collection's items show is kept in the daemon's memory, within a bound (4 MiB
    for every collection together), and the heap memory that reading them took is given back once the daemon is
    quiet. 20 items of 60 attributes of 16 KiB (20 MiB, within the per-collection quota), locked and unlocked
    twice: the daemon holds less than 16 MiB more than at start. Without giving memory back it held 31 MiB more;
    without the bound, every item shows while locked (and with 24 such items the daemon held 55 MiB more)."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"] * 2).start()
    time.sleep(0.5)
    start = rss_mib(daemon)
    client = Client(bus.address)
    try:
        session = client.open_plain()
        huge = "x" * (16 << 10)
        paths = []
        for number in range(20):
            attributes = {"service": "huge.example", "n": str(number)}
            attributes.update({f"a{index}": huge for index in range(60)})
            paths.append(client.create_item(session, attributes, b"s", label=f"Huge {number}", collection=LOGIN))
    finally:
        client.close()
    grown = []
    for _ in range(2):
        lock_login(bus)
        time.sleep(0.5)
        grown.append(rss_mib(daemon) - start)
        shown = [item_properties(bus, path)["Label"] for path in paths]
        assert 1 <= sum(label.startswith("Huge ") for label in shown) < len(paths), shown
        assert "items past the bound of 4194304 bytes show nothing while locked" in daemon.stderr.read_text()
        secret_tool(bus, "search", "--unlock", "service", "huge.example", "n", "0")
        assert item_properties(bus, paths[-1])["Locked"] is False
        time.sleep(0.5)
        grown.append(rss_mib(daemon) - start)
    assert max(grown) < 16, grown
