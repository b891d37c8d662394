"""latchkeyd as a process: the bus name, signals, restarts, several clients."""

import signal
import subprocess
import threading
import time

import secretstorage

from conftest import LOGIN_PASSWORD, binary, secret_tool


def test_second_daemon_exits_naming_the_owner(make_daemon, bus, tmp_path):
    first = make_daemon().start()
    second = subprocess.run(
        [binary("latchkeyd"), "--keychain-directory", str(tmp_path / "other")],
        env=bus.env(), capture_output=True, text=True, timeout=30)
    assert second.returncode != 0
    assert "already owned by :1." in second.stderr and "latchkeyd" in second.stderr
    assert first.alive()


def test_replace_takes_the_name_and_the_old_daemon_stops(make_daemon, bus):
    first = make_daemon().start()
    secret_tool(bus, "store", "--label=x", "r", "1", input=b"before")
    second = make_daemon(extra_args=["--replace"])
    second.start(wait=False)
    first.process.wait(timeout=15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not bus.has_owner():
        time.sleep(0.05)
    assert second.alive() and bus.has_owner()
    assert secret_tool(bus, "lookup", "r", "1").stdout == b"before"


def test_wrong_unlock_password_exits_nonzero(make_daemon, bus):
    make_daemon().start().stop()
    wrong = make_daemon(password="not the password").start(wait=False)
    assert wrong.process.wait(timeout=15) != 0
    assert "not" in wrong.stderr.read_text() and not bus.has_owner()


def test_sigterm_stops_cleanly_and_data_survives_a_restart(make_daemon, bus):
    daemon = make_daemon().start()
    secret_tool(bus, "store", "--label=keep", "survive", "restart", input=b"still here")
    assert daemon.stop(signal.SIGTERM) == 0
    assert not bus.has_owner()
    restarted = make_daemon().start()
    assert secret_tool(bus, "lookup", "survive", "restart").stdout == b"still here"
    assert restarted.alive()


def test_restart_without_password_starts_locked(make_daemon, bus):
    daemon = make_daemon().start()
    secret_tool(bus, "store", "--label=k", "locked", "start", input=b"v")
    daemon.stop()
    locked = make_daemon(answers=["password " + LOGIN_PASSWORD]).start(unlock=False)
    assert secret_tool(bus, "lookup", "locked", "start").stdout == b"v"
    assert "GETPIN" in locked.pinentry_log()


def test_daemon_exits_when_the_bus_goes_away(make_daemon, bus):
    daemon = make_daemon().start()
    bus.stop()
    assert daemon.process.wait(timeout=15) == 0
    assert "went away" in daemon.stderr.read_text()


def test_two_clients_at_once_and_a_hundred_in_a_row(daemon, bus, session_env):
    errors = []

    def worker(name):
        try:
            conn = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(conn)
            for i in range(25):
                collection.create_item(f"{name}-{i}", {"worker": name, "n": str(i)}, f"{name}{i}".encode())
            for i in range(25):
                found = list(collection.search_items({"worker": name, "n": str(i)}))
                assert [item.get_secret() for item in found] == [f"{name}{i}".encode()]
            conn.close()
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    for i in range(100):
        assert secret_tool(bus, "lookup", "worker", "a" if i % 2 else "b", "n", str(i % 25)).stdout == \
            (f"{'a' if i % 2 else 'b'}{i % 25}").encode()
    assert daemon.alive()


def test_a_password_longer_than_the_limit_is_refused_not_cut(tmp_path, bus):
    """A password is never cut short (a keychain made with a cut one would not open with the real one)."""
    result = subprocess.run(
        [binary("latchkeyd"), "--foreground", "--unlock", "--keychain-directory", str(tmp_path / "keychains")],
        input=b"L" * 5000, env=bus.env(), capture_output=True, timeout=30)
    assert result.returncode != 0
    assert b"longer than 4096 bytes" in result.stderr
    assert not (tmp_path / "keychains" / "login.keychain-db").exists()
