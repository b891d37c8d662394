"""Makes real gnome-keyring keyring files: Debian's gnome-keyring-daemon on a private bus under a
throwaway HOME, filled through the Secret Service with python secretstorage (jeepney underneath).

Used by test_gnome_keyring_import.py, and by `python3 Tests/Integration/gnome_keyring.py DIR`, which
wrote the fixtures of Tests/GnomeKeyringImportTests/Fixtures.

Keyrings other than login are made with gnome-keyring's private method
org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface.CreateWithMasterPassword, which takes the
password as a Secret and needs no prompt (CreateCollection would prompt through gcr, which needs a
display). The login keyring is made by `gnome-keyring-daemon --unlock` (without --start, which
refuses it) from the password on stdin.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import time

import jeepney
import secretstorage
from jeepney.io.blocking import open_dbus_connection

SERVICE = "org.freedesktop.secrets"
INTERNAL = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"

LOGIN_PASSWORD = "gnome login pw"
SECOND_PASSWORD = "second keyring pw ü"

# (collection, label, attributes, secret bytes, content type); the secrets cover UTF-8, binary and
# multi-line values; the attributes several schemas and many names.
ITEMS = [
    ("login", "Mail password for alice", {"xdg:schema": "org.gnome.Evolution.Data.Source", "e-source-uid": "abc123",
                                          "eds-backend": "imap"}, "pässwörd ✓".encode(), "text/plain"),
    ("login", "Network secret", {"xdg:schema": "org.freedesktop.NetworkManager.Connection",
                                 "connection-uuid": "3f1c-77", "setting-name": "802-11-wireless-security",
                                 "setting-key": "psk"}, b"wifi-psk-123", "text/plain"),
    ("login", "Chrome Safe Storage", {"xdg:schema": "chrome_libsecret_os_crypt_password_v2",
                                      "application": "chrome"}, bytes(range(256)), "application/octet-stream"),
    ("login", "Multi-line note", {"xdg:schema": "org.gnome.keyring.Note"}, b"line one\nline two\r\nline three\n",
     "text/plain"),
    ("login", "No schema item", {"service": "backup.example", "account": "bob"}, b"s3cret", "text/plain"),
    ("login", "Many attributes", {f"attr{i:02d}": f"value {i} ✓" for i in range(40)}, b"many", "text/plain"),
    ("login", "Twin", {"service": "twin.example"}, b"first twin", "text/plain"),
    ("login", "Twin", {"service": "twin.example"}, b"second twin", "text/plain"),
    ("second", "Second keyring item", {"xdg:schema": "org.example.Second", "user": "carol", "port": "8443"},
     "ünïcødé\tsecret".encode(), "text/plain"),
    ("second", "Empty secret", {"xdg:schema": "org.example.Second", "user": "dave"}, b"", "text/plain"),
    ("open", "Plain text item", {"xdg:schema": "org.example.Open", "k": "v = w", "spaced": "  leading"},
     b"plain secret", "text/plain"),
    ("open", "Binary in plain text", {"xdg:schema": "org.example.Open", "k": "bin"}, b"\x00\xff\x10 bin",
     "text/plain"),
    ("open", " Label with spaces \\ and [brackets] ", {"xdg:schema": "org.example.Open", "k": "multi"},
     b"  two\nlines  ", "text/plain"),
]


class GnomeKeyring:
    """gnome-keyring-daemon with only its secrets component, on the bus at `address`, under `home`."""

    def __init__(self, address, home, data=None):
        self.address = address
        self.home = pathlib.Path(home)
        self.data = pathlib.Path(data) if data else self.home / ".local" / "share"
        self.process = None

    def env(self):
        env = dict(os.environ)
        env.update(DBUS_SESSION_BUS_ADDRESS=self.address, HOME=str(self.home), XDG_DATA_HOME=str(self.data),
                   XDG_RUNTIME_DIR=str(self.home / "run"), XDG_CONFIG_HOME=str(self.home / ".config"))
        env.pop("DISPLAY", None)
        env.pop("WAYLAND_DISPLAY", None)
        return env

    @property
    def keyrings(self):
        return self.data / "keyrings"

    def start(self, login_password=LOGIN_PASSWORD):
        (self.home / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
        # gnome-keyring makes the keyrings directory but not a missing XDG_DATA_HOME above it.
        self.data.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--components=secrets", "--unlock"],
            env=self.env(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.process.stdin.write(login_password.encode())
        self.process.stdin.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gnome-keyring-daemon exited: {self.process.stderr.read().decode()}")
            connection = self.connect()
            try:
                # Not secretstorage.check_service_availability, which also counts an activatable name: a call
                # before this daemon owns the name would make the bus start another gnome-keyring-daemon
                # (its activation file), which would win the name without the login password.
                # The name comes first; the login keyring once the password on stdin has been read.
                owned = connection.send_and_get_reply(jeepney.bus_messages.message_bus.NameHasOwner(SERVICE)).body[0]
                if owned and any(c.collection_path.endswith("/login")
                                 for c in secretstorage.get_all_collections(connection)):
                    return self
            finally:
                connection.close()
            time.sleep(0.1)
        raise RuntimeError("gnome-keyring-daemon did not claim org.freedesktop.secrets")

    def connect(self):
        return open_dbus_connection(bus=self.address)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def internal_call(connection, method, signature, arguments):
    """Calls gnome-keyring's private interface with the password as a plain-session Secret (the
    session is opened first and stands at `arguments`' "SESSION" placeholder)."""
    service = jeepney.DBusAddress("/org/freedesktop/secrets", bus_name=SERVICE,
                                  interface="org.freedesktop.Secret.Service")
    reply = connection.send_and_get_reply(jeepney.new_method_call(service, "OpenSession", "sv", ("plain", ("s", ""))))
    session_path = reply.body[1]
    arguments = tuple((session_path, *a[1:]) if isinstance(a, tuple) and a and a[0] == "SESSION" else a
                      for a in arguments)
    internal = jeepney.DBusAddress("/org/freedesktop/secrets", bus_name=SERVICE, interface=INTERNAL)
    reply = connection.send_and_get_reply(jeepney.new_method_call(internal, method, signature, arguments))
    if reply.header.message_type != jeepney.MessageType.method_return:
        raise RuntimeError(f"{method} failed: {reply.body}")
    return reply.body


def create_collection(connection, label, password):
    """A new keyring with `password` through CreateWithMasterPassword (no prompt); its object path."""
    properties = {"org.freedesktop.Secret.Collection.Label": ("s", label)}
    return internal_call(connection, "CreateWithMasterPassword", "a{sv}(oayays)",
                         (properties, ("SESSION", b"", password.encode(), "text/plain")))[0]


def unlock_collection(connection, path, password):
    """Unlocks a keyring with its password through UnlockWithMasterPassword (no prompt)."""
    internal_call(connection, "UnlockWithMasterPassword", "o(oayays)",
                  (path, ("SESSION", b"", password.encode(), "text/plain")))


def set_default(keyring, label):
    """Points gnome-keyring's `default` alias at the collection labelled `label` (SetAlias); it
    writes the keyring's file name into the file `default` beside the keyrings."""
    connection = keyring.connect()
    try:
        path = next(c.collection_path for c in secretstorage.get_all_collections(connection)
                    if c.get_label() == label)
        service = jeepney.DBusAddress("/org/freedesktop/secrets", bus_name=SERVICE,
                                      interface="org.freedesktop.Secret.Service")
        reply = connection.send_and_get_reply(jeepney.new_method_call(service, "SetAlias", "so", ("default", path)))
        if reply.header.message_type != jeepney.MessageType.method_return:
            raise RuntimeError(f"SetAlias failed: {reply.body}")
    finally:
        connection.close()


def served(keyring):
    """Every keyring as gnome-keyring serves it from its files (the second one unlocked with its
    password): {label: [item dict]}."""
    connection = keyring.connect()
    try:
        result = {}
        for collection in secretstorage.get_all_collections(connection):
            if collection.collection_path.endswith("/session"):
                continue
            if collection.is_locked():
                unlock_collection(connection, collection.collection_path, SECOND_PASSWORD)
            result[collection.get_label()] = read_items(collection)
        return result
    finally:
        connection.close()


def populate(keyring):
    """Makes the login, second (own password) and open (empty password) keyrings and fills them;
    returns {collection label: [item dict]} as read back through the Secret Service."""
    connection = keyring.connect()
    try:
        collections = {"login": secretstorage.get_default_collection(connection)}
        collections["login"].unlock()
        for name, password in (("second", SECOND_PASSWORD), ("open", "")):
            path = create_collection(connection, name, password)
            collections[name] = secretstorage.Collection(connection, path)
        for collection, label, attributes, secret, content_type in ITEMS:
            collections[collection].create_item(label, attributes, secret, replace=False, content_type=content_type)
        return {name: read_items(collection) for name, collection in collections.items()}
    finally:
        connection.close()


def read_items(collection):
    """Every item of a collection: label, attributes, secret, content type, times."""
    result = []
    for item in collection.get_all_items():
        result.append({"label": item.get_label(), "attributes": dict(item.get_attributes()),
                       "secret": bytes(item.get_secret()), "content_type": item.get_secret_content_type(),
                       "created": item.get_created(), "modified": item.get_modified()})
    return sorted(result, key=lambda i: (i["label"], i["secret"]))


def main(directory):
    """Writes fresh keyring files into `directory` (the Swift tests' fixtures)."""
    import tempfile
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        bus = subprocess.run(["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
                             check=True, capture_output=True, text=True).stdout.split()
        keyring = GnomeKeyring(bus[0], home)
        try:
            keyring.start()
            items = populate(keyring)
            # gnome-keyring writes a keyring file on every change; give the last write a moment.
            time.sleep(1)
        finally:
            keyring.stop()
            os.kill(int(bus[1]), 15)
        for path in sorted(keyring.keyrings.glob("*.keyring")):
            shutil.copy(path, out / path.name)
            print(path.name, path.stat().st_size)
        for name, entries in items.items():
            print(name, len(entries))


if __name__ == "__main__":
    main(sys.argv[1])


def portal_secret(keyring, app_id):
    """The key gnome-keyring's Secret portal backend (org.freedesktop.impl.portal.Secret, what
    xdg-desktop-portal calls for a Flatpak app) hands out for an app: 64 random bytes, made on the
    first call and kept in the login keyring as an item with the attribute app_id. libsecret's
    SECRET_FILE_TEST_PASSWORD, which the tests use to write the app's file, cannot carry a NUL byte:
    when the key holds one, the next app id is asked (`app_id`, then `app_id` + "2", ...). Returns
    (app id, key)."""
    address = jeepney.DBusAddress("/org/freedesktop/portal/desktop", bus_name=SERVICE,
                                  interface="org.freedesktop.impl.portal.Secret")
    connection = open_dbus_connection(bus=keyring.address, enable_fds=True)
    try:
        for attempt in range(1, 20):
            app = app_id if attempt == 1 else f"{app_id}{attempt}"
            read, write = os.pipe()
            try:
                reply = connection.send_and_get_reply(jeepney.new_method_call(
                    address, "RetrieveSecret", "osha{sv}",
                    (f"/org/freedesktop/portal/desktop/request/1_1/t{attempt}", app, write, {})))
            finally:
                os.close(write)
            with os.fdopen(read, "rb") as pipe:
                secret = pipe.read()
            if reply.header.message_type != jeepney.MessageType.method_return or len(secret) != 64:
                raise RuntimeError(f"RetrieveSecret failed: {reply.body}")
            if b"\0" not in secret:
                return app, secret
        raise RuntimeError("the portal secret always held a NUL byte")
    finally:
        connection.close()


# Run with libsecret's file backend (SECRET_BACKEND=file, SECRET_FILE_TEST_PATH, SECRET_FILE_TEST_PASSWORD):
# stores the items given as JSON on stdin (label, attributes, secret in hex), then prints every item as
# libsecret reads the file back: label, attributes, secret in hex, created, modified.
LIBSECRET_FILE_SCRIPT = r"""
import json, sys
import gi
gi.require_version("Secret", "1")
from gi.repository import Secret
for item in json.load(sys.stdin):
    schema = Secret.Schema.new(item["attributes"]["xdg:schema"], Secret.SchemaFlags.NONE,
                               {k: Secret.SchemaAttributeType.STRING for k in item["attributes"] if k != "xdg:schema"})
    attributes = {k: v for k, v in item["attributes"].items() if k != "xdg:schema"}
    secret = bytes.fromhex(item["secret"])
    assert Secret.password_store_binary_sync(schema, attributes, None, item["label"],
                                             Secret.Value.new(secret.decode(), len(secret), "text/plain"), None)
found = Secret.password_search_sync(None, {}, Secret.SearchFlags.ALL | Secret.SearchFlags.UNLOCK
                                     | Secret.SearchFlags.LOAD_SECRETS, None)
out = []
for item in found:
    value = item.retrieve_secret_sync(None)
    out.append({"label": item.get_label(), "attributes": dict(item.get_attributes()),
                "secret": bytes(value.get()).hex(), "created": item.get_created(), "modified": item.get_modified()})
print(json.dumps(out))
"""


def libsecret_file(path, password, items):
    """Writes a libsecret file-backend keyring at `path` with the real libsecret (through GObject
    introspection), as a Flatpak app's libsecret does with the portal's key `password`; returns its
    items as libsecret reads them back (secrets as bytes)."""
    import json
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    env = {k.encode(): v.encode() for k, v in env.items()}
    env.update({b"SECRET_BACKEND": b"file", b"SECRET_FILE_TEST_PATH": str(path).encode(),
                b"SECRET_FILE_TEST_PASSWORD": password})
    items = [dict(i, secret=i["secret"].hex()) for i in items]
    result = subprocess.run(["/usr/bin/python3", "-c", LIBSECRET_FILE_SCRIPT], input=json.dumps(items).encode(),
                            env=env, capture_output=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"libsecret could not write {path}: {result.stderr.decode()}")
    return [dict(i, secret=bytes.fromhex(i["secret"])) for i in json.loads(result.stdout)]
