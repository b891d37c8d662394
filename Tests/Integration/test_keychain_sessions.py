"""org.latchkey.Keychain1's session encryption (issue 31, item 7): a process of the user watching the bus with
dbus-monitor never sees a secret the latchkey command or the Security module reads or writes through the
daemon; a Keychain1 session belongs to the connection that opened it, and bad input gets InvalidArgs while
the daemon keeps serving."""

import subprocess
import time

from jeepney import DBusAddress, new_method_call

from conftest import LOGIN_PASSWORD, binary
from dbus_client import DHClient, Client, Reply
from test_cli import Cli

ROOT_PATH = "/org/latchkey/keychain"
LOGIN_PATH = "/org/latchkey/keychain/login"
KEYCHAIN1 = "org.latchkey.Keychain1"
DH = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
# ReturnOptions: data (1) | attributes (2) | reference (4).
RETURN_DATA_ATTRIBUTES = 1 | 2 | 4


class Monitor:
    """dbus-monitor, a process of the same user, recording every message on the bus in the wire format."""

    def __init__(self, bus, path):
        self.bus = bus
        self.path = path
        self.output = open(path, "wb")
        self.process = subprocess.Popen(["dbus-monitor", "--address", bus.address, "--binary"],
                                        stdout=self.output, stderr=subprocess.DEVNULL)
        # Ready once it records a call made after it started.
        deadline = time.monotonic() + 10
        marker = "monitor-ready-marker"
        while marker.encode() not in self.captured():
            assert time.monotonic() < deadline, "dbus-monitor recorded nothing"
            subprocess.run(["dbus-send", "--session", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                            "org.freedesktop.DBus.NameHasOwner", f"string:{marker}"], env=bus.env())
            time.sleep(0.1)

    def captured(self):
        self.output.flush()
        return self.path.read_bytes()

    def stop(self):
        time.sleep(0.3)
        self.process.terminate()
        self.process.wait(timeout=10)
        self.output.close()
        return self.path.read_bytes()


def secitem(bus, *args):
    return subprocess.run([binary("secitem-client"), *args], env=bus.env(), capture_output=True, text=True,
                          timeout=60)


def test_secrets_read_and_written_through_the_daemon_never_cross_the_bus_in_clear(tmp_path, bus, make_daemon):
    cli = Cli(tmp_path, bus)
    make_daemon(keychains=cli.keychains).start()
    # Written before the monitor starts (secitem-client takes it in argv, which the monitor cannot see anyway).
    assert secitem(bus, "add-generic", "secitem.example", "bob", "SecItemReadSecret-5e1f").returncode == 0
    monitor = Monitor(bus, tmp_path / "monitor.bin")
    try:
        cli.ok("add-generic-password", "-a", "alice", "-s", "cli.example", "--stdin", input="CliStdinSecret-93ab\n")
        assert cli.ok("find-generic-password", "-s", "cli.example", "-w").stdout == "CliStdinSecret-93ab\n"
        found = secitem(bus, "find-generic", "secitem.example", "bob")
        assert found.stdout == "SecItemReadSecret-5e1f\n", found
        assert secitem(bus, "add-generic", "secitem2.example", "carol", "SecItemAddSecret-7c2d").returncode == 0
        # Update, ChangePassword and Unlock carry secrets too.
        cli.ok("add-generic-password", "-a", "alice", "-s", "cli.example", "-U", "--stdin", input="CliUpdated-41fe\n")
        assert cli.ok("find-generic-password", "-s", "cli.example", "-w").stdout == "CliUpdated-41fe\n"
        cli.ok("set-keychain-password", "--stdin", input=f"{LOGIN_PASSWORD}\nNewLoginPassword-c0de\n")
        cli.ok("lock-keychain")
        cli.ok("unlock-keychain", "--stdin", input="NewLoginPassword-c0de\n")
    finally:
        captured = monitor.stop()
    # The monitor did see the calls: the service names travel in clear, as attributes do.
    assert b"cli.example" in captured and b"secitem.example" in captured
    secrets = (b"CliStdinSecret-93ab", b"SecItemReadSecret-5e1f", b"SecItemAddSecret-7c2d", b"CliUpdated-41fe",
               LOGIN_PASSWORD.encode(), b"NewLoginPassword-c0de")
    leaked = [s for s in secrets if s in captured]
    assert not leaked, f"crossed the bus in clear: {leaked}"


def test_a_client_whose_daemon_restarts_opens_a_new_session_and_reads_sealed(tmp_path, bus, make_daemon):
    """The Security module's session is with the daemon that opened it: after a restart its next read reaches
    the new daemon under a new session (not sealed bytes read as plain, nor a reply in clear)."""
    daemon = make_daemon().start()
    assert secitem(bus, "add-generic", "restart.example", "bob", "RestartSecret-0b5e").returncode == 0
    reader = subprocess.Popen([binary("secitem-client"), "find-generic-per-line", "restart.example"], env=bus.env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline() == "RestartSecret-0b5e\n"
        daemon.stop()
        daemon.start()
        monitor = Monitor(bus, tmp_path / "monitor.bin")
        try:
            reader.stdin.write("\n")
            reader.stdin.flush()
            assert reader.stdout.readline() == "RestartSecret-0b5e\n"
        finally:
            captured = monitor.stop()
        assert b"OpenSession" in captured and b"RestartSecret-0b5e" not in captured
    finally:
        reader.stdin.close()
        assert reader.wait(timeout=10) == 0


def call(client, path, member, signature=None, body=(), destination="org.freedesktop.secrets"):
    address = DBusAddress(path, bus_name=destination, interface=KEYCHAIN1)
    return Reply(client.connection.send_and_get_reply(new_method_call(address, member, signature, body), timeout=10))


def open_dh(client):
    dh = DHClient()
    reply = call(client, ROOT_PATH, "OpenSession", "sv", (DH, ("ay", dh.public_bytes)))
    assert not reply.is_error, reply.body
    (_, server_public), session = reply.body
    dh.derive(server_public)
    return dh, session


def search(client, service):
    return call(client, LOGIN_PATH, "Search", "a{sv}", (search_query(service),))


def add(client, service, secret):
    attributes = {"svce": ("s", service), "acct": ("s", "x")}
    return call(client, LOGIN_PATH, "Add", "sa{sv}ayb", ("genp", attributes, secret, True))


def sealed(dh, plaintext):
    iv, ciphertext = dh.encrypt(plaintext)
    return iv + ciphertext


def badly_padded(dh):
    """A block sealed under the session's key whose plaintext ends in 0x00, which no PKCS#7 padding does (a
    ciphertext of arbitrary bytes decrypts to a valid padding about once in 256 sessions)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    iv = bytes(16)
    encryptor = Cipher(algorithms.AES(dh.key), modes.CBC(iv)).encryptor()
    return iv + encryptor.update(b"\x07" * 15 + b"\x00") + encryptor.finalize()


def test_a_keychain1_session_carries_secrets_both_ways_and_belongs_to_its_connection(daemon, bus):
    owner, other, old = Client(bus.address), Client(bus.address), Client(bus.address)
    try:
        dh, session = open_dh(owner)
        assert session.startswith("/org/freedesktop/secrets/session/")
        # In: the owner's secret is sealed under its session; the daemon stores the plaintext.
        assert not add(owner, "sealed.example", sealed(dh, b"sealed secret")).is_error
        # Out: sealed for the owner (16-byte IV, then the ciphertext) ...
        reply = search(owner, "sealed.example")
        assert not reply.is_error, reply.body
        value = reply.body[0][0]["secret"][1]
        assert b"sealed secret" not in value and dh.decrypt(value[:16], value[16:]) == b"sealed secret"
        # ... and plain, as before, for a connection that negotiated nothing (an older client).
        assert old.ok(LOGIN_PATH, KEYCHAIN1, "Search", "a{sv}", (search_query("sealed.example"),))[0][0][
            "secret"][1] == b"sealed secret"
        assert not add(old, "plain.example", b"plain secret").is_error
        assert search(owner, "plain.example").body[0][0]["secret"][1] != b"plain secret"

        # Another connection cannot use the session: it is not its own (Close refused), and its own calls are
        # not sealed under it.
        closing = other.call(session, "org.freedesktop.Secret.Session", "Close")
        assert closing.is_error and closing.error_name == "org.freedesktop.DBus.Error.AccessDenied"
        assert other.ok(LOGIN_PATH, KEYCHAIN1, "Search", "a{sv}", (search_query("sealed.example"),))[0][0][
            "secret"][1] == b"sealed secret"
        value = search(owner, "sealed.example").body[0][0]["secret"][1]
        assert dh.decrypt(value[:16], value[16:]) == b"sealed secret"

        # Bad input: InvalidArgs, nothing stored, and the daemon keeps serving.
        for bad in (b"", b"short", b"\x00" * 16, b"\x00" * 16 + b"\x01" * 15, badly_padded(dh)):
            refused = add(owner, "bad.example", bad)
            assert refused.is_error and refused.error_name == "org.freedesktop.DBus.Error.InvalidArgs", bad
        refused = call(owner, LOGIN_PATH, "Unlock", "ay", (b"not sealed",))
        assert refused.is_error and refused.error_name == "org.freedesktop.DBus.Error.InvalidArgs"
        for algorithm, value in ((DH, ("ay", b"\x01")), (DH, ("s", "x")), ("rot13", ("s", ""))):
            refused = call(owner, ROOT_PATH, "OpenSession", "sv", (algorithm, value))
            assert refused.is_error and refused.error_name in (
                "org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.NotSupported"), algorithm
        assert search(owner, "bad.example").body[0] == []
        assert not add(owner, "after.example", sealed(dh, b"still served")).is_error

        # Closed by its owner: the connection is plain again.
        owner.ok(session, "org.freedesktop.Secret.Session", "Close")
        assert search(owner, "after.example").body[0][0]["secret"][1] == b"still served"
    finally:
        for client in (owner, other, old):
            client.close()


def test_a_keychain1_session_ends_when_its_connection_leaves(daemon, bus):
    owner = Client(bus.address)
    _, session = open_dh(owner)
    owner.close()
    watcher = Client(bus.address)
    try:
        deadline = time.monotonic() + 5
        while True:
            reply = watcher.call(session, "org.freedesktop.DBus.Introspectable", "Introspect")
            if reply.is_error:
                break
            assert time.monotonic() < deadline, "the session outlived its connection"
            time.sleep(0.05)
        assert reply.error_name == "org.freedesktop.Secret.Error.NoSuchObject"
    finally:
        watcher.close()


def search_query(service):
    return {"class": ("s", "genp"), "attributes": ("a{sv}", {"svce": ("s", service)}),
            "returning": ("u", RETURN_DATA_ATTRIBUTES), "limit": ("x", 1)}


def test_another_connection_cannot_close_a_session(daemon, bus):
    """Closing another client's session would turn its Keychain1 secrets plain under its feet."""
    owner, other = Client(bus.address), Client(bus.address)
    try:
        session = owner.open_plain()
        refused = other.call(session, "org.freedesktop.Secret.Session", "Close")
        assert refused.is_error and refused.error_name == "org.freedesktop.DBus.Error.AccessDenied"
        owner.ok(session, "org.freedesktop.Secret.Session", "Close")
    finally:
        owner.close()
        other.close()
