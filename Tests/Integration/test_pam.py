"""pam_latchkey in a real PAM stack: a real user (useradd, chpasswd), a
service file in /etc/pam.d stacking pam_unix then the module, pamtester and
passwd driving it, the user's own session bus at $XDG_RUNTIME_DIR/bus, and
secret-tool run as the user to see the result. Needs root (CI runs as root)."""

import os
import pathlib
import pwd
import resource
import secrets
import shutil
import signal
import sqlite3
import socket
import subprocess
import tempfile
import threading
import time

import pytest

import control_client as control
from conftest import ROOT, SCRIPTED_PINENTRY, binary

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates users and PAM services")

MODULE_BUILD = ROOT / ".build" / "release" / "libpam_latchkey.so"
PASSWORD = "Login-passw0rd-1"
NEW_PASSWORD = "Changed-passw0rd-2"


class Syslog:
    """Collects what is logged to /dev/log while a test runs."""

    def __init__(self):
        self.saved = None
        if os.path.lexists("/dev/log"):
            self.saved = "/dev/log.latchkey-saved"
            os.rename("/dev/log", self.saved)
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind("/dev/log")
        os.chmod("/dev/log", 0o666)
        self.lines = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                data = self.socket.recv(8192)
            except OSError:
                return
            self.lines.append(data.decode(errors="replace"))

    def text(self):
        time.sleep(0.1)
        return "\n".join(self.lines)

    def close(self):
        self.socket.close()
        os.unlink("/dev/log")
        if self.saved:
            os.rename(self.saved, "/dev/log")


@pytest.fixture
def syslog():
    s = Syslog()
    yield s
    s.close()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The module as pam_latchkey.so and latchkeyd and the scripted pinentry
    where the test user can run them (the checkout may be in root's home)."""
    if not MODULE_BUILD.exists():
        pytest.fail(f"{MODULE_BUILD} is missing: swift build -c release --product pam_latchkey")
    directory = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-pam-"))
    os.chmod(directory, 0o755)
    shutil.copy(MODULE_BUILD, directory / "pam_latchkey.so")
    shutil.copy(binary("latchkeyd"), directory / "latchkeyd")
    shutil.copy(SCRIPTED_PINENTRY, directory / "scripted-pinentry")
    for name in ("latchkeyd", "scripted-pinentry", "pam_latchkey.so"):
        os.chmod(directory / name, 0o755)
    yield directory
    shutil.rmtree(directory)


class User:
    """A real account with a password, a runtime directory and a session bus."""

    def __init__(self, installed):
        self.name = "lk" + secrets.token_hex(4)
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", self.name], check=True)
        subprocess.run(["chpasswd"], input=f"{self.name}:{PASSWORD}\n", text=True, check=True)
        entry = pwd.getpwnam(self.name)
        self.uid, self.gid, self.home = entry.pw_uid, entry.pw_gid, pathlib.Path(entry.pw_dir)
        self.runtime = pathlib.Path(f"/run/user/{self.uid}")
        self.runtime.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chown(self.runtime, self.uid, self.gid)
        self.bus_address = f"unix:path={self.runtime}/bus"
        self.bus_pid = None
        self.installed = installed
        self.pinentry_answers = self.home / "pinentry-answers"
        self.pinentry_log = self.home / "pinentry-log"
        # The PINENTRY a login passes on: root's program (the module passes on no other) that runs the scripted
        # pinentry with this user's answers (the module passes on no SCRIPTED_PINENTRY_* variable).
        self.pinentry = installed / f"pinentry-{self.name}"
        self.pinentry.write_text(f"#!/bin/sh\nexport SCRIPTED_PINENTRY_ANSWERS='{self.pinentry_answers}'"
                                 f" SCRIPTED_PINENTRY_LOG='{self.pinentry_log}'\n"
                                 f"exec '{installed / 'scripted-pinentry'}' \"$@\"\n")
        os.chmod(self.pinentry, 0o755)
        self.set_pinentry_answers([])
        self.start_bus()

    def start_bus(self):
        out = self.run(["dbus-daemon", "--session", f"--address={self.bus_address}", "--fork", "--print-pid=1"],
                       check=True).stdout
        self.bus_pid = int(out.split()[0])

    def set_pinentry_answers(self, answers):
        self.pinentry_answers.write_text("".join(a + "\n" for a in answers))
        pos = pathlib.Path(str(self.pinentry_answers) + ".pos")
        if pos.exists():
            pos.unlink()
        for path in (self.pinentry_answers,):
            os.chown(path, self.uid, self.gid)

    def env(self):
        return {
            "HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "PATH": "/usr/bin:/bin",
            "XDG_RUNTIME_DIR": str(self.runtime), "DBUS_SESSION_BUS_ADDRESS": self.bus_address,
            "PINENTRY": str(self.pinentry),
        }

    def run(self, argv, input=None, check=False, timeout=30):
        """Runs argv as the user, with the user's environment."""
        return subprocess.run(
            ["runuser", "-u", self.name, "--", "env", "-i", *[f"{k}={v}" for k, v in self.env().items()], *argv],
            input=input, capture_output=True, text=True, check=check, timeout=timeout)

    def secret_tool(self, *args, input=None):
        return self.run(["secret-tool", *args], input=input)

    @property
    def keychain(self):
        return self.home / ".local" / "share" / "latchkey" / "keychains" / "login.keychain-db"

    def daemon_pids(self):
        """Live latchkeyd processes of the user (zombies left to a PID 1 that does not reap are not counted)."""
        out = subprocess.run(["ps", "-u", str(self.uid), "-o", "pid=,stat=,comm="], capture_output=True, text=True)
        rows = [line.split() for line in out.stdout.splitlines()]
        return [int(r[0]) for r in rows if len(r) == 3 and r[2] == "latchkeyd" and not r[1].startswith("Z")]

    def deriver_parents(self):
        """The parents of the user's key derivers (latchkeyd-kdf, forked by latchkeyd at its start)."""
        out = subprocess.run(["ps", "-u", str(self.uid), "-o", "ppid=,stat=,comm="], capture_output=True, text=True)
        rows = [line.split() for line in out.stdout.splitlines()]
        return [int(r[0]) for r in rows if len(r) == 3 and r[2] == "latchkeyd-kdf" and not r[1].startswith("Z")]

    def stop_daemon(self):
        for pid in self.daemon_pids():
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while self.daemon_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.daemon_pids(), "latchkeyd did not stop"

    def start_daemon(self):
        """latchkeyd started by hand (as a D-Bus activation would), with no password."""
        subprocess.Popen(
            ["runuser", "-u", self.name, "--", "env", "-i", *[f"{k}={v}" for k, v in self.env().items()],
             str(self.installed / "latchkeyd"), "--foreground", "--pinentry", str(self.pinentry)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_for_name()

    def wait_for_name(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                            "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                            "string:org.freedesktop.secrets"]).stdout
            if "boolean true" in out:
                return
            time.sleep(0.05)
        raise AssertionError("no daemon claimed org.freedesktop.secrets")

    def wait_for_keychain(self, timeout=15):
        """Waits for the login keychain file: the daemon answers a first login's hand-over at once and makes the
        file on its worker (built complete under a private name, then linked into place)."""
        deadline = time.monotonic() + timeout
        while not self.keychain.exists():
            assert time.monotonic() < deadline, f"{self.keychain} did not appear"
            time.sleep(0.05)

    def login_locked(self):
        """The login collection's Locked property, asked over the user's bus."""
        out = self.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                        "/org/freedesktop/secrets/collection/login", "org.freedesktop.DBus.Properties.Get",
                        "string:org.freedesktop.Secret.Collection", "string:Locked"])
        assert out.returncode == 0, out.stderr
        return "boolean true" in out.stdout

    def lock(self):
        self.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                  "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
                  "array:objpath:/org/freedesktop/secrets/collection/login"], check=True)

    def password_opens_keychain(self, password):
        """Whether `password` unwraps the login keychain file (daemon stopped):
        re-keying to the same password succeeds only with the right one."""
        request = control.request(control.CHANGE_PASSWORD, password.encode(), password.encode())
        out = subprocess.run(
            ["runuser", "-u", self.name, "--", "env", "-i", *[f"{k}={v}" for k, v in self.env().items()],
             str(self.installed / "latchkeyd"), "--change-login-password"],
            input=request, capture_output=True, timeout=30)
        return out.returncode == 0 and control.parse_reply(out.stdout) == ("ok", "login keychain re-keyed to the new password")

    def remove(self):
        subprocess.run(["pkill", "-KILL", "-u", str(self.uid)], capture_output=True)
        time.sleep(0.1)
        subprocess.run(["userdel", "-r", "-f", self.name], capture_output=True)
        shutil.rmtree(self.runtime, ignore_errors=True)
        self.pinentry.unlink(missing_ok=True)


@pytest.fixture
def user(installed):
    u = User(installed)
    yield u
    u.remove()


class Service:
    """A PAM service file: pam_unix, then pam_latchkey for auth, session and password."""

    def __init__(self, installed, options="auto_start", session_prefix=""):
        self.name = "latchkey-test-" + secrets.token_hex(4)
        module = installed / "pam_latchkey.so"
        common = f"daemon={installed / 'latchkeyd'} debug"
        self.path = pathlib.Path("/etc/pam.d") / self.name
        self.path.write_text(
            "auth      required  pam_unix.so\n"
            f"auth      optional  {module} {common}\n"
            "account   required  pam_unix.so\n"
            "session   required  pam_unix.so\n"
            f"{session_prefix}"
            f"session   optional  {module} {common} {options}\n"
            "password  required  pam_unix.so yescrypt\n"
            f"password  optional  {module} {common}\n")

    def remove(self):
        self.path.unlink()


@pytest.fixture
def make_service(installed):
    made = []

    def make(**kwargs):
        s = Service(installed, **kwargs)
        made.append(s)
        return s

    yield make
    for s in made:
        s.remove()


@pytest.fixture
def service(make_service, user, tmp_path):
    """The service, with PINENTRY and the scripted answers in the PAM environment (pam_env), and the display a
    graphical login's display manager puts there: prompts of callers with no terminal show on the desktop
    (docs/prompts-in-terminals.md), which is where the scripted pinentry stands in for the real one."""
    envfile = tmp_path / "pam-env"
    envfile.write_text(f"PINENTRY={user.env()['PINENTRY']}\nDISPLAY=:0\n")
    return make_service(session_prefix=f"session   required  pam_env.so envfile={envfile}\n")


@pytest.fixture
def make_plain_service():
    """A copy of a service's file without the module's lines (the same login, less the module)."""
    made = []

    def make(service):
        plain = Service.__new__(Service)
        plain.name = service.name + "-plain"
        plain.path = service.path.with_name(plain.name)
        plain.path.write_text("".join(line + "\n" for line in service.path.read_text().splitlines()
                                      if "pam_latchkey" not in line))
        made.append(plain)
        return plain

    yield make
    for s in made:
        s.remove()


def pamtester(service, user, *operations, password=PASSWORD):
    start = time.monotonic()
    result = subprocess.run(["pamtester", service.name, user.name, *operations],
                            input=(password + "\n") if password is not None else "", capture_output=True, text=True,
                            timeout=30)
    result.elapsed = time.monotonic() - start
    return result


def login(service, user, password=PASSWORD):
    result = pamtester(service, user, "authenticate", "open_session", password=password)
    assert result.returncode == 0, result.stderr + result.stdout
    return result


def test_first_login_creates_the_keychain_unlocked_and_a_later_login_unlocks_it(service, user, syslog):
    assert not user.keychain.exists()
    login(service, user)
    user.wait_for_keychain()
    info = user.keychain.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (user.uid, 0o600)
    user.wait_for_name()
    assert not user.login_locked()
    stored = user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    assert stored.returncode == 0, stored.stderr
    # The session step does not wait for the key derivation: the daemon answers that it is creating it.
    assert "creating the login keychain" in syslog.text()
    # The daemon a login starts forked its key deriver (docs/threat-model.md, "scrypt in a process of its own"):
    # it ran one thread when it came to it.
    assert user.deriver_parents() == user.daemon_pids(), (user.deriver_parents(), user.daemon_pids())

    user.stop_daemon()
    login(service, user)
    user.wait_for_name()
    assert not user.login_locked()
    assert user.secret_tool("lookup", "service", "mail").stdout == "s3cret"
    assert PASSWORD not in syslog.text()


def test_the_auth_step_authenticates_nobody_even_as_sufficient(installed, user, tmp_path):
    """auth answers PAM_IGNORE: on a `sufficient` line before pam_deny, a login still fails."""
    name = "latchkey-test-" + secrets.token_hex(4)
    path = pathlib.Path("/etc/pam.d") / name
    path.write_text(f"auth sufficient {installed / 'pam_latchkey.so'} daemon={installed / 'latchkeyd'}\n"
                    "auth required pam_deny.so\n")
    try:
        result = subprocess.run(["pamtester", name, user.name, "authenticate"], input=PASSWORD + "\n",
                                capture_output=True, text=True, timeout=30)
        assert result.returncode != 0, result.stdout
    finally:
        path.unlink()


def test_the_stash_is_dropped_after_the_session_step(service, user, syslog):
    """The password kept by auth serves one session step: a second open_session in the same PAM
    transaction hands over no password."""
    login(service, user)
    user.wait_for_name()
    assert not user.login_locked()
    user.lock()
    result = pamtester(service, user, "authenticate", "open_session", "open_session")
    assert result.returncode == 0, result.stderr
    sessions = [line for line in syslog.text().splitlines() if ":session): session:" in line]
    # The first login's step, then the two of this transaction: the password once, then none.
    assert "unlocking the login keychain" in sessions[-2], sessions
    assert "session counted; no password given" in sessions[-1], sessions


def test_the_daemon_cannot_be_dumped(service, user):
    """No core file and no dump: the daemon sets RLIMIT_CORE to 0 and is not dumpable, so its /proc
    files belong to root and its own user cannot attach a debugger or read its memory."""
    login(service, user)
    user.wait_for_name()
    (pid,) = user.daemon_pids()
    assert os.stat(f"/proc/{pid}/environ").st_uid == 0
    limits = pathlib.Path(f"/proc/{pid}/limits").read_text()
    core = next(line for line in limits.splitlines() if line.startswith("Max core file size"))
    assert core.split()[4:6] == ["0", "0"], core
    attach = user.run(["/usr/bin/python3", "-c", f"open('/proc/{pid}/mem', 'rb')"])
    assert attach.returncode != 0 and "Permission denied" in attach.stderr


def test_wrong_password_fails_and_the_keychain_stays_locked(service, user):
    login(service, user)
    user.wait_for_name()
    user.lock()
    result = pamtester(service, user, "authenticate", "open_session", password="not-the-password")
    assert result.returncode != 0
    assert user.login_locked()


def test_session_without_a_password_leaves_it_locked_and_unlock_prompts(service, user):
    login(service, user)
    user.wait_for_name()
    user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    user.stop_daemon()
    result = pamtester(service, user, "open_session", password=None)  # as autologin or a fingerprint
    assert result.returncode == 0, result.stderr
    user.wait_for_name()
    assert user.login_locked()
    user.set_pinentry_answers(["password " + PASSWORD])
    found = user.secret_tool("search", "--unlock", "service", "mail")
    assert found.returncode == 0 and "secret = s3cret" in found.stdout, found.stderr
    assert "Unlock" in user.pinentry_log.read_text()
    assert not user.login_locked()


@pytest.mark.parametrize("with_pin", [False, True], ids=["no-pin", "pin"])
def test_a_session_without_a_password_unlocks_from_the_tpm2_slot(make_service, user, installed, tmp_path, make_tpm,
                                                                 with_pin):
    """Autologin or a fingerprint: no password reaches PAM. With a tpm2 slot (docs/key-slots.md) the daemon
    pam_latchkey starts opens the login keychain from the TPM, or asks its PIN at the first request."""
    tpm = make_tpm()
    envfile = tmp_path / "pam-env"
    envfile.write_text(f"PINENTRY={user.env()['PINENTRY']}\nDISPLAY=:0\nLATCHKEY_TPM_TCTI={tpm.tcti}\n")
    service = make_service(session_prefix=f"session   required  pam_env.so envfile={envfile}\n")
    login(service, user)
    user.wait_for_name()
    user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    shutil.copy(binary("latchkey"), installed / "latchkey")
    os.chmod(installed / "latchkey", 0o755)
    added = user.run(["env", f"LATCHKEY_TPM_TCTI={tpm.tcti}", str(installed / "latchkey"), "add-slot", "tpm2",
                      *(["--pin"] if with_pin else []), "--stdin"],
                     input=PASSWORD + "\n" + ("4711\n" if with_pin else ""))
    assert added.returncode == 0, added.stderr
    user.stop_daemon()
    user.set_pinentry_answers(["password 4711"] if with_pin else [])
    result = pamtester(service, user, "open_session", password=None)
    assert result.returncode == 0, result.stderr
    user.wait_for_name()
    found = user.secret_tool("lookup", "service", "mail")
    assert found.returncode == 0 and found.stdout == "s3cret", found.stderr
    asked = user.pinentry_log.read_text() if user.pinentry_log.exists() else ""
    if with_pin:
        assert '"argument": "PIN:"' in asked
    else:
        assert "GETPIN" not in asked
    assert not user.login_locked()


@pytest.fixture
def passwd_stack(installed):
    """Puts the module in the password stack of `passwd` for the test."""
    path = pathlib.Path("/etc/pam.d/passwd")
    saved = path.read_text()
    path.write_text(
        "password  required  pam_unix.so obscure yescrypt\n"
        f"password  optional  {installed / 'pam_latchkey.so'} daemon={installed / 'latchkeyd'} debug\n")
    yield
    path.write_text(saved)


@pytest.mark.parametrize("daemon_running", [True, False], ids=["through-daemon", "on-the-file"])
def test_user_changes_password_with_passwd(service, user, passwd_stack, syslog, daemon_running):
    login(service, user)
    user.wait_for_name()
    user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    if not daemon_running:
        user.stop_daemon()
    changed = user.run(["passwd"], input=f"{PASSWORD}\n{NEW_PASSWORD}\n{NEW_PASSWORD}\n")
    assert changed.returncode == 0, changed.stderr + changed.stdout
    assert "re-keyed to the new password" in syslog.text()
    user.stop_daemon()
    assert user.password_opens_keychain(NEW_PASSWORD)
    assert not user.password_opens_keychain(PASSWORD)
    login(service, user, password=NEW_PASSWORD)
    user.wait_for_name()
    assert not user.login_locked()
    assert user.secret_tool("lookup", "service", "mail").stdout == "s3cret"


READER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN")
db.execute("SELECT count(*) FROM meta").fetchall()
print("reading", flush=True)
sys.stdin.read()
"""


def test_passwd_with_no_daemon_answers_in_time_while_another_process_reads_the_file(
        service, user, passwd_stack, syslog):
    login(service, user)
    user.wait_for_name()
    user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    user.stop_daemon()
    wrapped_before = sqlite3.connect(f"file:{user.keychain}?immutable=1", uri=True).execute(
        "SELECT value FROM meta WHERE name = 'wrapped_key'").fetchone()[0]
    # A process of the user holds a read snapshot: the log cannot be emptied while it does.
    reader = subprocess.Popen(["/usr/bin/python3", "-c", READER, str(user.keychain)], user=user.uid, group=user.gid,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "reading"
        changed = user.run(["passwd"], input=f"{PASSWORD}\n{NEW_PASSWORD}\n{NEW_PASSWORD}\n")
        assert changed.returncode == 0, changed.stderr + changed.stdout
        # Answered within the module's budget, though the file still holds the old wrapped key (the reader's
        # snapshot) and the log the new one, until a checkpoint copies it over.
        assert "re-keyed to the new password; another process holds an older snapshot" in syslog.text()
        assert wrapped_before in user.keychain.read_bytes()
    finally:
        reader.stdin.close()
        reader.wait(timeout=10)
    # The reader was the last connection: its close checkpointed, and the old wrapped key is off the disk.
    assert wrapped_before not in user.keychain.read_bytes()
    wal = pathlib.Path(str(user.keychain) + "-wal")
    assert not wal.exists() or wrapped_before not in wal.read_bytes()
    login(service, user, password=NEW_PASSWORD)
    user.wait_for_name()
    assert not user.login_locked()
    assert user.secret_tool("lookup", "service", "mail").stdout == "s3cret"


def test_root_reset_leaves_the_keychain_and_the_next_login_offers_to_rekey(service, user, syslog):
    login(service, user)
    user.wait_for_name()
    user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    user.stop_daemon()
    # pamtester runs as root: pam_unix asks no old password, as `passwd USER` by root.
    reset = subprocess.run(["pamtester", service.name, user.name, "chauthtok"],
                           input=f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n", capture_output=True, text=True, timeout=30)
    assert reset.returncode == 0, reset.stderr
    assert "set without the old one" in syslog.text()
    assert user.password_opens_keychain(PASSWORD) and not user.password_opens_keychain(NEW_PASSWORD)

    # Next login with the new password: the daemon asks for the previous one and re-keys.
    user.set_pinentry_answers(["password " + PASSWORD])
    login(service, user, password=NEW_PASSWORD)
    user.wait_for_name()
    deadline = time.monotonic() + 10
    while user.login_locked() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not user.login_locked()
    assert "no longer unlocks" in user.pinentry_log.read_text()
    assert user.secret_tool("lookup", "service", "mail").stdout == "s3cret"
    user.stop_daemon()
    assert user.password_opens_keychain(NEW_PASSWORD)


def send_as_user(user, opcode, *fields):
    """Sends one control request from a process of the user (not root): (status name, message)."""
    frame = control.request(opcode, *fields)
    probe = (
        "import socket, struct, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])\n"
        "s.sendall(bytes.fromhex(sys.argv[2]))\n"
        "data = b''\n"
        "while True:\n"
        "    chunk = s.recv(4096)\n"
        "    if not chunk: break\n"
        "    data += chunk\n"
        "sys.stdout.write(data.hex())\n")
    out = user.run(["/usr/bin/python3", "-c", probe, str(user.runtime / "latchkey" / "control"), frame.hex()])
    assert out.returncode == 0, out.stderr
    return control.parse_reply(bytes.fromhex(out.stdout))


def test_another_process_of_the_user_cannot_set_the_login_password(service, user):
    """The reported hijack: a wrong password sent over the control socket used to bring up the genuine
    re-key prompt, and the old password typed there re-keyed the keychain to the sender's password."""
    login(service, user)
    user.wait_for_name()
    user.lock()
    # Were the prompt shown, this answer (the real password) would complete the attack.
    user.set_pinentry_answers(["password " + PASSWORD])
    assert send_as_user(user, control.OPEN_SESSION, b"attacker-chosen") == (
        "wrongPassword", "the password does not unlock the login keychain")
    assert send_as_user(user, control.HAND_OVER, b"attacker-chosen")[0] == "badRequest"
    time.sleep(1)
    assert not user.pinentry_log.exists() or "no longer unlocks" not in user.pinentry_log.read_text()
    user.stop_daemon()
    assert user.password_opens_keychain(PASSWORD)
    assert not user.password_opens_keychain("attacker-chosen")


def test_another_process_of_the_user_cannot_create_the_login_keychain(user):
    user.start_daemon()
    status, message = send_as_user(user, control.OPEN_SESSION, b"attacker-chosen")
    assert status == "failed" and "a login creates it" in message
    assert not user.keychain.exists()


def test_the_daemon_starts_with_default_signals_and_no_inherited_descriptor(service, user):
    """A host that ignores SIGTERM and SIGHUP, blocks SIGUSR1 and holds a descriptor as high as it may
    (70,000 where the hard limit allows, past the 65,536 the module once closed up to; this machine's
    container caps it lower): the daemon the module starts has none of that."""
    high = min(70000, resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 1)
    host = (
        "import os, resource, signal, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n"
        f"fd = os.open('/dev/null', os.O_RDONLY); os.dup2(fd, {high}, inheritable=True)\n"
        "os.execvp('pamtester', sys.argv[1:])\n")
    result = subprocess.run(["/usr/bin/python3", "-c", host, "pamtester", service.name, user.name, "authenticate",
                             "open_session"], input=PASSWORD + "\n", capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    user.wait_for_name()
    (pid,) = user.daemon_pids()
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    ignored = int(fields["SigIgn"], 16)
    assert not ignored & (1 << (signal.SIGTERM - 1)) and not ignored & (1 << (signal.SIGHUP - 1)), fields["SigIgn"]
    # The daemon blocks SIGTERM and SIGINT itself (it takes them through sigwait); the host's SIGUSR1 is gone.
    assert not int(fields["SigBlk"], 16) & (1 << (signal.SIGUSR1 - 1)), fields["SigBlk"]
    descriptors = sorted(int(name) for name in os.listdir(f"/proc/{pid}/fd"))
    assert high not in descriptors and max(descriptors) < 100, descriptors
    user.stop_daemon()


def test_a_stopped_daemon_does_not_hold_up_the_login(service, user, syslog, make_plain_service):
    login(service, user)
    user.wait_for_name()
    pids = user.daemon_pids()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        result = login(service, user)
        # The module gives up on a daemon it sees stopped within 0.5 s (it waits the whole 2 s only for one
        # that runs); the rest of the login (pam_unix, pamtester) is timed beside it.
        unhindered = login(make_plain_service(service), user)
        assert result.elapsed - unhindered.elapsed < 0.5, (
            f"login took {result.elapsed:.2f} s, {unhindered.elapsed:.2f} s without the module")
        assert "is stopped" in syslog.text()
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def test_a_missing_daemon_does_not_break_the_login(make_service, user, syslog):
    service = make_service(options="auto_start daemon=/nonexistent/latchkeyd")
    result = login(service, user)
    assert "cannot start /nonexistent/latchkeyd: No such file or directory" in syslog.text()
    assert not user.keychain.exists()
    assert result.elapsed < 3.0


def test_only_if_leaves_other_services_alone(make_service, user, syslog):
    service = make_service(options="auto_start only_if=gdm-password,login")
    login(service, user)
    time.sleep(0.3)
    assert not user.keychain.exists() and not user.daemon_pids()
    assert "not acting for service" in syslog.text()


def test_lock_on_close_locks_when_the_last_session_ends(make_service, user):
    service = make_service(options="auto_start lock_on_close")
    login(service, user)  # a session that stays open
    user.wait_for_name()
    result = pamtester(service, user, "authenticate", "open_session", "close_session")
    assert result.returncode == 0, result.stderr
    assert not user.login_locked()  # the first session is still open
    user.stop_daemon()
    result = pamtester(service, user, "authenticate", "open_session", "close_session")
    assert result.returncode == 0, result.stderr
    user.wait_for_name()
    assert user.login_locked()


def test_a_symlinked_control_socket_is_refused(service, user, syslog):
    login(service, user)
    user.wait_for_name()
    user.stop_daemon()
    control = user.runtime / "latchkey" / "control"
    decoy = user.runtime / "latchkey" / "decoy"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(decoy))
    os.chown(decoy, user.uid, user.gid)
    if control.exists():
        control.unlink()
    os.symlink(decoy, control)
    os.lchown(control, user.uid, user.gid)
    sock.listen(1)
    login(service, user)
    assert "is a symlink" in syslog.text()
    sock.close()


def test_module_exports_only_pam_entry_points_and_carries_its_swift_runtime(installed):
    module = installed / "pam_latchkey.so"
    exported = subprocess.run(["nm", "-D", "--defined-only", "--extern-only", str(module)],
                              capture_output=True, text=True, check=True).stdout.split("\n")
    names = sorted(line.split()[-1] for line in exported if line.strip())
    assert names == ["pam_sm_authenticate", "pam_sm_chauthtok", "pam_sm_close_session", "pam_sm_open_session",
                     "pam_sm_setcred"]
    libraries = subprocess.run(["ldd", str(module)], capture_output=True, text=True, check=True).stdout
    assert "libpam.so" in libraries
    assert "swift" not in libraries.lower() and "Foundation" not in libraries
    dynamic = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True, check=True).stdout
    assert "NODELETE" in dynamic


@pytest.fixture
def pam_configs():
    """Restores the common-* files and the profile directory after pam-auth-update ran."""
    names = ["common-auth", "common-session", "common-password", "common-account", "common-session-noninteractive"]
    saved = {n: (pathlib.Path("/etc/pam.d") / n).read_text() for n in names}
    profile = pathlib.Path("/usr/share/pam-configs/latchkey")
    yield profile
    if profile.exists():
        subprocess.run(["pam-auth-update", "--package", "--remove", "latchkey"], capture_output=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        profile.unlink()
    for n, text in saved.items():
        (pathlib.Path("/etc/pam.d") / n).write_text(text)


def test_pam_auth_update_profile_adds_optional_lines_in_order(pam_configs):
    shutil.copy(ROOT / "pam" / "latchkey", pam_configs)
    result = subprocess.run(["pam-auth-update", "--package", "--enable", "latchkey"], capture_output=True, text=True,
                            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), timeout=60)
    assert result.returncode == 0, result.stderr

    def lines(name):
        text = (pathlib.Path("/etc/pam.d") / name).read_text()
        return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]

    for name, after in (("common-auth", "pam_unix.so"), ("common-session", "pam_unix.so"),
                        ("common-password", "pam_unix.so")):
        rows = lines(name)
        ours = [i for i, row in enumerate(rows) if "pam_latchkey.so" in row]
        assert len(ours) == 1, (name, rows)
        assert rows[ours[0]][1] == "optional"
        assert any(after in row for row in rows[:ours[0]]), f"{name}: pam_latchkey before {after}"
    session = lines("common-session")
    assert "auto_start" in next(row for row in session if "pam_latchkey.so" in row)
    systemd = [i for i, row in enumerate(session) if "pam_systemd.so" in row]
    if systemd:
        assert systemd[0] < next(i for i, row in enumerate(session) if "pam_latchkey.so" in row)
    assert not any("pam_latchkey.so" in row for row in lines("common-session-noninteractive"))


# What a user's collections hold, read through the Secret Service on the user's own bus, as the user.
READ_COLLECTIONS = """
import json, secretstorage, secretstorage.util
from jeepney.io.blocking import open_dbus_connection
connection = open_dbus_connection(bus="SESSION", auth_timeout=30)
found = {}
for collection in secretstorage.get_all_collections(connection):
    if collection.collection_path.endswith("/session"):
        continue
    items = [{"label": i.get_label(), "attributes": dict(i.get_attributes()), "secret": bytes(i.get_secret()).hex(),
              "content_type": i.get_secret_content_type(), "created": i.get_created(), "modified": i.get_modified()}
             for i in collection.get_all_items()]
    found[collection.get_label()] = sorted(items, key=lambda i: (i["label"], i["secret"]))
service = secretstorage.util.DBusAddressWrapper("/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
                                                      connection)
default = service.call("ReadAlias", "s", "default")[0]
labels = {c.collection_path: c.get_label() for c in secretstorage.get_all_collections(connection)}
print(json.dumps({"collections": found, "default": labels.get(default)}))
"""


@pytest.fixture(scope="module")
def gnome_keyrings(tmp_path_factory):
    """Keyrings made by Debian's real gnome-keyring-daemon whose login keyring has the user's login
    password (as pam_gnome_keyring keeps it), a second keyring whose password gnome-keyring kept in the
    login keyring, an empty-password one, and `default` naming the second; with the items gnome-keyring
    served from them, secrets in hex."""
    if shutil.which("gnome-keyring-daemon") is None:
        pytest.skip("gnome-keyring is not installed (.ci/packages lists it)")
    import gnome_keyring
    from conftest import Bus
    root = tmp_path_factory.mktemp("gnome-keyring-for-login")
    bus = Bus()
    keyring = gnome_keyring.GnomeKeyring(bus.address, root / "home", data=root / "data")
    try:
        keyring.start(login_password=PASSWORD)
        items = gnome_keyring.populate(keyring)
        connection = keyring.connect()
        import secretstorage
        login = next(c for c in secretstorage.get_all_collections(connection) if c.collection_path.endswith("/login"))
        login.create_item("Unlock password for: second", {"keyring": "LOCAL:/keyrings/second.keyring"},
                          gnome_keyring.SECOND_PASSWORD.encode())
        connection.close()
        gnome_keyring.set_default(keyring, "second")
        keyring.stop()
        keyring.start(login_password=PASSWORD)
        served = gnome_keyring.served(keyring)
    finally:
        keyring.stop()
        bus.stop()
    # open.keyring's multi-line secret makes gnome-keyring unable to read it back (see test_gnome_keyring_import).
    served.setdefault("open", items["open"])
    assert (keyring.keyrings / "default").read_text() == "second"
    for entries in served.values():
        for item in entries:
            item["secret"] = item["secret"].hex()
        entries.sort(key=lambda i: (i["label"], i["secret"]))
    return keyring.keyrings, served


def test_a_login_imports_gnome_keyrings_into_collections_of_their_own(service, user, gnome_keyrings, installed):
    """A real login (pamtester, pam_unix then pam_latchkey) of a user whose home holds gnome-keyring's
    files: latchkeyd imports login.keyring with the login password into the login collection, the second
    keyring with the password gnome-keyring kept for it and the empty-password one into collections of
    their own, every field kept; `default` names the second, so does the default alias; the files are
    untouched; a second login imports nothing more."""
    made, served = gnome_keyrings
    keyrings = user.home / ".local" / "share" / "keyrings"
    shutil.copytree(made, keyrings)
    for path in [keyrings.parent, keyrings, *keyrings.iterdir()]:
        os.chown(path, user.uid, user.gid)
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    before = {p.name: p.read_bytes() for p in keyrings.iterdir()}
    reader = user.home / "read-collections.py"
    reader.write_text(READ_COLLECTIONS.replace("SESSION", user.bus_address))
    shutil.copy(binary("latchkey"), user.home / "latchkey")
    for path in (reader, user.home / "latchkey"):
        os.chown(path, user.uid, user.gid)

    def collections():
        # Imported items trust no application yet: the user lets every application read them (not what this
        # test is about), as `latchkey set-access-policy allow-all` would, in each keychain file, unlocked with
        # the login password (again when the import made another meanwhile).
        deadline = time.monotonic() + 30
        while True:
            # A keychain file is complete whenever it is there (Keychain.create links it into place once built).
            for path in user.keychain.parent.glob("*.keychain-db"):
                user.run([binary("keychain-writer"), str(path), "--access-policy", "allow-all"], input=PASSWORD,
                         check=True)
            out = user.run(["/usr/bin/python3", str(reader)])
            if out.returncode == 0 or "AccessDenied" not in out.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert out.returncode == 0, out.stderr
        import json
        return json.loads(out.stdout)

    login(service, user)
    user.wait_for_name()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(map(len, collections()["collections"].values())) < 14:
        time.sleep(0.2)
    found = collections()
    assert found["collections"] == served
    assert found["default"] == "second"
    assert {p.name: p.read_bytes() for p in keyrings.iterdir()} == before

    # A second login, with a new daemon, imports nothing more.
    user.stop_daemon()
    login(service, user)
    user.wait_for_name()
    time.sleep(1)
    assert collections() == found
    status = user.run([str(user.home / "latchkey"), "migration-status"])
    assert status.returncode == 0, status.stderr
    assert status.stdout.count("imported ") == 3 and "left" not in status.stdout, status.stdout
    assert 'into collection "second"' in status.stdout


# A library a user plants: it records, in a file anyone may write, who it ran as.
PLANTED_LIBRARY = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(RECORD, O_WRONLY | O_APPEND | O_CREAT, 0666);
    if (fd >= 0) {
        dprintf(fd, "pid=%d uid=%d euid=%d\n", (int)getpid(), (int)getuid(), (int)geteuid());
        close(fd);
    }
}
"""


def test_a_library_planted_in_the_users_pam_environment_never_runs(make_service, user, tmp_path):
    """Issue 24, item 1. gdm-password's order: pam_env with user_readenv=1 (reading ~/.pam_environment) in
    the session stack before the line where pam-auth-update puts the module. The module used to give the
    daemon it starts the whole PAM environment and exec it as root (the daemon dropped to the user itself),
    so the dynamic loader honoured the user's LD_PRELOAD as root. Now the child becomes the user before exec
    and the daemon gets only the allow-listed variables: the library never runs at all."""
    record_directory = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-planted-"))
    os.chmod(record_directory, 0o777)
    record = record_directory / "ran"
    try:
        source = tmp_path / "planted.c"
        source.write_text(PLANTED_LIBRARY)
        library = user.home / "planted.so"
        subprocess.run(["cc", "-shared", "-fPIC", f'-DRECORD="{record}"', "-o", str(library), str(source)],
                       check=True)
        os.chown(library, user.uid, user.gid)
        # The library works: preloaded, it records.
        subprocess.run(["/bin/true"], env={"LD_PRELOAD": str(library)}, check=True)
        assert "uid=0 euid=0" in record.read_text()
        record.unlink()
        user_environment = user.home / ".pam_environment"
        user_environment.write_text(f"LD_PRELOAD DEFAULT={library}\nGCONV_PATH DEFAULT={user.home}\n"
                                    f"LOCPATH DEFAULT={user.home}\nHOSTALIASES DEFAULT={user.home}/hosts\n"
                                    f"LANG DEFAULT={user.home}/locale\nDBUS_SESSION_BUS_ADDRESS "
                                    f"DEFAULT=unixexec:path=/bin/true\n")
        os.chown(user_environment, user.uid, user.gid)
        envfile = tmp_path / "pam-env"
        envfile.write_text(f"PINENTRY={user.env()['PINENTRY']}\n")
        service = make_service()
        # Debian's gdm-password: pam_env (the second line reading ~/.pam_environment) before
        # `@include common-session`, where pam-auth-update puts the module after pam_unix.
        lines = service.path.read_text().splitlines(keepends=True)
        first_session = next(i for i, line in enumerate(lines) if line.startswith("session"))
        lines[first_session:first_session] = [
            f"session   required  pam_env.so readenv=1 envfile={envfile}\n",
            "session   required  pam_env.so readenv=1 user_readenv=1 envfile=/etc/default/locale\n"]
        service.path.write_text("".join(lines))
        login(service, user)
        user.wait_for_keychain()
        ran = record.read_text() if record.exists() else ""
        assert "uid=0" not in ran and "euid=0" not in ran, f"the planted library ran as root: {ran}"
        assert ran == "", f"the planted library ran: {ran}"
        user.wait_for_name()
        assert not user.login_locked()
        # The daemon's environment: the allow-list, the user's basics from the password database.
        (pid,) = user.daemon_pids()
        environ = dict(entry.split("=", 1) for entry in
                       pathlib.Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in entry)
        for name in ("LD_PRELOAD", "GCONV_PATH", "LOCPATH", "HOSTALIASES", "LANG", "DBUS_SESSION_BUS_ADDRESS"):
            assert name not in environ, (name, environ)
        assert environ["HOME"] == str(user.home) and environ["USER"] == user.name
        assert environ["PINENTRY"] == user.env()["PINENTRY"]
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
        assert f"Uid:\t{user.uid}\t{user.uid}\t{user.uid}\t{user.uid}" in status, status
    finally:
        shutil.rmtree(record_directory, ignore_errors=True)


# A process of the user starting latchkeyd --login itself with a hand-over it forged, on a pipe or on a socket
# pair it made: prints the reply frame in hex.
FORGED_HAND_OVER = """
import socket, subprocess, sys
daemon, mode, frame = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
argv = [daemon, "--foreground", "--login"]
if mode == "socketpair":
    ours, theirs = socket.socketpair()
    subprocess.Popen(argv, stdin=theirs, stdout=theirs, stderr=subprocess.DEVNULL)
    theirs.close()
    ours.sendall(frame)
    ours.settimeout(20)
    read = ours.recv
else:
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    process.stdin.write(frame)
    process.stdin.close()
    read = process.stdout.read
def exactly(count):
    data = b""
    while len(data) < count:
        chunk = read(count - len(data))
        if not chunk:
            break
        data += chunk
    return data
header = exactly(4)
sys.stdout.write((header + exactly(int.from_bytes(header, "big"))).hex() if len(header) == 4 else "")
"""


@pytest.mark.parametrize("mode", ["pipe", "socketpair"])
def test_a_process_of_the_user_cannot_rekey_through_latchkeyd_login(service, user, mode):
    """Issue 24, item 2. A process of the user stops the daemon and starts `latchkeyd --login` with a
    hand-over carrying a password of its choosing. It used to be answered as a login: the genuine "your
    login password no longer unlocks your login keychain" prompt came up, and the real password typed there
    re-keyed the keychain to the attacker's. A hand-over on standard input is a login only on a socket pair
    root made (pam_latchkey); this one is refused, with no prompt and no unlock (nor a tpm2 slot opened)."""
    login(service, user)
    user.wait_for_name()
    user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
    user.stop_daemon()
    # Were the prompt shown, this answer (the real password, typed by the user) would complete the attack.
    user.set_pinentry_answers(["password " + PASSWORD])
    replies = []
    for fields in ([b"attacker-chosen"], []):
        out = user.run(["/usr/bin/python3", "-c", FORGED_HAND_OVER, str(user.installed / "latchkeyd"), mode,
                        control.request(control.HAND_OVER, *fields).hex()])
        assert out.returncode == 0, out.stderr
        replies.append(control.parse_reply(bytes.fromhex(out.stdout)))
        # Give a daemon that took it time to prompt and re-key.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and user.daemon_pids() and not (
                user.pinentry_log.exists() and "no longer unlocks" in user.pinentry_log.read_text()):
            time.sleep(0.1)
        if user.daemon_pids():
            time.sleep(3)
        user.stop_daemon()
    assert not user.password_opens_keychain("attacker-chosen"), f"re-keyed to the attacker's password: {replies}"
    assert user.password_opens_keychain(PASSWORD)
    assert not user.pinentry_log.exists() or "no longer unlocks" not in user.pinentry_log.read_text()
    assert [status for status, _ in replies] == ["badRequest", "badRequest"], replies


def latchkeyd_with_login_running(user):
    """Whether a latchkeyd --login process of the user is running, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"latchkeyd") and b"--login" in argv:
            return True
    return False


def test_a_hand_over_racing_an_activated_daemon_is_not_lost(service, user, syslog):
    """Issue 24, item 12. A daemon the bus activated (it gets no password) and a login at the same moment:
    the module finds no control socket yet and starts a daemon of its own, which finds the activated one
    holding the socket (or, before, the bus name) and fails. That hand-over used to go nowhere: the login
    keychain stayed locked, though a daemon ran. Made deterministic here: the activated daemon's socket is
    hidden from the module's first look, and shown again as soon as the daemon the module started runs."""
    login(service, user)
    user.wait_for_name()
    user.stop_daemon()
    user.start_daemon()  # as the bus would: no password, so no login keychain open
    control_socket = user.runtime / "latchkey" / "control"
    hidden = control_socket.with_name("control.hidden")
    os.rename(control_socket, hidden)
    seen = threading.Event()
    done = threading.Event()

    def show_again():
        while not done.is_set():
            if latchkeyd_with_login_running(user):
                seen.set()
                break
        os.rename(hidden, control_socket)

    thread = threading.Thread(target=show_again)
    thread.start()
    try:
        login(service, user)
    finally:
        done.set()
        thread.join()
    assert seen.is_set(), "the module started no daemon"
    # The activated daemon got the hand-over: its login collection is there and unlocked.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = user.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                        "/org/freedesktop/secrets/collection/login", "org.freedesktop.DBus.Properties.Get",
                        "string:org.freedesktop.Secret.Collection", "string:Locked"])
        if "boolean false" in out.stdout:
            break
        time.sleep(0.1)
    assert "boolean false" in out.stdout, (out.stderr, syslog.text())
    assert len(user.daemon_pids()) == 1


# Issue 31, item 6: a process of the user floods the control socket. It keeps a ring of up to 400 connections to
# it, none of which ever sends a byte, and makes 50 more every 10 ms, closing the oldest; it says how many
# connects the kernel refused (EAGAIN: the daemon's listen backlog full) on its first line, once it has made
# 200 attempts.
CONTROL_FLOOD = """
import collections, socket, sys, time
path = sys.argv[1]
held = collections.deque()
attempts = refused = 0
reported = False
while True:
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        attempts += 1
        try:
            s.connect(path)
            held.append(s)
        except (BlockingIOError, InterruptedError):
            refused += 1
            s.close()
        while len(held) > 400:
            held.popleft().close()
    if attempts >= 200 and not reported:
        print(f"flooding: {len(held)} held, {refused} of {attempts} connects refused", flush=True)
        reported = True
    time.sleep(0.01)
"""


class ControlFlood:
    """CONTROL_FLOOD running as `user` until stopped."""

    def __init__(self, user):
        self.process = subprocess.Popen(
            ["runuser", "-u", user.name, "--", "env", "-i", *[f"{k}={v}" for k, v in user.env().items()],
             "/usr/bin/python3", "-c", CONTROL_FLOOD, str(user.runtime / "latchkey" / "control")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.report = self.process.stdout.readline().strip()
        assert self.report.startswith("flooding"), self.process.stderr.read()

    def stop(self):
        self.process.kill()
        self.process.wait()


def wait_until_unlocked(user, timeout=10):
    deadline = time.monotonic() + timeout
    while user.login_locked() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not user.login_locked()


def test_a_login_hands_over_and_the_logout_locks_while_the_user_floods_the_control_socket(
        make_service, user, syslog, make_plain_service):
    """Issue 31, item 6. A process of the user holding the control socket's 16 connections and its listen
    backlog made every hand-over fail at once with EAGAIN ("connect: Resource temporarily unavailable"): the
    login keychain stayed locked, and the logout's lock was lost the same way. Root's connections now have
    slots of their own, the daemon accepts every connection at once (a user's beyond its 16 are refused), and
    the module retries a full backlog within its 2 s."""
    service = make_service(options="auto_start lock_on_close")
    login(service, user)  # the first session; starts the daemon
    user.wait_for_name()
    user.lock()
    plain = make_plain_service(service)
    flood = ControlFlood(user)
    try:
        result = login(service, user)  # a second session, while flooded
        unhindered = login(plain, user)
        assert wait_until_unlocked(user), syslog.text()
        assert result.elapsed - unhindered.elapsed < 2.2
        # The figure (docs/robustness.md): sessions without a password (a hand-over each, then the close), with
        # the module and without it, while flooded.
        rounds = {"module": [], "plain": []}
        for _ in range(10):
            for name, used in (("module", service), ("plain", plain)):
                out = pamtester(used, user, "open_session", "close_session", password=None)
                assert out.returncode == 0, out.stderr
                rounds[name].append(out.elapsed)
        median = {name: sorted(times)[len(times) // 2] for name, times in rounds.items()}
        print(f"\n{flood.report}; first login {result.elapsed:.3f} s ({unhindered.elapsed:.3f} s without the module);"
              f" open+close session, median of 10: {median['module']:.3f} s, {median['plain']:.3f} s without the"
              f" module, slowest {max(rounds['module']):.3f} s")
        assert median["module"] - median["plain"] < 1.0
        for _ in range(2):
            out = pamtester(service, user, "close_session", password=None)
            assert out.returncode == 0, out.stderr
        assert user.login_locked(), syslog.text()
    finally:
        flood.stop()
    assert "Resource temporarily unavailable" not in syslog.text()


def test_a_process_of_the_user_neither_adds_nor_removes_a_login_session(make_service, user):
    """Issue 31, item 6. An `openSession` a process of the user sent counted a session like a login's, so the
    last logout never locked the login keychain; its `closeSession` took one away. Only a login (root, or
    pam_latchkey's hand-over) counts sessions now: a user process's open session only unlocks, its close
    session is refused."""
    service = make_service(options="auto_start lock_on_close")
    login(service, user)  # one session
    user.wait_for_name()
    assert wait_until_unlocked(user)
    path = user.runtime / "latchkey" / "control"
    opened = send_as_user(user, control.OPEN_SESSION)
    out = pamtester(service, user, "close_session", password=None)  # the last logout
    assert out.returncode == 0, out.stderr
    assert user.login_locked(), f"the last logout left it unlocked; the user's open session got {opened}"
    assert opened[0] == "ok" and "not counted" in opened[1], opened
    assert control.status(path) == ("ok", "locked; 0 sessions")
    login(service, user)  # one session again
    assert wait_until_unlocked(user)
    status, message = send_as_user(user, control.CLOSE_SESSION, b"\x01")
    assert status == "badRequest", message
    assert control.status(path) == ("ok", "unlocked; 1 sessions")
    assert not user.login_locked()
