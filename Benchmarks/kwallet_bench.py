#!/usr/bin/python3
"""KWallet benchmark: the same client (jeepney, one connection, exact signatures) against Debian's real
kwalletd5 and latchkeyd's org.kde.KWallet face, each on its own private bus with a fresh wallet, started by
the integration tests' kwallet_daemons.py (kwalletd5 opened with pamOpen; latchkeyd with an unlocked login
keychain).

Per daemon: `open` + `readPassword` + `close(handle)` as a KF5 application does for one lookup (p50/p99),
`writePassword` of 1,000 new entries one call each (p50/p99, and the total), `readPassword` at 1,000 entries,
`networkWallet` (the call clients use as a liveness probe), and the daemon's RSS at the end.

Run through scripts/bench-kwallet, which builds latchkeyd in release mode and writes the table into
docs/benchmarks.md.
"""

import argparse
import datetime
import os
import pathlib
import random
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
from kwallet_daemons import start_daemon  # noqa: E402  (the KWallet protocol tests' two daemons)

BEGIN, END = "<!-- kwallet-benchmark:begin -->", "<!-- kwallet-benchmark:end -->"


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def timed(action):
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def run(kind, entries, samples):
    with tempfile.TemporaryDirectory(prefix=f"bench-kwallet-{kind}-") as directory:
        with start_daemon(kind, directory) as daemon:
            handle = daemon.open_handle("kwallet-bench")
            assert daemon.value("createFolder", "iss", handle, "Bench", "kwallet-bench") in (True, False)
            writes = []
            for i in range(entries):
                elapsed, status = timed(lambda: daemon.value(
                    "writePassword", "issss", handle, "Bench", f"user{i}", f"secret-{i}", "kwallet-bench"))
                assert status == 0, f"{kind}: writePassword answered {status}"
                writes.append(elapsed)
            reads = []
            for _ in range(samples):
                i = random.randrange(entries)
                elapsed, value = timed(lambda: daemon.value(
                    "readPassword", "isss", handle, "Bench", f"user{i}", "kwallet-bench"))
                assert value == f"secret-{i}", f"{kind}: readPassword gave {value!r}"
                reads.append(elapsed)
            lookups = []
            for _ in range(samples):
                i = random.randrange(entries)

                def lookup():
                    opened = daemon.value("open", "sxs", daemon.wallet, 0, "kwallet-bench-lookup")
                    value = daemon.value("readPassword", "isss", opened, "Bench", f"user{i}", "kwallet-bench-lookup")
                    daemon.value("close", "ibs", opened, False, "kwallet-bench-lookup")
                    return value

                elapsed, value = timed(lookup)
                assert value == f"secret-{i}", f"{kind}: open + readPassword gave {value!r}"
                lookups.append(elapsed)
            probes = [timed(lambda: daemon.value("networkWallet"))[0] for _ in range(samples)]
            status = pathlib.Path(f"/proc/{daemon.process.pid}/status").read_text()
            rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024
    ms = 1e3
    return {
        "lookup": (quantile(lookups, 0.5) * ms, quantile(lookups, 0.99) * ms),
        "write": (quantile(writes, 0.5) * ms, quantile(writes, 0.99) * ms),
        "write_total": sum(writes),
        "read": (quantile(reads, 0.5) * ms, quantile(reads, 0.99) * ms),
        "probe": quantile(probes, 0.5) * ms,
        "rss": rss,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--daemons", default="kwalletd5,latchkeyd")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"), help="'-' prints only")
    args = parser.parse_args()
    rows = []
    for kind in args.daemons.split(","):
        r = run(kind, args.entries, args.samples)
        row = (f"| {kind} | {r['lookup'][0]:.2f} / {r['lookup'][1]:.2f} | {r['write'][0]:.2f} / {r['write'][1]:.2f}"
               f" | {r['write_total']:.2f} | {r['read'][0]:.2f} / {r['read'][1]:.2f} | {r['probe']:.2f} |"
               f" {r['rss']:.1f} |")
        print(row, flush=True)
        rows.append(row)
    if args.output == "-":
        return
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "unknown CPU")
    section = f"""{BEGIN}
Measured {datetime.date.today()} on {cpu}, {os.cpu_count()} cores, with `./scripts/bench-kwallet`
(latchkeyd built in release mode with the Swift runtime linked statically, as the package ships it; Debian
12's kwalletd5 5.103; the same jeepney client for both, each daemon on its own private bus with a fresh
wallet: kwalletd5's made through `pamOpen`, latchkeyd's the unlocked login keychain). Times in
milliseconds, p50 / p99 of {args.samples} unless marked. "open + readPassword" is what a KF5 application does
for one lookup: `open` of the network wallet, `readPassword`, `close(handle)`; "writePassword" is each of
{args.entries:,} new entries written one call each into one folder, and "total" their sum in seconds;
"readPassword" is at {args.entries:,} entries on a held handle; `networkWallet` is the call clients use as a
liveness probe; RSS at the end.

| daemon | open + readPassword | writePassword | total (s) | readPassword | `networkWallet` | RSS MiB |
|---|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}
{END}"""
    path = pathlib.Path(args.output)
    text = path.read_text()
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text += "\n## KWallet, latchkeyd and kwalletd5\n\n" + section + "\n"
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
