"""python keyring 25 (PyPI; Debian 12 ships 23.9.3, tested in test_kwallet_face.py) uses its KWallet backend
only when org.kde.kwalletd5 is both owned and activatable (keyring/backends/kwallet.py, `priority`), and
ranks it above the Secret Service in a KDE session. Here latchkeyd owns the name on a bus whose service
directory holds the package's activation file: keyring 25 picks KWallet, stores, reads and deletes through
latchkeyd's face, and the entry is a Secret Service item; without the activation file it refuses KWallet, as
it would with no KWallet at all.

keyring 25 comes from PyPI into a virtual environment that sees the system's python3-dbus, made once per
machine in $XDG_CACHE_HOME/latchkey-tests (pip needs PyPI, which CI reaches); where pip cannot reach it, the
test is skipped and says why."""

import contextlib
import os
import pathlib
import subprocess

import pytest

from conftest import ROOT, Daemon, binary
from kwallet_daemons import ServiceBus

KEYRING_VERSION = "25.7.0"
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "latchkey-tests"

CLIENT = r"""
import sys
import keyring
from keyring.backends import kwallet
backend = keyring.get_keyring()
# With several usable backends keyring chains them, highest priority first.
chain = getattr(backend, "backends", [backend])
print("first backend:", type(chain[0]).__module__ + "." + type(chain[0]).__name__)
try:
    print("kwallet priority:", kwallet.DBusKeyring.priority)
except RuntimeError as error:
    print("kwallet refused:", error)
    sys.exit(0)
keyring.set_password("latchkey-test", "alice", "pässwörd ✓")
print("read:", keyring.get_password("latchkey-test", "alice"))
keyring.delete_password("latchkey-test", "alice")
print("after delete:", keyring.get_password("latchkey-test", "alice"))
"""


@pytest.fixture(scope="module")
def keyring25():
    """The python of a venv holding keyring 25 (and the system's dbus module)."""
    venv = CACHE / f"keyring-{KEYRING_VERSION}"
    python = venv / "bin" / "python3"
    marker = venv / "installed"
    if not marker.exists():
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--clear", str(venv)], check=True)
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              f"keyring=={KEYRING_VERSION}"], capture_output=True, text=True, timeout=300)
        if pip.returncode != 0:
            pytest.skip(f"pip could not install keyring {KEYRING_VERSION} from PyPI: {pip.stderr.strip()[-300:]}")
        marker.write_text(KEYRING_VERSION)
    return python


def run_client(python, bus, tmp_path, source=CLIENT):
    """Runs `source` with keyring 25 in a KDE session on `bus`; its `name: value` lines as a dictionary."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    env = bus.env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
                  XDG_CURRENT_DESKTOP="KDE", PYTHONPATH="")
    env.pop("DISPLAY", None)
    script = tmp_path / "keyring_client.py"
    script.write_text(source)
    out = subprocess.run([str(python), str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (out.stdout, out.stderr)
    return dict(line.split(": ", 1) for line in out.stdout.splitlines() if ": " in line)


@contextlib.contextmanager
def latchkeyd_owning_the_name(tmp_path, activatable):
    """latchkeyd on a private bus, owning org.kde.kwalletd5; the name also activatable (the package's
    activation file in the bus's service directory) when `activatable`. Yields the bus."""
    services = tmp_path / "services"
    services.mkdir()
    if activatable:
        shipped = (ROOT / "dbus" / "org.kde.kwalletd5.service").read_text()
        (services / "org.kde.kwalletd5.service").write_text(shipped.replace("/usr/bin/latchkeyd", binary("latchkeyd")))
    bus = ServiceBus(tmp_path, services)
    daemon = Daemon(bus, tmp_path)
    try:
        daemon.start()
        assert bus.has_owner("org.kde.kwalletd5")
        yield bus
    finally:
        daemon.stop()
        bus.stop()


@pytest.mark.parametrize("activatable", [True, False], ids=["activatable", "not-activatable"])
def test_keyring_25_uses_the_kwallet_face_only_when_the_name_is_also_activatable(keyring25, tmp_path, activatable):
    with latchkeyd_owning_the_name(tmp_path, activatable) as bus:
        result = run_client(keyring25, bus, tmp_path)
    if not activatable:
        # Owned but not activatable: keyring 25 will not use KWallet, and takes the Secret Service.
        assert "neither running nor activatable" in result.get("kwallet refused", ""), result
        assert result["first backend"] == "keyring.backends.SecretService.Keyring", result
        return
    assert result["first backend"] == "keyring.backends.kwallet.DBusKeyring", result
    assert result["kwallet priority"] == "5.1", result
    assert result["read"] == "pässwörd ✓", result
    assert result["after delete"] == "None", result


def test_an_entry_keyring_25_stores_is_a_secret_service_item(keyring25, tmp_path):
    with latchkeyd_owning_the_name(tmp_path, activatable=True) as bus:
        run_client(keyring25, bus, tmp_path,
                   "import keyring\nkeyring.set_password('latchkey-test', 'bob', 'stored by keyring 25')\n")
        # keyring's KWallet backend: folder = the service, key = the username (KDE's scheme: server, user).
        looked_up = subprocess.run(["secret-tool", "lookup", "server", "latchkey-test", "user", "bob"],
                                   env=bus.env(), capture_output=True, text=True, timeout=30)
        assert looked_up.stdout == "stored by keyring 25", looked_up
