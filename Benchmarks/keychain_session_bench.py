"""What sealing org.latchkey.Keychain1's secrets costs (issue 31, item 7): a secret read at the protocol level
on one connection, plain (a client that opens no session) against sealed (after OpenSession), the
OpenSession a connection pays once, and `latchkey find-generic-password -w` from process start to exit
(which opens its session on its one connection). With LATCHKEY_PLAIN_CLI naming a `latchkey` built before
sessions (one that reads plain), its runs are interleaved with the current one's, against the same daemon.
Run by scripts/bench-keychain-session; prints a markdown table."""

import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
from conftest import Bus, Daemon  # noqa: E402
from dbus_client import Client, DHClient  # noqa: E402
from test_cli import Cli  # noqa: E402
from test_keychain_sessions import DH, ROOT_PATH, call, search  # noqa: E402

SECRET = b"benchmark secret of thirty-two b"


def median_ms(samples):
    return statistics.median(samples) * 1000


def timed(action, rounds):
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def daemon_cpu_seconds(daemon):
    """The daemon's user and system CPU time so far (clock ticks of /proc/PID/stat)."""
    fields = pathlib.Path(f"/proc/{daemon.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_per_call_us(daemon, action, calls):
    """The daemon's CPU per call over `calls` calls, in microseconds (robust to a busy machine, which
    stretches wall times but not CPU)."""
    before = daemon_cpu_seconds(daemon)
    for _ in range(calls):
        action()
    return (daemon_cpu_seconds(daemon) - before) / calls * 1e6


def read_plain(client):
    reply = search(client, "bench")
    assert reply.body[0][0]["secret"][1] == SECRET


def read_sealed(client, dh):
    value = search(client, "bench").body[0][0]["secret"][1]
    assert dh.decrypt(value[:16], value[16:]) == SECRET


def main(rounds=500, commands=30):
    with tempfile.TemporaryDirectory() as directory:
        bus = Bus()
        cli = Cli(pathlib.Path(directory), bus)
        daemon = Daemon(bus, pathlib.Path(directory), keychains=cli.keychains).start()
        cli.ok("add-generic-password", "-a", "me", "-s", "bench", "--stdin", input=SECRET.decode())
        plain, sealed = Client(bus.address), Client(bus.address)
        try:
            # Client keys made beforehand: the timed OpenSession is the round trip and the daemon's side.
            keys = [DHClient() for _ in range(rounds // 5)]
            opened = []
            for key in keys:
                start = time.perf_counter()
                reply = call(sealed, ROOT_PATH, "OpenSession", "sv", (DH, ("ay", key.public_bytes)))
                opened.append(time.perf_counter() - start)
                (_, server_public), _ = reply.body
                key.derive(server_public)
            dh = keys[-1]
            ping = timed(lambda: plain.ok("/org/freedesktop/secrets", "org.freedesktop.DBus.Peer", "Ping"), rounds)
            # Interleaved, so that a busy moment of the machine weighs on both alike.
            plain_reads, sealed_reads = [], []
            for _ in range(rounds):
                plain_reads += timed(lambda: read_plain(plain), 1)
                sealed_reads += timed(lambda: read_sealed(sealed, dh), 1)
            cpu_plain = cpu_per_call_us(daemon, lambda: read_plain(plain), 10 * rounds)
            cpu_sealed = cpu_per_call_us(daemon, lambda: read_sealed(sealed, dh), 10 * rounds)
            old = os.environ.get("LATCHKEY_PLAIN_CLI")
            command, old_command, command_cpu, old_command_cpu = [], [], [], []
            for _ in range(commands):
                before = children_cpu_seconds()
                command += timed(lambda: cli.ok("find-generic-password", "-s", "bench", "-w"), 1)
                command_cpu.append(children_cpu_seconds() - before)
                if old:
                    before = children_cpu_seconds()
                    old_command += timed(lambda: check_plain_cli(old, cli), 1)
                    old_command_cpu.append(children_cpu_seconds() - before)
        finally:
            plain.close()
            sealed.close()
            daemon.stop()
            bus.stop()
    print(f"p50 in milliseconds; {rounds} protocol calls each, {commands} commands; the daemon's CPU per read over"
          f" {10 * rounds} reads each; a command's CPU is its process's (user and system, p50)\n")
    print("| what | p50 ms | CPU |\n|---|---:|---:|")
    print(f"| Peer.Ping (a round trip through the bus) | {median_ms(ping):.3f} | |")
    print(f"| Keychain1.Search, one secret, plain connection | {median_ms(plain_reads):.3f} |"
          f" daemon {cpu_plain:.0f} µs |")
    print(f"| Keychain1.Search, one secret, sealed (with the client's AES decryption) | "
          f"{median_ms(sealed_reads):.3f} | daemon {cpu_sealed:.0f} µs |")
    print(f"| Keychain1.OpenSession (once per connection; daemon side and round trip) | {median_ms(opened):.3f} | |")
    print(f"| `latchkey find-generic-password -w` (process start to exit, session included) | "
          f"{median_ms(command):.1f} | {median_ms(command_cpu):.1f} ms |")
    if old_command:
        print(f"| the same, a `latchkey` without sessions (plain; LATCHKEY_PLAIN_CLI) | {median_ms(old_command):.1f} |"
              f" {median_ms(old_command_cpu):.1f} ms |")


def check_plain_cli(path, cli):
    result = subprocess.run([path, "find-generic-password", "-s", "bench", "-w"], env=cli.env(), capture_output=True,
                            text=True, timeout=60, start_new_session=True)
    assert result.stdout == SECRET.decode() + "\n", result.stderr


if __name__ == "__main__":
    main()
