"""What identifying a D-Bus caller costs latchkeyd (docs/benchmarks.md, "Caller identity").

On a private bus with one latchkeyd, each new connection's first call waits while the daemon asks the bus for
the caller's credentials and reads /proc (and hashes the program's file unless it is remembered); its later
calls find the caller cached. This prints, in microseconds, the p50 and max of:
- a connection's first call and of its later calls (the same Properties.Get each time), for many connections
  from this python3 script (its script file's digest is remembered after the first);
- the same from a fresh copy of the python3 executable (a new inode, so its 6.8 MB are hashed on first
  contact), one process per copy, running inline code (so the executable itself is what is identified).

Run: /usr/bin/python3 Benchmarks/caller_identity_bench.py [--connections N] [--copies N]
"""

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
from conftest import Bus, Daemon  # noqa: E402

CLIENT = """
import sys, time
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
address = DBusAddress("/org/freedesktop/secrets/collection/login", bus_name="org.freedesktop.secrets",
                      interface="org.freedesktop.DBus.Properties")
connection = open_dbus_connection(bus=sys.argv[1])
times = []
for _ in range(int(sys.argv[2])):
    call = new_method_call(address, "Get", "ss", ("org.freedesktop.Secret.Collection", "Label"))
    start = time.perf_counter()
    reply = connection.send_and_get_reply(call, timeout=30)
    times.append((time.perf_counter() - start) * 1e6)
    assert reply.body[0][1] == "Login", reply.body
connection.close()
print(" ".join(f"{t:.1f}" for t in times))
"""


def calls(bus, count, interpreter=sys.executable):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([interpreter, "-c", CLIENT, bus.address, str(count)], env=env, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return [float(t) for t in out.split()]


def in_process_calls(bus, count):
    """One connection of this script: the caller is this script (python3 + its file)."""
    namespace = {}
    exec(compile(CLIENT.split("connection = ")[0], "client", "exec"), namespace)
    from jeepney import new_method_call
    from jeepney.io.blocking import open_dbus_connection
    connection = open_dbus_connection(bus=bus.address)
    times = []
    for _ in range(count):
        call = new_method_call(namespace["address"], "Get", "ss", ("org.freedesktop.Secret.Collection", "Label"))
        start = time.perf_counter()
        connection.send_and_get_reply(call, timeout=30)
        times.append((time.perf_counter() - start) * 1e6)
    connection.close()
    return times


def row(label, firsts, laters):
    return (f"| {label} | {len(firsts)} | {statistics.median(firsts):.0f} / {max(firsts):.0f} | "
            f"{statistics.median(laters):.0f} / {max(laters):.0f} | "
            f"{statistics.median(firsts) - statistics.median(laters):.0f} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--calls", type=int, default=10)
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        bus = Bus()
        daemon = Daemon(bus, root).start()
        try:
            firsts, laters = [], []
            for _ in range(options.connections):
                times = in_process_calls(bus, options.calls)
                firsts.append(times[0])
                laters += times[1:]
            rows.append(row("python3 script, digest remembered", firsts, laters))
            firsts, laters = [], []
            for index in range(options.copies):
                copy = root / f"python3-copy-{index}"
                shutil.copy2(os.path.realpath(sys.executable), copy)
                times = calls(bus, options.calls, interpreter=str(copy))
                firsts.append(times[0])
                laters += times[1:]
                copy.unlink()
            size = os.path.getsize(os.path.realpath(sys.executable)) / 1e6
            rows.append(row(f"fresh python3 copy ({size:.1f} MB hashed)", firsts, laters))
        finally:
            daemon.stop()
            bus.stop()
    print("| caller | connections | first call p50 / max µs | later calls p50 / max µs | first − later p50 µs |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
