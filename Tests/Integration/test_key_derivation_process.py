"""scrypt in a one-shot helper process (docs/robustness.md, "Memory of a prompt storm"): latchkeyd runs each
password derivation of production cost in a helper started from its own program, so the 64 MiB scrypt needs
never become the daemon's peak. Asserted: the daemon's peak RSS (VmHWM) after an unlock through the prompt
stays far below scrypt's 64 MiB; prompts that wait hold no thread; the helper refuses to run traced, answers
junk with one line and a non-zero status and nothing on its output, derives exactly what OpenSSL's scrypt
derives; the daemon survives its helper killed mid-derivation (that unlock fails, the next one works)."""

import hashlib
import os
import pwd
import pathlib
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest

from conftest import LOGIN_PASSWORD, binary
from dbus_client import Client

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "Benchmarks"))
import robustness  # noqa: E402

LOGIN = "/org/freedesktop/secrets/collection/login"
HELPER_ARGUMENT = "--derive-password-key"
SCRYPT_MIB = 64  # KDFParameters.production: 128 * r * N = 128 * 8 * 2^16 bytes


@pytest.fixture
def latchkeyd():
    return binary("latchkeyd")


def request(password, salt=b"0123456789abcdef", log_n=16, r=8, p=2, magic=b"LKD1"):
    """A key derivation request as latchkeyd writes it to its helper."""
    return magic + struct.pack(">BIIII", log_n, r, p, len(salt), len(password)) + salt + password


def run_helper(latchkeyd, data, prefix=()):
    return subprocess.run([*prefix, latchkeyd, HELPER_ARGUMENT], input=data, capture_output=True, timeout=60,
                          env={})


def test_an_unlock_through_the_prompt_leaves_the_daemon_far_below_scrypts_memory(latchkeyd):
    figures = robustness.scenario_prompt_memory("latchkeyd", latchkeyd, clients=4, per_client=5, wait=1.0)
    assert figures["unlocked"] is True, figures
    # Two production derivations ran (the login keychain at start, the unlock through the prompt): in the
    # daemon, each would have raised its peak by 64 MiB over the baseline.
    assert figures["after_unlock"]["hwm_mib"] < SCRYPT_MIB * 0.75, figures
    # Waiting prompts hold no thread of their own: at most the showing prompt's (its pinentry).
    waiting = figures["with_prompts_waiting"]
    assert waiting["threads"] <= figures["after_unlock"]["threads"] + 1, figures
    assert waiting["children"] <= 1, figures
    assert figures["after_callers_left"]["threads"] <= figures["after_unlock"]["threads"], figures
    assert figures["alive"], figures


def test_the_helper_derives_what_openssl_scrypt_derives_and_nothing_else(latchkeyd):
    password, salt = "pässword".encode(), os.urandom(16)
    done = run_helper(latchkeyd, request(password, salt))
    assert done.returncode == 0, done.stderr
    assert done.stdout == hashlib.scrypt(password, salt=salt, n=1 << 16, r=8, p=2, maxmem=256 << 20, dklen=32)
    assert done.stderr == b""


@pytest.mark.parametrize("data, words", [
    (b"", "incomplete"),
    (b"junk\n", "incomplete"),
    (b"x" * 200, "not a key derivation request"),
    (request(b"pw", magic=b"LKD0"), "not a key derivation request"),
    (request(b"pw", log_n=40), "out of range"),
    (request(b"pw", r=0), "out of range"),
    (request(b"pw")[:-1], "incomplete"),
    (request(b"pw") + b"more", "too long"),
    (request(b"pw")[:17] + struct.pack(">I", 1 << 30), "too long"),
])
def test_the_helper_started_by_another_program_with_junk_says_so_and_writes_nothing(latchkeyd, data, words):
    done = run_helper(latchkeyd, data)
    assert done.returncode == 2, done
    assert done.stdout == b"", done
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith(f"latchkeyd {HELPER_ARGUMENT}: "), lines


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_traced_helper_refuses_before_it_reads_the_password(latchkeyd, tmp_path):
    trace = tmp_path / "trace"
    done = run_helper(latchkeyd, request(b"secret password"), prefix=("strace", "-f", "-e", "trace=read",
                                                                      "-o", str(trace)))
    assert done.returncode == 3, done
    assert done.stdout == b""
    assert "traced by process" in done.stderr.decode(), done.stderr
    # Nothing of the request was read (the status file was, for the check).
    assert "secret password" not in trace.read_text()
    assert "LKD1" not in trace.read_text()


def deriving_helpers_of(pid):
    """The daemon's key derivation workers that are deriving: scrypt's 64 MiB is filling (VmRSS over the
    deriver's by 16 MiB or more)."""
    found = []
    derivers = [child for child in robustness.children_of(pid, with_deriver=True)
                if robustness.is_key_derivation_helper(child)]
    for child in robustness.key_derivation_workers_of(pid):
        try:
            deriver = robustness.proc_status(derivers[0])["VmRSS"]
            if robustness.proc_status(child)["VmRSS"] >= deriver + 16 * 1024:
                found.append(child)
        except (OSError, KeyError):  # Gone meanwhile.
            pass
    return found


def test_the_daemon_survives_its_helper_killed_mid_derivation(make_daemon):
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"] * 2).start()
    pid = daemon.process.pid
    client = Client(daemon.bus.address)
    client.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", "ao", ([LOGIN],))

    killed = []

    def kill_helper():
        for helper in deriving_helpers_of(pid):
            try:
                os.kill(helper, signal.SIGKILL)
                killed.append(helper)
            except ProcessLookupError:  # It ended first: the next one is caught instead.
                pass
        return bool(killed)

    assert robustness.unlock_through_prompt(client, LOGIN, meanwhile=kill_helper) is False
    assert killed, "no helper seen deriving during the unlock"
    assert daemon.alive()
    deadline = time.monotonic() + 5
    while robustness.children_of(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert robustness.children_of(pid) == [], "a helper or pinentry left behind (a zombie?)"
    # The daemon saw that no key came; the deriver, reaping its worker (within a fifth of a second), why.
    deadline = time.monotonic() + 5
    while "ended by signal" not in daemon.stderr.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = daemon.stderr.read_text()
    assert "latchkeyd: the key derivation process failed: it was ended by signal 9" in log, log
    assert "latchkeyd: the key derivation process failed: it gave no key" in log, log
    assert robustness.unlock_through_prompt(client, LOGIN) is True
    locked = client.ok(LOGIN, "org.freedesktop.DBus.Properties", "Get", "ss",
                       ("org.freedesktop.Secret.Collection", "Locked"))[0]
    assert locked == ("b", False)
    client.close()


def running(pid):
    """Whether process `pid` exists and has not ended (a zombie has)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_helper_does_not_outlive_the_daemon(make_daemon):
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    pid = daemon.process.pid
    client = Client(daemon.bus.address)
    client.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", "ao", ([LOGIN],))
    seen, left = [], []

    def kill_daemon():
        seen.extend(deriving_helpers_of(pid))
        if not seen:
            return False
        daemon.process.kill()
        daemon.process.wait(timeout=10)
        # Killed with it (PR_SET_PDEATHSIG), not left to finish its derivation (a third of a second or more).
        # Ended: gone, or a zombie waiting for whoever inherited it to reap it.
        deadline = time.monotonic() + 0.25
        while any(map(running, seen)) and time.monotonic() < deadline:
            time.sleep(0.01)
        left.extend(filter(running, seen))
        return True

    with pytest.raises(TimeoutError):  # The daemon went: the prompt never completes.
        robustness.unlock_through_prompt(client, LOGIN, timeout=5, meanwhile=kill_daemon)
    assert seen, "no helper seen deriving during the unlock"
    assert left == [], "the helper outlived the daemon"


def test_with_its_deriver_killed_the_daemon_derives_in_its_own_memory(latchkeyd, tmp_path):
    """The deriver killed (a process of the user may signal it): the next unlock is derived in the daemon, as
    before there was a deriver (its peak shows scrypt's 64 MiB), with a line saying why, once."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    server = robustness.Latchkeyd(scratch, latchkeyd, answers=[f"password {robustness.PASSWORD}"] * 2)
    try:
        server.start()
        assert robustness.memory_figures(server.pid)["hwm_mib"] < SCRYPT_MIB * 0.75
        derivers = [child for child in robustness.children_of(server.pid, with_deriver=True)
                    if robustness.is_key_derivation_helper(child)]
        assert len(derivers) == 1, derivers
        os.kill(derivers[0], signal.SIGKILL)
        client = server.client()
        for _ in range(2):
            robustness.lock_login(client)
            assert robustness.unlock_through_prompt(client, LOGIN) is True
        client.close()
        assert robustness.memory_figures(server.pid)["hwm_mib"] > SCRYPT_MIB
        log = (scratch / "daemon.stderr").read_text()
        said = "latchkeyd: key derivation runs in this process from now on: the key derivation process is gone"
        assert log.count(said) == 1, log
        assert robustness.children_of(server.pid, with_deriver=True) == [], "the killed deriver was not reaped"
    finally:
        server.close()


def test_a_key_derivation_worker_is_forked_from_the_deriver_never_started_anew(make_daemon):
    """No process that receives a password was ever dumpable: the worker deriving an unlock's key is a fork of
    the deriver, which is a fork of the daemon made at its start; neither ran `exec` (which makes a process
    dumpable until its start-up code runs, a window in which a process of the same user could open its memory).
    A process that ran exec has its own command line; a fork keeps its parent's."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    pid = daemon.process.pid
    command_line = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    derivers = [child for child in robustness.children_of(pid, with_deriver=True)
                if robustness.is_key_derivation_helper(child)]
    assert len(derivers) == 1, derivers
    assert pathlib.Path(f"/proc/{derivers[0]}/cmdline").read_bytes() == command_line
    client = Client(daemon.bus.address)
    client.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", "ao", ([LOGIN],))
    workers = {}

    def look():
        for worker in robustness.key_derivation_workers_of(pid):
            try:
                stat = pathlib.Path(f"/proc/{worker}/stat").read_text()
                seen_command_line = pathlib.Path(f"/proc/{worker}/cmdline").read_bytes()
                if seen_command_line:  # Empty once it has exited (a zombie until the deriver reaps it).
                    workers[worker] = (seen_command_line, int(stat.rsplit(")", 1)[1].split()[1]))
            except OSError:
                pass
        return False

    assert robustness.unlock_through_prompt(client, LOGIN, meanwhile=look) is True
    client.close()
    assert workers, "no key derivation worker seen during the unlock"
    for worker, (seen_command_line, parent) in workers.items():
        assert seen_command_line == command_line, (worker, seen_command_line)
        assert parent == derivers[0], (worker, parent)


def test_latchkeyd_is_not_dumpable_before_its_swift_code_runs(latchkeyd, tmp_path):
    """The window after exec in which a process of the same user could open /proc/PID/mem or attach: latchkeyd
    (daemon and helper alike) is made non-dumpable by a C constructor at image start, before Swift's runtime
    and `main`. Observed on `latchkeyd --help` run as an unprivileged user and stalled writing its help into a
    full pipe (argument parsing, before any Swift hardening): the kernel makes a non-dumpable process's /proc
    files root's, so a same-user process can neither open its memory nor ptrace it."""
    user = pwd.getpwnam("nobody")
    program = tmp_path / "latchkeyd"
    shutil.copy(latchkeyd, program)
    tmp_path.chmod(0o755)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    process = subprocess.Popen(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                                str(program), "--help"], stdout=write_end, stderr=subprocess.DEVNULL, env={})
    os.close(write_end)
    try:
        deadline = time.monotonic() + 20
        status = pathlib.Path(f"/proc/{process.pid}/status")
        while time.monotonic() < deadline:
            text = status.read_text()
            uid = int(next(line for line in text.splitlines() if line.startswith("Uid:")).split()[1])
            state = next(line for line in text.splitlines() if line.startswith("State:"))
            # Running as the user now, and blocked in its write (S), past the loader and into Swift's code.
            if uid == user.pw_uid and "S" in state.split()[1] and "latchkeyd" in (status.parent / "comm").read_text():
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"latchkeyd --help never blocked writing: {status.read_text()}")
        time.sleep(0.3)
        assert process.poll() is None, "latchkeyd --help ended without filling the pipe"
        owner = (status.parent / "mem").stat().st_uid
        assert owner == 0, f"/proc/{process.pid}/mem belongs to uid {owner}: latchkeyd was dumpable in main"
    finally:
        process.kill()
        process.wait()
        os.close(read_end)


def test_an_unlock_works_when_latchkeyd_inherits_sigchld_ignored(make_daemon):
    """A parent that ignores SIGCHLD passes that on through exec; latchkeyd sets it back to the default, so the
    kernel does not reap its key derivation helper before waitpid can read its status."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    finally:
        signal.signal(signal.SIGCHLD, previous)
    client = Client(daemon.bus.address)
    client.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", "ao", ([LOGIN],))
    assert robustness.unlock_through_prompt(client, LOGIN) is True
    assert "its status is unknown" not in daemon.stderr.read_text()
    client.close()
    ignored = int(next(line for line in pathlib.Path(f"/proc/{daemon.process.pid}/status").read_text().splitlines()
                       if line.startswith("SigIgn:")).split()[1], 16)
    assert not ignored & (1 << (signal.SIGCHLD - 1)), "latchkeyd still ignores SIGCHLD"
