"""What a lock and an unlock of the login keychain cost with N items (debug or release latchkeyd): the Lock call
(which keeps what each item shows while locked, one pass over the items), the unlock through
UnlockWithMasterPassword (one scrypt plus the pass that announces the items), the signals a client receives for
the unlock, and the daemon's resident memory locked and unlocked.

    /usr/bin/python3 Benchmarks/locked_view_bench.py [--latchkeyd PATH] [--items 1000 10000]
"""

import argparse
import pathlib
import sys
import tempfile
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
            fill(bus, count)
            watcher = open_dbus_connection(bus=bus.address)
            watcher.send_and_get_reply(message_bus.AddMatch(MatchRule(type="signal")))
            session = DHSession(bus)
            rows = []
            for round_ in range(2):
                unlocked_rss = rss_kib(daemon.process.pid)
                start = time.monotonic()
                session.lock(LOGIN)
                lock_ms = (time.monotonic() - start) * 1000
                signals_until_quiet(watcher)
                locked_rss = rss_kib(daemon.process.pid)
                start = time.monotonic()
                assert not session.unlock(LOGIN, LOGIN_PASSWORD).is_error
                unlock_ms = (time.monotonic() - start) * 1000
                signals = signals_until_quiet(watcher)
                rows.append((count, round_ + 1, lock_ms, unlock_ms, signals, unlocked_rss // 1024, locked_rss // 1024))
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
    print("| items | round | Lock ms | Unlock ms | signals after Unlock | RSS unlocked MiB | RSS locked MiB |")
    print("|---|---|---|---|---|---|---|")
    for count in arguments.items:
        for row in run(arguments.latchkeyd, count):
            print("| {:,} | {} | {:.0f} | {:.0f} | {:,} | {} | {} |".format(*row))


if __name__ == "__main__":
    main()
