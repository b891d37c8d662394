"""The person's unlock while a client hammers Keychain1.Unlock (issue 31, item 2; docs/robustness.md).

For each run: a fresh latchkeyd on a private bus (the integration tests' fixtures: .build/debug or
$LATCHKEY_BIN_DIR), the login keychain locked; with `hammered`, a client sends wrong passwords to
Keychain1.Unlock as fast as the daemon answers, and the person's unlock starts once the file's wrong-password
wait runs; the person's unlock is Secret Service Unlock then Prompt, the scripted pinentry typing the right
password. Prints, per mode, how the unlock ended (completed / dismissed) and the seconds from Prompt to
Completed.

    /usr/bin/python3 Benchmarks/unlock_under_hammer.py [--runs N]
"""

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Tests" / "Integration"))
from conftest import LOGIN_PASSWORD, Bus, Daemon  # noqa: E402
from dbus_client import Client  # noqa: E402
from test_client_guards import LOGIN, TOO_MANY, Hammer, unlock_through_the_prompt  # noqa: E402


def run(hammering):
    bus = Bus()
    with tempfile.TemporaryDirectory() as directory:
        daemon = Daemon(bus, pathlib.Path(directory), answers=[f"password {LOGIN_PASSWORD}"])
        try:
            daemon.start()
            person = Client(bus.address)
            person.service("Lock", "ao", ([LOGIN],))
            hammer = Hammer(bus)
            if hammering:
                hammer.start()
                deadline = time.monotonic() + 30
                while TOO_MANY not in hammer.replies and time.monotonic() < deadline:
                    time.sleep(0.05)
            body, seconds = unlock_through_the_prompt(person)
            hammer.stop()
            person.close()
            return not body[0], seconds
        finally:
            daemon.stop()
            bus.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    for mode in ("alone", "hammered"):
        results = [run(mode == "hammered") for _ in range(runs)]
        completed = [seconds for done, seconds in results if done]
        dismissed = [seconds for done, seconds in results if not done]
        line = f"{mode}: {len(completed)} of {runs} unlocked"
        if completed:
            line += f", p50 {statistics.median(completed):.2f} s, max {max(completed):.2f} s"
        if dismissed:
            line += f"; {len(dismissed)} dismissed after p50 {statistics.median(dismissed):.2f} s"
        print(line, flush=True)


if __name__ == "__main__":
    main()
