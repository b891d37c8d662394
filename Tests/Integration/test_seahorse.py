"""Seahorse, GNOME's "Passwords and Keys", against latchkeyd under Xvfb: it lists the login keyring and its
items. The test starts a private bus, latchkeyd with a few items, an X server and Seahorse; it waits for
Seahorse's window, takes screenshots (xwd, converted with ImageMagick) and reads them with tesseract until the
keyring's name and every item label show, or fails with the last screenshot's text.

LATCHKEY_SEAHORSE_SCREENSHOT=path keeps the last screenshot (the one in docs/ was made that way)."""

import os
import re
import shutil
import subprocess
import time

import pytest

from jeepney.bus_messages import MatchRule, message_bus
from jeepney.io.blocking import open_dbus_connection

from conftest import LOGIN_PASSWORD, secret_tool
from desktop_prompts import XServer
from test_gnome_keyring_private import DENIED, LOGIN, DHSession

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
    server = XServer(width=1100, height=720)
    yield server
    server.stop()


class Seahorse:
    """Seahorse on the private bus and the X server, with a home of its own, its window found and widened."""

    def __init__(self, bus, xserver, tmp_path):
        home = tmp_path / "home"
        config = home / ".config"
        config.mkdir(parents=True)
        runtime = tmp_path / "seahorse-run"
        runtime.mkdir(mode=0o700)
        self.env = bus.env(
            DISPLAY=xserver.display, HOME=str(home), XDG_CONFIG_HOME=str(config), XDG_DATA_HOME=str(home / "data"),
            XDG_CACHE_HOME=str(home / "cache"), XDG_RUNTIME_DIR=str(runtime), GNUPGHOME=str(home / "gnupg"),
            GSETTINGS_BACKEND="keyfile", NO_AT_BRIDGE="1", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        self.stderr = tmp_path / "seahorse.stderr"
        self.screenshot = tmp_path / "seahorse.png"
        self.process = subprocess.Popen(["seahorse"], env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=open(self.stderr, "wb"))
        self.window = wait_for(lambda: xdotool(self.env, "search", "--onlyvisible", "--class", "seahorse"), 30,
                               "Seahorse's window").split()[0]
        # Wide enough for the sidebar of keyrings beside the item list (narrow, Seahorse folds the sidebar away
        # and shows the keyring's name in its header only). A resize sent before the window is ready is lost:
        # sent again until the window has the size.
        def resized():
            xdotool(self.env, "windowmove", self.window, "0", "0")
            xdotool(self.env, "windowsize", self.window, "1000", "640")
            time.sleep(0.3)
            geometry = xdotool(self.env, "getwindowgeometry", self.window)
            return re.search(r"Geometry: (\d+)x", geometry) and int(re.search(r"Geometry: (\d+)x", geometry)[1]) >= 1000
        wait_for(resized, 30, "Seahorse's window to be widened")

    def capture(self):
        assert self.process.poll() is None, f"seahorse exited: {self.stderr.read_text()}"
        capture(self.env, self.window, self.screenshot)
        return self.screenshot

    def login_in_sidebar(self):
        """Where the sidebar shows the login keyring (its label, read from the daemon), once it does."""
        return wait_for(lambda: locate(self.capture(), "Login", leftmost=True), 30,
                        "the login keyring in Seahorse's sidebar")

    def click(self, x, y, button="1", window=None):
        xdotool(self.env, "mousemove", "--window", window or self.window, str(x), str(y), "click", button)

    def popup(self):
        """The menu window that opened over the main one: its id and position."""
        for window in xdotool(self.env, "search", "--onlyvisible", "--name", "").split():
            geometry = " ".join(xdotool(self.env, "getwindowgeometry", window).split())
            match = re.search(r"Position: (-?\d+),(-?\d+) .*Geometry: (\d+)x(\d+)", geometry)
            if window != self.window and match and int(match[1]) >= 0 and 50 < int(match[3]) < 900:
                return window, int(match[1]), int(match[2])
        return None

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def test_seahorse_lists_the_login_keyring_and_its_items(make_daemon, bus, xserver, tmp_path):
    daemon = make_daemon().start()
    for number, label in enumerate(LABELS):
        secret_tool(bus, "store", f"--label={label}", "seahorse-test", str(number), input=f"secret {number}".encode())
    # The name is latchkeyd's, not a gnome-keyring's started by activation.
    assert name_owner_pid(bus) == daemon.process.pid
    seahorse = Seahorse(bus, xserver, tmp_path)
    text = ""
    try:
        # A click on the login keyring shows its items.
        seahorse.click(*seahorse.login_in_sidebar())

        def shows_everything():
            nonlocal text
            text = read_text(seahorse.capture())
            return all(word_in(label, text) for label in ["Login", *LABELS])

        try:
            wait_for(shows_everything, 45, "Seahorse to show the login keyring and its items")
        except AssertionError:
            raise AssertionError(f"Seahorse shows: {text!r}") from None
    finally:
        seahorse.stop()
        kept = os.environ.get("LATCHKEY_SEAHORSE_SCREENSHOT")
        if kept and seahorse.screenshot.exists():
            shutil.copy(seahorse.screenshot, kept)


def test_seahorse_changes_the_login_keyring_password(make_daemon, bus, xserver, tmp_path):
    """The sidebar's menu, "Change Password": Seahorse calls ChangeWithPrompt, pinentry asks for the current
    password, then for the new one with its confirmation in one dialog (SETREPEAT), and the login keychain opens
    with the new password only."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}", "password horse battery"])
    daemon.start()
    seahorse = Seahorse(bus, xserver, tmp_path)
    watcher = open_dbus_connection(bus=bus.address)
    completed = MatchRule(type="signal", interface="org.freedesktop.Secret.Prompt", member="Completed")
    watcher.send_and_get_reply(message_bus.AddMatch(completed))
    try:
        with watcher.filter(completed) as signals:
            seahorse.click(*seahorse.login_in_sidebar(), button="3")
            menu, left, top = wait_for(seahorse.popup, 45, "the keyring's menu")
            change = wait_for(lambda: locate(capture_to(seahorse.env, menu, tmp_path / "menu.png"), "Change"), 45,
                              "'Change Password' in the menu")
            xdotool(seahorse.env, "mousemove", str(left + change[0]), str(top + change[1]), "click", "1")
            signal = watcher.recv_until_filtered(signals, timeout=90)
        assert signal.body == (False, ("s", "")), signal.body
    finally:
        watcher.close()
        seahorse.stop()
    assert daemon.pinentry_log().count('"GETPIN"') == 2, daemon.pinentry_log()
    assert '"SETREPEAT"' in daemon.pinentry_log()
    session = DHSession(bus)
    try:
        session.lock(LOGIN)
        assert session.unlock(LOGIN, LOGIN_PASSWORD).error_name == DENIED
        assert not session.unlock(LOGIN, "horse battery").is_error
    finally:
        session.close()


def capture_to(env, window, png):
    capture(env, window, png)
    return png


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


def locate(png, word, leftmost=False):
    """The centre of `word` in the screenshot (window coordinates), read by tesseract; None if not there. The
    first one read, or with `leftmost` the one furthest left (the sidebar's, not the header's)."""
    found = []
    for line in read_text(png, "tsv").splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) == 12 and fields[11].strip() == word:
            left, top, width, height = (int(value) // 2 for value in fields[6:10])
            found.append((left + width // 2, top + height // 2))
    if not found:
        return None
    return min(found) if leftmost else found[0]


def word_in(label, text):
    """Whether every word of `label` is in the OCR'd text (as a word)."""
    return all(re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE) for word in label.split())


def test_seahorse_started_on_a_locked_login_keychain_shows_every_row_after_its_unlock_button(make_daemon, bus,
                                                                                          xserver, tmp_path):
    """Seahorse started while the login keychain is locked (the daemon started without the password, as after a
    key-based SSH login) and unlocked from its own "Unlock" button: the item list that appears shows every
    row's label and type. Seahorse (libsecret 0.20) built its item objects while the keychain was locked, when
    labels and attributes read as empty, and keeps them: it reads them again only for the `ItemChanged` (libsecret
    refreshes the item) and `PropertiesChanged` values latchkeyd sends at the unlock. Without both, every row
    shows no label and the generic type "Password or Secret", as the issue saw."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    secret_tool(bus, "store", f"--label={LABELS[0]}", "xdg:schema", "org.gnome.keyring.NetworkPassword",
                "server", "mail.example", "user", "alice", "protocol", "imap", input=b"secret 0")
    for number, label in enumerate(LABELS[1:], start=1):
        secret_tool(bus, "store", f"--label={label}", "seahorse-test", str(number), input=f"secret {number}".encode())
    daemon.stop()
    daemon.start(unlock=False)
    seahorse = Seahorse(bus, xserver, tmp_path)
    text = ""
    try:
        seahorse.click(*seahorse.login_in_sidebar())
        # "Keyring is locked", and below it the Unlock button (white on blue, which tesseract does not read).
        locked = wait_for(lambda: locate(seahorse.capture(), "locked"), 45, "the locked keyring's page")
        keyring = locate(seahorse.screenshot, "Keyring")
        seahorse.click((keyring[0] + locked[0]) // 2, locked[1] + 72)

        def shows_every_row():
            nonlocal text
            text = read_text(seahorse.capture())
            # The rows' labels, and their types: "Network password" (the network schema), "Password or Secret" (others).
            return all(word_in(label, text) for label in [*LABELS, "Network password", "Password or Secret"])

        try:
            wait_for(shows_every_row, 45, "Seahorse to show every row's label and type after the unlock")
        except AssertionError:
            raise AssertionError(f"Seahorse shows: {text!r}") from None
        assert "GETPIN" in daemon.pinentry_log()
    finally:
        seahorse.stop()
        kept = os.environ.get("LATCHKEY_SEAHORSE_SCREENSHOT")
        if kept and seahorse.screenshot.exists():
            shutil.copy(seahorse.screenshot, kept)
