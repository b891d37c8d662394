"""Wall time of a PAM login (pamtester SERVICE USER authenticate open_session), side by side for three
stacks, as root with throwaway users. Run by scripts/bench-pam-login; prints a markdown table and, with
--write-docs, puts it into docs/benchmarks.md (between the pam-login-benchmark markers).

Stacks (each service file also has `session required pam_env.so envfile=...` setting XDG_RUNTIME_DIR,
standing for pam_systemd in a real login; pamtester itself runs with neither XDG_RUNTIME_DIR nor a bus
address in its environment):

  pam_unix          pam_unix alone (auth, account, session);
  gnome-keyring     pam_unix + `auth optional pam_gnome_keyring.so` and
                    `session optional pam_gnome_keyring.so auto_start` (Debian's libpam-gnome-keyring);
  pam_latchkey      pam_unix + `auth optional pam_latchkey.so daemon=PATH` and
                    `session optional pam_latchkey.so daemon=PATH auto_start`.

Cases (fresh users each round: useradd, chpasswd, /run/user/UID 0700 with a dbus-daemon at
/run/user/UID/bus; userdel -r at the end of the round):

  first login       no keyring yet: the module starts its daemon, which creates the login keyring;
  daemon running, keyring locked
                    the daemon is up and the login collection was locked over D-Bus
                    (org.freedesktop.Secret.Service.Lock) before the login;
  no daemon (auto_start)
                    the daemon was stopped (SIGTERM) before the login; the keyring file exists;
  daemon stopped with SIGSTOP (pam_latchkey; gnome-keyring once, with a time limit)
                    the daemon is up but frozen: the module must give up (0.5 s bound).

After every timed login, and outside the timed part, the benchmark checks what the stack did: the daemon
runs, owns org.freedesktop.secrets on the user's bus, and the login collection reports Locked = false (for
latchkeyd, polled until the background key derivation ends; for gnome-keyring, after running
`gnome-keyring-daemon --start --components=secrets` as the user, as a desktop session does: a daemon
pam_gnome_keyring starts with --login only unlocks the keyring when that initialisation comes). The
"unlocked after" column is the time from the start of the login to the first poll (a dbus-send about every
10 ms) that saw the collection unlocked. Logins of the three stacks are interleaved round by round, so
that the machine's background load falls on all of them alike.
"""

import argparse
import datetime
import os
import pathlib
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
import test_pam as pam  # noqa: E402  (the test suite's User helper: account, runtime dir, session bus)

PASSWORD = pam.PASSWORD
GNOME_KEYRING_DAEMON = "/usr/bin/gnome-keyring-daemon"
BEGIN, END = "<!-- pam-login-benchmark:begin -->", "<!-- pam-login-benchmark:end -->"
STOP_BOUND_S = 0.5
GNOME_KEYRING_STOP_LIMIT_S = 5.0

FIRST, LOCKED, NO_DAEMON, STOPPED = ("first login: keyring created", "daemon running, keyring locked",
                                     "no daemon (auto_start)", "daemon stopped with SIGSTOP")
LOGIN = "login (no keyring module)"


class Failure(Exception):
    pass


def clean_env():
    """pamtester's environment: no XDG_RUNTIME_DIR, no bus address (a login manager's own environment)."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}


class Stack:
    def __init__(self, label, env_file, extra_auth="", extra_session=""):
        self.label = label
        self.name = "latchkey-bench-" + secrets.token_hex(4)
        self.path = pathlib.Path("/etc/pam.d") / self.name
        self.path.write_text(
            "auth      required  pam_unix.so\n"
            f"{extra_auth}"
            "account   required  pam_unix.so\n"
            "session   required  pam_unix.so\n"
            f"session   required  pam_env.so envfile={env_file}\n"
            f"{extra_session}")

    def login(self, user, timeout=30):
        """Times one pamtester run: (seconds, completed process or None when killed at `timeout`)."""
        start = time.monotonic()
        try:
            result = subprocess.run(["pamtester", self.name, user.name, "authenticate", "open_session"],
                                    input=PASSWORD + "\n", capture_output=True, text=True, timeout=timeout,
                                    env=clean_env())
        except subprocess.TimeoutExpired:
            return time.monotonic() - start, None
        elapsed = time.monotonic() - start
        if result.returncode != 0:
            raise Failure(f"{self.label}: pamtester failed for {user.name}: {result.stderr}{result.stdout}")
        return elapsed, result

    def remove(self):
        self.path.unlink(missing_ok=True)


def processes(user, command):
    """Live processes of the user whose comm is `command` (zombies are not counted)."""
    out = subprocess.run(["ps", "-u", str(user.uid), "-o", "pid=,stat=,comm="], capture_output=True, text=True)
    rows = [line.split() for line in out.stdout.splitlines()]
    return [int(r[0]) for r in rows if len(r) == 3 and r[2] == command and not r[1].startswith("Z")]


def as_user(user, argv, check=False, timeout=30):
    """Runs argv as the user with the user's environment, without runuser's own PAM session (cheaper to poll)."""
    return subprocess.run(argv, user=user.uid, group=user.gid, extra_groups=[], env=user.env(), cwd=user.home,
                          capture_output=True, text=True, check=check, timeout=timeout)


def collection_unlocked(user):
    out = as_user(user, ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                    "/org/freedesktop/secrets/collection/login", "org.freedesktop.DBus.Properties.Get",
                    "string:org.freedesktop.Secret.Collection", "string:Locked"])
    return out.returncode == 0 and "boolean false" in out.stdout


def wait_unlocked(user, start, timeout=15):
    """Seconds from `start` until the login collection reports Locked = false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if collection_unlocked(user):
            return time.monotonic() - start
        time.sleep(0.005)
    raise Failure(f"the login collection of {user.name} is still locked (or absent) {timeout} s after the login")


def lock(user):
    as_user(user, ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                   "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
                   "array:objpath:/org/freedesktop/secrets/collection/login"], check=True)
    if collection_unlocked(user):
        raise Failure(f"Lock left the login collection of {user.name} unlocked")


def stop(user, command):
    for pid in processes(user, command):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while processes(user, command) and time.monotonic() < deadline:
        time.sleep(0.02)
    if processes(user, command):
        raise Failure(f"{command} of {user.name} did not stop")
    # Wait until the bus has dropped the name too, so that the next check sees the new daemon.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        out = as_user(user, ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                        "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                        "string:org.freedesktop.secrets"]).stdout
        if "boolean false" in out:
            return
        time.sleep(0.02)


class Results:
    def __init__(self):
        self.times = {}      # (stack, case) -> [seconds]
        self.ready = {}      # (stack, case) -> [seconds until unlocked]
        self.notes = {}      # (stack, case) -> text

    def add(self, stack, case, elapsed, ready=None):
        self.times.setdefault((stack, case), []).append(elapsed)
        if ready is not None:
            self.ready.setdefault((stack, case), []).append(ready)


def round_unix(stack, user, results):
    for _ in range(3):
        elapsed, _ = stack.login(user)
        results.add("pam_unix", LOGIN, elapsed)


def round_gnome_keyring(stack, user, results):
    keyring = user.home / ".local" / "share" / "keyrings" / "login.keyring"

    def start_components_and_wait(start):
        # What the desktop session does once it starts: initialise the --login daemon's components.
        out = as_user(user, [GNOME_KEYRING_DAEMON, "--start", "--components=secrets"])
        if out.returncode != 0:
            raise Failure(f"gnome-keyring-daemon --start failed: {out.stderr}")
        return wait_unlocked(user, start)

    def check_one_daemon():
        pids = processes(user, "gnome-keyring-d")
        if len(pids) != 1:
            raise Failure(f"gnome-keyring: {len(pids)} daemons for {user.name} after the login")

    start = time.monotonic()
    elapsed, _ = stack.login(user)
    check_one_daemon()
    if keyring.exists():
        results.notes[("gnome-keyring", FIRST)] = "login.keyring existed before --start"
    ready = start_components_and_wait(start)
    if not keyring.exists():
        raise Failure(f"gnome-keyring: no {keyring} after the first login")
    results.add("gnome-keyring", FIRST, elapsed, ready)

    lock(user)
    start = time.monotonic()
    elapsed, _ = stack.login(user)
    check_one_daemon()
    # The session step unlocked it through the control socket before returning: no --start needed.
    if not collection_unlocked(user):
        raise Failure("gnome-keyring: the login with the daemon running did not unlock the keyring")
    results.add("gnome-keyring", LOCKED, elapsed, time.monotonic() - start)

    stop(user, "gnome-keyring-d")
    start = time.monotonic()
    elapsed, _ = stack.login(user)
    check_one_daemon()
    ready = start_components_and_wait(start)
    results.add("gnome-keyring", NO_DAEMON, elapsed, ready)


def gnome_keyring_stopped(stack, user, results):
    """One login with gnome-keyring-daemon frozen, killed at GNOME_KEYRING_STOP_LIMIT_S."""
    pids = processes(user, "gnome-keyring-d")
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        elapsed, result = stack.login(user, timeout=GNOME_KEYRING_STOP_LIMIT_S)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    results.add("gnome-keyring", STOPPED, elapsed)
    if result is None:
        results.notes[("gnome-keyring", STOPPED)] = f"pamtester killed after {GNOME_KEYRING_STOP_LIMIT_S:.0f} s"


def round_latchkey(stack, user, results):
    keychain = user.home / ".local" / "share" / "latchkey" / "keychains" / "login.keychain-db"

    def check_one_daemon():
        pids = processes(user, "latchkeyd")
        if len(pids) != 1:
            raise Failure(f"pam_latchkey: {len(pids)} latchkeyd for {user.name} after the login")

    start = time.monotonic()
    elapsed, _ = stack.login(user)
    ready = wait_unlocked(user, start)
    check_one_daemon()
    if not keychain.exists():
        raise Failure(f"pam_latchkey: no {keychain} after the first login")
    results.add("pam_latchkey", FIRST, elapsed, ready)

    lock(user)
    start = time.monotonic()
    elapsed, _ = stack.login(user)
    ready = wait_unlocked(user, start)
    check_one_daemon()
    results.add("pam_latchkey", LOCKED, elapsed, ready)

    stop(user, "latchkeyd")
    start = time.monotonic()
    elapsed, _ = stack.login(user)
    ready = wait_unlocked(user, start)
    check_one_daemon()
    results.add("pam_latchkey", NO_DAEMON, elapsed, ready)

    # Last step of the round: the user and its processes go right after it.
    pids = processes(user, "latchkeyd")
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        elapsed, result = stack.login(user, timeout=30)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    results.add("pam_latchkey", STOPPED, elapsed)


def ms(seconds):
    return f"{seconds * 1000:.0f}"


def table(results):
    base = statistics.median(results.times[("pam_unix", LOGIN)])
    rows = ["| stack | case | runs | p50 ms | max ms | added over pam_unix p50 (ms) | unlocked after, p50 ms |",
            "|---|---|---:|---:|---:|---:|---:|"]
    order = [("pam_unix", LOGIN)] + [(s, c) for s in ("gnome-keyring", "pam_latchkey")
                                     for c in (FIRST, LOCKED, NO_DAEMON, STOPPED)]
    for key in order:
        if key not in results.times:
            continue
        times = results.times[key]
        p50 = statistics.median(times)
        added = "–" if key[0] == "pam_unix" else f"{(p50 - base) * 1000:+.0f}"
        ready = ms(statistics.median(results.ready[key])) if key in results.ready else "–"
        case = key[1] + (f" ({results.notes[key]})" if key in results.notes else "")
        rows.append(f"| {key[0]} | {case} | {len(times)} | {ms(p50)} | {ms(max(times))} | {added} | {ready} |")
    return "\n".join(rows)


def machine():
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"^Model name:\s+(.+)$", lscpu, re.M)
    return f"{model.group(1).strip() if model else 'unknown CPU'}, {os.cpu_count()} cores"


def versions():
    def package(name):
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
        return out.stdout.strip() or "?"
    return f"libpam-gnome-keyring {package('libpam-gnome-keyring')}, pamtester {package('pamtester')}"


def write_docs(path, text):
    """Replaces what lies between the section's markers (re-reading the file right before writing)."""
    current = path.read_text()
    if BEGIN not in current or END not in current:
        raise SystemExit(f"{path} has no {BEGIN} … {END} markers: the table is not written")
    updated = current[: current.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + current[current.index(END):]
    path.write_text(updated)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", required=True, help="the pam_latchkey module (libpam_latchkey.so)")
    parser.add_argument("--latchkeyd", required=True)
    parser.add_argument("--rounds", type=int, default=25, help="fresh users per stack (one run of each case each)")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--command", default=os.environ.get("BENCH_PAM_LOGIN_COMMAND", "./scripts/bench-pam-login"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark creates users and PAM service files")
    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"warning: load average {load_before:.2f} before the run: other work skews the figures",
              file=sys.stderr)

    installed = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-pam-bench-"))
    os.chmod(installed, 0o755)
    shutil.copy(args.module, installed / "pam_latchkey.so")
    shutil.copy(args.latchkeyd, installed / "latchkeyd")
    shutil.copy(pam.SCRIPTED_PINENTRY, installed / "scripted-pinentry")  # User's environment names it
    for name in ("pam_latchkey.so", "latchkeyd", "scripted-pinentry"):
        os.chmod(installed / name, 0o755)
    env_file = installed / "pam-env"   # rewritten for each user: XDG_RUNTIME_DIR=/run/user/UID
    module = installed / "pam_latchkey.so"
    daemon = f"daemon={installed / 'latchkeyd'}"
    stacks = {
        "pam_unix": Stack("pam_unix", env_file),
        "gnome-keyring": Stack("gnome-keyring", env_file,
                               extra_auth="auth      optional  pam_gnome_keyring.so\n",
                               extra_session="session   optional  pam_gnome_keyring.so auto_start\n"),
        "pam_latchkey": Stack("pam_latchkey", env_file,
                              extra_auth=f"auth      optional  {module} {daemon}\n",
                              extra_session=f"session   optional  {module} {daemon} auto_start\n"),
    }
    runners = {"pam_unix": round_unix, "gnome-keyring": round_gnome_keyring, "pam_latchkey": round_latchkey}
    results = Results()
    users = []
    started = time.monotonic()
    try:
        names = list(stacks)
        for number in range(args.rounds):
            for label in names[number % 3:] + names[: number % 3]:   # rotate the order round by round
                user = pam.User(installed)
                users.append(user)
                env_file.write_text(f"XDG_RUNTIME_DIR={user.runtime}\n")
                runners[label](stacks[label], user, results)
                if label == "gnome-keyring" and number == args.rounds - 1:
                    gnome_keyring_stopped(stacks[label], user, results)
                user.remove()
                users.remove(user)
            print(f"round {number + 1}/{args.rounds} done ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    finally:
        for user in users:
            user.remove()
        for stack in stacks.values():
            stack.remove()
        shutil.rmtree(installed, ignore_errors=True)

    text = table(results)
    print(text)
    stopped = results.times.get(("pam_latchkey", STOPPED), [])
    base = statistics.median(results.times[("pam_unix", LOGIN)])
    if stopped:
        share = statistics.median(stopped) - base
        print(f"{'warning: ' if share > STOP_BOUND_S + 0.05 else ''}stopped latchkeyd: the module's share "
              f"{share:.2f} s p50 (bound {STOP_BOUND_S} s), slowest login {max(stopped):.2f} s", file=sys.stderr)
    if args.write_docs:
        doc = (f"Measured {datetime.date.today()} on {machine()} (Debian 12; {versions()}; load average "
               f"{load_before:.1f} at the start, so other work shared the machine) with `{args.command}`, "
               f"{args.rounds} rounds, {time.monotonic() - started:.0f} s:\n\n{text}")
        write_docs(pathlib.Path(args.output), doc)
        print(f"written to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
