"""Where a prompt shows, chosen from the caller (docs/prompts-in-terminals.md). latchkeyd runs without --pinentry
and without a display; clients are typed into a tmux pane, and the real /usr/bin/pinentry-curses shows on that
pane's terminal: what the person sees is read with capture-pane, what they type is sent with send-keys. A client
in a session of its own with no terminal gets an error that says what to do."""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import LOGIN_PASSWORD, binary, secret_tool

NO_DESKTOP = {"DISPLAY": None, "WAYLAND_DISPLAY": None, "XAUTHORITY": None, "PINENTRY": None}

pytestmark = pytest.mark.skipif(
    not (shutil.which("tmux") and os.path.exists("/usr/bin/pinentry-curses")), reason="needs tmux and pinentry-curses")


def lock_login(bus):
    subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
         "org.freedesktop.Secret.Service.Lock", "array:objpath:/org/freedesktop/secrets/collection/login"],
        env=bus.env(), check=True, capture_output=True)


class Pane:
    """A shell in a tmux pane on a server of its own (its socket in the test's directory)."""

    def __init__(self, directory, bus, width=100, height=30, name="tmux"):
        self.socket = str(directory / f"{name}.sock")
        environment = {name: value for name, value in bus.env(**NO_DESKTOP, TERM="xterm", LANG="C.UTF-8",
                                                            PS1="$ ").items() if value is not None}
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y",
                        str(height), "bash --norc --noprofile"], env=environment, check=True)
        self.type("export PS1='$ '; clear")
        self.wait_for(lambda screen: screen.strip() == "$")

    def type(self, text, enter=True):
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "0", "-l", text], check=True)
        if enter:
            subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "0", "Enter"], check=True)

    def screen(self):
        return subprocess.run(["tmux", "-S", self.socket, "capture-pane", "-p", "-t", "0"], check=True,
                              capture_output=True, text=True).stdout

    def in_alternate_screen(self):
        return subprocess.run(["tmux", "-S", self.socket, "display-message", "-p", "-t", "0", "#{alternate_on}"],
                              check=True, capture_output=True, text=True).stdout.strip() == "1"

    def wait_for(self, condition, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the pane did not show what was waited for; it shows:\n{screen}")
            time.sleep(0.02)

    def tty(self):
        return subprocess.run(["tmux", "-S", self.socket, "display-message", "-p", "-t", "0", "#{pane_tty}"],
                              check=True, capture_output=True, text=True).stdout.strip()

    def stop(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def locked(make_daemon, bus):
    """latchkeyd chosing where prompts show (no --pinentry, no display), an item, the login keychain locked."""
    daemon = make_daemon(pinentry=None, extra_env=NO_DESKTOP).start()
    secret_tool(bus, "store", "--label=Mail", "service", "mail", input=b"the secret")
    lock_login(bus)
    return daemon


@pytest.fixture
def pane(tmp_path, bus):
    started = Pane(tmp_path, bus)
    yield started
    started.stop()


def shell_lines(screen):
    return [line for line in screen.splitlines() if line.strip()]


def test_a_lookup_typed_in_a_terminal_is_asked_for_the_password_on_that_terminal(locked, pane):
    before = pane.screen()
    started = time.monotonic()
    pane.type("secret-tool lookup service mail; echo exit=$?")
    prompt = pane.wait_for(lambda screen: "Enter your login password" in screen)
    shown_after = time.monotonic() - started
    assert pane.in_alternate_screen(), prompt
    assert "Unlock" in prompt, prompt
    pane.type(LOGIN_PASSWORD)
    after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    lines = shell_lines(after)
    # The shell's lines as they were, then the command's output: nothing of the prompt left.
    assert lines == ["$ secret-tool lookup service mail; echo exit=$?", "the secret", "exit=0", "$"], after
    assert shell_lines(before) == ["$"] and not pane.in_alternate_screen()
    print(f"request to prompt on the terminal: {shown_after * 1000:.0f} ms")


def test_an_access_question_on_a_terminal_takes_the_password_not_a_key(make_daemon, bus, pane):
    daemon = make_daemon(pinentry=None, extra_env=NO_DESKTOP, access_policy="prompt").start()
    secret_tool(bus, "store", "--label=Mail", "service", "mail", input=b"the secret")
    login = daemon.keychains / "login.keychain-db"
    pane.type(f"{binary('latchkey')} find-generic-password -s mail -w {login}; echo exit=$?")
    question = pane.wait_for(lambda screen: "wants the secret of" in screen)
    assert "Type your login password to allow it this once, or choose Refuse" in question, question
    # latchkey says a wait of over a second (docs/ssh.md), but not into a prompt on its own terminal: the person
    # reads the prompt, and a line written into the Password field would garble it.
    time.sleep(1.5)
    assert "latchkey: waiting" not in pane.screen(), pane.screen()
    # What a program sharing the terminal could push: Enter alone, then a yes. Neither allows; each asks again.
    pane.type("")
    pane.wait_for(lambda screen: "password was not correct" in screen)
    pane.type("y", enter=False)
    pane.wait_for(lambda screen: "Password: *_" in screen)
    pane.type("")
    pane.wait_for(lambda screen: "Password: __" in screen)
    assert re.search(r"exit=\d", pane.screen()) is None
    pane.type(LOGIN_PASSWORD)
    after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    assert "the secret" in after and "exit=0" in after, after
    assert "latchkey: waiting" not in after, after


def pinentry_running(daemon):
    """Whether a pinentry-curses of the daemon runs."""
    pid = daemon.process.pid
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children += open(f"/proc/{pid}/task/{task}/children").read().split()
        except FileNotFoundError:
            pass
    for child in children:
        try:
            if open(f"/proc/{child}/comm").read().strip() == "pinentry-curses":
                return True
        except FileNotFoundError:
            pass
    return False


def test_a_client_that_leaves_takes_its_prompt_and_the_terminal_is_as_it_was(locked, pane, tmp_path):
    pane.type(f"stty -g > {tmp_path}/modes-before; clear")
    pane.wait_for(lambda screen: shell_lines(screen) == ["$"])
    # In the foreground: a background job gets no prompt on its terminal.
    pane.type("secret-tool lookup service mail")
    pane.wait_for(lambda screen: "Enter your login password" in screen)
    assert pinentry_running(locked)
    # The person starts typing, then the client goes away (as when it is killed or its window closed).
    pane.type("half typ", enter=False)
    time.sleep(0.2)
    listing = subprocess.run(["tmux", "-S", pane.socket, "list-panes", "-F", "#{pane_pid}"], capture_output=True,
                             text=True, check=True).stdout.split()
    shell = int(listing[0])
    children = [int(p) for p in open(f"/proc/{shell}/task/{shell}/children").read().split()]
    clients = [child for child in children if open(f"/proc/{child}/comm").read().strip() == "secret-tool"]
    assert len(clients) == 1, children
    os.kill(clients[0], signal.SIGKILL)
    # The daemon withdraws the prompt: its pinentry ends, and the pane is the shell's again.
    deadline = time.monotonic() + 10
    while pinentry_running(locked) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pinentry_running(locked)
    # (The shell's new prompt may have gone to pinentry's screen in the milliseconds before it left it: not
    # asserted; docs/prompts-in-terminals.md.)
    after = pane.wait_for(lambda screen: not pane.in_alternate_screen())
    assert shell_lines(after)[0] == "$ secret-tool lookup service mail", after
    assert "Enter your login password" not in after and "typ" not in after, after
    pane.type(f"stty -g > {tmp_path}/modes-after; clear; echo done")
    pane.wait_for(lambda screen: shell_lines(screen) == ["done", "$"])
    assert (tmp_path / "modes-after").read_text() == (tmp_path / "modes-before").read_text()


def test_a_client_with_no_terminal_and_no_display_is_told_what_to_do(locked, bus):
    started = time.monotonic()
    result = subprocess.run(["setsid", "--wait", "secret-tool", "lookup", "service", "mail"], env=bus.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert time.monotonic() - started < 5
    assert result.returncode == 1 and result.stdout == ""
    assert "The login keychain is locked and no prompt can be shown to this program (no display, no terminal):" \
        ' run "latchkey unlock-keychain" in a terminal' in result.stderr, result.stderr
    assert "no prompt can be shown to this program (no display, no terminal)" in locked.stderr.read_text()


def pinentry_environment(daemon):
    """The environment of the pinentry the daemon runs now."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = open(f"/proc/{daemon.process.pid}/task/{daemon.process.pid}/children").read().split()
        for task in os.listdir(f"/proc/{daemon.process.pid}/task"):
            children += open(f"/proc/{daemon.process.pid}/task/{task}/children").read().split()
        for child in set(children):
            if open(f"/proc/{child}/comm").read().strip() == "pinentry-curses":
                entries = open(f"/proc/{child}/environ", "rb").read().split(b"\0")
                return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)
        time.sleep(0.05)
    raise AssertionError("no pinentry-curses running")


def test_a_display_the_caller_names_and_a_terminal_it_holds_open_are_not_where_it_asks(locked, pane, tmp_path, bus):
    """A caller naming a display of its own (it could run that X server and answer its own prompt) and holding
    another terminal on its standard input: the prompt shows on its controlling terminal, nowhere else."""
    other = Pane(tmp_path, bus, name="other")
    try:
        pane.type(f"DISPLAY=:99 WAYLAND_DISPLAY=wayland-9 secret-tool lookup service mail 0<>{other.tty()};"
                  " echo exit=$?")
        pane.wait_for(lambda screen: "Enter your login password" in screen)
        assert pinentry_environment(locked).get("DISPLAY") is None
        assert shell_lines(other.screen()) == ["$"] and not other.in_alternate_screen()
        pane.type(LOGIN_PASSWORD)
        after = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        assert "the secret" in after and "exit=0" in after, after
    finally:
        other.stop()


def test_a_hostile_environment_gives_the_prompt_safe_terminal_settings(locked, pane, tmp_path):
    """TERM with an escape sequence, LC_CTYPE with a line break, and TERM past the first 64 KiB of an environment
    of 200 KB: refused or not read; the prompt shows with the defaults, and the daemon keeps serving."""
    hostile = tmp_path / "hostile"
    hostile.write_text("exec env -i DBUS_SESSION_BUS_ADDRESS=\"$DBUS_SESSION_BUS_ADDRESS\" TERM=\"$(printf 'xterm\\033[2J')\""
                       " LC_CTYPE=\"$(printf 'C\\n.UTF-8')\" secret-tool lookup service mail\n")
    huge = tmp_path / "huge"
    huge.write_text("pad=$(head -c 100000 /dev/zero | tr '\\0' x)\n"
                    "exec env -i DBUS_SESSION_BUS_ADDRESS=\"$DBUS_SESSION_BUS_ADDRESS\" A=$pad B=$pad TERM=xterm"
                    " secret-tool lookup service mail\n")
    for script in (hostile, huge):
        pane.type(f"clear; sh {script}; echo exit=$?")
        pane.wait_for(lambda screen: "Enter your login password" in screen)
        shown = pinentry_environment(locked)
        assert shown["TERM"] == "vt100" and "LC_CTYPE" not in shown, shown
        pane.type(LOGIN_PASSWORD)
        assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
        lock_login(locked.bus)
    assert locked.alive()


def test_a_confirmation_on_a_terminal_takes_the_password_not_a_key(make_daemon, bus, pane):
    """Switching the login keychain to allow-all (every program reads every secret unasked) is confirmed: on a
    terminal by the password, so that the program that asked cannot confirm it by pushing Enter."""
    daemon = make_daemon(pinentry=None, extra_env=NO_DESKTOP, access_policy="prompt").start()
    pane.type(f"{binary('latchkey')} set-access-policy allow-all {daemon.keychains / 'login.keychain-db'}; echo exit=$?")
    question = pane.wait_for(lambda screen: "Type your login password to confirm" in screen)
    assert "allow-all" in question or "every" in question, question
    pane.type("")
    pane.wait_for(lambda screen: "password was not correct" in screen)
    # pinentry-curses: Tab to OK, Tab to Refuse, Enter.
    for key in ("Tab", "Tab", "Enter"):
        subprocess.run(["tmux", "-S", pane.socket, "send-keys", "-t", "0", key], check=True)
        time.sleep(0.2)
    refused = pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    assert "exit=0" not in refused, refused
    pane.type("clear")
    pane.type(f"{binary('latchkey')} set-access-policy allow-all {daemon.keychains / 'login.keychain-db'}; echo exit=$?")
    pane.wait_for(lambda screen: "Type your login password to confirm" in screen)
    pane.type(LOGIN_PASSWORD)
    assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    daemon.wait_for_policy("allow-all")


def test_a_wrong_password_typed_on_a_terminal_counts_as_a_programs_attempt(locked, pane):
    """A caller can make a pseudo-terminal of its own and type into its own prompt: what is typed on a terminal
    is under the wrong-password limit (the count kept in the keychain file), as a program's Unlock is."""
    from conftest import keychain_rows
    login = locked.keychains / "login.keychain-db"
    assert "attempts" not in keychain_rows(login)
    pane.type("secret-tool lookup service mail; echo exit=$?")
    pane.wait_for(lambda screen: "Enter your login password" in screen)
    pane.type("a guess")
    pane.wait_for(lambda screen: "password was not correct" in screen)
    assert "attempts" in keychain_rows(login)
    pane.type(LOGIN_PASSWORD)
    assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)


def test_a_client_holding_no_descriptor_of_its_terminal_is_asked_on_its_shells(locked, pane, tmp_path):
    """git's credential helper runs with pipes on 0, 1 and 2: the terminal is found among its session leader's
    (the shell's) descriptors, still the caller's controlling terminal."""
    pane.type(f"secret-tool lookup service mail < /dev/null > {tmp_path}/out 2> /dev/null; echo exit=$?")
    pane.wait_for(lambda screen: "Enter your login password" in screen)
    pane.type(LOGIN_PASSWORD)
    assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    assert (tmp_path / "out").read_text() == "the secret"


@pytest.fixture
def silent_fuse(tmp_path):
    """A FUSE mount whose server never answers (not even the kernel's first request): a stat() or open() of
    a file there waits until the server's /dev/fuse descriptor is closed, at the end of the test."""
    import ctypes
    mountpoint = tmp_path / "fuse"
    mountpoint.mkdir()
    device = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"fd={device},rootmode=40000,user_id={os.getuid()},group_id={os.getgid()},allow_other".encode()
    if libc.mount(b"silent", str(mountpoint).encode(), b"fuse.silent", 0, options) != 0:
        os.close(device)
        pytest.skip(f"cannot mount FUSE here: {os.strerror(ctypes.get_errno())}")
    yield mountpoint
    os.close(device)
    subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def test_a_caller_holding_a_file_on_a_silent_fuse_mount_does_not_stall_the_daemon(locked, pane, bus, silent_fuse):
    """The caller's standard input names the root of a FUSE mount whose server never answers (an sshfs whose
    host went away, or a FUSE server the caller runs itself). Looking for the caller's terminal never follows
    that descriptor (its mount comes from the kernel's fdinfo and mountinfo): another client is answered at
    once, and the prompt shows on the caller's terminal (its standard output)."""
    pane.type(f"python3 -c \"import os; os.dup2(os.open('{silent_fuse}', os.O_PATH), 0);"
              " os.execvp('secret-tool', ['secret-tool', 'lookup', 'service', 'mail'])\"; echo exit=$?")
    time.sleep(0.5)
    started = time.monotonic()
    answer = subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--reply-timeout=1000", "--dest=org.freedesktop.secrets",
         "/org/freedesktop/secrets", "org.freedesktop.DBus.Properties.Get", "string:org.freedesktop.Secret.Service",
         "string:Collections"], env=bus.env(), capture_output=True, text=True)
    assert answer.returncode == 0, f"another client was not answered: {answer.stderr}"
    assert time.monotonic() - started < 1
    pane.wait_for(lambda screen: "Enter your login password" in screen)
    pane.type(LOGIN_PASSWORD)
    assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)


def test_a_login_keychain_with_a_tpm2_pin_asks_the_password_on_a_terminal(tmp_path, bus, make_daemon, make_tpm):
    """A program with a pseudo-terminal of its own could type PIN guesses there, pushing the TPM towards its
    dictionary lockout, uncounted: on a terminal the login password is asked instead (counted as a program's
    attempt), never the PIN."""
    from test_key_slots import control_socket, with_tpm2_slot
    import control_client as control
    _, cli, environment = with_tpm2_slot(tmp_path, bus, make_daemon, make_tpm, "--pin",
                                         slot_input=LOGIN_PASSWORD + "\n4711\n")
    daemon = make_daemon(keychains=cli.keychains, extra_env={**environment, **NO_DESKTOP}, pinentry=None)
    daemon.start(unlock=False)
    status, message = control.hand_over(control_socket(daemon))
    assert status == "ok" and "PIN" in message, message
    pane = Pane(tmp_path, bus, name="tmux-pin")
    try:
        pane.type("secret-tool lookup service mail; echo exit=$?")
        prompt = pane.wait_for(lambda screen: "Enter your login password" in screen or "PIN" in screen)
        assert "PIN" not in prompt, prompt
        pane.type(LOGIN_PASSWORD)
        assert "exit=0" in pane.wait_for(lambda screen: re.search(r"exit=\d", screen) is not None)
    finally:
        pane.stop()


def test_a_background_job_gets_no_prompt_on_its_terminal(locked, pane):
    """`secret-tool lookup … &`: a prompt on the pane would have pinentry-curses and the shell read the same
    keystrokes (part of the password landing in the shell's history). The job is told to run in the
    foreground, and nothing shows on the pane."""
    pane.type("secret-tool lookup service mail &")
    time.sleep(1)
    pane.type("")
    screen = pane.wait_for(lambda screen: "Exit 1" in screen or "Enter your login password" in screen)
    assert "Enter your login password" not in screen and not pane.in_alternate_screen(), screen
    assert "secret-tool: The login keychain is locked and no prompt can be shown" in screen, screen
    assert "a background job of its terminal; run it in the foreground" in locked.stderr.read_text()


MANY_PROMPTS_CLIENT = """
import sys
sys.path.insert(0, {tests!r})
from dbus_client import Client
client = Client("SESSION")
prompts = []
for _ in range({count}):
    unlocked, prompt = client.service("Unlock", "ao", (["/org/freedesktop/secrets/collection/login"],))
    prompts.append(prompt)
for prompt in prompts:
    client.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", "s", ("",))
open({done!r}, "w").write("asked")
import time
time.sleep(60)
"""


def terminal_descriptors(pid):
    """How many of `pid`'s open descriptors are pseudo-terminals."""
    count = 0
    for entry in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{entry}").startswith("/dev/pts/")
        except OSError:
            pass
    return count


def test_many_waiting_requests_from_one_terminal_hold_one_descriptor_of_it(locked, pane, tmp_path):
    """A client on a terminal that asks many times at once (200 Unlock prompts, each prompted) is one terminal to
    the daemon: the requests waiting for the prompt there share one open descriptor of it, instead of each
    holding its own until the daemon runs out of descriptors (review of issue 26)."""
    script = tmp_path / "many.py"
    done = tmp_path / "done"
    script.write_text(MANY_PROMPTS_CLIENT.format(tests=str(os.path.dirname(__file__)), count=200, done=str(done)))
    pane.type(f"/usr/bin/python3 {script}")
    pane.wait_for(lambda screen: "Enter your login password" in screen)
    deadline = time.monotonic() + 30
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done.exists(), "the client's 200 prompts were not all asked for"
    assert terminal_descriptors(locked.process.pid) <= 2
    pane.type(LOGIN_PASSWORD)
    pane.wait_for(lambda screen: "Enter your login password" not in screen)
