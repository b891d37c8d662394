#!/usr/bin/python3
"""Fault and load tests of a Secret Service daemon, each printing its figures.

Scenarios (each on its own private dbus-daemon and throwaway keychain directory):

  kill        SIGKILL of the daemon at random moments while several clients run CreateItem, SetSecret and
              Delete; after each restart every acknowledged operation must be there, nothing whose delete was
              acknowledged may come back, and (latchkeyd) `PRAGMA integrity_check` must say ok.
  load        N concurrent clients (one process each) of mixed operations for a bounded time: operations,
              errors, p50/p99 latency, lost writes (checked at the end against what each client was told),
              the daemon's peak RSS.
  sessions    many sessions opened and dropped (over many connections), calls whose caller leaves before
              the reply, and prompts whose caller leaves mid-prompt: the daemon's RSS, descriptors, threads
              and children before and after, and how long each departed caller's pinentry outlived it.
  prompts     C clients x P concurrent Unlock prompts answered with the right password while another client
              keeps locking: how many completed dismissed, the daemon's peak RSS, pinentries at once.
  own-prompts the same storm on a collection with a password of its own (CreateWithMasterPassword), its
              prompts half Unlock, half gnome-keyring's ChangeWithPrompt (current password, new one twice):
              how many completed dismissed, peak RSS, pinentries at once; then C x P such prompts whose
              callers leave right after Prompt: pinentries still alive one second after the last left.
  prompt-flood
              one application (N processes, each its own connection) asks for the secrets of N items it is not
              trusted with, again whenever a call ends, the person taking a second over each prompt; then another application asks for one:
              where its prompt came, how long it waited, whether its call timed out (25 s, D-Bus's default).
  full-disk   the keychain directory on a small tmpfs (root only): the disk filled, a write refused with an
              error, reads still served, writes resumed once space is freed, nothing lost after a restart.
  flood       one client, with the daemon started under systemd's default soft limit of 1,024 descriptors:
              N CreateCollection attempts, then N CreateItem attempts of a large secret into the in-memory
              session collection; what was made and refused (and with which error), the daemon's descriptors,
              soft limit and RSS after each, how long a Lock and an Unlock of the full session collection took,
              and whether the next unlock prompt still shows and completes.
  prompt-memory
              the daemon's RSS and peak RSS (VmHWM) after start, after one unlock (latchkeyd: through its
              prompt), then with C x P Unlock prompts shown and queued that are never answered (threads and
              children too), and after their callers left.

`scripts/stress` runs them with the full counts against a release build, gnome-keyring-daemon beside
latchkeyd where the comparison means something; Tests/Integration/test_robustness.py runs them with small
counts and asserts the properties (not the timings).
"""

import argparse
import datetime
import json
import multiprocessing
import os
import pathlib
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
from conftest import SCRIPTED_PINENTRY, Bus  # noqa: E402  (the integration tests' bus)
from dbus_client import DEFAULT, SERVICE, Client  # noqa: E402  (the integration tests' raw D-Bus client)

PASSWORD = "robustness password"
LOGIN = "/org/freedesktop/secrets/collection/login"
SECRET_SERVICE = "org.freedesktop.Secret.Service"
COLLECTION = "org.freedesktop.Secret.Collection"
ITEM = "org.freedesktop.Secret.Item"
PROMPT = "org.freedesktop.Secret.Prompt"
GNOME_KEYRING = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"


# MARK: Processes

def proc_status(pid):
    """VmRSS, VmHWM (KiB) and Threads of a process."""
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "Threads"):
            fields[name] = int(value.split()[0])
    return fields


def children_of(pid, with_deriver=False):
    """The pids whose parent is `pid` (zombies included). latchkeyd's key deriver (a child it forks at start
    and keeps, named latchkeyd-kdf) is left out unless `with_deriver`: it is no pinentry and no helper left
    behind. Its workers are its own children (`key_derivation_workers_of`)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            if with_deriver or not is_key_derivation_helper(int(entry)):
                found.append(int(entry))
    return found


def key_derivation_workers_of(pid):
    """The processes deriving a key for latchkeyd `pid`: the children of its deriver."""
    return [worker for deriver in children_of(pid, with_deriver=True) if is_key_derivation_helper(deriver)
            for worker in children_of(deriver, with_deriver=True)]


def probe(pid):
    """What a process holds now: RSS (MiB), open descriptors, threads, children."""
    status = proc_status(pid)
    return {"rss_mib": round(status["VmRSS"] / 1024, 1), "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": status["Threads"], "children": len(children_of(pid))}


def settle_probe(pid, baseline, seconds=5.0):
    """The probe once descriptors, threads and children are back to `baseline` (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        now = probe(pid)
        if all(now[k] <= baseline[k] for k in ("fds", "threads", "children")) or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def load_context():
    """The machine's load average and how many processors, for the record."""
    return {"loadavg": pathlib.Path("/proc/loadavg").read_text().split()[:3], "cpus": os.cpu_count()}


# MARK: Servers

class PrivateBus(Bus):
    """A private session bus that starts no service: a call to a name nobody owns fails at once
    (ServiceUnknown) instead of activating the machine's `org.freedesktop.secrets` (gnome-keyring-daemon,
    or an installed latchkeyd, over the real home directory) while the daemon under test is down."""

    def __init__(self, scratch):
        text = pathlib.Path("/usr/share/dbus-1/session.conf").read_text()
        text = "\n".join(line for line in text.splitlines() if "servicedir" not in line)
        text = text.replace("<includedir>session.d</includedir>", "")
        config = pathlib.Path(scratch) / "bus.conf"
        config.write_text(text)
        out = subprocess.run(
            ["dbus-daemon", f"--config-file={config}", "--fork", "--print-address=1", "--print-pid=1"],
            check=True, capture_output=True, text=True).stdout.split()
        self.address, self.pid = out[0], int(out[1])


class Server:
    """A Secret Service daemon on a private bus, restartable over the same files."""

    kind = "?"

    def __init__(self, scratch):
        self.scratch = pathlib.Path(scratch)
        self.bus = PrivateBus(scratch)
        self.process = None

    @property
    def pid(self):
        return self.process.pid

    def client(self):
        return Client(self.bus.address)

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def close(self):
        # Children left (a pinentry a daemon failed to end) are ended here, not left to their own timeout.
        if self.process and self.process.poll() is None:
            for child in children_of(self.process.pid):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.stop()
        self.bus.stop()

    def wait_for_name(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.process.returncode}")
            if self.bus.has_owner():
                owner = self.owner_pid()
                if owner != self.process.pid:
                    raise RuntimeError(f"org.freedesktop.secrets is owned by process {owner}, not {self.kind}")
                return
            time.sleep(0.02)
        raise RuntimeError(f"{self.kind} did not claim org.freedesktop.secrets")

    def owner_pid(self):
        from jeepney.bus_messages import message_bus
        client = self.client()
        try:
            return client.connection.send_and_get_reply(
                message_bus.GetConnectionUnixProcessID("org.freedesktop.secrets")).body[0]
        finally:
            client.close()


class Latchkeyd(Server):
    kind = "latchkeyd"

    def __init__(self, scratch, binary, answers=(), keychains=None, extra_args=(), descriptor_limit=None):
        super().__init__(scratch)
        self.binary = binary
        self.extra_args = list(extra_args)
        # A soft RLIMIT_NOFILE to start with (the hard one is left as it is), as systemd's 1,024 for services.
        self.descriptor_limit = descriptor_limit
        self.keychains = pathlib.Path(keychains) if keychains else self.scratch / "keychains"
        self.answers = self.scratch / "pinentry-answers"
        self.log = self.scratch / "pinentry-log"
        self.set_answers(answers)

    def set_answers(self, answers):
        self.answers.write_text("".join(a + "\n" for a in answers))
        pathlib.Path(str(self.answers) + ".pos").unlink(missing_ok=True)

    def start(self):
        runtime = self.scratch / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        env = self.bus.env(SCRIPTED_PINENTRY_ANSWERS=str(self.answers), SCRIPTED_PINENTRY_LOG=str(self.log),
                           XDG_RUNTIME_DIR=str(runtime),
                           DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={self.scratch}/no-system-bus")
        limit = self.descriptor_limit

        def lower_descriptor_limit():
            if limit is not None:
                import resource
                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))

        self.process = subprocess.Popen(
            [self.binary, "--foreground", "--unlock", "--keychain-directory", str(self.keychains),
             "--pinentry", str(SCRIPTED_PINENTRY), *self.extra_args],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=open(self.scratch / "daemon.stderr", "ab"), preexec_fn=lower_descriptor_limit)
        self.process.stdin.write(PASSWORD.encode())
        self.process.stdin.close()
        self.wait_for_name()
        # The bus name comes first, the control socket just after.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (runtime / "latchkey" / "control").exists():
            time.sleep(0.02)
        # The login keychain unlocks in the background (key derivation); calls wait for it. Served once done.
        client = self.client()
        try:
            client.call(LOGIN, "org.freedesktop.DBus.Properties", "Get", "ss", (COLLECTION, "Locked"), timeout=60)
        finally:
            client.close()
        return self

    def integrity(self):
        """`PRAGMA integrity_check` of the login keychain file, read-only."""
        uri = "file:" + str(self.keychains / "login.keychain-db") + "?mode=ro"
        db = sqlite3.connect(uri, uri=True, timeout=10)
        try:
            return db.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            db.close()


class GnomeKeyringServer(Server):
    kind = "gnome-keyring"

    def start(self):
        home = self.scratch / "home"
        (home / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
        (home / ".local" / "share").mkdir(parents=True, exist_ok=True)
        env = self.bus.env(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
                           XDG_RUNTIME_DIR=str(home / "run"), XDG_CONFIG_HOME=str(home / ".config"))
        env.pop("DISPLAY", None)
        env.pop("WAYLAND_DISPLAY", None)
        self.process = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--components=secrets", "--unlock"],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=open(self.scratch / "daemon.stderr", "ab"))
        self.process.stdin.write(PASSWORD.encode())
        self.process.stdin.close()
        self.wait_for_name()
        # The login keyring comes once the password on stdin has been read.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            client = self.client()
            try:
                reply = client.call(DEFAULT, "org.freedesktop.DBus.Properties", "Get", "ss", (COLLECTION, "Locked"))
                if not reply.is_error and reply.body == (("b", False),):
                    return self
            finally:
                client.close()
            time.sleep(0.1)
        raise RuntimeError("gnome-keyring-daemon did not unlock its login keyring")

    def stray_files(self):
        """Files gnome-keyring left half-written (its temporary files) in the keyrings directory."""
        keyrings = self.scratch / "home" / ".local" / "share" / "keyrings"
        return [p.name for p in keyrings.glob("*") if not p.name.endswith(".keyring") and p.is_file()]


def make_server(kind, scratch, binary, **kwargs):
    return Latchkeyd(scratch, binary, **kwargs) if kind == "latchkeyd" else GnomeKeyringServer(scratch)


# MARK: Client operations

def create(client, session, key, secret, run):
    """CreateItem with a unique key attribute; the item's path, or None when not acknowledged."""
    try:
        reply = client.call(DEFAULT, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                            ({"org.freedesktop.Secret.Item.Label": ("s", key),
                              "org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"run": run, "key": key})},
                             (session, b"", secret, "text/plain"), False))
    except Exception:
        return None, "no reply"
    if reply.is_error:
        return None, reply.error_name + (f": {reply.body[0]}" if reply.body else "")
    return reply.body[0], None


def set_secret(client, session, path, secret):
    try:
        reply = client.call(path, ITEM, "SetSecret", "(oayays)", ((session, b"", secret, "text/plain"),))
    except Exception:
        return "no reply"
    return reply.error_name if reply.is_error else None


def delete(client, path):
    try:
        reply = client.call(path, ITEM, "Delete")
    except Exception:
        return "no reply"
    return reply.error_name if reply.is_error else None


def get_secret(client, session, path):
    try:
        reply = client.call(path, ITEM, "GetSecret", "o", (session,))
    except Exception:
        return None, "no reply"
    return (None, reply.error_name) if reply.is_error else (bytes(reply.body[0][2]), None)


def search(client, attributes):
    reply = client.call(SERVICE, SECRET_SERVICE, "SearchItems", "a{ss}", (attributes,))
    if reply.is_error:
        return None, reply.error_name
    return reply.body[0] + reply.body[1], None


def stored_secret(client, session, run, key):
    """What the daemon holds for `key` now: its secret, None when absent; (value, number of items)."""
    paths, error = search(client, {"run": run, "key": key})
    if error:
        raise RuntimeError(f"SearchItems failed: {error}")
    if not paths:
        return None, 0
    secret, error = get_secret(client, session, paths[0])
    if error:
        raise RuntimeError(f"GetSecret failed: {error}")
    return secret, len(paths)


# MARK: kill

def scenario_kill(kind, binary, kills=20, clients=4, seed=1, max_run=1.5):
    """SIGKILLs the daemon `kills` times at random moments while `clients` threads write; after each restart
    checks every acknowledged operation (and, for latchkeyd, the file's integrity)."""
    rng = random.Random(seed)
    scratch = tempfile.mkdtemp(prefix=f"stress-kill-{kind}-")
    server = make_server(kind, scratch, binary)
    run = f"kill{seed}"
    # key -> set of what may be stored (None: absent); path of acknowledged creations.
    possible, paths = {}, {}
    lock = threading.Lock()
    totals = {"acknowledged": 0, "unacknowledged": 0, "lost": 0, "resurrected": 0, "wrong": 0, "duplicates": 0,
              "integrity_failures": 0, "restarts": 0, "restart_failures": 0, "stray_files": 0}
    counter = [0]

    def writer(number, stop):
        client = server.client()
        try:
            session = client.open_plain()
        except Exception:
            client.close()
            return
        local = random.Random(rng.random())
        mine = []
        while not stop.is_set():
            with lock:
                counter[0] += 1
                serial = counter[0]
            choice = local.random()
            if choice < 0.5 or not mine:
                key, secret = f"k{number}-{serial}", f"s{serial}".encode()
                with lock:
                    possible[key] = {None, secret}
                path, error = create(client, session, key, secret, run)
                with lock:
                    if error:
                        totals["unacknowledged"] += 1
                        if error.startswith("org.freedesktop.DBus.Error.ServiceUnknown"):
                            possible[key] = {None}  # never reached a daemon
                    else:
                        totals["acknowledged"] += 1
                        possible[key] = {secret}
                        paths[key] = path
                        mine.append(key)
            elif choice < 0.8:
                key = local.choice(mine)
                secret = f"s{serial}".encode()
                with lock:
                    possible[key] = possible[key] | {secret}
                error = set_secret(client, session, paths[key], secret)
                with lock:
                    if error:
                        totals["unacknowledged"] += 1
                    else:
                        totals["acknowledged"] += 1
                        possible[key] = {secret}
            else:
                key = local.choice(mine)
                mine.remove(key)
                with lock:
                    possible[key] = possible[key] | {None}
                error = delete(client, paths[key])
                with lock:
                    if error:
                        totals["unacknowledged"] += 1
                    else:
                        totals["acknowledged"] += 1
                        possible[key] = {None}
            if error:
                break
        client.close()

    def verify():
        """Reads every item of the run in three calls (SearchItems, GetSecrets, and the attributes of the
        items whose creation was not acknowledged) and compares each key with what it may hold."""
        client = server.client()
        try:
            session = client.open_plain()
            found, error = search(client, {"run": run})
            if error:
                raise RuntimeError(f"SearchItems failed: {error}")
            reply = client.call(SERVICE, SECRET_SERVICE, "GetSecrets", "aoo", (found, session), timeout=120)
            if reply.is_error:
                raise RuntimeError(f"GetSecrets failed: {reply.error_name}")
            secrets = {path: bytes(value[2]) for path, value in reply.body[0].items()}
            with lock:
                expected = dict(possible)
                key_of = {path: key for key, path in paths.items()}
            stored = {}
            for path in found:
                key = key_of.get(path)
                if key is None:
                    attributes = client.ok(path, "org.freedesktop.DBus.Properties", "Get", "ss", (ITEM, "Attributes"))
                    key = attributes[0][1].get("key")
                if key in stored:
                    totals["duplicates"] += 1
                stored[key] = secrets.get(path)
            for key, allowed in expected.items():
                value = stored.get(key)
                if value in allowed:
                    continue
                if value is None:
                    totals["lost"] += 1
                elif allowed == {None}:
                    totals["resurrected"] += 1
                else:
                    totals["wrong"] += 1
                # What is there now is what later rounds build on.
                possible[key] = {value}
        finally:
            client.close()

    try:
        server.start()
        for _ in range(kills):
            stop = threading.Event()
            threads = [threading.Thread(target=writer, args=(n, stop)) for n in range(clients)]
            for thread in threads:
                thread.start()
            time.sleep(rng.uniform(0.05, max_run))
            server.kill()
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
            if kind == "gnome-keyring":
                totals["stray_files"] += len(server.stray_files())
            try:
                server.start()
                totals["restarts"] += 1
            except RuntimeError:
                totals["restart_failures"] += 1
                server.stop()
                server.start()
            verify()
            if kind == "latchkeyd" and server.integrity() != "ok":
                totals["integrity_failures"] += 1
        totals["items_checked"] = len(possible)
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return totals


# MARK: load

def load_client(address, number, seconds, run, results):
    """One client process: mixed operations until the deadline, then checks its own items."""
    client = Client(address)
    session = client.open_plain()
    rng = random.Random(number)
    latencies, errors, expected, paths = [], 0, {}, {}
    deadline = time.monotonic() + seconds
    serial = 0
    while time.monotonic() < deadline:
        serial += 1
        choice = rng.random()
        start = time.perf_counter()
        if choice < 0.3 or not paths:
            key, secret = f"c{number}-{serial}", f"s{serial}".encode()
            path, error = create(client, session, key, secret, run)
            if not error:
                expected[key], paths[key] = secret, path
        elif choice < 0.6:
            key = rng.choice(list(paths))
            value, error = get_secret(client, session, paths[key])
            if not error and value != expected[key]:
                errors += 1
        elif choice < 0.75:
            _, error = search(client, {"run": run, "key": rng.choice(list(paths))})
        elif choice < 0.9:
            key = rng.choice(list(paths))
            secret = f"s{serial}".encode()
            error = set_secret(client, session, paths[key], secret)
            if not error:
                expected[key] = secret
        else:
            key = rng.choice(list(paths))
            error = delete(client, paths.pop(key))
            if not error:
                expected[key] = None
        latencies.append(time.perf_counter() - start)
        if error:
            errors += 1
    lost = 0
    for key, secret in expected.items():
        value, _ = stored_secret(client, session, run, key)
        lost += value != secret
    client.close()
    results.put({"latencies": latencies, "errors": errors, "lost": lost, "checked": len(expected)})


def scenario_load(kind, binary, clients=64, seconds=20.0):
    """`clients` processes of mixed operations for `seconds`."""
    scratch = tempfile.mkdtemp(prefix=f"stress-load-{kind}-")
    server = make_server(kind, scratch, binary)
    try:
        server.start()
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        processes = [context.Process(target=load_client, args=(server.bus.address, n, seconds, "load", results))
                     for n in range(clients)]
        peak = [0]
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                try:
                    peak[0] = max(peak[0], proc_status(server.pid)["VmRSS"])
                except OSError:
                    return
                time.sleep(0.2)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.monotonic()
        for process in processes:
            process.start()
        gathered = [results.get(timeout=seconds + 300) for _ in processes]
        elapsed = time.monotonic() - started
        sampling.set()
        sampler.join()
        for process in processes:
            process.join()
        latencies = sorted(x for g in gathered for x in g["latencies"])
        return {"clients": clients, "seconds": seconds, "operations": len(latencies),
                "operations_per_second": round(len(latencies) / elapsed),
                "errors": sum(g["errors"] for g in gathered), "lost_writes": sum(g["lost"] for g in gathered),
                "items_checked": sum(g["checked"] for g in gathered),
                "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1) if latencies else None,
                "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 1)
                if latencies else None,
                "peak_rss_mib": round(peak[0] / 1024, 1), "alive": server.process.poll() is None}
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)


# MARK: sessions and disconnects

def lock_login(client):
    client.ok(SERVICE, SECRET_SERVICE, "Lock", "ao", ([LOGIN],))


def leave_mid_prompt(address):
    """Asks to unlock the login collection, shows the prompt, and leaves the bus at once."""
    client = Client(address)
    try:
        _, prompt = client.service("Unlock", "ao", ([LOGIN],))
        if prompt != "/":
            client.ok(prompt, PROMPT, "Prompt", "s", ("",))
    finally:
        client.close()


def pinentries_showing(log, seen):
    """Pids of pinentries that logged HANGING and were not in `seen`."""
    if not log.exists():
        return []
    pids = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["command"] == "HANGING" and entry["pid"] not in seen:
            pids.append(entry["pid"])
    return pids


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def scenario_sessions(kind, binary, sessions=10_000, connections=100, mid_call=500, mid_prompt=500,
                      timed_prompts=20, workers=10):
    """Sessions opened and dropped, calls and prompts left mid-way; what the daemon holds before and after."""
    scratch = tempfile.mkdtemp(prefix=f"stress-sessions-{kind}-")
    answers = ["hang"] * (mid_prompt + timed_prompts + 10) if kind == "latchkeyd" else ()
    server = make_server(kind, scratch, binary, **({"answers": answers} if kind == "latchkeyd" else {}))
    figures = {"sessions": sessions, "mid_call": mid_call}
    try:
        server.start()
        warm = server.client()
        create(warm, warm.open_plain(), "warm", b"warm", "sessions")
        warm.close()
        time.sleep(0.3)
        figures["before"] = before = probe(server.pid)

        # Sessions: `connections` clients open their share, then leave without closing them.
        per = sessions // connections
        for _ in range(connections):
            client = server.client()
            for _ in range(per):
                client.open_plain()
            client.close()
        figures["after_sessions"] = settle_probe(server.pid, before)

        # Calls whose caller leaves before the reply (a write and a search, sent, then the connection closed).
        from jeepney import DBusAddress, new_method_call
        for n in range(mid_call):
            client = server.client()
            session = client.open_plain()
            collection = DBusAddress(DEFAULT, bus_name="org.freedesktop.secrets", interface=COLLECTION)
            client.connection.send(new_method_call(
                collection, "CreateItem", "a{sv}(oayays)b",
                ({"org.freedesktop.Secret.Item.Label": ("s", "left"),
                  "org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"run": "left", "n": str(n)})},
                 (session, b"", b"secret", "text/plain"), True)))
            service = DBusAddress(SERVICE, bus_name="org.freedesktop.secrets", interface=SECRET_SERVICE)
            client.connection.send(new_method_call(service, "SearchItems", "a{ss}", ({"run": "left"},)))
            client.close()
        figures["after_mid_call"] = settle_probe(server.pid, before)

        if kind == "latchkeyd" and mid_prompt:
            client = server.client()
            lock_login(client)
            client.close()
            # Each caller waits until its pinentry shows, then leaves: how long the pinentry outlives it.
            seen, outlived = set(), []
            for _ in range(timed_prompts):
                client = Client(server.bus.address)
                _, prompt = client.service("Unlock", "ao", ([LOGIN],))
                client.ok(prompt, PROMPT, "Prompt", "s", ("",))
                deadline = time.monotonic() + 20
                showing = []
                while not showing and time.monotonic() < deadline:
                    showing = pinentries_showing(server.log, seen)
                    time.sleep(0.01)
                client.close()
                left = time.monotonic()
                for pid in showing:
                    while not gone(pid) and time.monotonic() - left < 30:
                        time.sleep(0.005)
                    outlived.append(time.monotonic() - left)
                    seen.add(pid)
            outlived.sort()
            figures["pinentry_outlived_caller_ms"] = {
                "p50": round(outlived[len(outlived) // 2] * 1000), "max": round(outlived[-1] * 1000),
                "count": len(outlived)}
            # Then a burst: `mid_prompt` callers in `workers` threads, each leaving right after Prompt.
            peak_children = [0]
            done = threading.Event()

            def watch():
                while not done.is_set():
                    peak_children[0] = max(peak_children[0], len(children_of(server.pid)))
                    time.sleep(0.02)

            watcher = threading.Thread(target=watch)
            watcher.start()
            queue = list(range(mid_prompt))
            queue_lock = threading.Lock()

            def burst():
                while True:
                    with queue_lock:
                        if not queue:
                            return
                        queue.pop()
                    leave_mid_prompt(server.bus.address)

            threads = [threading.Thread(target=burst) for _ in range(workers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            last_left = time.monotonic()
            time.sleep(1.0)
            figures["one_second_after_burst"] = probe(server.pid)
            done.set()
            watcher.join()
            figures["burst_peak_children"] = peak_children[0]
            figures["mid_prompt"] = mid_prompt + timed_prompts
            figures["after_mid_prompt"] = settle_probe(server.pid, before)
            figures["settled_after_s"] = round(time.monotonic() - last_left, 2)
        figures["alive"] = server.process.poll() is None
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return figures


# MARK: prompts

def is_key_derivation_helper(pid):
    """Whether process `pid` is latchkeyd's key deriver or one of its workers (named latchkeyd-kdf)."""
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "latchkeyd-kdf"
    except OSError:
        return False


class PeakWatch:
    """Samples a process's RSS and its number of children every 50 ms on a thread, keeping the highest (the
    children counted are the pinentries: latchkeyd's key derivation helpers are counted apart)."""

    def __init__(self, pid):
        self.pid = pid
        self.rss = 0
        self.children = 0
        self.helpers = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            self.rss = max(self.rss, proc_status(self.pid)["VmRSS"])
            self.children = max(self.children, len(children_of(self.pid)))
            self.helpers = max(self.helpers, len(key_derivation_workers_of(self.pid)))
            time.sleep(0.05)

    def end(self):
        self.stop.set()
        self.thread.join()
        return {"peak_rss_mib": round(self.rss / 1024, 1), "peak_children": self.children,
                "peak_helpers": self.helpers}


def prompt_storm(server, clients, per_client, make_prompt, lock, lock_every, timeout):
    """`clients` connections each make `per_client` prompts (`make_prompt(client, number)`, "/" when none is
    needed) and call Prompt() on all of them at once, while another connection calls `lock(client)` every
    `lock_every` seconds; each waits for its prompts' Completed. The counts, pinentries started, peaks."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    from jeepney.low_level import HeaderFields
    outcome = {"completed": 0, "dismissed": 0, "errors": 0}
    outcome_lock = threading.Lock()
    stop = threading.Event()

    def locker():
        client = server.client()
        while not stop.is_set():
            lock(client)
            time.sleep(lock_every)
        client.close()

    def asker(number):
        client = server.client()
        rule = MatchRule(type="signal", interface=PROMPT, member="Completed")
        Proxy(message_bus, client.connection).AddMatch(rule)
        try:
            with client.connection.filter(rule, bufsize=1000) as queue:
                prompts = []
                for n in range(per_client):
                    prompt = make_prompt(client, number * per_client + n)
                    if prompt == "/":
                        with outcome_lock:
                            outcome["completed"] += 1
                        continue
                    prompts.append(prompt)
                for prompt in prompts:
                    client.ok(prompt, PROMPT, "Prompt", "s", ("",))
                waiting = set(prompts)
                deadline = time.monotonic() + timeout
                while waiting and time.monotonic() < deadline:
                    completed = client.connection.recv_until_filtered(queue, timeout=deadline - time.monotonic())
                    path = completed.header.fields.get(HeaderFields.path)
                    if path in waiting:
                        waiting.discard(path)
                        with outcome_lock:
                            outcome["completed"] += 1
                            outcome["dismissed"] += bool(completed.body[0])
        except Exception:
            with outcome_lock:
                outcome["errors"] += 1
        finally:
            client.close()

    watch = PeakWatch(server.pid)
    locking = threading.Thread(target=locker)
    locking.start()
    started = time.monotonic()
    askers = [threading.Thread(target=asker, args=(n,)) for n in range(clients)]
    for thread in askers:
        thread.start()
    for thread in askers:
        thread.join()
    elapsed = time.monotonic() - started
    stop.set()
    locking.join()
    outcome.update(watch.end())
    log = server.log.read_text().splitlines() if server.log.exists() else []
    outcome.update({"prompts": clients * per_client,
                    "pinentries": sum(1 for line in log if json.loads(line)["command"] == "GETPIN"),
                    "seconds": round(elapsed, 1)})
    return outcome


def scenario_prompts(binary, clients=20, per_client=5, lock_every=0.1, timeout=300):
    """`clients` connections each with `per_client` concurrent Unlock prompts, the pinentry answering the right
    password, while another connection locks the login collection every `lock_every` seconds."""
    scratch = tempfile.mkdtemp(prefix="stress-prompts-")
    server = Latchkeyd(scratch, binary, answers=[f"password {PASSWORD}"] * (clients * per_client * 2))
    try:
        server.start()
        before = probe(server.pid)
        outcome = prompt_storm(
            server, clients, per_client, lambda client, n: client.service("Unlock", "ao", ([LOGIN],))[1],
            lock_login, lock_every, timeout)
        outcome.update({"before": before, "after": settle_probe(server.pid, before),
                        "alive": server.process.poll() is None})
        outcome["peak_hwm_mib"] = round(proc_status(server.pid)["VmHWM"] / 1024, 1)
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


# MARK: memory of a prompt storm

def memory_figures(pid):
    """VmRSS and VmHWM (MiB), threads and children of a process; for latchkeyd, its key deriver's VmRSS and
    VmHWM too (a process of its own, mostly pages it shares with the daemon since the fork)."""
    status = proc_status(pid)
    figures = {"rss_mib": round(status["VmRSS"] / 1024, 1), "hwm_mib": round(status["VmHWM"] / 1024, 1),
               "threads": status["Threads"], "children": len(children_of(pid))}
    for deriver in children_of(pid, with_deriver=True):
        if is_key_derivation_helper(deriver):
            try:
                deriver_status = proc_status(deriver)
            except (OSError, KeyError):
                continue
            figures["deriver_rss_mib"] = round(deriver_status["VmRSS"] / 1024, 1)
            figures["deriver_hwm_mib"] = round(deriver_status["VmHWM"] / 1024, 1)
    return figures


def unlock_through_prompt(client, collection, timeout=120, meanwhile=None):
    """Unlock of `collection` through its prompt; whether it completed not dismissed (None: no prompt needed).
    `meanwhile`, if given, is called every 5 ms while the prompt runs until it returns true."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy

    rule = MatchRule(type="signal", interface=PROMPT, member="Completed")
    Proxy(message_bus, client.connection).AddMatch(rule)
    with client.connection.filter(rule, bufsize=10) as queue:
        _, prompt = client.service("Unlock", "ao", ([collection],))
        if prompt == "/":
            return None
        client.ok(prompt, PROMPT, "Prompt", "s", ("",))
        deadline = time.monotonic() + timeout
        while meanwhile is not None and time.monotonic() < deadline:
            if meanwhile():
                break
            try:
                completed = client.connection.recv_until_filtered(queue, timeout=0.005)
                return not completed.body[0]
            except TimeoutError:
                pass
        completed = client.connection.recv_until_filtered(queue, timeout=max(0.0, deadline - time.monotonic()))
        return not completed.body[0]


def scenario_prompt_memory(kind, binary, clients=20, per_client=5, wait=2.0):
    """Where a prompt storm's memory goes (docs/robustness.md, "Memory of a prompt storm"): the daemon's RSS and
    peak RSS (VmHWM) after start (the login keychain unlocked with the password on standard input), after
    the login collection was locked and unlocked once through a prompt answered with the right password
    (latchkeyd; gnome-keyring, which needs a graphical prompter, through its private UnlockWithMasterPassword),
    then with `clients` × `per_client` Unlock prompts shown and queued whose pinentry never answers (`wait`
    seconds after the last Prompt()), and once their callers left."""
    scratch = tempfile.mkdtemp(prefix="stress-prompt-memory-")
    server = make_server(kind, scratch, binary)
    if kind == "latchkeyd":
        server.set_answers([f"password {PASSWORD}"])
    outcome = {}
    try:
        server.start()
        time.sleep(0.5)
        outcome["after_start"] = memory_figures(server.pid)
        client = server.client()
        lock_login(client) if kind == "latchkeyd" else client.ok(SERVICE, SECRET_SERVICE, "Lock", "ao", ([DEFAULT],))
        if kind == "latchkeyd":
            outcome["unlocked"] = unlock_through_prompt(client, LOGIN)
        else:
            session = client.open_plain()
            client.ok(SERVICE, GNOME_KEYRING, "UnlockWithMasterPassword", "o(oayays)",
                      (DEFAULT, (session, b"", PASSWORD.encode(), "text/plain")))
            outcome["unlocked"] = True
        outcome["after_unlock"] = memory_figures(server.pid)
        if kind == "latchkeyd":
            server.set_answers(["hang"] * (clients * per_client))
            lock_login(client)
        else:
            client.ok(SERVICE, SECRET_SERVICE, "Lock", "ao", ([DEFAULT],))
        collection = LOGIN if kind == "latchkeyd" else DEFAULT
        waiting = []
        for _ in range(clients):
            asker = server.client()
            waiting.append(asker)
            for _ in range(per_client):
                _, prompt = asker.service("Unlock", "ao", ([collection],))
                if prompt != "/":
                    asker.ok(prompt, PROMPT, "Prompt", "s", ("",))
        time.sleep(wait)
        outcome["prompts"] = clients * per_client
        outcome["with_prompts_waiting"] = memory_figures(server.pid)
        for asker in waiting:
            asker.close()
        client.close()
        time.sleep(1.0)
        outcome["after_callers_left"] = memory_figures(server.pid)
        outcome["alive"] = server.process.poll() is None
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


# MARK: one application's prompts against another's

READER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from dbus_client import Client
client = Client(sys.argv[2])
session = client.open_plain()
while True:  # Once, or (a flooding application) again each time the call ends, until it is ended.
    started = time.monotonic()
    try:
        reply = client.call(sys.argv[3], "org.freedesktop.Secret.Item", "GetSecret", "o", (session,), timeout=25)
        outcome = reply.error_name if reply.is_error else "secret"
    except Exception as error:
        outcome = "no reply (%s)" % type(error).__name__
    print(json.dumps({"outcome": outcome, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    if len(sys.argv) < 5:
        break
"""


def read_as(program, server, path, again=False):
    """A reader process: the application `program` (a script of its own) asking for the secret at `path`, once,
    or `again` each time its call ends, until it is ended."""
    return subprocess.Popen([sys.executable, str(program), str(ROOT / "Tests" / "Integration"), server.bus.address,
                             path] + (["again"] if again else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def scenario_prompt_flood(binary, flood=30, answer_seconds=1.0, timeout=180):
    """One application asks for the secrets of `flood` items it is not trusted with (one process and connection
    each, all at once, each asking again whenever its call ends); once its first prompt shows and the rest had time to queue, another application asks for
    one item. Every prompt is answered Allow once after `answer_seconds` (a person clicking through). Where the
    second application's prompt came among those shown, how long its GetSecret waited, and how it ended."""
    scratch = tempfile.mkdtemp(prefix="stress-prompt-flood-")
    server = Latchkeyd(scratch, binary, answers=[f"wait {answer_seconds} ok"] * (flood + 10))
    try:
        server.start()
        flooder, real = pathlib.Path(scratch) / "flooding-app.py", pathlib.Path(scratch) / "real-app.py"
        flooder.write_text(READER)
        real.write_text(READER)
        client = server.client()
        session = client.open_plain()
        # Made by this process: they trust it, and neither reader.
        paths = [client.create_item(session, {"key": f"k{n}"}, b"flooded", label=f"k{n}")
                 for n in range(flood + 1)]
        client.close()
        started = time.monotonic()
        flooding = [read_as(flooder, server, path, again=True) for path in paths[:flood]]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not server.log.exists():
            time.sleep(0.05)
        time.sleep(2 * answer_seconds + 1)  # The rest of the flood queues meanwhile.
        asked = time.monotonic()
        shown_already = server.log.read_text().count('"command": "SETDESC"')
        reading = read_as(real, server, paths[flood])
        result = json.loads(reading.communicate(timeout=timeout)[0])
        for process in flooding:
            process.terminate()
        results = [json.loads(line) for process in flooding for line in process.communicate(timeout=timeout)[0]
                   .splitlines()]
        entries = [json.loads(line) for line in server.log.read_text().splitlines()]
        descriptions = [e["argument"] for e in entries if e["command"] == "SETDESC"]
        shown = [n for n, text in enumerate(descriptions) if str(real) in text]
        shown_before = sum(1 for e in entries if e["command"] == "SETDESC" and str(flooder) in e["argument"])
        return {"flood": flood, "answer_seconds": answer_seconds,
                # Prompts shown after the one showing when it asked, before its own (None: never shown).
                "shown_before_real": shown[0] - shown_already if shown else None,
                "real_outcome": result["outcome"], "real_waited_s": result["seconds"],
                "asked_after_flood_s": round(asked - started, 1),
                "flood_prompts_shown": shown_before,
                "flood_outcomes": {o: sum(1 for r in results if r["outcome"] == o)
                                   for o in sorted({r["outcome"] for r in results})}}
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)


# MARK: own-password prompts

def create_own_password_collection(client, label, password):
    """A collection with `password` as its own password (gnome-keyring's CreateWithMasterPassword); its path."""
    session = client.open_plain()
    return client.ok(SERVICE, GNOME_KEYRING, "CreateWithMasterPassword", "a{sv}(oayays)",
                     ({"org.freedesktop.Secret.Collection.Label": ("s", label)},
                      (session, b"", password.encode(), "text/plain")), timeout=60)[0]


def own_password_prompt(client, collection, change):
    """Asks to change the password of `collection` (ChangeWithPrompt) or to unlock it; the prompt, "/" if none."""
    if change:
        return client.ok(SERVICE, GNOME_KEYRING, "ChangeWithPrompt", "o", (collection,))[0]
    return client.service("Unlock", "ao", ([collection],))[1]


def scenario_own_prompts(binary, clients=20, per_client=5, lock_every=0.1, timeout=600):
    """`clients` connections each with `per_client` concurrent prompts on a collection with its own password
    (every other one a ChangeWithPrompt, to the same password, the rest Unlock), every answer the right
    password, while another connection locks it every `lock_every` seconds; then as many prompts whose callers
    leave right after Prompt, the pinentry hanging, and what is left one second after the last caller left."""
    scratch = tempfile.mkdtemp(prefix="stress-own-prompts-")
    password = "own collection password"
    # An Unlock takes one answer, a change three (the current password, the new one, again): all the same.
    server = Latchkeyd(scratch, binary, answers=[f"password {password}"] * (clients * per_client * 3))
    try:
        server.start()
        setup = server.client()
        collection = create_own_password_collection(setup, "Own", password)
        # Warmed up by a password change (which waits for its checkpoint): SQLite keeps the descriptor of a
        # checkpoint's connection open for the next while the daemon's own connection holds a lock.
        session = setup.open_plain()
        same = (session, b"", password.encode(), "text/plain")
        setup.ok(SERVICE, GNOME_KEYRING, "ChangeWithMasterPassword", "o(oayays)(oayays)", (collection, same, same),
                 timeout=60)
        setup.close()
        time.sleep(0.5)
        before = probe(server.pid)

        def lock(client):
            client.ok(SERVICE, SECRET_SERVICE, "Lock", "ao", ([collection],))

        outcome = prompt_storm(
            server, clients, per_client, lambda client, n: own_password_prompt(client, collection, n % 2 == 1),
            lock, lock_every, timeout)
        outcome.update({"before": before, "after": settle_probe(server.pid, before)})

        # Then callers that leave: each shows its prompts (the first pinentry hangs) and leaves the bus.
        server.set_answers(["hang"] * (clients * per_client * 3))
        client = server.client()
        lock(client)
        client.close()
        watch = PeakWatch(server.pid)

        def leaver(number):
            client = server.client()
            try:
                prompts = [own_password_prompt(client, collection, (number + n) % 2 == 1) for n in range(per_client)]
                for prompt in prompts:
                    client.ok(prompt, PROMPT, "Prompt", "s", ("",))
                time.sleep(0.2)
            finally:
                client.close()

        leavers = [threading.Thread(target=leaver, args=(n,)) for n in range(clients)]
        for thread in leavers:
            thread.start()
        for thread in leavers:
            thread.join()
        time.sleep(1.0)
        outcome["left"] = {"prompts": clients * per_client, "pinentries_one_second_after": len(children_of(server.pid))}
        outcome["left"].update(watch.end())
        outcome["left"]["after"] = settle_probe(server.pid, before)
        outcome["peak_hwm_mib"] = round(proc_status(server.pid)["VmHWM"] / 1024, 1)
        outcome["alive"] = server.process.poll() is None
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


# MARK: full disk

def scenario_full_disk(binary, size_mib=8, items_before=20):
    """The keychain directory on a `size_mib` tmpfs: filled up, a write refused, reads served, writes resumed
    once space is freed, and after a restart everything acknowledged is there. Root only."""
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="stress-disk-"))
    mount = scratch / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700", "tmpfs", str(mount)], check=True)
    server = Latchkeyd(scratch, binary, keychains=mount / "keychains")
    figures = {"size_mib": size_mib}
    try:
        server.start()
        client = server.client()
        session = client.open_plain()
        acknowledged = {}
        for n in range(items_before):
            key = f"before{n}"
            _, error = create(client, session, key, key.encode() * 10, "disk")
            assert error is None, error
            acknowledged[key] = key.encode() * 10
        filler = mount / "filler"
        descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(descriptor, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(descriptor)
        # Writes until one is refused: each refusal's error name.
        refused = []
        for n in range(200):
            key = f"full{n}"
            _, error = create(client, session, key, os.urandom(2048), "disk")
            if error:
                refused.append(error)
                if len(refused) >= 3:
                    break
            else:
                acknowledged[key] = None  # stored while some space was left; its secret is random
        figures["refusal_errors"] = sorted(set(refused))
        figures["writes_refused"] = len(refused)
        readable = 0
        for key, secret in acknowledged.items():
            value, _ = stored_secret(client, session, "disk", key)
            readable += value is not None and (secret is None or value == secret)
        figures["reads_while_full"] = f"{readable}/{len(acknowledged)}"
        figures["alive_while_full"] = server.process.poll() is None
        filler.unlink()
        resumed = 0
        for n in range(10):
            key = f"after{n}"
            _, error = create(client, session, key, key.encode(), "disk")
            if error is None:
                acknowledged[key] = key.encode()
                resumed += 1
        figures["writes_after_freeing"] = f"{resumed}/10"
        client.close()
        server.stop()
        server.start()
        client = server.client()
        session = client.open_plain()
        present = 0
        for key, secret in acknowledged.items():
            value, _ = stored_secret(client, session, "disk", key)
            present += value is not None and (secret is None or value == secret)
        client.close()
        figures["present_after_restart"] = f"{present}/{len(acknowledged)}"
        figures["lost"] = len(acknowledged) - present
        figures["integrity"] = server.integrity()
    finally:
        server.close()
        if subprocess.run(["umount", str(mount)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return figures


# MARK: flood

SESSION_COLLECTION = "/org/freedesktop/secrets/collection/session"


def descriptor_limits(pid):
    """The soft and hard RLIMIT_NOFILE of a process."""
    for line in pathlib.Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    return None


def unlock_with_prompt(client, path, timeout=30):
    """Unlock of `path` through its prompt: "unlocked", "dismissed", or "no prompt" (unlocked at once)."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    _, prompt = client.service("Unlock", "ao", ([path],))
    if prompt == "/":
        return "no prompt"
    rule = MatchRule(type="signal", interface=PROMPT, member="Completed", path=prompt)
    Proxy(message_bus, client.connection).AddMatch(rule)
    with client.connection.filter(rule) as queue:
        client.ok(prompt, PROMPT, "Prompt", "s", ("",))
        completed = client.connection.recv_until_filtered(queue, timeout=timeout)
    return "dismissed" if completed.body[0] else "unlocked"


def tally(outcomes, error):
    outcomes[error or "ok"] = outcomes.get(error or "ok", 0) + 1


def scenario_flood(binary, collections=10_000, items=10_000, item_bytes=512 * 1024, descriptor_limit=1024,
                   extra_args=()):
    """One client makes collections and items until refused; what the daemon holds after, and whether the
    next unlock prompt still shows."""
    scratch = tempfile.mkdtemp(prefix="latchkey-flood-")
    server = Latchkeyd(scratch, binary, answers=[f"password {PASSWORD}"], extra_args=extra_args,
                       descriptor_limit=descriptor_limit)
    figures = {"collection_attempts": collections, "item_attempts": items, "item_bytes": item_bytes}
    try:
        server.start()
        client = server.client()
        figures["before"] = probe(server.pid)
        figures["descriptor_limits"] = descriptor_limits(server.pid)
        outcomes = {}
        started = time.monotonic()
        for number in range(collections):
            reply = client.call(SERVICE, SECRET_SERVICE, "CreateCollection", "a{sv}s",
                                ({"org.freedesktop.Secret.Collection.Label": ("s", f"flood {number}")}, ""))
            tally(outcomes, reply.error_name if reply.is_error else None)
        figures["collections"] = {"outcomes": outcomes, "seconds": round(time.monotonic() - started, 1)}
        figures["after_collections"] = probe(server.pid)

        session = client.open_plain()
        secret = os.urandom(item_bytes)
        outcomes = {}
        started = time.monotonic()
        for number in range(items):
            properties = {"org.freedesktop.Secret.Item.Label": ("s", f"flood {number}"),
                          "org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"flood": str(number)})}
            reply = client.call(SESSION_COLLECTION, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                                (properties, (session, b"", secret, "text/plain"), False), timeout=60)
            tally(outcomes, reply.error_name if reply.is_error else None)
        figures["items"] = {"outcomes": outcomes, "seconds": round(time.monotonic() - started, 1)}
        figures["after_items"] = probe(server.pid)
        started = time.monotonic()
        client.service("Lock", "ao", ([SESSION_COLLECTION],))
        figures["session_lock_ms"] = round((time.monotonic() - started) * 1000)
        started = time.monotonic()
        figures["session_unlock"] = unlock_with_prompt(client, SESSION_COLLECTION)
        figures["session_unlock_ms"] = round((time.monotonic() - started) * 1000)
        figures["peak_rss_mib"] = round(proc_status(server.pid)["VmHWM"] / 1024, 1)

        lock_login(client)
        figures["login_unlock_after_flood"] = unlock_with_prompt(client, LOGIN)
        figures["pinentries_shown"] = sum(1 for line in server.log.read_text().splitlines()
                                          if json.loads(line)["command"] == "GETPIN") if server.log.exists() else 0
        figures["alive"] = server.process.poll() is None
        client.close()
        return figures
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)


# MARK: command line

def main():
    # A SIGTERM (a bounded run's timeout) unwinds like an exception, so each scenario's `finally` stops its
    # daemon and bus and removes its files.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latchkeyd", required=True, help="the latchkeyd binary")
    parser.add_argument("--only", action="append", choices=["kill", "load", "sessions", "prompts", "own-prompts", "prompt-flood",
                                                         "full-disk", "flood", "prompt-memory"],
                        help="run only these scenarios (repeatable)")
    parser.add_argument("--no-gnome-keyring", action="store_true", help="leave out gnome-keyring-daemon")
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--disconnects", type=int, default=500)
    parser.add_argument("--json", help="also write the figures to this file")
    arguments = parser.parse_args()
    chosen = arguments.only or ["kill", "load", "sessions", "prompts", "own-prompts", "prompt-flood", "full-disk", "flood",
                                "prompt-memory"]
    kinds = ["latchkeyd"] + ([] if arguments.no_gnome_keyring or not shutil.which("gnome-keyring-daemon")
                             else ["gnome-keyring"])
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{os.uname().machine}, {os.cpu_count()} cpus, {os.uname().release}",
              "load_at_start": load_context(), "results": {}}
    print(f"# robustness {report['date']} on {report['machine']}, load {report['load_at_start']['loadavg']}")

    def record(name, kind, figures):
        report["results"].setdefault(name, {})[kind] = figures
        print(f"{name:10} {kind:14} {json.dumps(figures)}", flush=True)

    for kind in kinds:
        if "kill" in chosen:
            record("kill", kind, scenario_kill(kind, arguments.latchkeyd, kills=arguments.kills))
        if "load" in chosen:
            record("load", kind, scenario_load(kind, arguments.latchkeyd, clients=arguments.clients,
                                               seconds=arguments.seconds))
        if "sessions" in chosen:
            record("sessions", kind, scenario_sessions(
                kind, arguments.latchkeyd, sessions=arguments.sessions, mid_call=arguments.disconnects,
                mid_prompt=arguments.disconnects if kind == "latchkeyd" else 0))
        if "prompt-memory" in chosen:
            record("prompt-memory", kind, scenario_prompt_memory(kind, arguments.latchkeyd))
    if "prompts" in chosen:
        record("prompts", "latchkeyd", scenario_prompts(arguments.latchkeyd))
    if "own-prompts" in chosen:
        record("own-prompts", "latchkeyd", scenario_own_prompts(arguments.latchkeyd))
    if "prompt-flood" in chosen:
        record("prompt-flood", "latchkeyd", scenario_prompt_flood(arguments.latchkeyd))
    if "full-disk" in chosen:
        if os.geteuid() == 0:
            record("full-disk", "latchkeyd", scenario_full_disk(arguments.latchkeyd))
        else:
            print("full-disk: skipped (needs root to mount a tmpfs)")
    if "flood" in chosen:
        record("flood", "latchkeyd", scenario_flood(arguments.latchkeyd))
    report["load_at_end"] = load_context()
    if arguments.json:
        pathlib.Path(arguments.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
