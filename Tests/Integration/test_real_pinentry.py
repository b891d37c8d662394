"""The system's real pinentry, pinentry-gnome3, showing its prompts through gcr's system prompter on an Xvfb
display, answered by xdotool as a person would (desktop_prompts.py): what it answers for each button, and what
it does without a display, talked to over Assuan as latchkeyd does; then latchkeyd started as at login (no
display, no pinentry named, the bus found in XDG_RUNTIME_DIR) running it for an access prompt, before and
after the desktop session starts."""

import os
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import LOGIN_PASSWORD, Bus, Daemon, binary, secret_tool
from desktop_prompts import (PINENTRY_GNOME3, GcrPrompt, XServer, missing, missing_for_gcr_prompts,
                             set_activation_environment, stop_prompter)
from test_secret_tool import lock_login
from test_session_environment import NO_DESKTOP, latchkey, read_secret

pytestmark = pytest.mark.skipif(bool(missing_for_gcr_prompts()),
                                reason=f"not installed: {' '.join(missing_for_gcr_prompts())} (see .ci/packages)")

GPG_ERR_CANCELED = 99
GPG_ERR_NOT_CONFIRMED = 114
# gpg-error's code for a system error (errno ENOTTY) from source "Pinentry": what curses answers without a tty.
NO_TTY = 83918950


class AssuanReply:
    """A pinentry's answer to one command: status lines, the data (percent-decoded) and the final line."""

    def __init__(self, status, data, final):
        self.status, self.data, self.final = status, data, final

    @property
    def ok(self):
        return self.final.startswith("OK")

    @property
    def code(self):
        """The error code of an ERR line, None for OK."""
        return None if self.ok else int(self.final.split()[1])

    def __repr__(self):
        return f"AssuanReply({self.status!r}, {self.data!r}, {self.final!r})"


def escaped(text):
    """Text as an Assuan argument: %, CR and LF percent-escaped."""
    return "".join(f"%{ord(c):02X}" if c in "%\r\n" else c for c in text)


def unescaped(data):
    out = bytearray()
    i = 0
    while i < len(data):
        if data[i] == 0x25 and i + 2 < len(data):
            out.append(int(data[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(data[i])
            i += 1
    return bytes(out)


class Pinentry:
    """A pinentry program spoken to over Assuan on its stdin and stdout, in a session of its own (no controlling
    terminal), as latchkeyd runs it."""

    def __init__(self, env, stderr_path, program=PINENTRY_GNOME3):
        self.stderr_path = stderr_path
        self.process = subprocess.Popen([program], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(stderr_path, "wb"), start_new_session=True)
        self.buffer = b""
        greeting = self.reply(timeout=15)
        assert greeting.ok, greeting

    def send(self, line):
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def line(self, deadline):
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"pinentry did not answer in time; stderr: {self.stderr()}")
            chunk = os.read(self.process.stdout.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"pinentry closed its output; stderr: {self.stderr()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def reply(self, timeout=30):
        deadline = time.monotonic() + timeout
        status, data = [], b""
        while True:
            line = self.line(deadline)
            if line.startswith(b"D "):
                data += unescaped(line[2:])
            elif line.startswith(b"S "):
                status.append(line[2:].decode())
            elif line.startswith(b"OK") or line.startswith(b"ERR"):
                return AssuanReply(status, data, line.decode())

    def command(self, line, timeout=30):
        self.send(line)
        return self.reply(timeout)

    def set_texts(self, **texts):
        """SETTITLE, SETDESC, … with their texts: set_texts(title="…", desc="…", ok="…")."""
        for name, text in texts.items():
            reply = self.command(f"SET{name.upper()} {escaped(text)}")
            assert reply.ok, (name, reply)

    def flavor(self):
        return self.command("GETINFO flavor").data.decode()

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")

    def close(self):
        if self.process.poll() is None:
            try:
                self.command("BYE", timeout=5)
            except (AssertionError, OSError):
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@pytest.fixture
def bus(monkeypatch):
    """A private session bus started without DISPLAY or WAYLAND_DISPLAY, so that what its activated services
    (gcr-prompter) see is only what the test puts in its activation environment."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    started = Bus()
    yield started
    stop_prompter(started)
    started.stop()


@pytest.fixture
def xserver():
    server = XServer()
    yield server
    server.stop()


@pytest.fixture
def start_pinentry(tmp_path):
    started = []

    def start(env):
        pinentry = Pinentry(env, tmp_path / f"pinentry-{len(started)}.stderr")
        started.append(pinentry)
        return pinentry

    yield start
    for pinentry in started:
        pinentry.close()


def pinentry_env(bus, display=None):
    """What latchkeyd gives pinentry: its bus, and DISPLAY only when it has one."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "DBUS_SESSION_BUS_ADDRESS": bus.address}
    if display:
        env["DISPLAY"] = display
    return env


@pytest.fixture
def desktop(bus, xserver):
    """The display and a bus whose activation environment has it, as a desktop session sets it."""
    set_activation_environment(bus, DISPLAY=xserver.display, NO_AT_BRIDGE="1")
    return xserver.display


ACCESS_TEXTS = dict(title="Keychain Access", desc="/usr/bin/other-app\nwants the secret of “k”.", ok="Allow once",
                    cancel="Deny")


def test_getpin_answers_the_password_typed_into_the_gcr_prompt(bus, desktop, start_pinentry):
    pinentry = start_pinentry(pinentry_env(bus, desktop))
    assert pinentry.flavor() == "gnome3"
    pinentry.set_texts(title="Unlock Keychain", desc="Enter the password of the keychain “login”.",
                       prompt="Password:")
    pinentry.send("GETPIN")
    prompt = GcrPrompt.wait(desktop, "Unlock Keychain")
    assert prompt.title() == "Unlock Keychain"
    prompt.enter_password("correct horse 1")
    reply = pinentry.reply()
    assert reply.ok and reply.data == b"correct horse 1", reply
    prompt.wait_closed()


@pytest.mark.parametrize("answer, expected", [
    (("press", "ok"), None),
    (("press", "cancel"), GPG_ERR_CANCELED),
    (("key", "Return"), None),
    (("key", "Escape"), GPG_ERR_CANCELED),
])
def test_confirm_answers_ok_for_the_ok_button_and_cancelled_for_cancel(bus, desktop, start_pinentry, answer,
                                                                      expected):
    pinentry = start_pinentry(pinentry_env(bus, desktop))
    pinentry.set_texts(**ACCESS_TEXTS)
    pinentry.send("CONFIRM")
    prompt = GcrPrompt.wait(desktop, "Keychain Access")
    how, what = answer
    prompt.press(what) if how == "press" else prompt.key(what)
    reply = pinentry.reply()
    if expected is None:
        assert reply.ok, reply
    else:
        assert reply.code is not None and reply.code & 0xFFFF == expected, reply
    prompt.wait_closed()


def test_gcr_shows_no_third_button(bus, desktop, start_pinentry, tmp_path):
    """SETNOTOK is accepted, but gcr's prompt has only OK and Cancel: two buttons, the third one's text nowhere
    on it, so nothing on it answers "not confirmed" (114)."""
    pinentry = start_pinentry(pinentry_env(bus, desktop))
    pinentry.set_texts(**ACCESS_TEXTS, notok="Always allow")
    pinentry.send("CONFIRM")
    prompt = GcrPrompt.wait(desktop, "Keychain Access")
    assert len(prompt.shown_buttons()) == 2
    if not missing("convert", "tesseract"):
        shown = prompt.text(tmp_path)
        assert "Allow once" in shown and "Deny" in shown, shown
        assert "Always" not in shown, shown
    prompt.press("cancel")
    reply = pinentry.reply()
    assert reply.code & 0xFFFF == GPG_ERR_CANCELED, reply


@pytest.mark.parametrize("pinentry_display", [False, True], ids=["no DISPLAY anywhere", "DISPLAY for pinentry only"])
def test_without_a_display_for_the_prompter_it_falls_back_to_curses_and_fails_without_a_terminal(
        bus, xserver, start_pinentry, pinentry_display):
    """What latchkeyd started at login meets: the bus cannot start gcr-prompter on a display, so pinentry-gnome3
    turns to curses, which has no terminal. pinentry's own DISPLAY does not help: only the bus's activation
    environment decides."""
    pinentry = start_pinentry(pinentry_env(bus, xserver.display if pinentry_display else None))
    assert pinentry.flavor() == "gnome3:curses"
    pinentry.set_texts(**ACCESS_TEXTS)
    reply = pinentry.command("CONFIRM", timeout=15)
    assert reply.code == NO_TTY and "Inappropriate ioctl for device" in reply.final, reply
    assert "falling back to curses" in pinentry.stderr()
    assert not GcrPrompt.shown(xserver.display, "Keychain Access")


def test_the_activation_environment_is_enough_without_a_display_for_pinentry(bus, desktop, start_pinentry):
    """The converse: pinentry started with no DISPLAY of its own shows the gcr prompt when the bus can start
    gcr-prompter on the display."""
    pinentry = start_pinentry(pinentry_env(bus))
    assert pinentry.flavor() == "gnome3"
    pinentry.set_texts(**ACCESS_TEXTS)
    pinentry.send("CONFIRM")
    GcrPrompt.wait(desktop, "Keychain Access").press("ok")
    assert pinentry.reply().ok



def system_pinentry_is_gnome3():
    found = shutil.which("pinentry", path="/usr/bin:/bin")
    return found is not None and os.path.realpath(found) == PINENTRY_GNOME3


@pytest.fixture
def login_bus(monkeypatch, tmp_path):
    """The user's bus as a login has it: at $XDG_RUNTIME_DIR/bus (the daemon's runtime directory in
    conftest.Daemon), started without DISPLAY or WAYLAND_DISPLAY."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    started = Bus(address=f"unix:path={runtime}/bus")
    yield started
    stop_prompter(started)
    started.stop()


@pytest.fixture
def before_the_desktop(login_bus, tmp_path):
    """latchkeyd as pam_latchkey starts it: no DISPLAY or WAYLAND_DISPLAY, no --pinentry and no PINENTRY (so it
    runs the system's `pinentry`), no DBUS_SESSION_BUS_ADDRESS (it finds the bus in $XDG_RUNTIME_DIR), its
    keychains asking (policy prompt); an item secret-tool made, which the latchkey command is not trusted to
    read."""
    if not system_pinentry_is_gnome3():
        pytest.skip("the system's pinentry is not pinentry-gnome3 (update-alternatives --display pinentry)")
    daemon = Daemon(login_bus, tmp_path, access_policy="prompt", pinentry=None,
                    extra_env={**NO_DESKTOP, "DBUS_SESSION_BUS_ADDRESS": None}).start()
    stored = secret_tool(login_bus, "store", "--label=Mail", "service", "mail", input=b"the secret", check=False)
    assert stored.returncode == 0, stored.stderr
    yield daemon
    daemon.stop(signal.SIGKILL)


def read_secret_answering(daemon, display, *answers):
    """`latchkey find-generic-password` reading the item, the gcr prompts it causes answered one after another by
    pressing `answers` (as long as prompts show before the command ends): the completed command, and how many
    prompts showed."""
    environment = {name: value for name, value in daemon.bus.env(**NO_DESKTOP).items() if value is not None}
    reading = subprocess.Popen(
        [binary("latchkey"), "find-generic-password", "-s", "mail", "-w", str(daemon.keychains / "login.keychain-db")],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    shown = 0
    try:
        for answer in answers:
            prompt = prompt_for(reading, display, "Keychain Access")
            if not prompt:
                break
            shown += 1
            prompt.press(answer)
            prompt.wait_closed()
        out, err = reading.communicate(timeout=30)
    finally:
        if reading.poll() is None:
            reading.kill()
            reading.wait()
    return subprocess.CompletedProcess(reading.args, reading.returncode, out, err), shown


def prompt_for(client, display, title, timeout=30):
    """The gcr prompt titled `title` that `client` (a process waiting for it) causes; None when the client
    ends first (no prompt could show)."""
    deadline = time.monotonic() + timeout
    while client.poll() is None:
        if GcrPrompt.shown(display, title):
            return GcrPrompt.wait(display, title)
        assert time.monotonic() < deadline, f"no prompt titled {title!r} showed in {timeout} s"
        time.sleep(0.1)
    return None


def test_a_daemon_started_at_login_shows_the_real_prompt_once_the_desktop_session_runs(
        before_the_desktop, login_bus, xserver):
    """The whole way with the real pinentry-gnome3 and gcr-prompter. The desktop session, once it runs, puts its
    display in the bus's activation environment (as gnome-session does) and runs `latchkey update-environment`
    (the package's autostart entry): from then on the daemon's access prompts show on the display."""
    daemon, bus = before_the_desktop, login_bus
    # No display anywhere yet: the system's pinentry cannot show, and the read is denied at once.
    denied = read_secret(daemon)
    assert denied.returncode == 1 and denied.stdout == "", denied.stderr
    assert "no way to ask" in denied.stderr and len(denied.stderr.splitlines()) == 1, denied.stderr

    set_activation_environment(bus, DISPLAY=xserver.display, NO_AT_BRIDGE="1")
    handed = latchkey(bus, "update-environment", DISPLAY=xserver.display, LANG="C.UTF-8")
    assert handed.returncode == 0 and handed.stderr == "", handed.stderr

    # The same read shows gcr's prompt on that display. gcr shows two buttons, so the access prompt asks twice:
    # Allow… (or Deny), then whether every time (Always allow) or only this time (Allow once, its Cancel).
    allowed, shown = read_secret_answering(daemon, xserver.display, "ok", "cancel")
    assert shown == 2 and allowed.returncode == 0 and allowed.stdout == "the secret\n", allowed.stderr

    # Allow once was for that read only: the next one is asked again, and Deny refuses it at the first question.
    refused, shown = read_secret_answering(daemon, xserver.display, "cancel", "cancel")
    assert shown == 1 and refused.returncode == 1 and refused.stdout == "", refused.stderr
    assert "no way to ask" not in refused.stderr and len(refused.stderr.splitlines()) == 1, refused.stderr

    # Always allow: the command is on the item's list from then on, and the next read asks nothing.
    always, shown = read_secret_answering(daemon, xserver.display, "ok", "ok")
    assert shown == 2 and always.returncode == 0 and always.stdout == "the secret\n", always.stderr
    listed = latchkey(bus, "list-access", str(daemon.keychains / "login.keychain-db")).stdout
    assert os.path.realpath(binary("latchkey")) in listed, listed
    trusted, shown = read_secret_answering(daemon, xserver.display, "ok")
    assert shown == 0 and trusted.returncode == 0 and trusted.stdout == "the secret\n", trusted.stderr
    assert daemon.alive()


def test_the_login_keychain_unlocks_with_the_password_typed_into_the_real_prompt(before_the_desktop, login_bus,
                                                                                 xserver):
    """The unlock prompt (GETPIN) of the same daemon once the desktop runs: a wrong password typed into gcr's
    prompt is refused and asked again (a new prompt), the right one unlocks and the lookup returns the secret."""
    bus = login_bus
    set_activation_environment(bus, DISPLAY=xserver.display, NO_AT_BRIDGE="1")
    assert latchkey(bus, "update-environment", DISPLAY=xserver.display, LANG="C.UTF-8").returncode == 0
    lock_login(bus)
    # No controlling terminal (a session of its own): the desktop's prompt, also when the tests run in a terminal.
    lookup = subprocess.Popen(["secret-tool", "lookup", "service", "mail"], env=bus.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True)
    try:
        first = prompt_for(lookup, xserver.display, "Unlock Keychain")
        assert first, lookup.communicate()
        first.enter_password("not the password")
        first.wait_closed()
        second = prompt_for(lookup, xserver.display, "Unlock Keychain")
        assert second, lookup.communicate()
        second.enter_password(LOGIN_PASSWORD)
        out, err = lookup.communicate(timeout=30)
    finally:
        if lookup.poll() is None:
            lookup.kill()
            lookup.wait()
    assert lookup.returncode == 0 and out == b"the secret", err


def test_setrepeat_shows_gcrs_new_password_prompt_and_answers_pin_repeated(bus, desktop, start_pinentry):
    """What latchkeyd asks a new password with (OwnPasswords.askNewPassword): SETREPEAT and SETREPEATERROR, then
    one GETPIN. pinentry-gnome3 shows gcr's new-password prompt (a password field and a confirmation field, OK
    only once both match) and answers with "S PIN_REPEATED": one dialog, not two."""
    pinentry = start_pinentry(pinentry_env(bus, desktop))
    pinentry.set_texts(title="Change Keychain Password", desc="Choose a new password for the “k” keychain.",
                       prompt="New password:", repeat="Confirm:",
                       repeaterror="The passwords did not match. Try again.")
    pinentry.send("GETPIN")
    prompt = GcrPrompt.wait(desktop, "Change Keychain Password")
    prompt.type("new horse 2")
    prompt.key("Tab")
    prompt.type("new horse 2")
    prompt.key("Return")
    reply = pinentry.reply()
    assert reply.ok and reply.data == b"new horse 2", reply
    assert "PIN_REPEATED" in reply.status, reply
    prompt.wait_closed()


@pytest.mark.skipif(shutil.which("tmux") is None or shutil.which("pinentry-tty") is None,
                    reason="tmux or pinentry-tty is not installed (see .ci/packages)")
def test_pinentry_tty_asks_a_new_password_and_its_confirmation_until_they_match(tmp_path):
    """pinentry-tty on a terminal (a tmux pane, OPTION ttyname as gpg-agent sends it): after SETREPEAT it asks
    "New password:" then "Confirm:" in one GETPIN, shows SETREPEATERROR's text and asks both again when they
    differ, and answers "S PIN_REPEATED" with the password once they match: the behaviour the scripted pinentry
    copies (Tests/Support/scripted-pinentry, SETREPEAT)."""
    socket = str(tmp_path / "tmux.sock")
    subprocess.run(["tmux", "-S", socket, "new-session", "-d", "-x", "80", "-y", "24", "sleep 120"], check=True)
    try:
        tty = subprocess.run(["tmux", "-S", socket, "display", "-p", "#{pane_tty}"], capture_output=True, text=True,
                             check=True).stdout.strip()

        def pane():
            return subprocess.run(["tmux", "-S", socket, "capture-pane", "-p"], capture_output=True, text=True,
                                  check=True).stdout

        def wait_for_pane(text, count=1):
            deadline = time.monotonic() + 10
            while pane().count(text) < count:
                assert time.monotonic() < deadline, f"the pane never showed {text!r} {count} times: {pane()!r}"
                time.sleep(0.05)

        def type_line(text):
            subprocess.run(["tmux", "-S", socket, "send-keys", "-l", text], check=True)
            subprocess.run(["tmux", "-S", socket, "send-keys", "Enter"], check=True)

        pinentry = Pinentry({"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, tmp_path / "tty.stderr",
                            program=shutil.which("pinentry-tty"))
        try:
            for line in (f"OPTION ttyname={tty}", "OPTION ttytype=xterm"):
                assert pinentry.command(line).ok
            pinentry.set_texts(desc="Choose a new password.", prompt="New password:", repeat="Confirm:",
                               repeaterror="They differ")
            pinentry.send("GETPIN")
            wait_for_pane("New password:")
            type_line("first")
            wait_for_pane("Confirm:")
            type_line("other")
            wait_for_pane("They differ")
            wait_for_pane("New password:", 2)
            type_line("same one")
            wait_for_pane("Confirm:", 2)
            type_line("same one")
            reply = pinentry.reply()
            assert reply.ok and reply.data == b"same one", reply
            assert reply.status == ["PIN_REPEATED"], reply
        finally:
            pinentry.close()
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
