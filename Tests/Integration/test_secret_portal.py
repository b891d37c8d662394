"""The Secret portal through Debian's real xdg-desktop-portal (1.16) on a private bus: a client calls
org.freedesktop.portal.Secret.RetrieveSecret on org.freedesktop.portal.Desktop as a Flatpak application
does, the portal works out the application's id from the caller and calls latchkeyd's
org.freedesktop.impl.portal.Secret, and the client reads its secret from its pipe.

The portal takes the id from /proc/PID/root/.flatpak-info of the caller. The client here connects, then
chroots into a directory holding a .flatpak-info ([Application] name=...) before it calls: to the portal
it is then exactly what a Flatpak application is, a process whose root holds that file. Two directories
make two applications."""

import os
import pathlib
import shutil
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import LOGIN_PASSWORD, ROOT, binary
from dbus_client import Client

PORTAL = "/usr/libexec/xdg-desktop-portal"
GNOME_KEYRING_PORTAL = pathlib.Path("/usr/share/xdg-desktop-portal/portals/gnome-keyring.portal")
SCHEMA = "org.freedesktop.portal.Secret"

# The application: connects to the bus, becomes "sandboxed" (chroot into a root with .flatpak-info) when
# given one, calls RetrieveSecret with the write end of a pipe, waits for the Response signal on its
# request and reads the pipe to its end. Prints the response code and the secret in hex.
CLIENT = textwrap.dedent("""
    import os, sys, time
    import gi
    gi.require_version("Gio", "2.0")
    from gi.repository import Gio, GLib

    address, app_root = sys.argv[1], sys.argv[2]
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    bus = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
    if app_root:
        os.chroot(app_root)
        os.chdir("/")
    token = "latchkey1"
    handle = "/org/freedesktop/portal/desktop/request/%s/%s" % (
        bus.get_unique_name()[1:].replace(".", "_"), token)
    responses = []
    bus.signal_subscribe("org.freedesktop.portal.Desktop", "org.freedesktop.portal.Request", "Response", handle,
                         None, Gio.DBusSignalFlags.NO_MATCH_RULE,
                         lambda *args: responses.append(args[5].unpack()[0]))
    bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                  GLib.Variant("(s)", ("type='signal',interface='org.freedesktop.portal.Request',path='%s'" % handle,)),
                  None, Gio.DBusCallFlags.NONE, 5000, None)
    read_end, write_end = os.pipe()
    fds = Gio.UnixFDList.new()
    index = fds.append(write_end)
    os.close(write_end)
    reply, _ = bus.call_with_unix_fd_list_sync(
        "org.freedesktop.portal.Desktop", "/org/freedesktop/portal/desktop", "org.freedesktop.portal.Secret",
        "RetrieveSecret", GLib.Variant("(ha{sv})", (index, {"handle_token": GLib.Variant("s", token)})),
        GLib.VariantType("(o)"), Gio.DBusCallFlags.NONE, 30000, fds, None)
    del fds
    assert reply.unpack()[0] == handle, reply.unpack()
    context = GLib.MainContext.default()
    deadline = time.monotonic() + 30
    while not responses and time.monotonic() < deadline:
        context.iteration(False)
        time.sleep(0.01)
    # Every write end closed (the portal's, latchkeyd's): the pipe reaches its end.
    secret = b""
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        secret += chunk
    print(responses[0] if responses else "none", secret.hex())
""")


class Portal:
    """xdg-desktop-portal on the private bus, reading its backends from `portals`, for GNOME."""

    def __init__(self, bus, portals, log):
        env = bus.env(XDG_DESKTOP_PORTAL_DIR=str(portals), XDG_CURRENT_DESKTOP="GNOME", G_MESSAGES_DEBUG="all")
        self.bus = bus
        self.log = log
        self.process = subprocess.Popen([PORTAL, "--verbose"], env=env, stdout=subprocess.DEVNULL,
                                        stderr=open(log, "wb"))
        deadline = time.monotonic() + 30
        while not bus.has_owner("org.freedesktop.portal.Desktop"):
            assert self.process.poll() is None, f"xdg-desktop-portal exited: {log.read_text()}"
            assert time.monotonic() < deadline, "xdg-desktop-portal did not claim its name"
            time.sleep(0.05)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def app_root(directory, app_id):
    """A root directory for a "sandboxed" application: only the .flatpak-info naming it."""
    directory.mkdir()
    (directory / ".flatpak-info").write_text(f"[Application]\nname={app_id}\nruntime=runtime/x/x86_64/1\n")
    return directory


def wait_until_login_unlocked(bus, timeout=15):
    """latchkeyd makes a new login keychain on its worker, after it claims the name: wait for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = Client(bus.address)
        try:
            reply = client.call("/org/freedesktop/secrets/collection/login", "org.freedesktop.DBus.Properties",
                                "Get", "ss", ("org.freedesktop.Secret.Collection", "Locked"))
            if not reply.is_error and reply.body[0][1] is False:
                return
        finally:
            client.close()
        time.sleep(0.05)
    raise AssertionError("latchkeyd did not make and unlock its login keychain")


def retrieve(bus, root):
    """The client's response code and secret (bytes)."""
    result = subprocess.run(["/usr/bin/python3", "-c", CLIENT, bus.address, str(root or "")],
                            env=bus.env(), capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    response, _, secret = result.stdout.strip().partition(" ")
    return response, bytes.fromhex(secret)


@pytest.fixture
def portals(tmp_path):
    directory = tmp_path / "portals"
    directory.mkdir()
    shutil.copy(ROOT / "dbus" / "latchkey.portal", directory)
    return directory


def requires_portal():
    if not os.path.exists(PORTAL):
        pytest.skip("xdg-desktop-portal is not installed (apt-get install xdg-desktop-portal)")
    if os.geteuid() != 0:
        pytest.skip("making a caller look like a Flatpak application needs chroot (root)")
    pytest.importorskip("gi")


@pytest.mark.parametrize("beside_gnome_keyring", [False, True], ids=["latchkey-alone", "beside-gnome-keyring"])
def test_flatpak_apps_get_their_own_lasting_secret_through_the_portal(daemon, bus, portals, tmp_path,
                                                                     beside_gnome_keyring):
    requires_portal()
    if beside_gnome_keyring:
        if not GNOME_KEYRING_PORTAL.exists():
            pytest.skip("gnome-keyring's .portal file is not installed")
        # Both files name org.freedesktop.secrets: whichever the portal picks, latchkeyd answers.
        shutil.copy(GNOME_KEYRING_PORTAL, portals)
    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        first_app = app_root(tmp_path / "app-a", "org.example.A")
        other_app = app_root(tmp_path / "app-b", "org.example.B")
        response, first = retrieve(bus, first_app)
        assert response == "0", (response, portal.log.read_text()[-2000:], daemon.stderr.read_text())
        assert len(first) == 64
        assert retrieve(bus, first_app) == ("0", first)
        response, other = retrieve(bus, other_app)
        assert response == "0"
        assert len(other) == 64 and other != first
    finally:
        portal.stop()
    # Which file xdg-desktop-portal 1.16 chose: with both, gnome-keyring's sorts first for GNOME. Both name
    # org.freedesktop.secrets, so either way the call went to latchkeyd (the items below are its).
    chosen = "gnome-keyring.portal" if beside_gnome_keyring else "latchkey.portal"
    assert f"Using {chosen} for org.freedesktop.impl.portal.Secret in GNOME" in portal.log.read_text()

    # Each secret is an item of latchkeyd's login collection, with the portal's schema and the app id.
    client = Client(bus.address)
    try:
        session = client.open_plain()
        for app_id, expected in [("org.example.A", first), ("org.example.B", other)]:
            unlocked, locked = client.service("SearchItems", "a{ss}", ({"xdg:schema": SCHEMA, "app_id": app_id},))
            assert len(unlocked) == 1 and locked == [], (app_id, unlocked, locked)
            assert unlocked[0].startswith("/org/freedesktop/secrets/collection/login/")
            [secret] = client.ok(unlocked[0], "org.freedesktop.Secret.Item", "GetSecret", "o", (session,))
            assert secret[2] == expected
            attributes = client.ok(unlocked[0], "org.freedesktop.DBus.Properties", "Get", "ss",
                                   ("org.freedesktop.Secret.Item", "Attributes"))[0][1]
            assert attributes == {"xdg:schema": SCHEMA, "app_id": app_id}
    finally:
        client.close()


def test_a_host_application_gets_no_secret_and_nothing_is_stored(daemon, bus, portals, tmp_path):
    """Outside a sandbox (and outside an app-*.scope unit) the portal passes an empty app id: latchkeyd
    refuses it (response 2) rather than hand every host process one shared key."""
    requires_portal()
    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        assert retrieve(bus, None) == ("2", b"")
    finally:
        portal.stop()
    assert "refused a request without an application id" in daemon.stderr.read_text()
    client = Client(bus.address)
    try:
        assert client.service("SearchItems", "a{ss}", ({"xdg:schema": SCHEMA},)) == ([], [])
    finally:
        client.close()


def test_an_application_keeps_the_key_gnome_keyring_gave_it(bus, make_daemon, portals, tmp_path):
    """The switch from gnome-keyring: an application's key, made by gnome-keyring's own portal backend
    (through the real portal), is imported with the login keyring, and latchkeyd's backend then hands the
    application the same key, so what the application encrypted with it (libsecret's file backend in its
    sandbox) stays readable."""
    requires_portal()
    if shutil.which("gnome-keyring-daemon") is None or not GNOME_KEYRING_PORTAL.exists():
        pytest.skip("gnome-keyring is not installed (.ci/packages lists it)")
    import gnome_keyring

    app = app_root(tmp_path / "app-a", "org.example.A")
    data = tmp_path / "data"
    theirs_dir = tmp_path / "gnome-keyring-portals"
    theirs_dir.mkdir()
    shutil.copy(GNOME_KEYRING_PORTAL, theirs_dir)
    keyring = gnome_keyring.GnomeKeyring(bus.address, tmp_path / "home", data=data)
    keyring.start()
    try:
        portal = Portal(bus, theirs_dir, tmp_path / "portal-gnome-keyring.log")
        try:
            response, theirs = retrieve(bus, app)
        finally:
            portal.stop()
    finally:
        keyring.stop()
    assert response == "0" and len(theirs) == 64

    daemon = make_daemon(keychains=data / "latchkey" / "keychains").start()
    wait_until_login_unlocked(bus)
    # The daemon holds the login keychain: it imports the keyring, once the person confirms it.
    daemon.set_pinentry_answers(["confirm"])
    imported = subprocess.run(
        [binary("latchkey"), "import-gnome-keyring", "--stdin"],
        input=f"{LOGIN_PASSWORD}\n{gnome_keyring.LOGIN_PASSWORD}\n",
        env=bus.env(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(data)), capture_output=True, text=True,
        timeout=120, start_new_session=True)
    assert imported.returncode == 0, imported.stderr
    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        response, mine = retrieve(bus, app)
        assert response == "0", daemon.stderr.read_text()
        assert mine == theirs
        # The imported item served: no second one was made. (gnome-keyring's saved item reads back with
        # xdg:schema=org.freedesktop.Secret.Generic; latchkeyd takes only an item with exactly these two.)
        client = Client(bus.address)
        try:
            [found], _ = client.service("SearchItems", "a{ss}", ({"app_id": "org.example.A"},))
            attributes = client.ok(found, "org.freedesktop.DBus.Properties", "Get", "ss",
                                   ("org.freedesktop.Secret.Item", "Attributes"))[0][1]
            assert attributes == {"app_id": "org.example.A", "xdg:schema": "org.freedesktop.Secret.Generic"}
        finally:
            client.close()
        assert retrieve(bus, app_root(tmp_path / "app-b", "org.example.B"))[1] not in (b"", theirs)
    finally:
        portal.stop()


def test_a_locked_login_keychain_is_unlocked_through_pinentry_first(make_daemon, bus, portals, tmp_path):
    """The portal waits for the answer while latchkeyd's unlock prompt (the scripted pinentry here) asks
    for the login password; then the application gets the same key as before the lock."""
    requires_portal()
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    wait_until_login_unlocked(bus)
    app = app_root(tmp_path / "app-a", "org.example.A")
    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        response, first = retrieve(bus, app)
        assert response == "0"
        client = Client(bus.address)
        try:
            client.service("Lock", "ao", (["/org/freedesktop/secrets/collection/login"],))
        finally:
            client.close()
        assert "GETPIN" not in daemon.pinentry_log()
        assert retrieve(bus, app) == ("0", first)
        assert "GETPIN" in daemon.pinentry_log()
    finally:
        portal.stop()


# A Flatpak application using libsecret: inside a sandbox (/.flatpak-info present) libsecret keeps its
# items in a file of its own (0.20: $XDG_DATA_HOME/keyrings/default.keyring), encrypted with a key
# derived from the secret the portal gives it.
LIBSECRET_APP = textwrap.dedent("""
    import os, sys
    import gi
    gi.require_version("Secret", "1")
    from gi.repository import Gio, Secret

    # libsecret loaded from the host's files first (gi loads it lazily); the bus connection made only inside the
    # sandbox, as a real sandboxed app makes it: latchkeyd identifies a connection when it appears on the bus.
    schema = Secret.Schema.new("org.example.Password", Secret.SchemaFlags.NONE,
                               {"user": Secret.SchemaAttributeType.STRING})
    os.chroot(sys.argv[1])
    os.chdir("/")
    Gio.bus_get_sync(Gio.BusType.SESSION, None)
    if sys.argv[2] == "store":
        Secret.password_store_sync(schema, {"user": "alice"}, Secret.COLLECTION_DEFAULT, "In the sandbox",
                                   "pw kept in the sandbox", None)
    print(repr(Secret.password_lookup_sync(schema, {"user": "alice"}, None)))
""")


def test_libsecret_in_a_sandbox_keeps_its_file_with_the_key_latchkeyd_gives(daemon, bus, portals, tmp_path):
    """libsecret itself, as a Flatpak application runs it: it stores a password in its own file under the
    portal's key and reads it back in a later run; the file holds no clear text, latchkeyd holds only the
    application's key, and with that key gone the file no longer opens."""
    requires_portal()
    root = app_root(tmp_path / "sandbox", "org.example.Sandboxed")
    (root / "data").mkdir()
    # The session bus inside the sandbox, at the same path (Flatpak maps it in too): a hard link to the
    # bus's socket (libsecret opens connections of its own after the chroot).
    socket = pathlib.Path(bus.address.split("unix:path=", 1)[1].split(",", 1)[0])
    (root / socket.parent.relative_to("/")).mkdir(parents=True)
    os.link(socket, root / socket.relative_to("/"))

    def run(mode):
        result = subprocess.run(["/usr/bin/python3", "-c", LIBSECRET_APP, str(root), mode],
                                env=bus.env(XDG_DATA_HOME="/data", HOME="/"), capture_output=True, text=True,
                                timeout=90)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        assert run("store") == "'pw kept in the sandbox'"
        assert run("lookup") == "'pw kept in the sandbox'"
        keyring = root / "data" / "keyrings" / "default.keyring"
        assert keyring.exists()
        assert b"pw kept in the sandbox" not in keyring.read_bytes()
        client = Client(bus.address)
        try:
            assert client.service("SearchItems", "a{ss}", ({"user": "alice"},)) == ([], [])
            [key], _ = client.service("SearchItems", "a{ss}", ({"app_id": "org.example.Sandboxed"},))
            client.ok(key, "org.freedesktop.Secret.Item", "Delete")
        finally:
            client.close()
        # A new key (latchkeyd makes one): the old file does not open with it.
        assert run("lookup") == "None"
    finally:
        portal.stop()


# A client that calls latchkeyd's backend itself, as only xdg-desktop-portal should: RetrieveSecret on
# org.freedesktop.secrets for the app id it names, with the write end of its pipe; "sandboxed" (chrooted into
# a root with .flatpak-info) when given one, as a Flatpak app allowed to talk to org.freedesktop.secrets is
# (xdg-dbus-proxy filters by bus name, not by object). Prints the D-Bus error name (or the response code)
# and what arrived in the pipe, in hex.
DIRECT = textwrap.dedent("""
    import os, sys
    import gi
    gi.require_version("Gio", "2.0")
    from gi.repository import Gio, GLib

    address, app_root, app_id = sys.argv[1], sys.argv[2], sys.argv[3]
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    bus = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
    if app_root:
        os.chroot(app_root)
        os.chdir("/")
    read_end, write_end = os.pipe()
    fds = Gio.UnixFDList.new()
    index = fds.append(write_end)
    os.close(write_end)
    handle = "/org/freedesktop/portal/desktop/request/%s/direct" % bus.get_unique_name()[1:].replace(".", "_")
    try:
        reply, _ = bus.call_with_unix_fd_list_sync(
            "org.freedesktop.secrets", "/org/freedesktop/portal/desktop", "org.freedesktop.impl.portal.Secret",
            "RetrieveSecret", GLib.Variant("(osha{sv})", (handle, app_id, index, {})), None,
            Gio.DBusCallFlags.NONE, 30000, fds, None)
        outcome = str(reply.unpack()[0])
    except GLib.Error as error:
        outcome = Gio.DBusError.get_remote_error(error) or error.message
    del fds
    os.set_blocking(read_end, False)
    try:
        secret = os.read(read_end, 4096)
    except BlockingIOError:
        secret = b""
    print(outcome, secret.hex())
""")


def retrieve_directly(bus, root, app_id):
    """What a client calling the backend itself gets: the error name (or response) and the bytes."""
    result = subprocess.run(["/usr/bin/python3", "-c", DIRECT, bus.address, str(root or ""), app_id],
                            env=bus.env(), capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    outcome, _, secret = result.stdout.strip().partition(" ")
    return outcome, bytes.fromhex(secret)


def test_only_xdg_desktop_portal_may_call_the_backend(daemon, bus, portals, tmp_path):
    """An application's key is handed to xdg-desktop-portal, the owner of org.freedesktop.portal.Desktop,
    and to no one else: a client on the host, or a "sandboxed" one (a Flatpak app allowed to talk to
    org.freedesktop.secrets), calling RetrieveSecret itself with another app's id gets AccessDenied and
    nothing in its pipe, while the portal runs and after it has gone."""
    requires_portal()
    app = app_root(tmp_path / "app-a", "org.example.A")
    attacker = app_root(tmp_path / "attacker", "org.example.Attacker")
    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        response, key = retrieve(bus, app)
        assert response == "0" and len(key) == 64
        for root in [None, attacker]:
            assert retrieve_directly(bus, root, "org.example.A") == ("org.freedesktop.DBus.Error.AccessDenied", b"")
            assert retrieve_directly(bus, root, "org.example.New") == ("org.freedesktop.DBus.Error.AccessDenied", b"")
        # The portal still serves the application.
        assert retrieve(bus, app) == ("0", key)
    finally:
        portal.stop()
    assert retrieve_directly(bus, None, "org.example.A") == ("org.freedesktop.DBus.Error.AccessDenied", b"")
    client = Client(bus.address)
    try:
        assert client.service("SearchItems", "a{ss}", ({"app_id": "org.example.New"},)) == ([], [])
    finally:
        client.close()


def test_an_item_a_client_planted_is_never_handed_out_as_an_applications_key(daemon, bus, portals, tmp_path):
    """A client stores, before the application first asks, items shaped as the backend's keys (the portal's
    schema) and as gnome-keyring's (xdg:schema=org.freedesktop.Secret.Generic, no label) for the
    application's id, with secrets it knows. The application gets a key of its own, which the backend made
    and marked; the planted items stay as they were, and the application's key is the same at every call."""
    requires_portal()
    client = Client(bus.address)
    try:
        session = client.open_plain()
        planted = {}
        for app_id, attributes, label in [
            ("org.example.P", {"xdg:schema": SCHEMA, "app_id": "org.example.P"}, "Application key for org.example.P"),
            ("org.example.G", {"xdg:schema": "org.freedesktop.Secret.Generic", "app_id": "org.example.G"}, ""),
        ]:
            secret = f"known to the attacker: {app_id}".encode()
            item = client.create_item(session, attributes, secret, label=label,
                                      collection="/org/freedesktop/secrets/collection/login")
            planted[app_id] = (item, secret)
    finally:
        client.close()
    portal = Portal(bus, portals, tmp_path / "portal.log")
    try:
        for app_id, (item, secret) in planted.items():
            root = app_root(tmp_path / app_id, app_id)
            response, key = retrieve(bus, root)
            assert response == "0", daemon.stderr.read_text()
            assert len(key) == 64 and key != secret
            assert retrieve(bus, root) == ("0", key)
    finally:
        portal.stop()
    client = Client(bus.address)
    try:
        session = client.open_plain()
        for app_id, (item, secret) in planted.items():
            [stored] = client.ok(item, "org.freedesktop.Secret.Item", "GetSecret", "o", (session,))
            assert stored[2] == secret
            found, _ = client.service("SearchItems", "a{ss}", ({"app_id": app_id},))
            assert len(found) == 2 and item in found
    finally:
        client.close()
