"""The import of KWallet's .kwl wallets (docs/kwallet.md §5) on wallets Debian's real kwalletd5 makes in the test
(Tests/KWalletImportTests/Fixtures/make-fixtures.py: pamOpen with a PBKDF2 key and a salt file written first):
a login imports the wallet its password opens into the login collection, in KDE's scheme (secret-tool finds the
password by server=FOLDER user=KEY); a second login imports nothing; `latchkey import-kwallet --stdin` imports a
wallet with another password into the collection of its name; `migration-status` lists what is left; hostile
files (a FIFO named x.kwl, a salt that is a FIFO or a link to /dev/zero, huge counts) neither wedge a login nor
write anything."""

import importlib.util
import json
import os
import pathlib
import shutil
import struct
import subprocess
import time

import pytest
import secretstorage
from jeepney.io.blocking import open_dbus_connection

import control_client as control
from conftest import LOGIN_PASSWORD, SCRIPTED_PINENTRY, allow_all_held_keychains, binary

pytestmark = pytest.mark.skipif(shutil.which("kwalletd5") is None,
                                reason="kwalletd5 is not installed (.ci/packages lists libkf5wallet-bin)")

HERE = pathlib.Path(__file__).resolve().parent
MAKER = HERE.parent / "KWalletImportTests" / "Fixtures" / "make-fixtures.py"
OTHER_PASSWORD = "other wallet pässword"
OTHER_WALLET = "Work ü/2"
OTHER_FILE = "Work ;C3;BC;2F2"


def maker():
    spec = importlib.util.spec_from_file_location("make_fixtures", MAKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wallets(tmp_path_factory):
    """kdewallet (the login password) and "Work ü/2" (another password), made by the real kwalletd5."""
    out = tmp_path_factory.mktemp("kwallets")
    make = maker()
    specs = {
        "kdewallet": dict(make.WALLETS["kdewallet"], password=LOGIN_PASSWORD),
        OTHER_WALLET: {"password": OTHER_PASSWORD, "entries": [("Network", "vpn", "password", "vpn-secret ✓")],
                       "empty_folders": []},
    }
    make.make_wallets(out, specs)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{OTHER_FILE}.kwl", f"{OTHER_FILE}.salt", "kdewallet.kwl", "kdewallet.salt"])
    return out


@pytest.fixture
def home(tmp_path, wallets):
    """The user's directories: the wallets in $XDG_DATA_HOME/kwalletd, an empty $XDG_CONFIG_HOME."""
    data = tmp_path / "data"
    shutil.copytree(wallets, data / "kwalletd")
    (tmp_path / "config").mkdir()
    (tmp_path / "home").mkdir()
    return tmp_path


def environment(home):
    return {"XDG_DATA_HOME": str(home / "data"), "HOME": str(home / "home"), "XDG_CONFIG_HOME": str(home / "config")}


def login(make_daemon, home):
    """latchkeyd started with no keychain unlocked, then a login's hand-over of the login password (as
    pam_latchkey sends it): the login keychain is made or unlocked and the import at login starts."""
    daemon = make_daemon(keychains=home / "data" / "latchkey" / "keychains", extra_env=environment(home))
    daemon.start(unlock=False)
    started = time.monotonic()
    assert control.hand_over(daemon.runtime / "latchkey" / "control", LOGIN_PASSWORD)[0] == "ok"
    assert time.monotonic() - started < 10
    return daemon


def latchkey(bus, home, *args, input=None):
    answers = home / "pinentry-answers"
    answers.write_text("")
    env = bus.env(PINENTRY=str(SCRIPTED_PINENTRY), SCRIPTED_PINENTRY_ANSWERS=str(answers),
                  SCRIPTED_PINENTRY_LOG=str(home / "pinentry-log"), **environment(home))
    return subprocess.run([binary("latchkey"), *args], env=env, input=input, capture_output=True, text=True,
                          timeout=120, start_new_session=True)


def lookup(bus, folder, key, timeout=30):
    """secret-tool lookup server FOLDER user KEY, once the import has written it (None if it never comes)."""
    deadline = time.monotonic() + timeout
    while True:
        allow_all_held_keychains(bus)
        result = subprocess.run(["secret-tool", "lookup", "server", folder, "user", key], env=bus.env(),
                                capture_output=True, timeout=30)
        if result.returncode == 0 and result.stdout:
            return result.stdout.decode()
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def items_by_collection(bus):
    """Every collection but the session one, by label: {item label: attributes}."""
    connection = open_dbus_connection(bus=bus.address)
    try:
        return {c.get_label(): {i.get_label(): i.get_attributes() for i in c.get_all_items()}
                for c in secretstorage.get_all_collections(connection)
                if not c.collection_path.endswith("/session")}
    finally:
        connection.close()


def file_bytes(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_login_imports_the_wallet_its_password_opens_once(bus, make_daemon, home):
    before = file_bytes(home / "data" / "kwalletd")
    daemon = login(make_daemon, home)
    assert lookup(bus, "Passwords", "mail@example.org") == "sëcret ☃ mail", daemon.stderr.read_text()[-2000:]
    found = items_by_collection(bus)
    assert sorted(found) == ["Login"], found
    assert found["Login"] == {
        "Passwords/mail@example.org": {"server": "Passwords", "user": "mail@example.org", "type": "plaintext"},
        "Passwords/empty": {"server": "Passwords", "user": "empty", "type": "plaintext"},
        "Form Data/https://example.org/login": {"server": "Form Data", "user": "https://example.org/login",
                                                "type": "map"},
        "Binary/blob": {"server": "Binary", "user": "blob", "type": "base64"},
    }
    map_secret = subprocess.run(["secret-tool", "lookup", "server", "Form Data", "user", "https://example.org/login"],
                                env=bus.env(), capture_output=True, timeout=30).stdout.decode()
    assert json.loads(map_secret) == {"nothing": "", "pass": "p@ss wörd", "user": "alice"}
    # The other wallet does not open with the login password: left, and listed.
    status = latchkey(bus, home, "migration-status", "--json")
    assert status.returncode == 0, status.stderr
    kwallet = json.loads(status.stdout)["kwallet"]
    assert [r["wallet"] for r in kwallet["imported"]] == ["kdewallet"]
    assert kwallet["imported"][0]["added"] == 4 and kwallet["imported"][0]["collection"] == "Login"
    assert kwallet["left"] == [{"path": str(home / "data" / "kwalletd" / f"{OTHER_FILE}.kwl"),
                                "reason": "not imported (latchkey import-kwallet)"}]
    assert file_bytes(home / "data" / "kwalletd") == before

    # A second login imports nothing.
    daemon.stop()
    daemon.start(unlock=False)
    assert control.hand_over(daemon.runtime / "latchkey" / "control", LOGIN_PASSWORD)[0] == "ok"
    time.sleep(2)
    assert lookup(bus, "Passwords", "mail@example.org") == "sëcret ☃ mail"
    assert items_by_collection(bus) == found
    status = json.loads(latchkey(bus, home, "migration-status", "--json").stdout)["kwallet"]
    assert len(status["imported"]) == 1

    # The other wallet, with its own password, through the command: into the collection of its name.
    dry = latchkey(bus, home, "import-kwallet", "--dry-run", "--stdin", input=f"{OTHER_PASSWORD}\n")
    assert dry.returncode == 0, dry.stderr
    assert f'would import 1 entries of wallet "{OTHER_WALLET}"' in dry.stdout
    assert items_by_collection(bus) == found
    result = latchkey(bus, home, "import-kwallet", "--stdin", input=f"{OTHER_PASSWORD}\n{LOGIN_PASSWORD}\n")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "kdewallet.kwl: already imported" in result.stdout
    assert f'imported 1 entries of wallet "{OTHER_WALLET}"' in result.stdout
    assert lookup(bus, "Network", "vpn") == "vpn-secret ✓"
    assert items_by_collection(bus)[OTHER_WALLET] == {
        "Network/vpn": {"server": "Network", "user": "vpn", "type": "plaintext"}}
    status = json.loads(latchkey(bus, home, "migration-status", "--json").stdout)["kwallet"]
    assert status["left"] == [] and len(status["imported"]) == 2
    assert file_bytes(home / "data" / "kwalletd") == before


def test_a_wrong_password_on_the_command_imports_nothing_and_says_so(bus, make_daemon, home):
    login(make_daemon, home)
    assert lookup(bus, "Passwords", "mail@example.org") is not None
    path = home / "data" / "kwalletd" / f"{OTHER_FILE}.kwl"
    result = latchkey(bus, home, "import-kwallet", "--stdin", str(path), input=f"not it\n{LOGIN_PASSWORD}\n")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"latchkey: {path}: wrong password, or the wallet is damaged (its SHA-1 check fails); nothing imported from it")
    assert OTHER_WALLET not in items_by_collection(bus)


def hostile_wallet(count):
    """A .kwl whose clear index claims `count` folders (or one folder with `count` keys past the end)."""
    header = b"KWALLET\n\r\0\r\n" + bytes([0, 1, 3, 2])
    if count > 0xFFFF:
        return header + struct.pack(">I", count) + b"\0" * 64
    return header + struct.pack(">I", 1) + b"\x07" * 16 + struct.pack(">I", count) + b"\0" * 64


@pytest.mark.parametrize("planted", ["fifo-wallet", "fifo-salt", "zero-salt", "huge-count"])
def test_hostile_files_neither_wedge_a_login_nor_write_anything(bus, make_daemon, home, planted):
    """What another program of the user could leave in the wallet directory: a FIFO named x.kwl (opened as a file
    it would block the reader forever, and with it the import and every later unlock), kdewallet's salt as a FIFO
    or a symbolic link to /dev/zero (endless), a wallet whose counts run past the end. Each is refused with a
    clear error, the login ends at once, and nothing of that file is written."""
    directory = home / "data" / "kwalletd"
    fifo = None
    if planted == "fifo-wallet":
        fifo = directory / "x.kwl"
        os.mkfifo(fifo)
    elif planted == "fifo-salt":
        fifo = directory / "kdewallet.salt"
        fifo.unlink()
        os.mkfifo(fifo)
    elif planted == "zero-salt":
        (directory / "kdewallet.salt").unlink()
        (directory / "kdewallet.salt").symlink_to("/dev/zero")
    else:
        (directory / "x.kwl").write_bytes(hostile_wallet(0xFFFFFFFF))
        (directory / "x.salt").write_bytes(b"\0" * 56)
        (directory / "y.kwl").write_bytes(hostile_wallet(0xFFFF))
        (directory / "y.salt").write_bytes(b"\0" * 56)
    try:
        daemon = login(make_daemon, home)
        if planted in ("fifo-wallet", "huge-count"):
            # The good wallet is still imported.
            assert lookup(bus, "Passwords", "mail@example.org") == "sëcret ☃ mail", daemon.stderr.read_text()[-2000:]
        else:
            time.sleep(2)
            assert lookup(bus, "Passwords", "mail@example.org", timeout=1) is None
            assert items_by_collection(bus) == {"Login": {}}
        # A later unlock is answered at once (nothing holds the worker).
        connection = open_dbus_connection(bus=bus.address)
        try:
            secretstorage.Collection(connection, "/org/freedesktop/secrets/collection/login").lock()
        finally:
            connection.close()
        started = time.monotonic()
        assert control.hand_over(daemon.runtime / "latchkey" / "control", LOGIN_PASSWORD)[0] == "ok"
        assert time.monotonic() - started < 5
        status = latchkey(bus, home, "migration-status")
        assert status.returncode == 0, status.stderr
        if planted == "fifo-wallet":
            assert f"left wallet {directory}/x.kwl: cannot be imported: {directory}/x.kwl: not a KWallet wallet file" \
                in status.stdout
        elif planted == "huge-count":
            assert f"left wallet {directory}/x.kwl: cannot be imported: {directory}/x.kwl: damaged: " \
                   f"4294967295 folders" in status.stdout
            assert f"{directory}/y.kwl: the file ends inside the name index" in status.stdout
        else:
            result = latchkey(bus, home, "import-kwallet", "--stdin", str(directory / "kdewallet.kwl"),
                              input=f"{LOGIN_PASSWORD}\n")
            assert result.returncode == 1
            assert f"{directory}/kdewallet.kwl: its salt file {directory}/kdewallet.salt" in result.stderr
    finally:
        if fifo is not None:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
