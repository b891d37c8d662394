"""The two daemons the KWallet protocol tests run against, behind one interface: Debian's real kwalletd5
(libkf5wallet-bin 5.103, the reference) and latchkeyd (its org.kde.KWallet face, docs/kwallet.md), each on a
private dbus-daemon under a scratch HOME with the kwalletrc of docs/kwallet.md §6.

A test module imports the module fixture `kwallet` (one daemon per module and parameter of DAEMONS)

    from kwallet_daemons import kwallet

and then `kwallet.kind` ("kwalletd5" | "latchkeyd"), `kwallet.is_reference` (True for kwalletd5),
`kwallet.address` (the bus address), `kwallet.env()` (the environment for a client program: bus, scratch
HOME/XDG_*, QT_QPA_PLATFORM=offscreen), `kwallet.wallet` ("kdewallet", open when the fixture yields),
`kwallet.call(method, signature, *args, connection=None)` (the reply's body; default: the fixture's own
connection), `kwallet.value(...)` (the single returned value), `kwallet.connect()` (a new jeepney connection,
another client), `kwallet.open_handle(appid, connection=None)` (open(wallet, 0, appid), asserted > 0),
`kwallet.reopen()` (after a test closed the wallet for everyone: pamOpen again on kwalletd5). Beside it:
`SignalWatch(kwallet)` (collects org.kde.KWallet signals on a connection of its own; `drain()`),
`build_client(directory)` (compiles kwallet_client.cpp) and `KWalletClient(executable, kwallet).run(steps)`.

kwalletd5 gets its wallet without a dialog: the test writes the 56-byte salt
$XDG_DATA_HOME/kwalletd/kdewallet.salt, then calls pamOpen("kdewallet", PBKDF2-HMAC-SHA512(password, salt,
50000, 56), 0): KWalletD::pamOpen (kwalletd.cpp, v5.103.0) hands the hash to Backend::openPreHashed, which
creates the wallet when no .kwl exists and opens it with that key (the salt file is what
Backend::setPassword/the PAM module derive the same hash from, so the wallet file is also one the import
can open with the password). latchkeyd is the conftest Daemon: an unlocked login keychain, allow-all policy.
"""

import contextlib
import hashlib
import os
import pathlib
import signal
import subprocess
import time

import pytest
from jeepney import DBusAddress, MatchRule, MessageType, message_bus, new_method_call
from jeepney.io.blocking import open_dbus_connection

from conftest import Bus, Daemon

DAEMONS = ["kwalletd5", "latchkeyd"]
SERVICE = "org.kde.kwalletd5"
OBJECT = "/modules/kwalletd5"
INTERFACE = "org.kde.KWallet"
WALLET = "kdewallet"
WALLET_PASSWORD = "kwallet test password ✓"
HERE = pathlib.Path(__file__).resolve().parent
CLIENT_SOURCE = HERE / "kwallet_client.cpp"

KWALLETRC = """[Wallet]
First Use=false
Prompt on Open=false
Enabled=true
Close When Idle=false

[org.freedesktop.secrets]
apiEnabled=false
"""


def wallet_hash(password, salt):
    """The 56-byte key kwalletd5 takes in pamOpen: PBKDF2-HMAC-SHA512, 50,000 rounds, with the wallet's salt
    (kwalletbackend.cc: password2PBKDF2_SHA512, PBKDF2_SHA512_KEYSIZE 56, PBKDF2_SHA512_ITERATIONS 50000)."""
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 50000, 56)


class KWalletDaemon:
    """One daemon serving org.kde.KWallet at org.kde.kwalletd5 /modules/kwalletd5 on its own bus."""

    def __init__(self, kind, directory):
        assert kind in DAEMONS, kind
        self.kind = kind
        self.directory = pathlib.Path(directory)
        self.home = self.directory / "home"
        self.config_home = self.home / ".config"
        self.data_home = self.home / ".local" / "share"
        self.runtime = self.directory / "run"
        self.wallet = WALLET
        self.password = WALLET_PASSWORD
        self.bus = None
        self.process = None
        self.latchkeyd = None
        self.connection = None
        self.stderr = self.directory / f"{kind}.stderr"

    @property
    def is_reference(self):
        """True for Debian's kwalletd5, the daemon whose answers are the protocol."""
        return self.kind == "kwalletd5"

    @property
    def address(self):
        return self.bus.address

    def env(self, **extra):
        """The environment of a client (and of kwalletd5): the bus, the scratch HOME and XDG directories,
        Qt's offscreen platform, no display."""
        env = self.bus.env(HOME=str(self.home), XDG_CONFIG_HOME=str(self.config_home),
                           XDG_DATA_HOME=str(self.data_home), XDG_RUNTIME_DIR=str(self.runtime),
                           QT_QPA_PLATFORM="offscreen", **extra)
        for name in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_CURRENT_DESKTOP"):
            env.pop(name, None)
        return env

    def _prepare(self):
        for d in (self.config_home, self.data_home / "kwalletd"):
            d.mkdir(parents=True, exist_ok=True)
        self.runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.config_home / "kwalletrc").write_text(KWALLETRC)

    def start(self):
        self._prepare()
        self.bus = Bus()
        if self.kind == "kwalletd5":
            self._start_kwalletd5()
        else:
            self._start_latchkeyd()
        self.connection = self.connect()
        return self

    def _start_kwalletd5(self):
        salt = os.urandom(56)
        salt_file = self.data_home / "kwalletd" / f"{WALLET}.salt"
        salt_file.write_bytes(salt)
        salt_file.chmod(0o600)
        self.process = subprocess.Popen(["kwalletd5"], env=self.env(), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=open(self.stderr, "wb"))
        self._wait_for_service()
        self._hash = wallet_hash(self.password, salt)
        self.reopen()

    def reopen(self):
        """Opens the wallet again after a test closed it for everyone: kwalletd5 through pamOpen (a closed
        wallet would otherwise need the password dialog); latchkeyd's wallet is the unlocked login keychain,
        which no KWallet call closes (docs/kwallet.md §3)."""
        if self.kind != "kwalletd5":
            return
        connection = self.connect()
        try:
            # pamOpen is declared NoReply; kwalletd5 5.103 still sends an empty method return (no `i`).
            connection.send_and_get_reply(
                new_method_call(self._address(), "pamOpen", "sayi", (WALLET, self._hash, 0)), timeout=30)
            deadline = time.monotonic() + 30
            while not self.call("isOpen", "s", WALLET, connection=connection)[0]:
                if time.monotonic() > deadline:
                    raise AssertionError(f"kwalletd5 did not open {WALLET} through pamOpen: {self.stderr_text()}")
                time.sleep(0.05)
        finally:
            connection.close()

    def _start_latchkeyd(self):
        self.latchkeyd = Daemon(self.bus, self.directory, extra_env={
            "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.config_home), "XDG_DATA_HOME": str(self.data_home)})
        self.latchkeyd.start()
        self.process = self.latchkeyd.process
        self.stderr = self.latchkeyd.stderr
        self._wait_for_service(timeout=10)

    def _wait_for_service(self, timeout=30):
        """Waits until the daemon owns org.kde.kwalletd5 and answers org.kde.KWallet at /modules/kwalletd5."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.kind} exited {self.process.returncode}: {self.stderr_text()}")
            if self.bus.has_owner(SERVICE):
                try:
                    self.call("networkWallet", timeout=5, connection=None)
                    return
                except Exception:  # the name is there before the object (kwalletd5: KDBusService first)
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind} does not serve {INTERFACE} at {SERVICE} {OBJECT} after {timeout}"
                                     f" s: {self.stderr_text()}")
            time.sleep(0.05)

    def stderr_text(self):
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        if self.latchkeyd is not None:
            self.latchkeyd.stop(signal.SIGKILL)
        elif self.alive():
            self.process.kill()
            self.process.wait(timeout=10)
        if self.bus is not None:
            self.bus.stop()

    @staticmethod
    def _address():
        return DBusAddress(OBJECT, bus_name=SERVICE, interface=INTERFACE)

    def connect(self):
        """A new connection to the daemon's bus (close it when done)."""
        return open_dbus_connection(bus=self.bus.address)

    def call(self, method, signature=None, *args, connection=None, timeout=30):
        """Calls `method` of org.kde.KWallet with the exact D-Bus `signature`; returns the reply's body (a tuple).
        A D-Bus error raises AssertionError (kwalletd5 never answers one)."""
        own = None
        if connection is None:
            connection = self.connection
            if connection is None:
                connection = own = self.connect()
        try:
            reply = connection.send_and_get_reply(new_method_call(self._address(), method, signature, args),
                                                  timeout=timeout)
        finally:
            if own is not None:
                own.close()
        if reply.header.message_type == MessageType.error:
            raise AssertionError(f"{self.kind}: {method} answered the D-Bus error "
                                 f"{reply.header.fields.get(4)}: {reply.body}")
        return reply.body

    def value(self, method, signature=None, *args, **kwargs):
        """The single value a method returns."""
        body = self.call(method, signature, *args, **kwargs)
        assert len(body) == 1, f"{self.kind}: {method} returned {body!r}, not one value"
        return body[0]

    def open_handle(self, appid, connection=None):
        """Opens the wallet for `appid` on `connection` (default: the fixture's) and returns the handle."""
        handle = self.value("open", "sxs", self.wallet, 0, appid, connection=connection)
        assert handle > 0, f"{self.kind}: open({self.wallet!r}) answered {handle}"
        return handle


@contextlib.contextmanager
def start_daemon(kind, directory):
    """Starts `kind` ("kwalletd5" or "latchkeyd") in `directory`; yields the KWalletDaemon, stops it after."""
    daemon = KWalletDaemon(kind, directory)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module", params=DAEMONS)
def kwallet(request, tmp_path_factory):
    """One daemon per module and parameter, its wallet "kdewallet" open; checked alive at the module's end."""
    with start_daemon(request.param, tmp_path_factory.mktemp(request.param)) as daemon:
        yield daemon
        assert daemon.alive(), f"{daemon.kind} died: {daemon.stderr_text()}"


class SignalWatch:
    """Collects the org.kde.KWallet signals a connection of its own receives (as any client on the bus would,
    with an eavesdrop-free match rule), for asserting which signals a step sent."""

    def __init__(self, daemon):
        self.connection = daemon.connect()
        self.rule = MatchRule(type="signal", interface=INTERFACE)
        self.connection.send_and_get_reply(message_bus.AddMatch(self.rule))
        self._filter = self.connection.filter(self.rule)
        self.queue = self._filter.__enter__()

    def drain(self, settle=0.3):
        """The (member, body) of every signal received until none arrives for `settle` seconds."""
        out = []
        while True:
            try:
                message = self.connection.recv_until_filtered(self.queue, timeout=settle)
            except TimeoutError:
                return out
            out.append((message.header.fields[3], message.body))

    def close(self):
        self._filter.__exit__(None, None, None)
        self.connection.close()


def build_client(directory):
    """Compiles kwallet_client.cpp into `directory`; returns the executable's path."""
    output = pathlib.Path(directory) / "kwallet_client"
    flags = lambda *args: subprocess.run(["pkg-config", *args, "Qt5Core", "Qt5DBus", "Qt5Gui"], check=True,
                                         capture_output=True, text=True).stdout.split()
    subprocess.run(["g++", "-fPIC", "-std=c++17", "-Wall", "-Werror", "-Wno-deprecated-declarations",
                    "-I/usr/include/KF5/KWallet", *flags("--cflags"), str(CLIENT_SOURCE), "-o", str(output),
                    "-lKF5Wallet", *flags("--libs")], check=True)
    return output


def _hex(value):
    if value is None:
        return "~"
    if isinstance(value, (bytes, bytearray)):
        return value.hex() if value else "-"
    return value.encode().hex() if value else "-"


def _unhex(field):
    if field == "~":
        return None
    if field == "-":
        return ""
    return bytes.fromhex(field).decode()


class KWalletClient:
    """Runs the KF5 client program against a daemon: `run(steps)` sends each step, a tuple of the command and its
    arguments (str, bytes, None for a null QString, int for a count), and returns the parsed result lines.

    Results: a list per step of the fields after the command name, decoded: ints stay strings of digits
    (compare with "0"), names and values are str (None for a null QString), `bytes_fields` gives bytes."""

    def __init__(self, executable, daemon):
        self.executable = executable
        self.daemon = daemon

    def run(self, *steps, timeout=60):
        lines = []
        for step in steps:
            command, *args = step
            lines.append("\t".join([command, *(str(a) if isinstance(a, int) else _hex(a) for a in args)]))
        result = subprocess.run([str(self.executable)], input="\n".join(lines) + "\n", env=self.daemon.env(),
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"kwallet_client exited {result.returncode}: {result.stderr}"
        out = [line.split("\t") for line in result.stdout.splitlines()]
        assert [o[0] for o in out] == [s[0] for s in steps], (
            f"kwallet_client answered {result.stdout!r} to {lines!r}; stderr: {result.stderr}")
        return [o[1:] for o in out]

    decode = staticmethod(_unhex)

    @staticmethod
    def decode_bytes(field):
        return b"" if field == "-" else bytes.fromhex(field)

    @staticmethod
    def pairs(fields):
        """A list of (key, value) from "N k v k v …" fields, in the order printed."""
        count = int(fields[0])
        assert len(fields) == 1 + 2 * count, fields
        return [(_unhex(fields[1 + 2 * i]), _unhex(fields[2 + 2 * i])) for i in range(count)]


class ServiceBus(Bus):
    """A private session bus whose only service directory is `services` (what makes a name activatable); the
    programs it activates inherit `env` (default: this process's)."""

    def __init__(self, directory, services, env=None):
        config = directory / "bus.conf"
        config.write_text(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{services}</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
""")
        out = subprocess.run(["dbus-daemon", f"--config-file={config}", "--fork", "--print-address=1",
                              "--print-pid=1"], env=env, check=True, capture_output=True, text=True).stdout.split()
        self.address, self.pid = out[0], int(out[1])
