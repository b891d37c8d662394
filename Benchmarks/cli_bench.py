"""Wall time of one `latchkey` command (process start to exit) on a
keychain that latchkeyd holds on a private bus, and on a keychain file with
no daemon (each command then unlocks the file itself: one scrypt). Run by
scripts/bench-cli; prints a markdown table."""

import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
from conftest import Bus, Daemon  # noqa: E402
from test_cli import FILE_PASSWORD, Cli  # noqa: E402

COMMANDS = {
    "find-generic-password -w": ["find-generic-password", "-s", "bench", "-w"],
    "find-generic-password (attributes)": ["find-generic-password", "-s", "bench"],
    "show-keychain-info": ["show-keychain-info"],
    "find, no match (exit 44)": ["find-generic-password", "-s", "absent"],
}


def timed(cli, args, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        cli.run(*args)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times)


def main(rounds=20):
    rows = []
    with tempfile.TemporaryDirectory() as held_dir, tempfile.TemporaryDirectory() as file_dir:
        bus = Bus()
        held = Cli(pathlib.Path(held_dir), bus)
        daemon = Daemon(bus, pathlib.Path(held_dir), keychains=held.keychains).start()
        held.ok("add-generic-password", "-a", "me", "-s", "bench", "--stdin", input="secret")
        plain = Cli(pathlib.Path(file_dir))
        plain.ok("create-keychain", "--stdin", "login", input=FILE_PASSWORD + "\n")
        plain.set_answers([f"password {FILE_PASSWORD}"] * 4 * rounds + [f"password {FILE_PASSWORD}"])
        plain.ok("add-generic-password", "-a", "me", "-s", "bench", "--stdin", input="secret")
        try:
            for name, args in COMMANDS.items():
                for label, cli in (("daemon", held), ("file", plain)):
                    p50, worst = timed(cli, args, rounds)
                    rows.append(f"| `latchkey {name}` | {label} | {p50:.1f} | {worst:.1f} |")
        finally:
            daemon.stop()
            bus.stop()
    print(f"{rounds} runs each; milliseconds from process start to exit\n")
    print("| command | keychain held by | p50 | max |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
