#!/usr/bin/python3
"""Secret Service benchmark: the same client workload (python secretstorage with
the DH session, plus `secret-tool lookup`) against latchkeyd and, side by side,
gnome-keyring-daemon, each on its own private bus with a throwaway keychain.

Run through scripts/bench-secret-service, which builds latchkeyd in release
mode and writes the table into docs/benchmarks.md.
"""

import argparse
import datetime
import os
import pathlib
import random
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

import sys

import secretstorage

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
from dbus_client import SERVICE, Client  # noqa: E402  (the integration tests' raw D-Bus client)


def p(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class Server:
    def __init__(self, kind, latchkeyd):
        self.kind = kind
        self.scratch = tempfile.mkdtemp(prefix=f"bench-{kind}-")
        out = subprocess.run(["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
                             check=True, capture_output=True, text=True).stdout.split()
        self.address, self.bus_pid = out[0], int(out[1])
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address, HOME=self.scratch,
                   XDG_DATA_HOME=self.scratch + "/data", XDG_RUNTIME_DIR=self.scratch)
        if kind == "latchkeyd":
            args = [latchkeyd, "--foreground", "--unlock", "--keychain-directory", self.scratch + "/keychains"]
        else:
            args = ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"]
        self.process = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.process.stdin.write(b"benchmark password")
        self.process.stdin.close()
        self.env = env
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            owner = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                    "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                    "string:org.freedesktop.secrets"], env=env, capture_output=True, text=True)
            if "boolean true" in owner.stdout:
                break
            time.sleep(0.05)
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = self.address
        self.connection = secretstorage.dbus_init()
        self.collection = secretstorage.get_default_collection(self.connection)
        if self.collection.is_locked():
            self.collection.unlock()

    def memory_mib(self, field):
        status = pathlib.Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(field + r":\s+(\d+)", status).group(1)) / 1024

    def stop(self):
        self.connection.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.kill(self.bus_pid, signal.SIGTERM)
        shutil.rmtree(self.scratch, ignore_errors=True)


def attributes(i):
    return {"service": "bench.example.com", "account": f"user{i}", "thousand": str(i // 1000)}


def run(kind, items, latchkeyd, samples):
    server = Server(kind, latchkeyd)
    try:
        create = []
        for i in range(items):
            start = time.perf_counter()
            server.collection.create_item(f"Item {i}", attributes(i), f"secret-{i}".encode())
            create.append(time.perf_counter() - start)
        lookups = []
        for _ in range(samples):
            i = random.randrange(items)
            start = time.perf_counter()
            found = list(server.collection.search_items({"account": f"user{i}"}))
            secret = found[0].get_secret()
            lookups.append(time.perf_counter() - start)
            assert secret == f"secret-{i}".encode()
        raw = Client(server.address)
        plain = raw.open_plain()
        raw_create = []
        for i in range(samples):
            start = time.perf_counter()
            raw.create_item(plain, {"raw": str(i)}, b"raw secret")
            raw_create.append(time.perf_counter() - start)
        ping = []
        for _ in range(samples):
            start = time.perf_counter()
            raw.call(SERVICE, "org.freedesktop.DBus.Peer", "Ping")
            ping.append(time.perf_counter() - start)
        raw_lookup = []
        for _ in range(samples):
            i = random.randrange(items)
            start = time.perf_counter()
            (found, _) = raw.service("SearchItems", "a{ss}", ({"account": f"user{i}"},))
            (secret,) = raw.ok(found[0], "org.freedesktop.Secret.Item", "GetSecret", "o", (plain,))
            raw_lookup.append(time.perf_counter() - start)
            assert secret[2] == f"secret-{i}".encode()
        raw.close()
        searches = []
        for _ in range(5):
            start = time.perf_counter()
            (paths,) = server.collection._collection.call("SearchItems", "a{ss}", {"thousand": "0"})
            searches.append(time.perf_counter() - start)
            assert len(paths) == min(1000, items)
        tool = []
        for _ in range(20):
            i = random.randrange(items)
            start = time.perf_counter()
            out = subprocess.run(["secret-tool", "lookup", "account", f"user{i}"], env=server.env,
                                 capture_output=True).stdout
            tool.append(time.perf_counter() - start)
            assert out == f"secret-{i}".encode()
        rss = server.memory_mib("VmRSS")
        anonymous = server.memory_mib("RssAnon")
        half = list(server.collection.search_items({"service": "bench.example.com"}))[: items // 2]
        start = time.perf_counter()
        for item in half:
            item.delete()
        delete_half = time.perf_counter() - start
        return {
            "create_first": statistics.median(create[:100]) * 1e3,
            "create_last": statistics.median(create[-100:]) * 1e3,
            "lookup_p50": p(lookups, 0.5) * 1e3, "lookup_p99": p(lookups, 0.99) * 1e3,
            "raw_create": p(raw_create, 0.5) * 1e3, "raw_lookup": p(raw_lookup, 0.5) * 1e3,
            "ping": p(ping, 0.5) * 1e6,
            "search_1000": statistics.median(searches) * 1e3,
            "delete_half": delete_half, "tool_p50": p(tool, 0.5) * 1e3, "rss": rss, "anonymous": anonymous,
        }
    finally:
        server.stop()


PLAN_ORDER = ["latchkeyd:1,000", "gnome-keyring:1,000", "latchkeyd:10,000", "gnome-keyring:10,000",
              "latchkeyd:100,000"]


def merged_rows(path, new_rows):
    """The table's rows after this run: rows measured now replace those of the same daemon and size; rows of
    plans not run now are kept (a long gnome-keyring run can be made on its own)."""
    def key(row):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        return f"{cells[0]}:{cells[1]}"
    old = []
    if path.exists():
        old = [line for line in path.read_text().splitlines()
               if line.startswith("| latchkeyd |") or line.startswith("| gnome-keyring |")]
    columns = 11
    rows = {key(row): row + " – |" * max(0, columns - (row.count("|") - 1)) for row in old}
    rows.update({key(row): row for row in new_rows})
    return sorted(rows.values(), key=lambda row: PLAN_ORDER.index(key(row)) if key(row) in PLAN_ORDER else 99)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--latchkeyd", required=True)
    parser.add_argument("--plan", default="latchkeyd:1000,gnome-keyring:1000,latchkeyd:10000,latchkeyd:100000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()
    path = pathlib.Path(args.output)
    rows = []
    for entry in args.plan.split(","):
        kind, items = entry.split(":")
        result = run(kind, int(items), args.latchkeyd, args.samples)
        row = (f"| {kind} | {int(items):,} | {result['create_first']:.2f} → {result['create_last']:.2f} | "
               f"{result['lookup_p50']:.2f} / {result['lookup_p99']:.2f} | {result['raw_create']:.2f} | "
               f"{result['raw_lookup']:.2f} | {result['search_1000']:.0f} | "
               f"{result['delete_half']:.1f} | {result['tool_p50']:.1f} | {result['rss']:.1f} ({result['anonymous']:.1f}) | "
               f"{result['ping']:.0f} |")
        print(row, flush=True)
        rows.append(row)
    rows = merged_rows(path, rows)
    startup = []
    for _ in range(20):
        start = time.perf_counter()
        subprocess.run(["secret-tool"], capture_output=True)
        startup.append(time.perf_counter() - start)
    begin, end = "<!-- secret-service-benchmark:begin -->", "<!-- secret-service-benchmark:end -->"
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "unknown CPU")
    section = f"""<!-- secret-service-benchmark:begin -->
Measured {datetime.date.today()} on {cpu}, {os.cpu_count()} cores, with `./scripts/bench-secret-service`
(latchkeyd built in release mode with the Swift runtime linked statically, as the package ships it; python3-secretstorage {secretstorage.__version__} with the DH session;
each daemon on its own private bus with a fresh keychain; {args.samples} lookups, 20 `secret-tool lookup` runs).
Times in milliseconds unless marked; CreateItem is the median of the first and of the last 100 items created;
a lookup is secretstorage's search_items on one attribute plus get_secret (so it includes the client's own
work: DH decryption, a property read per item); "raw create" and "raw lookup" are the same at the protocol
level (jeepney, plain session: one CreateItem; SearchItems then GetSecret), p50 of {args.samples};
"search 1,000" is one raw SearchItems call matching 1,000
items; "delete half" deletes half the items one Delete call each, in seconds; RSS after the lookups, with
the anonymous (heap and stack) part in brackets: the rest is shared library code mapped from disk
(latchkeyd reads its keychain file through a 1 MiB SQLite cache, without mmap); "Ping µs" is the p50 of
a `org.freedesktop.DBus.Peer.Ping` call to the daemon, which its D-Bus library answers without reaching the
daemon's own code: the price of one round trip through the bus, below which no call can go.

| daemon | items | CreateItem first → last | lookup p50 / p99 | raw create | raw lookup | search 1,000 | delete half (s) | `secret-tool lookup` | RSS MiB (anon) | Ping µs |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

`secret-tool` alone (no arguments: it prints its usage and exits, talking to no bus) takes
{p(startup, 0.5) * 1e3:.1f} ms p50 here: the process start that every `secret-tool lookup` pays before its first call.
<!-- secret-service-benchmark:end -->"""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text += "\n## Secret Service, latchkeyd and gnome-keyring\n\n" + section + "\n"
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
