"""`latchkey` never waits silently (docs/ssh.md): a wait on the bus or the daemon longer than a second is told on
standard error, every wait ends within its bound with one clear line, and with no session bus at all the verbs
that need latchkeyd say so at once. Real binaries: a real dbus-daemon with a process that owns the Secret
Service name and never answers, a socket that accepts and never answers, and no bus at all."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import control_client as control
from conftest import binary


def run_timed(args, env, timeout=60):
    """Runs latchkey; its stderr lines with the seconds since start each arrived at, and the exit status."""
    start = time.monotonic()
    process = subprocess.Popen([binary("latchkey"), *args], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(timeout, process.kill)  # a command that hangs fails the test instead
    killer.start()
    lines = []
    for line in process.stderr:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
    process.wait()
    killer.cancel()
    return lines, process.returncode, time.monotonic() - start


def cli_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR")}
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_RUNTIME_DIR=str(runtime))
    env.update(extra)
    return env


def test_with_no_session_bus_unlock_keychain_says_so_in_one_line(tmp_path):
    """An ssh login without a user bus: no DBUS_SESSION_BUS_ADDRESS, no $XDG_RUNTIME_DIR/bus."""
    lines, status, elapsed = run_timed(["unlock-keychain"], cli_env(tmp_path))
    assert status == 1 and elapsed < 3, (lines, status, elapsed)
    assert len(lines) == 1, lines
    assert "no session bus (DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus is missing)" in lines[0][1]
    assert "docs/ssh.md" in lines[0][1]


def test_with_no_session_bus_update_environment_names_what_is_missing(tmp_path):
    lines, status, elapsed = run_timed(["update-environment", "DISPLAY=:5"], cli_env(tmp_path))
    assert status == 1 and elapsed < 3, (lines, status, elapsed)
    assert [text for _, text in lines] == [
        "latchkey: the session bus cannot be reached: no session bus: DBUS_SESSION_BUS_ADDRESS is unset and "
        "$XDG_RUNTIME_DIR/bus is missing"]


@pytest.fixture
def silent_socket(tmp_path):
    """A socket that accepts connections and never says a word (a hung bus, or a fake one another process of
    the user put in DBUS_SESSION_BUS_ADDRESS)."""
    path = tmp_path / "silent-bus"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(8)
    held = []

    def accept():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"unix:path={path}"
    listener.close()
    for connection in held:
        connection.close()


@pytest.mark.parametrize("fake", ["silent_socket", "hello_less_bus"])
def test_a_bus_that_never_answers_is_told_after_a_second_and_given_up_on(tmp_path, fake, request):
    """Silent from the start, or silent after the authentication (the Hello shares the 10 s with it)."""
    silent_socket = request.getfixturevalue(fake)
    lines, status, elapsed = run_timed(["show-keychain-info"], cli_env(tmp_path, DBUS_SESSION_BUS_ADDRESS=silent_socket))
    assert status == 1, lines
    (at, waiting), (_, gave_up) = lines
    assert 0.9 < at < 2.5, lines
    assert waiting == f"latchkey: waiting for the session bus at {silent_socket} to answer (at most 10 s)"
    assert gave_up == f"latchkey: the bus at {silent_socket} did not answer within 10 s"
    assert 9.5 < elapsed < 13, elapsed


SILENT_OWNER = """
import sys, time, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
assert bus.request_name("org.freedesktop.secrets") == dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER
print("owner", flush=True)
time.sleep(120)
"""


@pytest.fixture
def silent_owner(bus):
    """A process on a real bus that owns the Secret Service name and never answers a call (a stopped or hung
    latchkeyd, or another program of the user squatting the name)."""
    process = subprocess.Popen([sys.executable, "-c", SILENT_OWNER, bus.address], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "owner"
    yield bus
    process.kill()
    process.wait()


def test_a_daemon_that_never_answers_is_told_after_a_second_and_ends_the_verb(tmp_path, silent_owner):
    env = cli_env(tmp_path, DBUS_SESSION_BUS_ADDRESS=silent_owner.address)
    lines, status, elapsed = run_timed(["show-keychain-info"], env)
    assert status == 1, lines
    (at, waiting), (_, ended) = lines
    assert 0.9 < at < 2.5, lines
    assert waiting == "latchkey: waiting for latchkeyd to answer List: it may be starting (at most 5 s)"
    assert ended == "latchkey: latchkeyd (org.freedesktop.secrets on the session bus) did not answer List within 5 s"
    assert 4.5 < elapsed < 8, elapsed
    # The keychain file was not opened behind the silent owner's back: none was made.
    assert not (tmp_path / "data").exists()


SLOW_PINENTRY = """#!/bin/sh
echo "OK slow pinentry"
while read -r line; do
  case "$line" in
    GETPIN*) sleep 3; echo "D not the password"; echo OK ;;
    BYE*) echo OK; exit 0 ;;
    *) echo OK ;;
  esac
done
"""


def test_a_pinentry_prompt_is_named_after_a_second(tmp_path):
    """No terminal: the password is asked through pinentry, and a prompt the person may not see (a display
    over ssh) is named, with its bound."""
    pinentry = tmp_path / "slow-pinentry"
    pinentry.write_text(SLOW_PINENTRY)
    pinentry.chmod(0o755)
    env = cli_env(tmp_path, DBUS_SESSION_BUS_ADDRESS=f"unix:path={tmp_path}/no-bus", PINENTRY=str(pinentry))
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    made = subprocess.run([binary("latchkey"), "create-keychain", "--stdin", "work"], input="pw\n", env=env,
                          capture_output=True, text=True, start_new_session=True)
    assert made.returncode == 0, made.stderr
    start = time.monotonic()
    process = subprocess.Popen([binary("latchkey"), "unlock-keychain", "work"], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    first = process.stderr.readline().rstrip("\n")
    at = time.monotonic() - start
    process.kill()
    process.wait()
    assert first == f"latchkey: waiting for the prompt of {pinentry} on no display (at most 120 s)"
    assert 0.9 < at < 2.5, at


def first_line_about_the_bus(process):
    """latchkeyd's first line on standard error about the session bus (others, on the system bus, come first)."""
    for line in process.stderr:
        if "session bus" in line:
            return line.rstrip("\n")
    return None


def test_latchkeyd_on_a_bus_that_never_answers_serves_its_control_socket(tmp_path, silent_socket):
    """A fake DBUS_SESSION_BUS_ADDRESS that accepts and never answers held latchkeyd in its start for good
    (libdbus does not bound the authentication), so a login's hand-over found no control socket. Now the
    connection gives up after 10 s, the daemon says so and serves the control socket."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = cli_env(tmp_path, DBUS_SESSION_BUS_ADDRESS=silent_socket)
    process = subprocess.Popen(
        [binary("latchkeyd"), "--foreground", "--keychain-directory", str(tmp_path / "keychains"),
         "--pinentry", "/bin/false"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(30, process.kill)  # a daemon that hangs fails the test instead
    killer.start()
    try:
        start = time.monotonic()
        first = first_line_about_the_bus(process)
        assert first.startswith(f"latchkeyd: no session bus yet (the bus at {silent_socket} did not answer within"
                                " 10 s): serving the control socket"), first
        assert 9.5 < time.monotonic() - start < 13
        path = runtime / "latchkey" / "control"
        deadline = time.monotonic() + 15
        while not path.exists():
            assert time.monotonic() < deadline, "no control socket"
            time.sleep(0.05)
        # Answered (there is no login keychain here, so what it says does not matter).
        assert control.status(path)[0] in control.STATUS_NAMES.values()
    finally:
        killer.cancel()
        process.kill()
        process.wait()


@pytest.fixture
def hello_less_bus(tmp_path):
    """A fake bus that completes the SASL authentication (OK, unix fds agreed) and then never answers Hello:
    libdbus's own 25 s reply timeout for Hello (and again for RequestName) held latchkeyd's start."""
    path = tmp_path / "hello-less-bus"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(8)
    held = []

    def serve(connection):
        data = b""
        while True:
            try:
                chunk = connection.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
            while b"\r\n" in data:
                line, data = data.split(b"\r\n", 1)
                line = line.lstrip(b"\0")
                if line.startswith(b"AUTH"):
                    connection.sendall(b"OK 0123456789abcdef0123456789abcdef\r\n")
                elif line.startswith(b"NEGOTIATE_UNIX_FD"):
                    connection.sendall(b"AGREE_UNIX_FD\r\n")
                elif line.startswith(b"BEGIN"):
                    return  # Hello and everything after it: never answered, the connection held open

    def accept():
        while True:
            try:
                connection = listener.accept()[0]
            except OSError:
                return
            held.append(connection)
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"unix:path={path}"
    listener.close()
    for connection in held:
        connection.close()


@pytest.fixture
def full_listener(tmp_path):
    """A listener that never accepts, its backlog full: libdbus's connect() blocks on it (before libdbus makes
    the socket non-blocking), with no bound."""
    path = tmp_path / "full-bus"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(0)
    fillers = []
    while True:
        filler = socket.socket(socket.AF_UNIX)
        filler.setblocking(False)
        try:
            filler.connect(str(path))
        except BlockingIOError:
            filler.close()
            break
        fillers.append(filler)
        assert len(fillers) < 100, "the backlog does not fill"
    yield f"unix:path={path}"
    listener.close()
    for filler in fillers:
        filler.close()


def start_latchkeyd(tmp_path, address):
    env = cli_env(tmp_path, DBUS_SESSION_BUS_ADDRESS=address)
    process = subprocess.Popen(
        [binary("latchkeyd"), "--foreground", "--keychain-directory", str(tmp_path / "keychains"),
         "--pinentry", "/bin/false"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    return process, tmp_path / "runtime" / "latchkey" / "control"


def control_answered_within(path, seconds):
    """Whether the control socket at `path` answers a status request within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return control.status(path)[0] in control.STATUS_NAMES.values()
            except OSError:
                pass
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("fake", ["hello_less_bus", "full_listener"])
def test_latchkeyd_serves_its_control_socket_at_once_whatever_the_bus_does(tmp_path, fake, request):
    """The bus is tried on a thread of its own: a bus that authenticates and never answers Hello, or a listener
    whose full backlog blocks connect() for good, neither delays the control socket (a login's hand-over has
    2 s) nor holds the loop; latchkeyd stops waiting for the try after 10 s and says so."""
    address = request.getfixturevalue(fake)
    start = time.monotonic()
    process, path = start_latchkeyd(tmp_path, address)
    killer = threading.Timer(40, process.kill)  # a daemon that hangs fails the test instead
    killer.start()
    try:
        assert control_answered_within(path, 1.5), f"no answer on the control socket {time.monotonic() - start:.1f} s"
        first = first_line_about_the_bus(process)
        at = time.monotonic() - start
        assert first == (f"latchkeyd: no session bus yet (the bus at {address} did not answer within 10 s): serving"
                         " the control socket; org.freedesktop.secrets is claimed once a bus appears at"
                         " $XDG_RUNTIME_DIR/bus"), first
        assert 9.5 < at < 11.5, at
        # Still served after the loop gave up on the try.
        assert control_answered_within(path, 1), "the control socket stopped answering"
        assert process.poll() is None
    finally:
        killer.cancel()
        process.kill()
        process.wait()
