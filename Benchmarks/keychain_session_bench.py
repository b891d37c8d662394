"""What sealing org.latchkey.Keychain1's secrets costs (issue 31, item 7): a secret read at the protocol level
on one connection, plain (a client that opens no session) against sealed (after OpenSession), the
OpenSession a connection pays once, and `latchkey find-generic-password -w` from process start to exit
(which opens its session on its one connection). Run by scripts/bench-keychain-session; prints a markdown
table."""

import pathlib
import statistics
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
            command = timed(lambda: cli.ok("find-generic-password", "-s", "bench", "-w"), commands)
        finally:
            plain.close()
            sealed.close()
            daemon.stop()
            bus.stop()
    print(f"p50 in milliseconds; {rounds} protocol calls each, {commands} commands\n")
    print("| what | p50 ms |\n|---|---:|")
    print(f"| Peer.Ping (a round trip through the bus) | {median_ms(ping):.3f} |")
    print(f"| Keychain1.Search, one secret, plain connection | {median_ms(plain_reads):.3f} |")
    print(f"| Keychain1.Search, one secret, sealed (with the client's AES decryption) | "
          f"{median_ms(sealed_reads):.3f} |")
    print(f"| Keychain1.OpenSession (once per connection; daemon side and round trip) | {median_ms(opened):.3f} |")
    print(f"| `latchkey find-generic-password -w` (process start to exit, session included) | "
          f"{median_ms(command):.1f} |")


if __name__ == "__main__":
    main()
