#!/usr/bin/env python3
"""Times TPMSealing's seal and unseal against a fresh software TPM (swtpm) and prints a Markdown table.

Usage: swift build -c release --product tpm-seal-bench && python3 Benchmarks/tpm_seal_bench.py [--samples N]
"""
import argparse
import os
import socket
import subprocess
import tempfile
import time


def free_port_pair():
    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no two free neighbouring ports")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--binary", default=".build/release/tpm-seal-bench")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        port = free_port_pair()
        swtpm = subprocess.Popen(
            ["swtpm", "socket", "--tpm2", "--server", f"type=tcp,port={port},bindaddr=127.0.0.1",
             "--ctrl", f"type=tcp,port={port + 1},bindaddr=127.0.0.1", "--tpmstate", f"dir={state}",
             "--flags", "not-need-init,startup-clear"])
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.02)
            environment = dict(os.environ, LATCHKEY_TPM_TCTI=f"swtpm:host=127.0.0.1,port={port}")
            subprocess.run([arguments.binary, str(arguments.samples)], env=environment, check=True)
        finally:
            swtpm.kill()
            swtpm.wait()


if __name__ == "__main__":
    main()
