"""KDE's KWallet bus names, org.kde.kwalletd5 and org.kde.kwalletd6 (docs/kwallet.md, "Names and packaging, as
built"), with Debian 12's real kwalletd5 (libkf5wallet-bin) on a private dbus-daemon: latchkeyd owns them beside
org.freedesktop.secrets; a kwalletd5 started while it does (as D-Bus activation or pam_kwallet5 starts it) exits
and leaves all three names with latchkeyd; a kwalletd5 that came first keeps its names and latchkeyd, queued,
takes them when it leaves; another program of the user cannot take them; a client's forged NameAcquired or
NameLost counts for nothing; D-Bus activation of org.kde.kwalletd5 through the shipped activation file starts
latchkeyd."""

import os
import pathlib
import signal
import socket
import subprocess
import time

import dbus
import dbus.lowlevel
import pytest

from conftest import ROOT, binary
from kwallet_daemons import ServiceBus

KWALLETD5 = "/usr/bin/kwalletd5"
SECRETS = "org.freedesktop.secrets"
KDE_NAMES = ("org.kde.kwalletd5", "org.kde.kwalletd6")
ACQUIRED_LINE = "serves KWallet clients as "

pytestmark = pytest.mark.skipif(not os.path.exists(KWALLETD5), reason="needs kwalletd5 (libkf5wallet-bin)")


def connect(bus):
    return dbus.bus.BusConnection(bus.address)


def owner(connection, name):
    try:
        return str(connection.get_name_owner(name))
    except dbus.DBusException:
        return None


def queued(connection, name):
    return [str(n) for n in connection.call_blocking(
        "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListQueuedOwners", "s", (name,))]


def wait_for(condition, timeout=15, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class KDEHome:
    """A scratch home for KDE programs: kwalletrc without first-use wizard or prompts, data and runtime dirs."""

    def __init__(self, directory, secret_service=True):
        self.home = directory / "kde-home"
        self.config = self.home / ".config"
        self.data = self.home / ".local" / "share"
        self.runtime = self.home / "run"
        for path in (self.config, self.data):
            path.mkdir(parents=True, exist_ok=True)
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        rc = "[Wallet]\nFirst Use=false\nPrompt on Open=false\nEnabled=true\n"
        if not secret_service:
            rc += "\n[org.freedesktop.secrets]\napiEnabled=false\n"
        (self.config / "kwalletrc").write_text(rc)

    def env(self, bus, **extra):
        return bus.env(HOME=str(self.home), XDG_CONFIG_HOME=str(self.config), XDG_DATA_HOME=str(self.data),
                       XDG_RUNTIME_DIR=str(self.runtime), QT_QPA_PLATFORM="offscreen", **extra)

    def wallets(self):
        return sorted(p.name for p in (self.data / "kwalletd").glob("*")) if (self.data / "kwalletd").exists() else []


@pytest.fixture
def kde(tmp_path):
    return KDEHome(tmp_path)


def run_kwalletd5(bus, kde, *args, timeout=30):
    """kwalletd5 as D-Bus activation starts it (no arguments) or with `args`: (exit status, seconds, output)."""
    started = time.monotonic()
    result = subprocess.run([KWALLETD5, *args], env=kde.env(bus), capture_output=True, text=True, timeout=timeout)
    return result.returncode, time.monotonic() - started, result.stdout + result.stderr


def names_of(connection):
    return {name: owner(connection, name) for name in (SECRETS, *KDE_NAMES)}


def test_latchkeyd_owns_the_kwallet_names_and_a_started_kwalletd5_leaves_them(daemon, bus, kde):
    connection = connect(bus)
    latchkeyd = owner(connection, SECRETS)
    wait_for(lambda: all(owner(connection, n) == latchkeyd for n in KDE_NAMES), what="latchkeyd owning the KDE names")
    # kwalletd5's KDBusService::Unique finds the name taken (it asks queued), calls org.freedesktop.Application
    # Activate on the owner at /org/kde/kwalletd5, gets latchkeyd's error, waits two seconds for the name and
    # exits 1. It never reaches its own Secret Service nor makes a wallet.
    status, seconds, output = run_kwalletd5(bus, kde)
    assert status == 1, output
    assert "Couldn't register name 'org.kde.kwalletd5'" in output
    assert seconds < 10, f"kwalletd5 took {seconds:.1f} s to give up"
    assert names_of(connection) == {name: latchkeyd for name in (SECRETS, *KDE_NAMES)}
    assert queued(connection, "org.kde.kwalletd5") == [latchkeyd]
    assert kde.wallets() == []
    # With arguments it calls org.kde.KDBusService.CommandLine instead: the same end.
    status, _, output = run_kwalletd5(bus, kde, "--unknown-option")
    assert status == 1, output
    assert names_of(connection) == {name: latchkeyd for name in (SECRETS, *KDE_NAMES)}
    assert daemon.stderr.read_text().count(ACQUIRED_LINE) == 2
    assert "is owned by" not in daemon.stderr.read_text()


def start_like_pam_kwallet5(bus, kde, tmp_path):
    """kwalletd5 as pam_kwallet5 (KDE/kwallet-pam 5.27, execute_kwallet/start_kwallet) starts it at session open:
    `kwalletd5 --pam-login PIPE SOCKET` with PAM_KWALLET5_LOGIN naming the listening socket and no session bus in
    its environment; the key hash (56 bytes) comes down the pipe, then pam_kwallet_init (an autostart entry,
    `env | socat STDIN UNIX-CONNECT:$PAM_KWALLET5_LOGIN`) sends the session's environment, bus included."""
    socket_path = tmp_path / "kwallet5.socket"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen(5)
    read_end, write_end = os.pipe()
    env = kde.env(bus, PAM_KWALLET5_LOGIN=str(socket_path))
    session_environment = "".join(f"{k}={v}\n" for k, v in env.items() if "\n" not in v)
    del env["DBUS_SESSION_BUS_ADDRESS"]
    process = subprocess.Popen(
        [KWALLETD5, "--pam-login", str(read_end), str(listener.fileno())], env=env,
        pass_fds=(read_end, listener.fileno()), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    os.close(read_end)
    listener.close()
    os.write(write_end, bytes(range(56)))
    os.close(write_end)
    # pam_kwallet_init, later in the session.
    time.sleep(0.3)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as init:
        init.connect(str(socket_path))
        init.sendall(session_environment.encode())
    return process


def test_a_kwalletd5_started_by_pam_kwallet5_exits_and_leaves_the_names(daemon, bus, kde, tmp_path):
    connection = connect(bus)
    latchkeyd = owner(connection, SECRETS)
    wait_for(lambda: all(owner(connection, n) == latchkeyd for n in KDE_NAMES), what="latchkeyd owning the KDE names")
    process = start_like_pam_kwallet5(bus, kde, tmp_path)
    output, _ = process.communicate(timeout=30)
    # It joined the bus (it read the hash and the environment), found the name taken, and exited before pamOpen:
    # the login's key opened and made no wallet.
    assert process.returncode == 1, output
    assert "Couldn't register name 'org.kde.kwalletd5'" in output
    assert names_of(connection) == {name: latchkeyd for name in (SECRETS, *KDE_NAMES)}
    assert kde.wallets() == []
    assert daemon.alive()


def start_kwalletd5_first(bus, kde):
    process = subprocess.Popen([KWALLETD5], env=kde.env(bus), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    connection = connect(bus)
    wait_for(lambda: owner(connection, "org.kde.kwalletd5") is not None, what="kwalletd5 owning its name")
    return process, connection


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)


def test_kwalletd5_first_with_its_secret_service_keeps_latchkeyd_out_until_it_leaves(make_daemon, bus, kde):
    """kwalletd5 5.103 also serves org.freedesktop.secrets unless kwalletrc says apiEnabled=false, and allows no
    replacement: latchkeyd, started after it, exits naming it (--replace cannot take the name either). Once
    kwalletd5 is gone, latchkeyd starts and owns all three names."""
    kwalletd5, connection = start_kwalletd5_first(bus, kde)
    try:
        wait_for(lambda: owner(connection, SECRETS) == owner(connection, "org.kde.kwalletd5"),
                 what="kwalletd5 owning org.freedesktop.secrets")
        for extra in ([], ["--replace"]):
            refused = make_daemon(extra_args=extra)
            refused.start(wait=False)
            assert refused.process.wait(timeout=30) == 1
            message = refused.stderr.read_text()
            assert "org.freedesktop.secrets is already owned by" in message and KWALLETD5 in message, message
            assert owner(connection, SECRETS) == owner(connection, "org.kde.kwalletd5")
    finally:
        stop(kwalletd5)
    daemon = make_daemon().start()
    latchkeyd = owner(connection, SECRETS)
    wait_for(lambda: all(owner(connection, n) == latchkeyd for n in KDE_NAMES), what="latchkeyd owning the KDE names")
    assert daemon.alive()


def test_kwalletd5_first_keeps_its_name_and_latchkeyd_takes_it_when_it_leaves(make_daemon, bus, tmp_path):
    kde = KDEHome(tmp_path, secret_service=False)
    kwalletd5, connection = start_kwalletd5_first(bus, kde)
    kwalletd5_name = owner(connection, "org.kde.kwalletd5")
    try:
        daemon = make_daemon().start()
        latchkeyd = owner(connection, SECRETS)
        assert latchkeyd != kwalletd5_name
        wait_for(lambda: owner(connection, "org.kde.kwalletd6") == latchkeyd, what="latchkeyd owning kwalletd6")
        # Queued behind kwalletd5, which keeps serving; one line says who has the name.
        assert owner(connection, "org.kde.kwalletd5") == kwalletd5_name
        assert queued(connection, "org.kde.kwalletd5") == [kwalletd5_name, latchkeyd]
        lines = [line for line in daemon.stderr.read_text().splitlines() if "is owned by" in line]
        assert len(lines) == 1 and lines[0].startswith("latchkeyd: org.kde.kwalletd5 is owned by ")
        assert f"pid {kwalletd5.pid}, {KWALLETD5})" in lines[0], lines
    finally:
        stop(kwalletd5)
    wait_for(lambda: owner(connection, "org.kde.kwalletd5") == latchkeyd, what="latchkeyd taking org.kde.kwalletd5")
    wait_for(lambda: "serves KWallet clients as org.kde.kwalletd5" in daemon.stderr.read_text(),
             what="the line saying latchkeyd took the name")
    assert daemon.alive() and owner(connection, SECRETS) == latchkeyd


def test_replace_hands_the_kwallet_names_to_the_new_daemon(make_daemon, bus, tmp_path):
    """--replace takes org.freedesktop.secrets; the KDE names follow when the old daemon exits, since the new
    one waits queued for them."""
    first = make_daemon().start()
    connection = connect(bus)
    old = owner(connection, SECRETS)
    wait_for(lambda: all(owner(connection, n) == old for n in KDE_NAMES), what="the first daemon owning the names")
    second = make_daemon(extra_args=["--replace"])
    second.stderr = tmp_path / "second.stderr"
    second.start(wait=False)
    first.process.wait(timeout=15)
    wait_for(lambda: owner(connection, SECRETS) not in (None, old), what="the new daemon owning the Secret Service")
    new = owner(connection, SECRETS)
    wait_for(lambda: all(owner(connection, n) == new for n in KDE_NAMES), what="the new daemon owning the KDE names")
    wait_for(lambda: second.stderr.read_text().count(ACQUIRED_LINE) == 2, what="the new daemon's two lines")
    assert second.alive(), second.stderr.read_text()


def test_no_kwallet_leaves_the_names_alone(make_daemon, bus, kde):
    daemon = make_daemon(extra_args=["--no-kwallet"]).start()
    connection = connect(bus)
    assert owner(connection, SECRETS) is not None
    assert all(owner(connection, n) is None and queued_or_empty(connection, n) == [] for n in KDE_NAMES)
    # A real kwalletd5 then starts and serves them.
    kwalletd5, _ = start_kwalletd5_first(bus, KDEHome(kde.home.parent / "second", secret_service=False))
    try:
        assert daemon.alive()
    finally:
        stop(kwalletd5)


def queued_or_empty(connection, name):
    try:
        return queued(connection, name)
    except dbus.DBusException:
        return []


def test_another_program_cannot_take_the_kwallet_names(daemon, bus):
    """A program of the same user asking for the names, even with REPLACE_EXISTING, is queued or refused:
    latchkeyd does not allow replacement of them."""
    connection = connect(bus)
    latchkeyd = owner(connection, SECRETS)
    wait_for(lambda: all(owner(connection, n) == latchkeyd for n in KDE_NAMES), what="latchkeyd owning the KDE names")
    thief = connect(bus)
    for name in KDE_NAMES:
        assert thief.request_name(name, dbus.bus.NAME_FLAG_REPLACE_EXISTING) == dbus.bus.REQUEST_NAME_REPLY_IN_QUEUE
        assert thief.request_name(
            name, dbus.bus.NAME_FLAG_REPLACE_EXISTING | dbus.bus.NAME_FLAG_DO_NOT_QUEUE
        ) in (dbus.bus.REQUEST_NAME_REPLY_EXISTS, dbus.bus.REQUEST_NAME_REPLY_IN_QUEUE)
        assert owner(connection, name) == latchkeyd
    assert daemon.alive()


def test_forged_name_signals_count_for_nothing(daemon, bus):
    """NameLost and NameAcquired sent to latchkeyd by a client (the bus stamps the client's own name as sender)
    neither stop it nor make it report a name it does not hold."""
    connection = connect(bus)
    latchkeyd = owner(connection, SECRETS)
    wait_for(lambda: daemon.stderr.read_text().count(ACQUIRED_LINE) == 2, what="latchkeyd's two lines")
    forger = connect(bus)
    for member, name in [("NameLost", "org.kde.kwalletd5"), ("NameLost", "org.kde.kwalletd6"),
                         ("NameLost", SECRETS), ("NameAcquired", "org.kde.kwalletd5"),
                         ("NameAcquired", "org.kde.kwalletd6")]:
        message = dbus.lowlevel.SignalMessage("/org/freedesktop/DBus", "org.freedesktop.DBus", member)
        message.set_destination(latchkeyd)
        message.append(name, signature="s")
        forger.send_message(message)
    forger.flush()
    # A call answered after the signals were read.
    connection.call_blocking(SECRETS, "/org/freedesktop/secrets", "org.freedesktop.DBus.Properties", "Get", "ss",
                             ("org.freedesktop.Secret.Service", "Collections"))
    time.sleep(0.3)
    assert daemon.alive(), daemon.stderr.read_text()
    assert names_of(connection) == {name: latchkeyd for name in (SECRETS, *KDE_NAMES)}
    assert daemon.stderr.read_text().count(ACQUIRED_LINE) == 2, daemon.stderr.read_text()


def test_activation_of_org_kde_kwalletd5_starts_latchkeyd(tmp_path):
    """A private bus whose only service directory holds the shipped activation file (its Exec pointed at the
    built latchkeyd): a call to org.kde.kwalletd5 starts latchkeyd, which then owns all three names."""
    services = tmp_path / "services"
    services.mkdir()
    shipped = (ROOT / "dbus" / "org.kde.kwalletd5.service").read_text()
    assert "Exec=/usr/bin/latchkeyd --foreground" in shipped.splitlines()
    assert "SystemdService=latchkeyd.service" in shipped.splitlines()
    (services / "org.kde.kwalletd5.service").write_text(
        shipped.replace("/usr/bin/latchkeyd", f"{binary('latchkeyd')} --keychain-directory {tmp_path / 'kc'}"))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={tmp_path}/none",
               XDG_DATA_HOME=str(tmp_path / "data"), HOME=str(tmp_path))
    bus = ServiceBus(tmp_path, services, env=env)
    address, bus_pid = bus.address, bus.pid
    latchkeyd_pid = None
    try:
        connection = dbus.bus.BusConnection(address)
        assert owner(connection, "org.kde.kwalletd5") is None
        assert connection.start_service_by_name("org.kde.kwalletd5")[1] == 1  # DBUS_START_REPLY_SUCCESS
        latchkeyd = owner(connection, "org.kde.kwalletd5")
        latchkeyd_pid = int(connection.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                     "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s",
                                                     ("org.kde.kwalletd5",)))
        assert os.readlink(f"/proc/{latchkeyd_pid}/exe") == os.path.realpath(binary("latchkeyd"))
        wait_for(lambda: names_of(connection) == {n: latchkeyd for n in (SECRETS, *KDE_NAMES)},
                 what="latchkeyd owning the three names")
    finally:
        if latchkeyd_pid:
            os.kill(latchkeyd_pid, signal.SIGTERM)
        os.kill(bus_pid, signal.SIGTERM)
