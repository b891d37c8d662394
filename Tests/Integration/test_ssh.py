"""pam_latchkey in sshd's PAM stack, with a real sshd (openssh-server) on localhost: its own sshd_config, port
and host key in a temporary directory, `UsePAM yes`, and a PAM service file of the test's own stacking pam_unix
then pam_latchkey as pam/README.md tells users to. sshd names its PAM service after the program's name, so the
test runs sshd through a symbolic link named after that service and leaves /etc/pam.d/sshd alone. Users, the
module and their session bus come from test_pam.py's fixtures. Needs root (CI runs as root)."""

import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

from conftest import binary
from test_pam import PASSWORD, installed, login, make_service, user  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates users, PAM services and runs sshd"),
    pytest.mark.skipif(shutil.which("sshd", path="/usr/sbin:/usr/bin") is None, reason="openssh-server is missing"),
]

SSHD = "/usr/sbin/sshd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """sshd on 127.0.0.1 for one PAM service, and the ssh client's key and options to log in to it."""

    def __init__(self, directory, service, keyboard_interactive=False):
        self.directory = directory
        directory.mkdir(mode=0o700, exist_ok=True)
        pathlib.Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # the privilege separation directory
        self.host_key = directory / "host_ed25519"
        self.client_key = directory / "client_ed25519"
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        self.port = free_port()
        self.log = directory / "sshd.log"
        config = directory / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\nPidFile {directory}/sshd.pid\n"
            "UsePAM yes\nPubkeyAuthentication yes\n"
            + ("PasswordAuthentication no\nKbdInteractiveAuthentication yes\n" if keyboard_interactive
               else "PasswordAuthentication yes\nKbdInteractiveAuthentication no\n") +
            "AuthorizedKeysFile .ssh/authorized_keys\nPermitRootLogin no\nStrictModes yes\nLogLevel VERBOSE\n")
        # The program's name is the PAM service's: sshd runs as `service.name`.
        self.program = directory / service.name
        self.program.symlink_to(SSHD)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([str(self.program), "-D", "-e", "-f", str(config)],
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "sshd did not listen"
            time.sleep(0.05)

    def authorize(self, user):
        """Lets the test's client key log in as `user`."""
        ssh = user.home / ".ssh"
        ssh.mkdir(mode=0o700, exist_ok=True)
        keys = ssh / "authorized_keys"
        keys.write_text(pathlib.Path(str(self.client_key) + ".pub").read_text())
        for path in (ssh, keys):
            os.chown(path, user.uid, user.gid)
        os.chmod(keys, 0o600)

    def options(self):
        return ["-p", str(self.port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"]

    def run_with_key(self, user, command, timeout=30, tty=False):
        """`command` over ssh as `user`, logged in with the client key (no password reaches PAM); with `tty`,
        in a pty on the server (`ssh -tt`), as a person's shell runs it."""
        return self._finish(subprocess.run(
            ["ssh", *self.options(), *(["-tt"] if tty else []), "-i", str(self.client_key), "-o", "BatchMode=yes",
             "-o", "PreferredAuthentications=publickey", f"{user.name}@127.0.0.1", command],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout))

    def run_with_password(self, user, command, password=PASSWORD, timeout=30, tty=False):
        """`command` over ssh as `user`, logged in with a password typed at ssh's prompt (sshpass answers it on
        the pty it gives ssh); with `tty`, in a pty on the server too."""
        return self._finish(subprocess.run(
            ["sshpass", "-e", "ssh", *self.options(), *(["-tt"] if tty else []),
             "-o", "PreferredAuthentications=password,keyboard-interactive", "-o", "PubkeyAuthentication=no",
             "-o", "NumberOfPasswordPrompts=1", f"{user.name}@127.0.0.1", command],
            env={**os.environ, "SSHPASS": password}, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout))

    @staticmethod
    def _finish(result):
        """The result with a pty's line ends made plain."""
        result.stdout = result.stdout.replace("\r\n", "\n")
        return result

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def latchkey_for_users(installed):
    """The latchkey command beside the installed module, where the test users can run it."""
    path = installed / "latchkey"
    shutil.copy(binary("latchkey"), path)
    os.chmod(path, 0o755)
    return path


# Asked in the ssh session: the login collection's Locked property, over the user's bus.
LOCKED = ("dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets/collection/login"
          " org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Collection string:Locked")


def session_sees(result):
    """What the ssh session saw: 'locked', 'unlocked', or the failure."""
    assert result.returncode == 0, result.stderr + result.stdout
    if "boolean true" in result.stdout:
        return "locked"
    if "boolean false" in result.stdout:
        return "unlocked"
    return result.stdout


@pytest.fixture
def ssh_setup(make_service, user, tmp_path):
    """A user with a login keychain holding one item (made by a first login), the daemon stopped, and sshd
    serving a PAM service that stacks pam_latchkey, its session environment given by pam_env as pam_systemd
    would (XDG_RUNTIME_DIR, where the user's bus is) plus PINENTRY and any `extra` variables."""
    made = []

    def make(extra="", user_bus=True, pinentry=True, keyboard_interactive=False):
        envfile = tmp_path / "pam-env"
        runtime = f"XDG_RUNTIME_DIR={user.runtime}\n" if user_bus else ""
        named = f"PINENTRY={user.env()['PINENTRY']}\n" if pinentry else ""
        envfile.write_text(f"{runtime}{named}{extra}")
        os.chmod(envfile, 0o644)
        service = make_service(session_prefix=f"session   required  pam_env.so envfile={envfile}\n")
        login(service, user)
        user.wait_for_name()
        stored = user.secret_tool("store", "--label=mail", "service", "mail", input="s3cret")
        assert stored.returncode == 0, stored.stderr
        sshd = Sshd(tmp_path / "sshd", service, keyboard_interactive=keyboard_interactive)
        made.append(sshd)
        sshd.authorize(user)
        return sshd

    yield make
    for sshd in made:
        sshd.stop()


def test_a_password_login_over_ssh_unlocks_the_login_keychain(ssh_setup, user):
    sshd = ssh_setup()
    user.stop_daemon()
    result = sshd.run_with_password(user, LOCKED + "; secret-tool lookup service mail", tty=True)
    assert session_sees(result) == "unlocked"
    assert result.stdout.splitlines()[-1] == "s3cret", result.stdout


def test_a_keyboard_interactive_password_login_leaves_it_locked(ssh_setup, user):
    """docs/ssh.md: with KbdInteractiveAuthentication sshd runs PAM's auth in a child process, so the password
    pam_latchkey's auth step kept there never reaches the session step: the keychain stays locked, as after a
    key login."""
    sshd = ssh_setup(keyboard_interactive=True)
    user.stop_daemon()
    assert session_sees(sshd.run_with_password(user, LOCKED)) == "locked"


def test_a_key_login_over_ssh_leaves_the_login_keychain_locked(ssh_setup, user):
    sshd = ssh_setup()
    user.stop_daemon()
    assert session_sees(sshd.run_with_key(user, LOCKED)) == "locked"
    # The daemon the key login started is the one asked: it runs, holding the keychain locked.
    assert len(user.daemon_pids()) == 1
    assert user.login_locked()


def test_a_tpm2_slot_without_a_pin_unlocks_at_a_key_login(ssh_setup, user, installed, make_tpm):  # noqa: F811
    """docs/key-slots.md: a tpm2 slot without a PIN opens the login keychain when no password reaches PAM;
    an ssh key login is such a login."""
    tpm = make_tpm()
    sshd = ssh_setup(extra=f"LATCHKEY_TPM_TCTI={tpm.tcti}\n")
    added = user.run(["env", f"LATCHKEY_TPM_TCTI={tpm.tcti}", str(latchkey_for_users(installed)), "add-slot", "tpm2",
                      "--stdin"], input=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    user.stop_daemon()
    user.set_pinentry_answers([])
    result = sshd.run_with_key(user, LOCKED + "; secret-tool lookup service mail", tty=True)
    assert session_sees(result) == "unlocked"
    assert result.stdout.splitlines()[-1] == "s3cret", result.stdout
    asked = user.pinentry_log.read_text() if user.pinentry_log.exists() else ""
    assert "GETPIN" not in asked


def test_a_session_without_a_user_bus_gets_one_clear_line_from_latchkey(ssh_setup, user, installed):  # noqa: F811
    """No pam_systemd / dbus-user-session (docs/ssh.md): the ssh session has no XDG_RUNTIME_DIR and no
    DBUS_SESSION_BUS_ADDRESS. `latchkey unlock-keychain` says there is no session bus, in one line, at once."""
    sshd = ssh_setup(user_bus=False)
    start = time.monotonic()
    result = sshd.run_with_key(user, f"{latchkey_for_users(installed)} unlock-keychain")
    elapsed = time.monotonic() - start
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        "latchkey: no session bus (DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus is missing): no"
        " latchkeyd to unlock the keychain in (docs/ssh.md: a user bus)"], result.stderr
    assert elapsed < 10, elapsed


def test_after_a_key_login_the_first_client_gets_the_terminal_prompt(ssh_setup, user):
    """A key login leaves the keychain locked; secret-tool run in the ssh session's terminal gets the unlock
    prompt on that terminal (pinentry-curses), typed into through the pty ssh -tt gives the session. No PINENTRY
    is named at login, so the daemon chooses the prompter by caller."""
    sshd = ssh_setup(pinentry=False)
    user.stop_daemon()
    tty_prompt_unlocks(sshd, user)


def tty_prompt_unlocks(sshd, user):
    """Runs `secret-tool lookup` in an ssh session with a pty (tmux holds the client's terminal), waits for the
    password prompt on it, types the login password, and expects the secret."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is missing")
    name = "lkssh" + str(sshd.port)
    command = " ".join(["ssh", "-tt", *sshd.options(), "-i", str(sshd.client_key), "-o", "BatchMode=yes",
                        f"{user.name}@127.0.0.1", "'secret-tool lookup service mail; sleep 30'"])
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30", command], check=True)
    try:
        screen = wait_for_screen(name, lambda s: "assword" in s or "PIN" in s)
        assert "assword" in screen, screen
        subprocess.run(["tmux", "send-keys", "-t", name, PASSWORD, "Enter"], check=True)
        assert "s3cret" in wait_for_screen(name, lambda s: "s3cret" in s)
        assert not user.login_locked()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def wait_for_screen(name, done, timeout=20):
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
        if done(screen):
            return screen
        time.sleep(0.1)
    return screen
