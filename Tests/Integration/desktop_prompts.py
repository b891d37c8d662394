"""The real desktop prompts in tests: an X server (Xvfb), gcr's system prompter (gcr-prompter, activated by a
private session bus on that display) and xdotool pressing the prompt's buttons as a person would.

This is what the system's `pinentry` on a GNOME desktop, pinentry-gnome3 (Debian 12: 1.2.1), shows. What it
does, found by running it (Tests/Integration/test_real_pinentry.py checks all but the headings, seen in
screenshots):

- It shows its dialog through gcr's system prompter when it can open a gcr system prompt on the session bus,
  that is when the bus can activate gcr-prompter on a display: the bus's *activation environment* must hold
  DISPLAY (or WAYLAND_DISPLAY). pinentry's own DISPLAY plays no part; without a prompter it falls back to curses
  ("No Gcr System Prompter available, falling back to curses" on stderr, `GETINFO flavor` answers
  "gnome3:curses"), which without a terminal fails: `ERR 83918950 Inappropriate ioctl for device`.
- The window's title is SETTITLE's text (else "pinentry-gnome3"); SETDESC is the body, SETPROMPT the bold
  heading above it ("Message" for CONFIRM, "Enter Passphrase" for GETPIN when not set).
- CONFIRM shows two buttons at the bottom of the window, Cancel (SETCANCEL) left of OK (SETOK): spread over
  the width of a narrow window, right-aligned in a wide one (a long description). SETNOTOK is accepted and
  ignored: gcr has no third button, so a CONFIRM through gcr never answers "not confirmed" (114). OK answers
  `OK`; Cancel and Escape `ERR 83886179 Operation cancelled` (GPG_ERR_CANCELED, 99).
- Return presses OK (the default button); Escape cancels.
- GETPIN shows a password field with the focus; typed text and Return answer it.
"""

import os
import re
import shutil
import signal
import struct
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
    return missing(PINENTRY_GNOME3, PROMPTER, "Xvfb", "xdotool", "xwd")


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
    its title. Buttons are clicked where a screenshot of the window shows them; a password is typed into the
    focused field."""

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

    def pixels(self):
        """The window's pixels, from `xwd` (a ZPixmap of 24 or 32 bits a pixel): width, height and a function
        giving the (red, green, blue) at x, y."""
        dump = subprocess.run(["xwd", "-silent", "-id", self.window], env=dict(os.environ, DISPLAY=self.display),
                              capture_output=True, check=True, timeout=10).stdout
        header = struct.unpack(">25I", dump[:100])
        header_size, width, height, byte_order = header[0], header[4], header[5], header[7]
        bits_per_pixel, bytes_per_line, masks, colours = header[11], header[12], header[14:17], header[19]
        assert bits_per_pixel in (24, 32), f"xwd gave {bits_per_pixel} bits a pixel"
        data = dump[header_size + 12 * colours:]
        step = bits_per_pixel // 8
        order = "little" if byte_order == 0 else "big"

        def shifted(value, mask):
            return (value & mask) >> ((mask & -mask).bit_length() - 1)

        def at(x, y):
            offset = y * bytes_per_line + x * step
            value = int.from_bytes(data[offset:offset + step], order)
            return tuple(shifted(value, mask) for mask in masks)

        return width, height, at

    def buttons(self):
        """The buttons' horizontal spans, left to right, found along a row `BORDER_ROW_FROM_BOTTOM` pixels above
        the window's bottom (through the buttons, below their labels): each button is a pair of borders, pixels
        far darker than the dialog's background (the colour of its top left corner); shading is near it."""
        width, height, at = self.pixels()
        background = sum(at(0, 0))
        y = height - self.BORDER_ROW_FROM_BOTTOM
        borders, previous = [], False
        for x in range(width):
            dark = background - sum(at(x, y)) > self.BORDER_DARKNESS
            if dark and not previous:
                borders.append(x)
            previous = dark
        if len(borders) % 2:
            return []
        return [(left, right) for left, right in zip(borders[::2], borders[1::2])
                if right - left >= self.MIN_BUTTON_WIDTH]

    def shown_buttons(self, timeout=10):
        """The buttons' spans (``buttons()``) once the window is painted: found mapped, it may not be yet."""
        deadline = time.monotonic() + timeout
        while not (spans := self.buttons()):
            assert time.monotonic() < deadline, f"no buttons showed in prompt window {self.window}"
            time.sleep(0.1)
        return spans

    # gcr's dialogs end with a row of buttons, Cancel left of OK (right-aligned in a wide window, spread over
    # a narrow one), about 33 pixels high: their labels this far above the window's bottom edge, their borders
    # (Adwaita's #CDC7C2 on #F6F5F4: 137 darker in the sum of red, green and blue; shading less than 20) below.
    BUTTON_ROW_FROM_BOTTOM = 18
    BORDER_ROW_FROM_BOTTOM = 8
    BORDER_DARKNESS = 60
    MIN_BUTTON_WIDTH = 30

    def press(self, button, timeout=10):
        """Clicks the button `button`: "ok" (SETOK's, the rightmost), "cancel" (SETCANCEL's, left of it) or
        "notok" (SETNOTOK's: gcr shows none, so asking for it fails)."""
        wanted = {"cancel": 2, "ok": 1}
        if button not in wanted:
            raise NoSuchButton(f"gcr's prompt has no {button!r} button, only cancel and ok")
        spans = self.shown_buttons(timeout)
        assert len(spans) == 2, f"the prompt shows {len(spans)} buttons, not 2: {spans}"
        left, right = spans[-wanted[button]]
        x, y = (left + right) // 2, self.size()[1] - self.BUTTON_ROW_FROM_BOTTOM
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
