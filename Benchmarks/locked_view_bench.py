"""What a lock and an unlock of the login keychain cost with N items (debug or release latchkeyd): CreateItem per
item while filling it, the Lock call (which keeps what each item shows while locked), the unlock through
UnlockWithMasterPassword (one scrypt plus the pass that announces the items), the signals a client receives for
the unlock, the daemon's resident memory locked and unlocked, and what a bystander waits during the Lock: the
longest round trip of a `Peer.Ping` another client sends to latchkeyd every 5 ms while the Lock is under way.
Round 1 is the first lock after the items were made, round 2 a lock after an unlock with nothing written since,
round 3 a lock after an unlock and one label changed.

    /usr/bin/python3 Benchmarks/locked_view_bench.py [--latchkeyd PATH] [--items 1000 10000]
"""

import argparse
import pathlib
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

from jeepney import DBusAddress, MessageType, new_method_call  # noqa: E402
from jeepney.bus_messages import MatchRule, message_bus  # noqa: E402
from jeepney.io.blocking import open_dbus_connection  # noqa: E402

import conftest  # noqa: E402
from conftest import LOGIN_PASSWORD, Bus, Daemon  # noqa: E402
from test_gnome_keyring_private import LOGIN, DHSession  # noqa: E402


def rss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fill(bus, count):
    connection = open_dbus_connection(bus=bus.address)
    try:
        service = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                              interface="org.freedesktop.Secret.Service")
        _, session = connection.send_and_get_reply(new_method_call(service, "OpenSession", "sv",
                                                                   ("plain", ("s", ""))), timeout=30).body
        collection = DBusAddress(LOGIN, bus_name="org.freedesktop.secrets",
                                 interface="org.freedesktop.Secret.Collection")
        for number in range(count):
            properties = {"org.freedesktop.Secret.Item.Label": ("s", f"Item {number}"),
                          "org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"service": "bench.example",
                                                                              "user": f"user{number}"})}
            reply = connection.send_and_get_reply(new_method_call(
                collection, "CreateItem", "a{sv}(oayays)b",
                (properties, (session, b"", f"secret {number}".encode(), "text/plain"), False)), timeout=30)
            assert reply.header.message_type == MessageType.method_return, reply.body
    finally:
        connection.close()


def ping_while(bus, running, longest):
    """Pings latchkeyd from another connection while `running` is set; the longest round trip (ms) in longest[0]."""
    connection = open_dbus_connection(bus=bus.address)
    try:
        peer = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                           interface="org.freedesktop.DBus.Peer")
        while running.is_set():
            start = time.monotonic()
            connection.send_and_get_reply(new_method_call(peer, "Ping"), timeout=60)
            longest[0] = max(longest[0], (time.monotonic() - start) * 1000)
            time.sleep(0.005)
    finally:
        connection.close()


def timed_lock(bus, session):
    """Locks the login keychain with a bystander pinging: (Lock ms, longest Ping ms)."""
    running, longest = threading.Event(), [0.0]
    running.set()
    bystander = threading.Thread(target=ping_while, args=(bus, running, longest))
    bystander.start()
    time.sleep(0.05)
    start = time.monotonic()
    session.lock(LOGIN)
    lock_ms = (time.monotonic() - start) * 1000
    running.clear()
    bystander.join()
    return lock_ms, longest[0]


def change_one_label(bus):
    """Renames the first item of the login keychain found by its attributes (one write through the daemon)."""
    connection = open_dbus_connection(bus=bus.address)
    try:
        service = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                              interface="org.freedesktop.Secret.Service")
        unlocked, _ = connection.send_and_get_reply(new_method_call(
            service, "SearchItems", "a{ss}", ({"service": "bench.example", "user": "user0"},)), timeout=60).body
        item = DBusAddress(unlocked[0], bus_name="org.freedesktop.secrets", interface="org.freedesktop.DBus.Properties")
        reply = connection.send_and_get_reply(new_method_call(
            item, "Set", "ssv", ("org.freedesktop.Secret.Item", "Label", ("s", "Renamed"))), timeout=60)
        assert reply.header.message_type == MessageType.method_return, reply.body
    finally:
        connection.close()


def signals_until_quiet(watcher, quiet=1.0):
    count = 0
    while True:
        try:
            watcher.receive(timeout=quiet)
            count += 1
        except TimeoutError:
            return count


def run(latchkeyd, count):
    if latchkeyd:
        conftest.binary = lambda name: str(pathlib.Path(latchkeyd).parent / name)
    with tempfile.TemporaryDirectory() as directory:
        bus = Bus()
        daemon = Daemon(bus, pathlib.Path(directory), extra_args=["--max-items-per-application", str(count + 10)]).start()
        try:
            start = time.monotonic()
            fill(bus, count)
            create_ms = (time.monotonic() - start) * 1000 / count
            watcher = open_dbus_connection(bus=bus.address)
            watcher.send_and_get_reply(message_bus.AddMatch(MatchRule(type="signal")))
            session = DHSession(bus)
            rows = []
            for round_ in range(3):
                unlocked_rss = rss_kib(daemon.process.pid)
                if round_ == 2:
                    # A write after the unlock: the next lock cannot take the unlock's read as it is.
                    change_one_label(bus)
                lock_ms, ping_ms = timed_lock(bus, session)
                signals_until_quiet(watcher)
                locked_rss = rss_kib(daemon.process.pid)
                start = time.monotonic()
                assert not session.unlock(LOGIN, LOGIN_PASSWORD).is_error
                unlock_ms = (time.monotonic() - start) * 1000
                signals = signals_until_quiet(watcher)
                rows.append((count, create_ms, round_ + 1, lock_ms, ping_ms, unlock_ms, signals, unlocked_rss // 1024,
                             locked_rss // 1024))
            session.close()
            watcher.close()
            return rows
        finally:
            daemon.stop()
            bus.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--latchkeyd")
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 10000])
    arguments = parser.parse_args()
    print("| items | CreateItem ms each | round | Lock ms | longest Ping during Lock ms | Unlock ms"
          " | signals after Unlock | RSS unlocked MiB | RSS locked MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for count in arguments.items:
        for row in run(arguments.latchkeyd, count):
            print("| {:,} | {:.1f} | {} | {:.0f} | {:.0f} | {:.0f} | {:,} | {} | {} |".format(*row))


if __name__ == "__main__":
    main()
