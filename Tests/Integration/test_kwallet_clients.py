"""More real KWallet clients against latchkeyd, each run the same way against Debian's real kwalletd5 (the
reference) in the same test, parametrized over kwallet_daemons.DAEMONS:

- QtKeychain (Debian 12: libqt5keychain1 0.13.2) through qtkeychain_client.cpp, with XDG_CURRENT_DESKTOP=KDE and
  KDE_SESSION_VERSION=5, which is what makes QtKeychain 0.13.2 (keychain_unix.cpp, detectKeyringBackend) pick
  its KWallet backend when org.kde.kwalletd5 answers networkWallet within 500 ms; otherwise it uses libsecret,
  which on latchkeyd reaches the same items, so a bus monitor records the org.kde.KWallet calls the client
  made and the test asserts them.
- kwalletcli 3.03 (MirBSD; KF5's KWallet::Wallet): `-f FOLDER -e ENTRY` reads, `-P` writes the password read
  from stdin. It refuses to start without DISPLAY (kwif5.cc: "very basic protection against kdeinit5 errors"),
  so the test sets a DISPLAY where no X server listens and Qt's offscreen platform.
- Chromium's KWallet backend, which cannot run here: its calls are replayed with jeepney in the order and with
  the signatures of Chromium's source, components/os_crypt/sync/key_storage_kwallet.cc (KeyStorageKWallet::
  InitWallet, GetKeyImpl, InitFolder, GenerateAndStorePassword, the destructor's Close; chromium/chromium at
  230a75c679d1) and kwallet_dbus.cc (the D-Bus signatures; at 153865a15b33), with key_storage_linux.cc (folder
  "Chromium Keys", key "Chromium Safe Storage"; the appid is config.product_name, "Chromium").

On latchkeyd each client's entry is also checked through the Secret Service face (secret-tool, KDE's scheme of
docs/kwallet.md §2: server = folder, user = key, type = plaintext | base64).

Run against the reference alone with `pytest-3 -q Tests/Integration/test_kwallet_clients.py -k kwalletd5`."""

import base64
import os
import pathlib
import subprocess
import threading

import pytest
from jeepney import MatchRule, MessageType
from jeepney.bus_messages import Monitoring
from jeepney.io.blocking import open_dbus_connection

from conftest import secret_tool
from kwallet_daemons import INTERFACE, kwallet  # noqa: F401  (kwallet: the module fixture)

HERE = pathlib.Path(__file__).resolve().parent
QTKEYCHAIN_SOURCE = HERE / "qtkeychain_client.cpp"
APP = "clients-test"


@pytest.fixture(scope="module")
def handle(kwallet):
    """A handle on the wallet for APP on the fixture's connection, to look at what the clients wrote."""
    return kwallet.open_handle(APP)


@pytest.fixture(scope="session")
def qtkeychain_program(tmp_path_factory):
    """qtkeychain_client.cpp compiled against Debian's libqt5keychain."""
    output = tmp_path_factory.mktemp("qtkeychain") / "qtkeychain_client"
    flags = lambda *args: subprocess.run(["pkg-config", *args, "Qt5Core", "Qt5DBus"], check=True,
                                         capture_output=True, text=True).stdout.split()
    subprocess.run(["g++", "-fPIC", "-std=c++17", "-Wall", "-Werror", *flags("--cflags"), str(QTKEYCHAIN_SOURCE),
                    "-o", str(output), "-lqt5keychain", *flags("--libs")], check=True)
    return output


def client_env(kwallet, **extra):
    """kwallet.env() (which drops DISPLAY and XDG_CURRENT_DESKTOP) with `extra` set after."""
    env = kwallet.env()
    env.update(extra)
    return env


class KWalletMonitor:
    """The org.kde.KWallet method calls on the bus while it runs, recorded by a monitor connection
    (org.freedesktop.DBus.Monitoring.BecomeMonitor): `calls()` gives (member, signature) in order."""

    def __init__(self, kwallet):
        self.connection = open_dbus_connection(bus=kwallet.address)
        rule = MatchRule(type="method_call", interface=INTERFACE)
        reply = self.connection.send_and_get_reply(Monitoring().BecomeMonitor([rule.serialise()]), timeout=10)
        assert reply.header.message_type == MessageType.method_return, reply.body
        self.seen = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                message = self.connection.receive(timeout=0.2)
            except TimeoutError:  # nothing more in flight: stop once asked to
                if self.stopping.is_set():
                    return
                continue
            except Exception:  # the connection closed under us: stop
                return
            fields = message.header.fields
            if message.header.message_type == MessageType.method_call and fields.get(2) == INTERFACE:
                self.seen.append((fields.get(3), fields.get(8, "")))

    def calls(self):
        self.stopping.set()
        self.thread.join(timeout=10)
        self.connection.close()
        return self.seen


# --- QtKeychain ----------------------------------------------------------------------------------------------


def qtkeychain(kwallet, program, *steps):
    """Runs qtkeychain_client with `steps` (lists of arguments) as a Plasma 5 session would; returns its lines."""
    args = [str(program)]
    for step in steps:
        args.extend(step)
    result = subprocess.run(args, env=client_env(kwallet, XDG_CURRENT_DESKTOP="KDE", KDE_SESSION_VERSION="5"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_qtkeychain_text_and_binary_through_kwallet(kwallet, handle, qtkeychain_program):
    service = "QtKeychain ✓"
    text = "pässword ✓".encode()
    binary = b"\x00\x01\xff\x00bin\x00"
    monitor = KWalletMonitor(kwallet)
    lines = qtkeychain(kwallet, qtkeychain_program,
                       ["read", service, "text"],
                       ["write-text", service, "text", text.hex()],
                       ["read", service, "text"],
                       ["write-binary", service, "binary", binary.hex()],
                       ["read", service, "binary"],
                       ["write-text", service, "text", b"second".hex()],
                       ["read", service, "text"])
    calls = monitor.calls()
    assert lines == ["error 1 Entry not found", "ok", f"data {text.hex()}", "ok", f"data {binary.hex()}", "ok",
                     f"data {b'second'.hex()}"]
    # Every job went through org.kde.KWallet (not libsecret): the 500 ms networkWallet probe once, then per job
    # networkWallet, open(wallet, 0, service) and entryType + readPassword/readEntry, or writePassword (text) /
    # writeEntry (binary, the Stream form without a type); QtKeychain never closes its handle.
    read_text = [("networkWallet", ""), ("open", "sxs"), ("entryType", "isss"), ("readPassword", "isss")]
    write_text = [("networkWallet", ""), ("open", "sxs"), ("writePassword", "issss")]
    assert calls == [("networkWallet", ""), ("networkWallet", ""), ("open", "sxs"), ("entryType", "isss"),
                     *write_text, *read_text,
                     ("networkWallet", ""), ("open", "sxs"), ("writeEntry", "issays"),
                     ("networkWallet", ""), ("open", "sxs"), ("entryType", "isss"), ("readEntry", "isss"),
                     *write_text, *read_text], calls
    # Text is a Password entry, binary data a Stream: folder = the service, key = the job's key.
    assert kwallet.value("entryType", "isss", handle, service, "text", APP) == 1
    assert kwallet.value("readPassword", "isss", handle, service, "text", APP) == "second"
    assert kwallet.value("entryType", "isss", handle, service, "binary", APP) == 2
    assert kwallet.value("readEntry", "isss", handle, service, "binary", APP) == binary

    lines = qtkeychain(kwallet, qtkeychain_program, ["delete", service, "binary"], ["read", service, "binary"],
                       ["delete", service, "text"], ["read", service, "text"], ["read", service, "never"])
    assert lines == ["ok", "error 1 Entry not found", "ok", "error 1 Entry not found", "error 1 Entry not found"]
    assert kwallet.value("hasEntry", "isss", handle, service, "binary", APP) is False
    assert kwallet.value("hasEntry", "isss", handle, service, "text", APP) is False


def test_qtkeychain_entries_are_secret_service_items(kwallet, handle, qtkeychain_program):
    if kwallet.is_reference:
        pytest.skip("kwalletd5 runs with apiEnabled=false: its Secret Service face is not under test")
    service = "qtk-items"
    binary = b"\x00zero\x00\xfe"
    assert qtkeychain(kwallet, qtkeychain_program, ["write-text", service, "alice", "s3cret ✓".encode().hex()],
                      ["write-binary", service, "blob", binary.hex()]) == ["ok", "ok"]
    found = secret_tool(kwallet.bus, "lookup", "server", service, "user", "alice", "type", "plaintext")
    assert found.stdout.decode() == "s3cret ✓"
    found = secret_tool(kwallet.bus, "lookup", "server", service, "user", "blob", "type", "base64")
    assert base64.b64decode(found.stdout) == binary
    # And the other way round: a libsecret item in KDE's scheme is what QtKeychain's KWallet backend reads.
    secret_tool(kwallet.bus, "store", "--label", f"{service}/bob", "server", service, "user", "bob", "type",
                "plaintext", input="from secret-tool".encode())
    assert qtkeychain(kwallet, qtkeychain_program, ["read", service, "bob"]) == [
        f"data {b'from secret-tool'.hex()}"]


def test_qtkeychain_long_service_and_key(kwallet, handle, qtkeychain_program):
    # A service and a key of 3,000 characters each: each within latchkeyd's bound on a name (docs/kwallet.md,
    # "Clients tested"), their label "folder/key" past the 4 KiB bound on labels. QtKeychain does not look at
    # writePassword's answer, so a refusal would be a silent loss: "ok", then "Entry not found".
    service, key = "s" * 2999 + "é", "k" * 2999 + "✓"
    assert qtkeychain(kwallet, qtkeychain_program, ["write-text", service, key, b"long".hex()],
                      ["read", service, key]) == ["ok", f"data {b'long'.hex()}"]
    assert kwallet.value("readPassword", "isss", handle, service, key, APP) == "long"
    assert kwallet.value("renameEntry", "issss", handle, service, key, key + "2", APP) == 0
    assert kwallet.value("readPassword", "isss", handle, service, key + "2", APP) == "long"
    if not kwallet.is_reference:
        found = secret_tool(kwallet.bus, "lookup", "server", service, "user", key + "2")
        assert found.stdout == b"long"
        # A name past the 4 KiB bound is refused by the write as by every read (docs/kwallet.md, "Clients
        # tested"), so that nothing is stored that the KWallet face could not find again.
        too_long = "k" * 4097
        assert kwallet.value("writePassword", "issss", handle, service, too_long, "x", APP) == -1
        assert secret_tool(kwallet.bus, "lookup", "server", service, "user", too_long, check=False).stdout == b""


# --- kwalletcli ------------------------------------------------------------------------------------------------


def kwalletcli(kwallet, *args, input=None):
    # kwif5.cc returns "cannot open wallet" at once when DISPLAY is unset or empty; nothing listens at :97.
    return subprocess.run(["kwalletcli", *args], env=client_env(kwallet, DISPLAY=":97"), input=input,
                          capture_output=True, timeout=60)


def test_kwalletcli_writes_reads_and_reports_missing(kwallet, handle):
    monitor = KWalletMonitor(kwallet)
    missing_folder = kwalletcli(kwallet, "-f", "cli folder", "-e", "entry")
    written = kwalletcli(kwallet, "-f", "cli folder", "-e", "entry", "-P", input="pässwörd ✓".encode())
    read = kwalletcli(kwallet, "-f", "cli folder", "-e", "entry")
    missing_entry = kwalletcli(kwallet, "-f", "cli folder", "-e", "other")
    overwritten = kwalletcli(kwallet, "-f", "cli folder", "-e", "entry", "-p", "second")
    read_again = kwalletcli(kwallet, "-f", "cli folder", "-e", "entry")
    calls = monitor.calls()
    # Exit codes of kwalletcli(1): 4 folder missing, 1 entry missing, 0 done; a read prints the value as is.
    assert (missing_folder.returncode, written.returncode, read.returncode, missing_entry.returncode,
            overwritten.returncode, read_again.returncode) == (4, 0, 0, 1, 0, 0), [
        r.stderr for r in (missing_folder, written, read, missing_entry, overwritten, read_again)]
    assert read.stdout.decode() == "pässwörd ✓" and read_again.stdout == b"second"
    assert b"folder 'cli folder' does not exist" in missing_folder.stderr
    assert b"entry 'other' does not exist in folder 'cli folder'" in missing_entry.stderr
    assert kwallet.value("readPassword", "isss", handle, "cli folder", "entry", APP) == "second"
    assert kwallet.value("entryType", "isss", handle, "cli folder", "entry", APP) == 1
    # KF5 5.103's KWallet::Wallet under kwif5.cc: a synchronous open(LocalWallet(), window id, appid), hasFolder
    # (twice: kwif5's own, then setFolder's), createFolder for a new folder, hasEntry before a read, and the
    # Wallet's destructor closing the handle.
    start = [("open", "sxs"), ("hasFolder", "iss")]
    folder = [*start, ("hasFolder", "iss")]
    assert calls == [*start, ("close", "ibs"),
                     *folder, ("createFolder", "iss"), ("hasFolder", "iss"), ("writePassword", "issss"),
                     ("close", "ibs"),
                     *folder, ("hasEntry", "isss"), ("readPassword", "isss"), ("close", "ibs"),
                     *folder, ("hasEntry", "isss"), ("close", "ibs"),
                     *folder, ("writePassword", "issss"), ("close", "ibs"),
                     *folder, ("hasEntry", "isss"), ("readPassword", "isss"), ("close", "ibs")], calls
    if not kwallet.is_reference:
        found = secret_tool(kwallet.bus, "lookup", "server", "cli folder", "user", "entry")
        assert found.stdout == b"second"


# --- Chromium's calls ------------------------------------------------------------------------------------------

CHROMIUM_APP = "Chromium"
CHROMIUM_FOLDER = "Chromium Keys"
CHROMIUM_KEY = "Chromium Safe Storage"


def chromium_get_key(kwallet):
    """One Chromium start and exit: KeyStorageKWallet::Init (InitWallet), GetKeyImpl and the destructor, on a
    connection of its own (Chromium's private dbus::Bus), each call with kwallet_dbus.cc's signature. Returns
    (the key, the calls made)."""
    connection = kwallet.connect()
    made = []

    def call(method, signature=None, *args):
        made.append(method)
        return kwallet.value(method, signature, *args, connection=connection)

    try:
        assert call("isEnabled") is True
        wallet = call("networkWallet")
        handle = call("open", "sxs", wallet, 0, CHROMIUM_APP)
        assert handle > 0, handle
        # InitFolder
        if not call("hasFolder", "iss", handle, CHROMIUM_FOLDER, CHROMIUM_APP):
            assert call("createFolder", "iss", handle, CHROMIUM_FOLDER, CHROMIUM_APP) is True
        key = None
        if call("hasEntry", "isss", handle, CHROMIUM_FOLDER, CHROMIUM_KEY, CHROMIUM_APP):
            entry_type = call("entryType", "isss", handle, CHROMIUM_FOLDER, CHROMIUM_KEY, CHROMIUM_APP)
            if entry_type != 1:  # not a Password: removeEntry, then a new key
                call("removeEntry", "isss", handle, CHROMIUM_FOLDER, CHROMIUM_KEY, CHROMIUM_APP)
            else:
                key = call("readPassword", "isss", handle, CHROMIUM_FOLDER, CHROMIUM_KEY, CHROMIUM_APP) or None
        if key is None:  # GenerateAndStorePassword: base64 of 16 random bytes, success when writePassword is 0
            key = base64.b64encode(os.urandom(16)).decode()
            assert call("writePassword", "issss", handle, CHROMIUM_FOLDER, CHROMIUM_KEY, key, CHROMIUM_APP) == 0
        call("close", "ibs", handle, False, CHROMIUM_APP)  # ~KeyStorageKWallet ignores the answer
        return key, made
    finally:
        connection.close()


def test_chromium_keeps_its_safe_storage_key(kwallet, handle):
    first, first_calls = chromium_get_key(kwallet)
    assert first_calls == ["isEnabled", "networkWallet", "open", "hasFolder", "createFolder", "hasEntry",
                           "writePassword", "close"]
    second, second_calls = chromium_get_key(kwallet)
    assert second_calls == ["isEnabled", "networkWallet", "open", "hasFolder", "hasEntry", "entryType",
                            "readPassword", "close"]
    assert second == first and len(base64.b64decode(first)) == 16
    # A Stream where the key should be (another program wrote it): Chromium removes it and stores a new key.
    assert kwallet.value("writeEntry", "issays", handle, CHROMIUM_FOLDER, CHROMIUM_KEY, b"\x00stream", APP) == 0
    third, third_calls = chromium_get_key(kwallet)
    assert third_calls == ["isEnabled", "networkWallet", "open", "hasFolder", "hasEntry", "entryType",
                           "removeEntry", "writePassword", "close"]
    assert third != first and chromium_get_key(kwallet)[0] == third
    if not kwallet.is_reference:
        found = secret_tool(kwallet.bus, "lookup", "server", CHROMIUM_FOLDER, "user", CHROMIUM_KEY)
        assert found.stdout.decode() == third
