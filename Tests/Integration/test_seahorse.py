"""Seahorse, GNOME's "Passwords and Keys", against latchkeyd under Xvfb: it lists the login keyring and its
items. The test starts a private bus, latchkeyd with a few items, an X server and Seahorse; it waits for
Seahorse's window, takes screenshots (xwd, converted with ImageMagick) and reads them with tesseract until the
keyring's name and every item label show, or fails with the last screenshot's text.

LATCHKEY_SEAHORSE_SCREENSHOT=path keeps the last screenshot (the one in docs/ was made that way)."""

import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

from conftest import secret_tool

LABELS = ["Mailbox Alice", "Gateway Berlin", "Wiki Token"]
TOOLS = ["seahorse", "Xvfb", "xdotool", "xwd", "tesseract"]
CONVERT = "/usr/bin/convert"


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class XServer:
    """Xvfb on a display number it picks itself (-displayfd)."""

    def __init__(self, width=1100, height=720):
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
        self.process.terminate()
        self.process.wait(timeout=10)


def name_owner_pid(bus):
    out = subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
         "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.freedesktop.secrets"],
        env=bus.env(), capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1])


@pytest.fixture
def xserver():
    missing = [tool for tool in TOOLS if shutil.which(tool) is None] + (
        [] if os.path.exists(CONVERT) else [CONVERT])
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)} (see .ci/packages)")
    server = XServer()
    yield server
    server.stop()


def test_seahorse_lists_the_login_keyring_and_its_items(make_daemon, bus, xserver, tmp_path):
    daemon = make_daemon().start()
    for number, label in enumerate(LABELS):
        secret_tool(bus, "store", f"--label={label}", "seahorse-test", str(number), input=f"secret {number}".encode())
    # The name is latchkeyd's, not a gnome-keyring's started by activation.
    assert name_owner_pid(bus) == daemon.process.pid

    home = tmp_path / "home"
    config = home / ".config"
    config.mkdir(parents=True)
    runtime = tmp_path / "seahorse-run"
    runtime.mkdir(mode=0o700)
    env = bus.env(
        DISPLAY=xserver.display, HOME=str(home), XDG_CONFIG_HOME=str(config), XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"), XDG_RUNTIME_DIR=str(runtime), GNUPGHOME=str(home / "gnupg"),
        GSETTINGS_BACKEND="keyfile", NO_AT_BRIDGE="1", LANG="C.UTF-8", LC_ALL="C.UTF-8", GTK_A11Y="none")
    log = open(tmp_path / "seahorse.stderr", "wb")
    seahorse = subprocess.Popen(["seahorse"], env=env, stdout=subprocess.DEVNULL, stderr=log)
    screenshot = tmp_path / "seahorse.png"
    text = ""
    try:
        window = wait_for(lambda: xdotool(env, "search", "--onlyvisible", "--class", "seahorse"), 30,
                          "Seahorse's window").split()[0]
        # Wide enough for the sidebar of keyrings beside the item list.
        xdotool(env, "windowmove", window, "0", "0")
        xdotool(env, "windowsize", window, "1000", "640")

        # The sidebar lists the login keyring (read from the daemon); a click on it shows its items.
        def login_in_sidebar():
            capture(env, window, screenshot)
            return locate(screenshot, "Login")

        x, y = wait_for(login_in_sidebar, 30, "the login keyring in Seahorse's sidebar")
        xdotool(env, "mousemove", "--window", window, str(x), str(y), "click", "1")

        def shows_everything():
            nonlocal text
            assert seahorse.poll() is None, f"seahorse exited: {(tmp_path / 'seahorse.stderr').read_text()}"
            capture(env, window, screenshot)
            text = read_text(screenshot)
            return all(word_in(label, text) for label in ["Login", *LABELS])

        try:
            wait_for(shows_everything, 45, "Seahorse to show the login keyring and its items")
        except AssertionError:
            raise AssertionError(f"Seahorse shows: {text!r}") from None
    finally:
        seahorse.terminate()
        seahorse.wait(timeout=10)
        kept = os.environ.get("LATCHKEY_SEAHORSE_SCREENSHOT")
        if kept and screenshot.exists():
            shutil.copy(screenshot, kept)


def xdotool(env, *args):
    result = subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=10)
    return result.stdout.strip() if result.returncode == 0 else ""


def capture(env, window, png):
    dump = png.with_suffix(".xwd")
    subprocess.run(["xwd", "-silent", "-id", window, "-out", str(dump)], env=env, check=True, timeout=10)
    subprocess.run([CONVERT, str(dump), str(png)], check=True, timeout=30)


def read_text(png, output="txt"):
    # Grey, at twice the size: tesseract reads the small sidebar text and the header's title then.
    scaled = png.with_name("ocr.png")
    subprocess.run([CONVERT, str(png), "-colorspace", "Gray", "-resize", "200%", str(scaled)], check=True,
                   timeout=30)
    return subprocess.run(["tesseract", str(scaled), "-", "--psm", "11", *([output] if output != "txt" else [])],
                          capture_output=True, text=True, timeout=60).stdout


def locate(png, word):
    """The centre of `word` in the screenshot (window coordinates), read by tesseract; None if not there."""
    for line in read_text(png, "tsv").splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) == 12 and fields[11].strip() == word:
            left, top, width, height = (int(value) // 2 for value in fields[6:10])
            return left + width // 2, top + height // 2
    return None


def word_in(label, text):
    """Whether every word of `label` is in the OCR'd text (as a word)."""
    return all(re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE) for word in label.split())
