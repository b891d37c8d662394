"""Fixtures for the daemon's integration tests: a private dbus-daemon per test,
latchkeyd on it with a throwaway keychain directory, and a scripted pinentry."""

import contextlib
import os
import pathlib
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
import jeepney.io.blocking

# jeepney gives a connection 1 s to authenticate with the bus; a loaded 2-core CI machine has missed that
# (test_protocol's fixture, "Did not authenticate in 1.0 seconds"). The bus is a real dbus-daemon either way:
# give every connection the tests open in this process 30 s.
jeepney.io.blocking.open_dbus_connection.__defaults__ = ("SESSION", False, 30.0)


def pytest_configure(config):
    """Says so when the runner is `python3 -m pytest`: the test process is a client of the daemons it starts,
    and an item made by `python3 -m MODULE` trusts no application (docs/threat-model.md, "Generic tools"), so
    tests that read back what they made in a new collection are asked about, and fail. scripts/test runs
    pytest-3."""
    if pathlib.Path(sys.argv[0]).name == "__main__.py":
        sys.stderr.write("conftest: run the integration tests with pytest-3 (as scripts/test does), not python3 -m"
                         " pytest: latchkeyd trusts no item to an interpreter running a module\n")


ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTED_PINENTRY = ROOT / "Tests" / "Support" / "scripted-pinentry"
LOGIN_PASSWORD = "login password"


def binary(name):
    """A built executable: $LATCHKEY_BIN_DIR/name, else .build/debug/name."""
    directory = pathlib.Path(os.environ.get("LATCHKEY_BIN_DIR", ROOT / ".build" / "debug"))
    path = directory / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build first (swift build)")
    return str(path)


class Bus:
    """A private session bus."""

    def __init__(self, address=None):
        listen = [f"--address={address}"] if address else []
        out = subprocess.run(
            ["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1", *listen],
            check=True, capture_output=True, text=True).stdout.split()
        self.address, self.pid = out[0], int(out[1])

    def env(self, **extra):
        env = dict(os.environ)
        env["DBUS_SESSION_BUS_ADDRESS"] = self.address
        env.update(extra)
        return env

    def has_owner(self, name="org.freedesktop.secrets"):
        out = subprocess.run(
            ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus.NameHasOwner", f"string:{name}"],
            env=self.env(), capture_output=True, text=True).stdout
        return "boolean true" in out

    def stop(self):
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


class Daemon:
    """latchkeyd on a bus, with its keychain directory and pinentry script."""

    def __init__(self, bus, directory, password=LOGIN_PASSWORD, answers=(), extra_args=(), keychains=None,
                 system_bus=None, extra_env=None, access_policy="allow-all", pinentry=SCRIPTED_PINENTRY):
        self.bus = bus
        # A private bus standing in for the system bus (logind's signals), else an address where nothing
        # listens, so that no test depends on the machine's own system bus.
        self.system_bus_address = system_bus.address if system_bus else f"unix:path={directory}/no-system-bus"
        self.directory = directory
        self.keychains = keychains or directory / "keychains"
        self.answers = directory / "pinentry-answers"
        self.log = directory / "pinentry-log"
        self.set_pinentry_answers(answers)
        self.password = password
        self.extra_args = list(extra_args)
        # Variables added to (or, given None, removed from) the environment the daemon starts with.
        self.extra_env = dict(extra_env or {})
        # The --pinentry given; None: none (the daemon chooses, from PINENTRY or the session).
        self.pinentry = pinentry
        self.process = None
        self.stderr = directory / "latchkeyd.stderr"
        # Its own runtime directory: the control socket lives there.
        self.runtime = directory / "run"
        # What the keychains' access policy is set to once the daemon runs: allow-all for the tests that are
        # not about access prompts (they cross programs: secret-tool stores, python reads), prompt (the
        # default of a new keychain) for those that are (test_access_prompts.py).
        self.access_policy = access_policy
        # Passwords of keychains with one of their own, for setting their policy at start.
        self.own_passwords = []

    def set_pinentry_answers(self, answers):
        self.answers.write_text("".join(a + "\n" for a in answers))
        pos = pathlib.Path(str(self.answers) + ".pos")
        if pos.exists():
            pos.unlink()

    def start(self, unlock=True, wait=True):
        args = [binary("latchkeyd"), "--foreground", "--keychain-directory", str(self.keychains)]
        args += ["--pinentry", str(self.pinentry)] if self.pinentry else []
        args += self.extra_args
        if unlock:
            args.append("--unlock")
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        env = self.bus.env(SCRIPTED_PINENTRY_ANSWERS=str(self.answers), SCRIPTED_PINENTRY_LOG=str(self.log),
                           XDG_RUNTIME_DIR=str(self.runtime), DBUS_SYSTEM_BUS_ADDRESS=self.system_bus_address,
                           **self.extra_env)
        env = {name: value for name, value in env.items() if value is not None}
        self.process = subprocess.Popen(
            args, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=open(self.stderr, "wb"))
        self.process.stdin.write(self.password.encode() if unlock else b"")
        self.process.stdin.close()
        if wait:
            self.wait_for_name()
            # The bus name comes first, the control socket just after: wait for both.
            socket_path = self.runtime / "latchkey" / "control"
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not socket_path.exists():
                time.sleep(0.02)
            # The name is claimed before the keychains are opened (and the login keychain made, a key derivation
            # of a few hundred milliseconds): the files are there once the daemon answers a call.
            self.wait_until_serving()
            if unlock:
                assert (self.keychains / "login.keychain-db").exists(), "latchkeyd --unlock serves no login keychain"
            if self.access_policy != "prompt" and (unlock or any(self.keychains.glob("*.keychain-db"))):
                set_access_policy(self.keychains, self.access_policy, self.password, self.own_passwords)
                if unlock:
                    self.wait_for_policy(self.access_policy)
        return self

    def wait_until_serving(self):
        """Waits for the daemon's answer to a call (it serves once its keychains are open)."""
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection
        connection = open_dbus_connection(bus=self.bus.address)
        try:
            address = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                                  interface="org.freedesktop.DBus.Introspectable")
            connection.send_and_get_reply(new_method_call(address, "Introspect"), timeout=60)
        finally:
            connection.close()

    def wait_for_policy(self, policy, timeout=15):
        """Waits until the daemon reads `policy` from its login keychain (org.latchkey.Keychain1 Status), so
        that a test starts only once the daemon sees what the fixture wrote in the file."""
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection
        connection = open_dbus_connection(bus=self.bus.address)
        try:
            address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                                  interface="org.latchkey.Keychain1")
            deadline = time.monotonic() + timeout
            while True:
                status = connection.send_and_get_reply(new_method_call(address, "Status"), timeout=30).body[0]
                seen = status.get("AccessPolicy", ("s", ""))[1]
                if seen == policy:
                    return
                if time.monotonic() > deadline:
                    in_file = keychain_rows(self.keychains / "login.keychain-db")
                    raise AssertionError(f"latchkeyd reads access policy {seen!r}, not {policy!r}, from its login"
                                         f" keychain; the file's meta rows: {in_file}")
                time.sleep(0.05)
        finally:
            connection.close()

    def wait_for_name(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"latchkeyd exited {self.process.returncode}: {self.stderr.read_text()}")
            if self.bus.has_owner():
                return
            time.sleep(0.02)
        raise AssertionError("latchkeyd did not claim org.freedesktop.secrets")

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if self.alive():
            self.process.send_signal(sig)
            self.process.wait(timeout=10)
        return self.process.returncode

    def pinentry_log(self):
        return self.log.read_text() if self.log.exists() else ""


def set_access_policy(keychains, policy, password=LOGIN_PASSWORD, own_passwords=()):
    """Sets the access policy of every keychain file in the directory `keychains`, as a user would with
    `latchkey set-access-policy` on the file: unlocked with `password`, the login password (a keychain under
    the login key through the login keychain), or one of `own_passwords` (keychains with their own)."""
    # A keychain file is complete whenever it is there (Keychain.create links it into place once built).
    paths = sorted(pathlib.Path(keychains).glob("*.keychain-db"))
    assert paths, f"no keychain file in {keychains} to set the access policy of"
    for path in paths:
        subprocess.run([binary("keychain-writer"), str(path), "--access-policy", policy],
                       input="\n".join([password, *own_passwords]).encode(),
                       check=True)


def allow_all_held_keychains(bus, *other_passwords):
    """Sets allow-all on every keychain file the daemon on `bus` holds (org.latchkey.Keychain1.List; unlocked
    with the fixtures' login password or one of `other_passwords`), for tests
    not about access prompts that read items of keychains made after the daemon started (imports, new
    collections)."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection
    connection = open_dbus_connection(bus=bus.address)
    try:
        address = DBusAddress("/org/latchkey/keychain", bus_name="org.freedesktop.secrets",
                              interface="org.latchkey.Keychain1")
        listing = connection.send_and_get_reply(new_method_call(address, "List"), timeout=30).body[0]
    finally:
        connection.close()
    for directory in {pathlib.Path(k["File"][1]).parent for k in listing if k.get("File", ("s", ""))[1]}:
        set_access_policy(directory, "allow-all", LOGIN_PASSWORD, other_passwords)


def keychain_rows(path):
    """The names of a keychain file's meta rows as another process reads them."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
            return sorted(row[0] for row in db.execute("SELECT name FROM meta"))
    except sqlite3.Error as error:
        return str(error)


@pytest.fixture
def bus():
    b = Bus()
    yield b
    b.stop()


@pytest.fixture
def make_daemon(bus, tmp_path):
    daemons = []

    def make(**kwargs):
        d = Daemon(bus, tmp_path, **kwargs)
        daemons.append(d)
        return d

    yield make
    for d in daemons:
        d.stop(signal.SIGKILL)


@pytest.fixture
def daemon(make_daemon):
    """A running latchkeyd with an unlocked login keychain."""
    d = make_daemon().start()
    yield d
    assert d.alive(), f"latchkeyd died: {d.stderr.read_text()}"


@pytest.fixture
def session_env(bus, monkeypatch):
    """Points this test process (secretstorage, keyring) at the private bus."""
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    return bus


def secret_tool(bus, *args, input=None, check=True):
    """Runs secret-tool on the bus; returns the completed process."""
    result = subprocess.run(["secret-tool", *args], env=bus.env(), input=input, capture_output=True, timeout=30)
    if check and result.returncode != 0:
        raise AssertionError(f"secret-tool {args} failed: {result.stderr.decode()}")
    return result


class SoftwareTPM:
    """A real software TPM 2.0 (Debian's swtpm) on two free local TCP ports with its own state directory (its
    own owner seed: a key sealed by one does not load in another). `tcti` is what LATCHKEY_TPM_TCTI takes."""

    def __init__(self, directory):
        self.state = pathlib.Path(directory)
        self.state.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            port = random.randint(20000, 60000)
            if not (self._free(port) and self._free(port + 1)):
                continue
            self.process = subprocess.Popen(
                ["swtpm", "socket", "--tpm2", "--server", f"type=tcp,port={port},bindaddr=127.0.0.1",
                 "--ctrl", f"type=tcp,port={port + 1},bindaddr=127.0.0.1", "--tpmstate", f"dir={self.state}",
                 "--flags", "not-need-init,startup-clear"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if not self._free(port):
                    self.port = port
                    self.tcti = f"swtpm:host=127.0.0.1,port={port}"
                    return
                time.sleep(0.02)
            self.stop()
        raise AssertionError("swtpm did not start")

    def extend_pcr(self, index):
        """Extends PCR `index` (SHA-256 bank) as a measured boot of other firmware or another boot chain would."""
        subprocess.run(["tpm2_pcrextend", f"{index}:sha256=" + "ab" * 32], check=True, capture_output=True,
                       env=dict(os.environ, TPM2TOOLS_TCTI=self.tcti), timeout=30)

    @staticmethod
    def _free(port):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) != 0

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def make_tpm(tmp_path):
    """Starts software TPMs for a test (skipped only where swtpm is not installed; CI installs it)."""
    if shutil.which("swtpm") is None:
        pytest.skip("swtpm is not installed")
    started = []

    def make():
        tpm = SoftwareTPM(tmp_path / f"swtpm-{len(started)}")
        started.append(tpm)
        return tpm

    yield make
    for tpm in started:
        tpm.stop()
