"""The real desktop prompts in tests: an X server (Xvfb), gcr's system prompter (gcr-prompter, activated by a
private session bus on that display) and xdotool pressing the prompt's buttons as a person would.

This is what the system's `pinentry` is on a GNOME desktop, pinentry-gnome3 (Debian 12: 1.2.1), shows. What it
does, found by running it (Tests/Integration/test_real_pinentry.py checks each point):

- It shows its dialog through gcr's system prompter when it can open a gcr system prompt on the session bus,
  that is when the bus can activate gcr-prompter on a display: the bus's *activation environment* must hold
  DISPLAY (or WAYLAND_DISPLAY). pinentry's own DISPLAY plays no part; without a prompter it falls back to curses
  ("No Gcr System Prompter available, falling back to curses" on stderr, `GETINFO flavor` answers
  "gnome3:curses"), which without a terminal fails: `ERR 83918950 Inappropriate ioctl for device`.
- The window's title is SETTITLE's text (else "pinentry-gnome3"); SETDESC is the body, SETPROMPT the bold
  heading above it ("Message" for CONFIRM, "Enter Passphrase" for GETPIN when not set).
- CONFIRM shows two buttons, Cancel (SETCANCEL) on the left and OK (SETOK) on the right, equal widths across
  the bottom of the window. SETNOTOK is accepted and ignored: gcr has no third button, so a CONFIRM through gcr
  never answers "not confirmed" (114); OK answers `OK`, Cancel or Escape
  `ERR 83886179 Operation cancelled` (GPG_ERR_CANCELED, 99).
- Return presses OK (the default button); Escape cancels.
- GETPIN shows a password field with the focus; typed text and Return answer it.
"""

import os
import re
import shutil
import signal
import subprocess
import time

import jeepney
from jeepney.io.blocking import open_dbus_connection

PINENTRY_GNOME3 = "/usr/bin/pinentry-gnome3"
PROMPTER = "/usr/libexec/gcr-prompter"
PROMPTER_NAME = "org.gnome.keyring.SystemPrompter"


def missing(*programs):
    """Which of `programs` (paths, or names looked up in PATH) are not installed."""
    return [program for program in programs
            if not (os.access(program, os.X_OK) if "/" in program else shutil.which(program))]


def missing_for_gcr_prompts():
    """What a test of pinentry-gnome3's gcr prompt needs and is not installed (.ci/packages lists them all)."""
    return missing(PINENTRY_GNOME3, PROMPTER, "Xvfb", "xdotool")


class XServer:
    """Xvfb on a display number it picks itself (-displayfd): `display` is its name (":N")."""

    def __init__(self, width=1024, height=768):
        read, write = os.pipe()
        self.process = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp"],
            pass_fds=[write], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(write)
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()
        assert number, "Xvfb did not start"
        self.display = f":{number}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def set_activation_environment(bus, **variables):
    """What the bus gives the services it activates (gcr-prompter), as a session manager sets it
    (`dbus-update-activation-environment`)."""
    connection = open_dbus_connection(bus=bus.address)
    try:
        reply = connection.send_and_get_reply(jeepney.new_method_call(
            jeepney.bus_messages.message_bus, "UpdateActivationEnvironment", "a{ss}", (variables,)))
        assert reply.header.message_type == jeepney.MessageType.method_return, reply.body
    finally:
        connection.close()


def prompter_pid(bus):
    """The process id of the gcr-prompter the bus activated, or None when none runs."""
    connection = open_dbus_connection(bus=bus.address)
    try:
        reply = connection.send_and_get_reply(jeepney.new_method_call(
            jeepney.bus_messages.message_bus, "GetConnectionUnixProcessID", "s", (PROMPTER_NAME,)))
        return reply.body[0] if reply.header.message_type == jeepney.MessageType.method_return else None
    finally:
        connection.close()


def stop_prompter(bus):
    """Stops the gcr-prompter the bus activated, if it runs (the next prompt activates a new one, with the
    activation environment as it is then)."""
    pid = prompter_pid(bus)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def xdotool(display, *args, timeout=30):
    """Runs xdotool on `display`; the completed process."""
    return subprocess.run(["xdotool", *args], env=dict(os.environ, DISPLAY=display), capture_output=True, text=True,
                          timeout=timeout)


class NoSuchButton(Exception):
    """The prompt has no such button (gcr's prompts have no third one)."""


class GcrPrompt:
    """A dialog gcr-prompter shows on `display` (for pinentry-gnome3, gcr-ssh-agent, …): its X window, found by
    its title. Buttons are pressed with the mouse where gcr puts them; a password is typed into the focused
    field."""

    # Where gcr's dialogs put their buttons: a row of equal-width buttons across the bottom, Cancel first.
    BUTTONS = ("cancel", "ok")
    BUTTON_ROW_FROM_BOTTOM = 18

    def __init__(self, display, window):
        self.display = display
        self.window = window

    @classmethod
    def wait(cls, display, title, timeout=30):
        """Waits until a visible window whose name contains `title` shows on `display`; the prompt."""
        try:
            found = xdotool(display, "search", "--sync", "--onlyvisible", "--name", re.escape(title),
                            timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"no window titled {title!r} showed on {display} within {timeout} s") from None
        assert found.returncode == 0 and found.stdout.split(), found.stderr
        return cls(display, found.stdout.split()[0])

    @staticmethod
    def shown(display, title):
        """Whether a visible window whose name contains `title` is on `display` now (without waiting)."""
        found = xdotool(display, "search", "--onlyvisible", "--name", re.escape(title))
        return found.returncode == 0 and bool(found.stdout.split())

    def title(self):
        return xdotool(self.display, "getwindowname", self.window).stdout.rstrip("\n")

    def size(self):
        """The window's width and height."""
        geometry = xdotool(self.display, "getwindowgeometry", self.window).stdout
        match = re.search(r"Geometry: (\d+)x(\d+)", geometry)
        assert match, f"no geometry for window {self.window}: {geometry!r}"
        return int(match[1]), int(match[2])

    def focus(self):
        assert xdotool(self.display, "windowfocus", "--sync", self.window).returncode == 0

    def press(self, button):
        """Clicks the button `button`: "ok" (SETOK's), "cancel" (SETCANCEL's) or "notok" (SETNOTOK's, which
        gcr does not show: NoSuchButton)."""
        if button not in self.BUTTONS:
            raise NoSuchButton(f"gcr's prompt has no {button!r} button, only {', '.join(self.BUTTONS)}")
        width, height = self.size()
        slot = width // len(self.BUTTONS)
        x = slot * self.BUTTONS.index(button) + slot // 2
        y = height - self.BUTTON_ROW_FROM_BOTTOM
        clicked = xdotool(self.display, "mousemove", "--window", self.window, str(x), str(y), "click", "1")
        assert clicked.returncode == 0, clicked.stderr

    def key(self, *keys):
        """Presses keys in the window: "Return" is OK, "Escape" cancels."""
        self.focus()
        pressed = xdotool(self.display, "key", *keys)
        assert pressed.returncode == 0, pressed.stderr

    def type(self, text):
        """Types `text` into the window's focused field."""
        self.focus()
        typed = xdotool(self.display, "type", "--delay", "20", text)
        assert typed.returncode == 0, typed.stderr

    def enter_password(self, password):
        """Types `password` into the password field (it has the focus) and presses Return (GETPIN)."""
        self.type(password)
        self.key("Return")

    def wait_closed(self, timeout=15):
        """Waits until the window is no longer visible."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            visible = xdotool(self.display, "search", "--onlyvisible", "--name", ".*").stdout.split()
            if self.window not in visible:
                return
            time.sleep(0.05)
        raise AssertionError(f"prompt window {self.window} still shows after {timeout} s")

    def text(self, directory):
        """The words the window shows, read from a screenshot by tesseract (needs xwd, ImageMagick's convert and
        tesseract: check with `missing` first)."""
        dump = directory / f"prompt-{self.window}.xwd"
        png = dump.with_suffix(".png")
        subprocess.run(["xwd", "-silent", "-id", self.window, "-out", str(dump)],
                       env=dict(os.environ, DISPLAY=self.display), check=True, timeout=10)
        subprocess.run(["convert", str(dump), "-colorspace", "Gray", "-resize", "300%", str(png)], check=True,
                       timeout=30)
        return subprocess.run(["tesseract", str(png), "-", "--psm", "11"], capture_output=True, text=True,
                              timeout=60).stdout
