"""gcr-ssh-agent (Debian 12's gcr) with latchkeyd as the Secret Service: the SSH agent docs/packaging.md
tells users to keep. Everything is the real program: gcr-ssh-agent wrapping OpenSSH's ssh-agent, its
ssh-add and gcr-ssh-askpass, and gcr's own system prompter (gcr-prompter, GTK) activated by the bus on
an Xvfb display, where xdotool types the passphrase and ticks "Automatically unlock this key whenever
I'm logged in" as a user would.

gcr-ssh-agent (gcr/gcr-ssh-agent-interaction.c) looks a key's passphrase up, and stores it when that box
is ticked, with libsecret: schema org.freedesktop.Secret.Generic, attribute unique =
"ssh-store:<private key path>", label "Unlock password for: <key comment>", in the default collection."""

import os
import pathlib
import signal
import subprocess
import time

import pytest
import secretstorage
from jeepney.io.blocking import open_dbus_connection

from desktop_prompts import (PROMPTER, GcrPrompt, XServer, missing, set_activation_environment,
                             stop_prompter)

AGENT = "/usr/libexec/gcr-ssh-agent"
PASSPHRASE = "key passphrase 1"

pytestmark = pytest.mark.skipif(
    bool(missing(AGENT, PROMPTER, "Xvfb", "xdotool", "ssh-keygen")),
    reason="needs gcr, xvfb, xdotool and openssh-client (.ci/packages lists them)")


@pytest.fixture
def display():
    """An Xvfb display for gcr's GTK prompter; its name (":N")."""
    server = XServer()
    yield server.display
    server.stop()


class SshAgent:
    """gcr-ssh-agent for a user whose HOME holds a passphrase-protected key, as its systemd unit runs it:
    `gcr-ssh-agent $XDG_RUNTIME_DIR/gcr`, clients using $XDG_RUNTIME_DIR/gcr/ssh."""

    def __init__(self, bus, directory):
        self.bus = bus
        self.home = directory / "home"
        self.runtime = directory / "run"
        (self.home / ".ssh").mkdir(parents=True, mode=0o700)
        (self.runtime / "gcr").mkdir(parents=True, mode=0o700)
        self.key = self.home / ".ssh" / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-C", "test key", "-f", str(self.key)],
                       check=True)
        self.socket = self.runtime / "gcr" / "ssh"
        self.process = None
        self.data = directory / "signed"
        self.data.write_text("signed by the key\n")

    def env(self):
        return self.bus.env(HOME=str(self.home), XDG_RUNTIME_DIR=str(self.runtime), SSH_AUTH_SOCK=str(self.socket),
                            NO_AT_BRIDGE="1")

    def start(self):
        # Its own process group: it starts OpenSSH's ssh-agent beside it.
        self.process = subprocess.Popen([AGENT, str(self.runtime / "gcr")], env=self.env(), start_new_session=True,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.socket.exists():
            time.sleep(0.05)
        assert self.socket.exists(), "gcr-ssh-agent made no socket"
        # It reads ~/.ssh after making its socket: ready once it lists the key (not loaded, only known).
        while time.monotonic() < deadline:
            if "test key" in self.listed():
                return
            time.sleep(0.05)
        raise AssertionError("gcr-ssh-agent does not list the key in ~/.ssh")

    def listed(self):
        return subprocess.run(["ssh-add", "-L"], env=self.env(), capture_output=True, text=True, timeout=30).stdout

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)

    def sign(self):
        """`ssh-keygen -Y sign` with the public key: the private half must come from the agent, which
        loads it (ssh-add with gcr's askpass) on the first signature. Started, not waited for."""
        signature = pathlib.Path(str(self.data) + ".sig")
        if signature.exists():
            signature.unlink()
        return subprocess.Popen(["ssh-keygen", "-Y", "sign", "-n", "file", "-f", str(self.key) + ".pub",
                                 str(self.data)], env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)


@pytest.fixture
def agent(bus, tmp_path):
    made = SshAgent(bus, tmp_path / "agent")
    yield made
    made.stop()


def stored_passphrases(bus, key):
    """The login collection's items with gcr-ssh-agent's schema and attribute for `key`."""
    connection = open_dbus_connection(bus=bus.address)
    try:
        login = secretstorage.Collection(connection, "/org/freedesktop/secrets/collection/login")
        found = []
        for item in login.get_all_items():
            attributes = item.get_attributes()
            if attributes.get("unique") == f"ssh-store:{key}":
                found.append({"label": item.get_label(), "attributes": dict(attributes),
                              "secret": bytes(item.get_secret())})
        return found
    finally:
        connection.close()


def test_a_passphrase_gcr_ssh_agent_saves_lands_in_the_login_keychain_and_unlocks_the_key_later(
        daemon, bus, agent, display):
    set_activation_environment(bus, DISPLAY=display, HOME=str(agent.home), NO_AT_BRIDGE="1")
    agent.start()

    # The first signature: nothing is stored, so gcr's prompter asks. Type the passphrase, tick
    # "Automatically unlock this key whenever I'm logged in" (the next widget), go back to the
    # password field and press Enter, which is the dialog's Unlock.
    signing = agent.sign()
    try:
        prompt = GcrPrompt.wait(display, "Unlock private key")
        prompt.focus()
        prompt.type(PASSPHRASE)
        prompt.key("Tab", "space", "shift+Tab", "Return")
        out, _ = signing.communicate(timeout=60)
    finally:
        if signing.poll() is None:
            signing.kill()
    assert signing.returncode == 0, out

    # gcr-ssh-agent saved it through the Secret Service: in the login collection, with its schema.
    key = str(agent.key)
    assert stored_passphrases(bus, key) == [{
        "label": "Unlock password for: test key",
        "attributes": {"xdg:schema": "org.freedesktop.Secret.Generic", "unique": f"ssh-store:{key}"},
        "secret": PASSPHRASE.encode()}]

    # Next session: a new agent that holds no key, and no prompter that could answer (the display is
    # gone). The key is loaded with the passphrase from latchkeyd, asking nothing.
    agent.stop()
    stop_prompter(bus)
    set_activation_environment(bus, DISPLAY=":4242")
    agent.start()
    signing = agent.sign()
    out, _ = signing.communicate(timeout=60)
    assert signing.returncode == 0, out

    # Without the stored passphrase the same signature fails: it came from the keychain.
    cleared = subprocess.run(["secret-tool", "clear", "unique", f"ssh-store:{key}"], env=agent.env(), timeout=30)
    assert cleared.returncode == 0
    agent.stop()
    agent.start()
    signing = agent.sign()
    out, _ = signing.communicate(timeout=60)
    assert signing.returncode != 0 and "agent refused operation" in out, out
