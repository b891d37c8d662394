"""What one client can do to everyone else (issue 31, items 2 and 3), on a real bus with the real daemon: a
program sending wrong passwords cannot keep the person from unlocking in the daemon's own prompt; a Flatpak
application cannot send keychain passwords at all (nothing is counted); lock settings that lock less, and an
alias moved away from its collection, are confirmed by the person first (a scripted pinentry answers), while
locking more asks nothing; a Flatpak application can change neither."""

import json
import threading
import time

import pytest
from jeepney import MatchRule, message_bus
from jeepney.io.blocking import Proxy

from conftest import LOGIN_PASSWORD
from dbus_client import Client
from flatpak_caller import as_flatpak, needs_root

LOGIN = "/org/freedesktop/secrets/collection/login"
NATIVE_LOGIN = "/org/latchkey/keychain/login"
KEYCHAIN1 = "org.latchkey.Keychain1"
PROMPT = "org.freedesktop.Secret.Prompt"
TOO_MANY = "org.latchkey.Keychain1.Error.TooManyAttempts"
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"


def confirmations(daemon):
    """The descriptions of the CONFIRM prompts the daemon showed, in order."""
    entries = [json.loads(line) for line in daemon.pinentry_log().splitlines()]
    shown, description = [], None
    for entry in entries:
        if entry["command"] == "SETDESC":
            description = entry["argument"]
        elif entry["command"] == "CONFIRM":
            shown.append(description)
    return shown


def status(client, path=NATIVE_LOGIN):
    (found,) = client.ok(path, KEYCHAIN1, "Status")
    return {name: value for name, (_, value) in found.items()}


def unlock_through_the_prompt(client, timeout=60):
    """The person's unlock: Secret Service Unlock, then the daemon's own prompt (the scripted pinentry types
    the password); the Completed signal's body and the seconds from Prompt to Completed."""
    _, prompt = client.service("Unlock", "ao", ([LOGIN],))
    assert prompt != "/", "the login keychain is unlocked already"
    rule = MatchRule(type="signal", interface=PROMPT, member="Completed", path=prompt)
    Proxy(message_bus, client.connection).AddMatch(rule)
    with client.connection.filter(rule) as queue:
        started = time.monotonic()
        client.ok(prompt, PROMPT, "Prompt", "s", ("",))
        completed = client.connection.recv_until_filtered(queue, timeout=timeout)
    return completed.body, time.monotonic() - started


class Hammer(threading.Thread):
    """A client sending wrong passwords to Keychain1.Unlock as fast as the daemon answers."""

    def __init__(self, bus):
        super().__init__(daemon=True)
        self.client = Client(bus.address)
        self.stopping = threading.Event()
        self.replies = []

    def run(self):
        while not self.stopping.is_set():
            reply = self.client.call(NATIVE_LOGIN, KEYCHAIN1, "Unlock", "ay", (b"not the password",), timeout=60)
            self.replies.append(reply.error_name)

    def stop(self):
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=60)
        self.client.close()


@pytest.mark.parametrize("hammering", [True, False], ids=["hammered", "alone"])
def test_a_client_hammering_unlock_does_not_keep_the_person_from_unlocking(make_daemon, bus, hammering):
    """While a client keeps sending wrong passwords to Keychain1.Unlock (the file's wrong-password wait runs
    all along), the right password typed into the daemon's own prompt unlocks, at its first try (and, for
    comparison, with nobody hammering). The time it took is printed (docs/robustness.md)."""
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    person = Client(bus.address)
    person.service("Lock", "ao", ([LOGIN],))
    hammer = Hammer(bus)
    if hammering:
        hammer.start()
    try:
        deadline = time.monotonic() + 30
        while hammering and TOO_MANY not in hammer.replies:
            assert time.monotonic() < deadline, hammer.replies
            time.sleep(0.05)
        body, seconds = unlock_through_the_prompt(person)
        sent = len(hammer.replies)
    finally:
        hammer.stop()
    assert body == (False, ("ao", [LOGIN])), f"the person's unlock was dismissed: {body}"
    assert status(person)["Locked"] is False
    # At the first try: the prompt asked once.
    assert daemon.pinentry_log().count('"GETPIN"') == 1
    print(f"\nthe person's unlock took {seconds:.2f} s while a client sent {sent} wrong passwords")


WRONG = {"bytes": "not the password"}
GNOME = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"


@needs_root
def test_a_flatpak_application_cannot_send_keychain_passwords_and_nothing_is_counted(make_daemon, bus, tmp_path):
    make_daemon().start()
    person = Client(bus.address)
    person.service("Lock", "ao", ([LOGIN],))
    secret = ["SESSION", {"bytes": ""}, WRONG, "text/plain"]
    calls = [[NATIVE_LOGIN, KEYCHAIN1, "Unlock", "(ay)", [WRONG]] for _ in range(6)]
    calls += [[NATIVE_LOGIN, KEYCHAIN1, "ChangePassword", "(ayay)", [WRONG, {"bytes": "new"}]]]
    calls += [["/org/freedesktop/secrets", GNOME, "UnlockWithMasterPassword", "(o(oayays))", [LOGIN, secret]]]
    calls += [["/org/freedesktop/secrets", GNOME, "ChangeWithMasterPassword", "(o(oayays)(oayays))",
               [LOGIN, secret, secret]]]
    calls += [["/org/freedesktop/secrets", GNOME, "CreateWithMasterPassword", "(a{sv}(oayays))",
               [{"org.freedesktop.Secret.Collection.Label": ["s", "sneaky"]}, secret]]]
    assert as_flatpak(bus, tmp_path, calls) == [ACCESS_DENIED] * len(calls)
    # None of them was counted: the right password from an ordinary program is tried at once.
    reply = person.call(NATIVE_LOGIN, KEYCHAIN1, "Unlock", "ay", (LOGIN_PASSWORD.encode(),), timeout=60)
    assert not reply.is_error, (reply.error_name, reply.body)
    assert status(person)["Locked"] is False


def set_settings(client, **settings):
    values = {name: ("u" if name == "LockTimeout" else "b", value) for name, value in settings.items()}
    return client.call(NATIVE_LOGIN, KEYCHAIN1, "SetSettings", "a{sv}", (values,), timeout=60)


def settings_of(client):
    found = status(client)
    return {name: found.get(name) for name in ("LockTimeout", "LockOnSleep", "LockOnScreenLock")}


def test_lock_settings_that_lock_less_are_confirmed_and_more_are_not(make_daemon, bus):
    daemon = make_daemon(answers=["deny", "confirm"]).start()
    client = Client(bus.address)
    # Locking more (a timeout where there was none, on sleep, on screen lock): at once, nothing asked.
    tight = set_settings(client, LockTimeout=600, LockOnSleep=True, LockOnScreenLock=True)
    assert not tight.is_error, (tight.error_name, tight.body)
    strict = settings_of(client)
    assert (strict["LockOnSleep"], strict["LockOnScreenLock"]) == (True, True), strict
    shorter = set_settings(client, LockTimeout=60, LockOnSleep=True, LockOnScreenLock=True)
    assert not shorter.is_error and confirmations(daemon) == []
    strict = settings_of(client)

    # Locking less (the screen lock off, though the timeout gets shorter): asked; Deny changes nothing.
    denied = set_settings(client, LockTimeout=30, LockOnSleep=True, LockOnScreenLock=False)
    assert denied.is_error, denied.body
    assert settings_of(client) == strict
    (asked,) = confirmations(daemon)
    assert "lock less often" in asked and "on screen lock" in asked, asked
    # Confirmed: applied.
    loose = set_settings(client, LockTimeout=0, LockOnSleep=False, LockOnScreenLock=False)
    assert not loose.is_error, (loose.error_name, loose.body)
    assert settings_of(client)["LockOnScreenLock"] is False and settings_of(client)["LockOnSleep"] is False
    assert len(confirmations(daemon)) == 2


def test_moving_the_default_alias_is_confirmed_and_a_new_alias_is_not(make_daemon, bus):
    daemon = make_daemon(answers=["deny", "confirm"]).start()
    client = Client(bus.address)
    properties = {"org.freedesktop.Secret.Collection.Label": ("s", "Elsewhere")}
    (mine, _) = client.service("CreateCollection", "a{sv}s", (properties, ""))
    # A new alias: at once.
    client.service("SetAlias", "so", ("fresh", mine))
    assert client.service("ReadAlias", "s", ("fresh",)) == (mine,)
    assert confirmations(daemon) == []
    # Moving default away from the login collection: asked; Deny keeps it.
    denied = client.call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SetAlias", "so",
                         ("default", mine), timeout=60)
    assert denied.error_name == ACCESS_DENIED, (denied.error_name, denied.body)
    assert client.service("ReadAlias", "s", ("default",)) == (LOGIN,)
    (asked,) = confirmations(daemon)
    assert "Elsewhere" in asked and "default" in asked, asked
    # Confirmed: moved.
    client.service("SetAlias", "so", ("default", mine))
    assert client.service("ReadAlias", "s", ("default",)) == (mine,)


@needs_root
def test_a_flatpak_application_can_change_neither_lock_settings_nor_aliases(make_daemon, bus, tmp_path):
    daemon = make_daemon(answers=["confirm", "confirm"]).start()
    client = Client(bus.address)
    assert not set_settings(client, LockTimeout=600, LockOnSleep=True).is_error
    before = settings_of(client)
    calls = [[NATIVE_LOGIN, KEYCHAIN1, "SetSettings", "(a{sv})", [{}]],
             [NATIVE_LOGIN, KEYCHAIN1, "SetSettings", "(a{sv})", [{"LockTimeout": ["u", 60]}]],
             ["/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SetAlias", "(so)", ["default", "/"]],
             ["/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SetAlias", "(so)",
              ["new", "/org/freedesktop/secrets/collection/session"]]]
    assert as_flatpak(bus, tmp_path, calls) == [ACCESS_DENIED] * len(calls)
    assert settings_of(client) == before
    assert client.service("ReadAlias", "s", ("default",)) == (LOGIN,)
    assert client.service("ReadAlias", "s", ("new",)) == ("/",)
    assert confirmations(daemon) == [], "nothing was asked of the person"
