"""latchkeyd as a process: the bus name, signals, restarts, several clients."""

import shutil
import signal
import subprocess
import threading
import time

import secretstorage

from conftest import LOGIN_PASSWORD, binary, keychain_rows, secret_tool


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


def test_a_deleted_item_leaves_no_index_tags_in_the_file_or_its_log(daemon, bus):
    """After a delete through the Secret Service, the daemon's worker empties the write-ahead log: neither the
    file nor the log keeps the deleted item's index tags (the file's cells are zeroed by secure_delete)."""
    import sqlite3
    keychain = daemon.keychains / "login.keychain-db"
    secret_tool(bus, "store", "--label=doomed", "purpose", "doomed-item", input=b"x")
    secret_tool(bus, "store", "--label=kept", "purpose", "kept-item", input=b"y")
    db = sqlite3.connect(keychain)
    # Its own tags: those of values the kept item shares (the same attribute and value) stay, rightly.
    tags = [t for (t,) in db.execute(
        "SELECT tag FROM attribute_index WHERE item = (SELECT min(id) FROM items)"
        " EXCEPT SELECT tag FROM attribute_index WHERE item = (SELECT max(id) FROM items)").fetchall()]
    db.close()
    assert len(tags) >= 2

    def on_disk():
        data = b"".join(p.read_bytes() for p in (keychain, keychain.with_name(keychain.name + "-wal")) if p.exists())
        return [t for t in tags if t in data]

    assert on_disk() == tags
    secret_tool(bus, "clear", "purpose", "doomed-item")
    deadline = time.monotonic() + 10
    while on_disk() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert on_disk() == [], "a deleted item's tags are still in the keychain file or its log"
    assert secret_tool(bus, "lookup", "purpose", "kept-item").stdout == b"y"


def test_settings_altered_in_the_file_make_the_daemon_lock_sooner_not_later(make_daemon, bus, tmp_path):
    """The settings carry a MAC under the keychain key: rewritten in the file to "never lock", the daemon
    finds the MAC wrong once unlocked and applies the after-tampering settings (5 minutes, lock on sleep)."""
    import sqlite3
    env = dict(bus.env(), HOME=str(tmp_path / "home"))
    first = make_daemon().start()
    keychain = first.keychains / "login.keychain-db"
    subprocess.run([binary("latchkey"), "set-keychain-settings", "-t", "3600", str(keychain)], env=env,
                   check=True, capture_output=True, timeout=30)
    first.stop()
    with sqlite3.connect(keychain) as db:
        db.execute("UPDATE meta SET value = ? WHERE name = 'x-settings'", (b"timeout=0\nsleep=0\n",))
    db.close()
    make_daemon().start()
    info = subprocess.run([binary("latchkey"), "show-keychain-info", "--json", str(keychain)], env=env,
                          check=True, capture_output=True, text=True, timeout=30).stdout
    assert '"heldByDaemon":true' in info.replace(" ", ""), info
    assert '"lockTimeout":300' in info.replace(" ", "") and '"lockOnSleep":true' in info.replace(" ", ""), info


def test_the_login_keychain_a_starting_daemon_makes_is_complete_whenever_another_process_finds_it(make_daemon):
    """latchkeyd claims its name before it makes the login keychain (a key derivation of a few hundred
    milliseconds). Another process that finds the file meanwhile (a user's `latchkey`, a fixture setting the
    access policy) finds a complete keychain, and what it writes there at once stays: the daemon reads it and
    so does a later reader. Before keychains were built under a private name and linked into place, the file
    stood empty through the key derivation, and a writer opening it then wrote a schema into it (the daemon's
    creation then failed) or found no keychain."""
    import contextlib
    import sqlite3
    for start in range(3):
        daemon = make_daemon(access_policy="prompt")
        shutil.rmtree(daemon.keychains, ignore_errors=True)
        daemon.start(wait=False)
        path = daemon.keychains / "login.keychain-db"
        deadline = time.monotonic() + 30
        while not path.exists():
            assert time.monotonic() < deadline and daemon.alive(), daemon.stderr.read_text()
            time.sleep(0.001)
        # At once, as the first thing another process can do with the file.
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            rows = {name for (name,) in db.execute("SELECT name FROM meta")}
        assert {"format", "wrapped_key", "uuid"} <= rows, f"start {start}: {sorted(rows)}"
        subprocess.run([binary("keychain-writer"), str(path), "--access-policy", "allow-all"],
                       input=LOGIN_PASSWORD.encode(), check=True, timeout=60)
        daemon.wait_for_name()
        daemon.wait_for_policy("allow-all")
        time.sleep(0.5)
        assert daemon.alive()
        assert {"x-access-policy", "access_policy_mac"} <= set(keychain_rows(path)), f"start {start}"
        daemon.stop(signal.SIGKILL)
