"""latchkeyd's control socket, the way pam_latchkey uses it: unlocking and
creating the login keychain, session counting and lock on last close,
password change, rate limiting, bad input, peers of other users, starting
before the session bus, and systemd socket activation."""

import os
import pathlib
import socket
import stat
import subprocess
import shutil
import tempfile
import time

import pytest

import control_client as control
from conftest import LOGIN_PASSWORD, ROOT, SCRIPTED_PINENTRY, Bus, Daemon, binary, secret_tool


def control_path(daemon):
    return daemon.runtime / "latchkey" / "control"


def wait_for_socket(path, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


def is_locked(bus):
    out = subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
         "/org/freedesktop/secrets/collection/login", "org.freedesktop.DBus.Properties.Get",
         "string:org.freedesktop.Secret.Collection", "string:Locked"],
        env=bus.env(), capture_output=True, text=True, check=True).stdout
    return "boolean true" in out


def lock_login(bus):
    subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
         "org.freedesktop.Secret.Service.Lock", "array:objpath:/org/freedesktop/secrets/collection/login"],
        env=bus.env(), capture_output=True, check=True)


def test_socket_is_private_and_reports_status(daemon):
    path = control_path(daemon)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert control.status(path) == ("ok", "unlocked; 0 sessions")


def test_open_session_unlocks_and_last_close_locks(daemon, bus):
    path = control_path(daemon)
    secret_tool(bus, "store", "--label=x", "k", "v", input=b"kept")
    lock_login(bus)
    assert is_locked(bus)
    assert control.open_session(path, LOGIN_PASSWORD) == ("ok", "login keychain unlocked")
    assert not is_locked(bus)
    assert control.open_session(path)[0] == "ok"  # a second session, without a password
    assert control.close_session(path, lock_if_last=True) == ("ok", "session closed; 1 left")
    assert not is_locked(bus)
    assert control.close_session(path, lock_if_last=True) == ("ok", "last session closed; login keychain locked")
    assert is_locked(bus)
    assert control.open_session(path, LOGIN_PASSWORD)[0] == "ok"
    assert secret_tool(bus, "lookup", "k", "v").stdout == b"kept"


def test_close_without_lock_on_close_leaves_it_open(daemon, bus):
    path = control_path(daemon)
    control.open_session(path, LOGIN_PASSWORD)
    assert control.close_session(path, lock_if_last=False)[0] == "ok"
    assert not is_locked(bus)


def test_wrong_passwords_are_refused_then_rate_limited(daemon, bus):
    path = control_path(daemon)
    lock_login(bus)
    for _ in range(3):
        assert control.open_session(path, "wrong")[0] == "wrongPassword"
    # After three wrong ones, even the right password is not tried for 2 s.
    status, message = control.open_session(path, LOGIN_PASSWORD)
    assert status == "tooManyAttempts" and "wait" in message
    assert is_locked(bus)
    time.sleep(2.2)
    assert control.open_session(path, LOGIN_PASSWORD)[0] == "ok"
    assert not is_locked(bus)


def test_the_wrong_password_count_survives_a_restart_and_never_refuses_a_login(make_daemon, bus):
    daemon = make_daemon().start()
    path = control_path(daemon)
    lock_login(bus)
    for _ in range(3):
        assert control.open_session(path, "wrong")[0] == "wrongPassword"
    daemon.stop()
    daemon.start(unlock=False)
    status, message = control.open_session(path, LOGIN_PASSWORD)
    assert status == "tooManyAttempts" and "wait" in message
    assert is_locked(bus)
    # A login's hand-over (PAM verified it) is tried all the same.
    assert control.hand_over(path, LOGIN_PASSWORD) == ("ok", "unlocking the login keychain")
    assert not is_locked(bus)  # held until the unlock was done


def test_change_password_rewraps_and_keeps_items(daemon, bus):
    path = control_path(daemon)
    secret_tool(bus, "store", "--label=x", "k", "v", input=b"kept")
    assert control.change_password(path, "wrong", "new one")[0] == "wrongPassword"
    assert control.change_password(path, LOGIN_PASSWORD, "new one") == (
        "ok", "login keychain re-keyed to the new password")
    lock_login(bus)
    assert control.open_session(path, LOGIN_PASSWORD)[0] == "wrongPassword"
    assert is_locked(bus)
    assert control.open_session(path, "new one")[0] == "ok"
    assert secret_tool(bus, "lookup", "k", "v").stdout == b"kept"


@pytest.mark.parametrize("raw", [
    b"",
    b"\x00\x00\x00\x01\x01",
    b"\x00\x00\x00\x02\x09\x04",  # unknown version
    b"\x00\x00\x00\x02\x01\x63",  # unknown request
    b"\x00\x00\x00\x07\x01\x01\x00\x00\x00\x09a",  # a field past the end
    b"\x00\x00\x00\x06\x01\x01\x00\x00\x00\x00",  # an empty password
    b"\xff\xff\xff\xff",  # 4 GiB announced
])
def test_bad_requests_get_an_error_and_change_nothing(daemon, bus, raw):
    path = control_path(daemon)
    if raw:
        status, _ = control.exchange(path, raw)
        assert status == "badRequest"
    else:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(path))
            s.shutdown(socket.SHUT_WR)
            assert s.recv(10) == b""
    assert daemon.alive() and control.status(path) == ("ok", "unlocked; 0 sessions")


def test_a_stalled_client_does_not_hold_up_others(daemon):
    path = control_path(daemon)
    with socket.socket(socket.AF_UNIX) as stalled:
        stalled.connect(str(path))
        stalled.sendall(b"\x00\x00")
        start = time.monotonic()
        assert control.status(path)[0] == "ok"
        assert time.monotonic() - start < 1.5
        stalled.settimeout(5)
        assert stalled.recv(10) == b""  # dropped after its 2 s


def test_peer_of_another_user_is_refused(bus):
    directory = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-peer-"))
    daemon = Daemon(bus, directory).start()
    try:
        path = control_path(daemon)
        # Open every door the file system would otherwise close, to reach the SO_PEERCRED check.
        for p in (directory, daemon.runtime, path.parent):
            os.chmod(p, 0o755)
        os.chmod(path, 0o666)
        check_refused(path)
    finally:
        daemon.stop()
        shutil.rmtree(directory)


def check_refused(path):
    # The daemon may answer and close before the request is written (it refuses on accepting): the write
    # then fails with EPIPE, and the answer is still there to read.
    probe = ("import socket,struct\n"
             f"s=socket.socket(socket.AF_UNIX); s.connect({str(path)!r})\n"
             "try: s.sendall(bytes([0,0,0,2,1,4]))\n"
             "except (BrokenPipeError, ConnectionResetError): pass\n"
             "print(s.recv(100))\n")
    out = subprocess.run(["/usr/bin/python3", "-c", probe], user=65534, group=65534,
                         capture_output=True, text=True, timeout=10)
    assert "not allowed" in out.stdout, out.stderr
    assert control.status(path)[0] == "ok"


def test_daemon_started_before_the_bus_claims_it_when_it_appears(tmp_path):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    env["XDG_RUNTIME_DIR"] = str(runtime)
    # A socket pair made by root (this test runs as root), as pam_latchkey makes it: a login's hand-over.
    ours, theirs = socket.socketpair()
    process = subprocess.Popen(
        [binary("latchkeyd"), "--foreground", "--login", "--keychain-directory", str(tmp_path / "keychains"),
         "--pinentry", str(SCRIPTED_PINENTRY)],
        env=env, stdin=theirs, stdout=theirs, stderr=subprocess.PIPE)
    theirs.close()
    bus = None
    try:
        # The module's hand-over, framed as on the control socket; the answer comes before the key derivation.
        ours.sendall(control.request(control.HAND_OVER, b"first login"))
        ours.settimeout(10)
        assert control.parse_reply(control.recv_exactly(ours, 5 + len("creating the login keychain"))) == (
            "ok", "creating the login keychain")
        ours.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (tmp_path / "keychains" / "login.keychain-db").exists():
            time.sleep(0.05)
        assert (tmp_path / "keychains" / "login.keychain-db").exists()
        bus_socket = runtime / "bus"
        bus = Bus(address=f"unix:path={bus_socket}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not bus.has_owner():
            time.sleep(0.05)
        assert bus.has_owner(), process.stderr.read1().decode() if process.poll() is not None else ""
        assert not is_locked(bus)
        secret_tool(bus, "store", "--label=x", "early", "1", input=b"held since login")
        assert secret_tool(bus, "lookup", "early", "1").stdout == b"held since login"
    finally:
        process.kill()
        process.wait()
        if bus:
            bus.stop()
    # What it did is said (docs/ssh.md): no bus at the start, and the bus once it appeared.
    log = process.stderr.read().decode().splitlines()
    # (The bus is tried on a thread of its own: lines about the system bus may come before.)
    no_bus = (
        "latchkeyd: no session bus yet (no session bus: DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus"
        " is missing): serving the control socket; org.freedesktop.secrets is claimed once a bus appears at"
        " $XDG_RUNTIME_DIR/bus")
    appeared = "latchkeyd: the session bus appeared: serving org.freedesktop.secrets on it"
    assert no_bus in log and appeared in log and log.index(no_bus) < log.index(appeared), log


def test_a_hand_over_on_a_pipe_is_refused(tmp_path):
    """`latchkeyd --login` answers a hand-over as a login's only on a socket pair root made (pam_latchkey's):
    on a pipe, though the writer is root here, it is refused and nothing is created or unlocked."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    result = subprocess.run(
        [binary("latchkeyd"), "--foreground", "--login", "--keychain-directory", str(tmp_path / "keychains")],
        env=env, input=control.request(control.HAND_OVER, b"first login"), capture_output=True, timeout=30)
    status, message = control.parse_reply(result.stdout)
    assert result.returncode != 0 and status == "badRequest" and "socket pair root made" in message, message
    assert not (tmp_path / "keychains" / "login.keychain-db").exists()


def test_socket_activation_serves_the_passed_socket(tmp_path, bus):
    runtime = tmp_path / "run"
    (runtime / "latchkey").mkdir(parents=True, mode=0o700)
    path = runtime / "latchkey" / "control"
    process = subprocess.Popen(
        ["systemd-socket-activate", "-l", str(path), "-E", "DBUS_SESSION_BUS_ADDRESS", "-E", "XDG_RUNTIME_DIR",
         binary("latchkeyd"), "--foreground", "--keychain-directory", str(tmp_path / "keychains")],
        env=bus.env(XDG_RUNTIME_DIR=str(runtime)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_socket(path)
        # The first connection starts latchkeyd, which must serve the passed socket itself.
        assert control.open_session(path, "activated password") == ("ok", "login keychain created and unlocked")
        assert control.status(path) == ("ok", "unlocked; 1 sessions")
        assert bus.has_owner()
        assert not (runtime / "latchkey" / "lock").exists()
    finally:
        process.kill()
        process.wait()


def test_systemd_user_units_verify(tmp_path):
    units = ROOT / "packaging" / "systemd"
    for unit in ("latchkeyd.socket", "latchkeyd.service"):
        text = (units / unit).read_text().replace("/usr/bin/latchkeyd", binary("latchkeyd"))
        (tmp_path / unit).write_text(text)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--user", str(tmp_path / "latchkeyd.socket"), str(tmp_path / "latchkeyd.service")],
        env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "ListenStream=%t/latchkey/control" in (units / "latchkeyd.socket").read_text()


def test_a_password_change_replies_only_once_the_old_wrapped_key_is_off_disk(daemon, bus):
    """A reader holding an older snapshot of the file keeps the key wrapped under the old password in the file
    or its write-ahead log; the change's reply waits until it let go and the log was emptied."""
    import sqlite3
    import threading
    path = control_path(daemon)
    keychain = daemon.keychains / "login.keychain-db"
    secret_tool(bus, "store", "--label=x", "k", "v", input=b"kept")
    reader = sqlite3.connect(keychain, isolation_level=None, check_same_thread=False)
    (old_wrapped,) = reader.execute("SELECT value FROM meta WHERE name = 'wrapped_key'").fetchone()
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM items").fetchall()
    released = threading.Event()

    def release():
        time.sleep(1.5)
        released.set()
        reader.execute("COMMIT")

    threading.Thread(target=release).start()
    assert control.change_password(path, LOGIN_PASSWORD, "new one") == (
        "ok", "login keychain re-keyed to the new password")
    assert released.is_set(), "the change replied while a reader still held the old snapshot"
    reader.close()
    for suffix in ("", "-wal"):
        file = pathlib.Path(str(keychain) + suffix)
        assert not file.exists() or old_wrapped not in file.read_bytes(), suffix
    lock_login(bus)
    assert control.open_session(path, LOGIN_PASSWORD)[0] == "wrongPassword"
    assert control.open_session(path, "new one")[0] == "ok"


def test_a_password_change_by_another_process_is_seen_by_the_daemon(daemon, bus, tmp_path):
    """The no-daemon path (pam_latchkey re-keying the file itself, or the command on the file) changes the
    password behind a running daemon: the daemon then refuses the old password and takes the new one."""
    path = control_path(daemon)
    keychain = daemon.keychains / "login.keychain-db"
    secret_tool(bus, "store", "--label=x", "k", "v", input=b"kept")
    lock_login(bus)
    env = dict(os.environ, HOME=str(tmp_path / "home"), DBUS_SESSION_BUS_ADDRESS=f"unix:path={tmp_path}/no-bus")
    subprocess.run([binary("latchkey"), "set-keychain-password", "--stdin", str(keychain)],
                   input=f"{LOGIN_PASSWORD}\nchanged elsewhere\n", env=env, text=True, check=True,
                   capture_output=True, timeout=60)
    assert control.open_session(path, LOGIN_PASSWORD)[0] == "wrongPassword"
    assert is_locked(bus)
    assert control.open_session(path, "changed elsewhere")[0] == "ok"
    assert secret_tool(bus, "lookup", "k", "v").stdout == b"kept"
    # The daemon's own next change starts from the new password, and does not put the old one back.
    assert control.change_password(path, "changed elsewhere", "third") == (
        "ok", "login keychain re-keyed to the new password")
    lock_login(bus)
    assert control.open_session(path, "changed elsewhere")[0] == "wrongPassword"
    assert control.open_session(path, LOGIN_PASSWORD)[0] == "wrongPassword"
    assert control.open_session(path, "third")[0] == "ok"
