"""Wall time of a PAM login through pam_latchkey (pamtester: authenticate +
open_session, pam_unix before the module), as root with throwaway users.
Run by scripts/bench-pam-login; prints a markdown table."""

import os
import pathlib
import shutil
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
import test_pam as pam  # noqa: E402  (the test suite's User and Service helpers)


def main(rounds=5):
    installed = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-bench-"))
    os.chmod(installed, 0o755)
    shutil.copy(pam.MODULE_BUILD, installed / "pam_latchkey.so")
    shutil.copy(pam.binary("latchkeyd"), installed / "latchkeyd")
    os.chmod(installed / "latchkeyd", 0o755)
    service = pam.Service(installed)
    cases = {"first login: keychain created": [], "login, daemon running, keychain locked": [],
             "login, no daemon (auto_start)": [], "login, daemon stopped with SIGSTOP": []}
    try:
        for _ in range(rounds):
            user = pam.User(installed)
            cases["first login: keychain created"].append(pam.login(service, user).elapsed)
            user.wait_for_name()
            for _ in range(3):
                user.lock()
                cases["login, daemon running, keychain locked"].append(pam.login(service, user).elapsed)
                user.stop_daemon()
                cases["login, no daemon (auto_start)"].append(pam.login(service, user).elapsed)
                user.wait_for_name()
            stopped = user.daemon_pids()
            for pid in stopped:
                os.kill(pid, 19)
            cases["login, daemon stopped with SIGSTOP"].append(pam.login(service, user).elapsed)
            for pid in stopped:
                os.kill(pid, 18)
            user.remove()
    finally:
        service.remove()
        shutil.rmtree(installed)
    print("| case | runs | p50 ms | max ms |\n|---|---|---|---|")
    for name, times in cases.items():
        print(f"| {name} | {len(times)} | {statistics.median(times) * 1000:.0f} | {max(times) * 1000:.0f} |")


if __name__ == "__main__":
    main()
