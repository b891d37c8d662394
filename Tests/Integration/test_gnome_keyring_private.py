"""gnome-keyring's private interface, org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface, on a real
dbus-daemon: ChangeWithPrompt called as Seahorse calls it (libsecret through GObject introspection: the method
on the service's connection, then libsecret's own prompt handling), and the master-password methods with the
passwords encrypted in a Diffie-Hellman session (jeepney)."""

import json
import subprocess
import textwrap

import pytest

from conftest import LOGIN_PASSWORD, secret_tool
from dbus_client import SERVICE, Client, DHClient

PRIVATE = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
LOGIN = "/org/freedesktop/secrets/collection/login"
DENIED = "org.gnome.keyring.Error.Denied"

SEAHORSE_CHANGE = textwrap.dedent("""
    import sys
    import gi
    gi.require_version("Secret", "1")
    from gi.repository import Gio, GLib, Secret

    service = Secret.Service.get_sync(Secret.ServiceFlags.OPEN_SESSION | Secret.ServiceFlags.LOAD_COLLECTIONS, None)
    reply = service.get_connection().call_sync(
        "org.freedesktop.secrets", "/org/freedesktop/secrets",
        "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface", "ChangeWithPrompt",
        GLib.Variant("(o)", (sys.argv[1],)), GLib.VariantType("(o)"), Gio.DBusCallFlags.NONE, -1, None)
    [path] = reply.unpack()
    # As Seahorse does: a Secret.Prompt proxy for the path, run by the service (libsecret's prompt handling).
    prompt = Secret.Prompt(g_connection=service.get_connection(), g_name=service.get_name_owner(),
                           g_object_path=path, g_interface_name="org.freedesktop.Secret.Prompt")
    prompt.init(None)
    try:
        result = service.prompt_sync(prompt, None, GLib.VariantType("s"))
        print("changed", repr(result.unpack()) if result is not None else None)
    except GLib.Error as error:
        print("failed", error.message)
""")


class DHSession:
    """A jeepney client with a dh-ietf1024-sha256-aes128-cbc-pkcs7 session."""

    def __init__(self, bus):
        self.client = Client(bus.address)
        self.dh = DHClient()
        output, self.path = self.client.service(
            "OpenSession", "sv", ("dh-ietf1024-sha256-aes128-cbc-pkcs7", ("ay", self.dh.public_bytes)))
        self.dh.derive(output[1])

    def secret(self, text):
        iv, value = self.dh.encrypt(text.encode())
        return (self.path, iv, value, "text/plain")

    def call(self, member, signature, body):
        return self.client.call(SERVICE, PRIVATE, member, signature, body, timeout=60)

    def unlock(self, collection, password):
        return self.call("UnlockWithMasterPassword", "o(oayays)", (collection, self.secret(password)))

    def change(self, collection, original, new):
        return self.call("ChangeWithMasterPassword", "o(oayays)(oayays)",
                         (collection, self.secret(original), self.secret(new)))

    def lock(self, *collections):
        self.client.service("Lock", "ao", (list(collections),))

    def locked(self, collection):
        return self.client.ok(collection, "org.freedesktop.DBus.Properties", "Get", "ss",
                              ("org.freedesktop.Secret.Collection", "Locked"))[0][1]

    def close(self):
        self.client.close()


def pinentry_requests(daemon):
    """The descriptions of the GETPINs pinentry was asked, in order."""
    descriptions, asked = None, []
    for line in daemon.pinentry_log().splitlines():
        entry = json.loads(line)
        if entry["command"] == "SETDESC":
            descriptions = entry["argument"]
        elif entry["command"] == "GETPIN":
            asked.append(descriptions)
    return asked


def test_seahorse_changes_the_login_keychain_password_through_a_pinentry_prompt(make_daemon, bus):
    pytest.importorskip("gi")
    daemon = make_daemon(answers=["password not the password", f"password {LOGIN_PASSWORD}",
                                  "password new login"]).start()
    secret_tool(bus, "store", "--label=Kept", "kept", "across", input=b"still here")
    result = subprocess.run(
        ["/usr/bin/python3", "-c", SEAHORSE_CHANGE, LOGIN],
        env=bus.env(SCRIPTED_PINENTRY_ANSWERS=str(daemon.answers), SCRIPTED_PINENTRY_LOG=str(daemon.log)),
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "changed ''", result.stdout
    asked = pinentry_requests(daemon)
    # The new password and its confirmation in one dialog (SETREPEAT), as pinentry-gnome3 shows gcr's
    # new-password prompt: three dialogs in all, not four.
    assert len(asked) == 3, asked
    assert "current password" in asked[0] and "current password" in asked[1]
    assert "new password" in asked[2].lower()
    assert repeat_requests(daemon) == [("Confirm:", "The passwords did not match. Try again.")]

    session = DHSession(bus)
    try:
        session.lock(LOGIN)
        assert session.unlock(LOGIN, LOGIN_PASSWORD).error_name == DENIED
        assert session.locked(LOGIN)
        reply = session.unlock(LOGIN, "new login")
        assert not reply.is_error, reply.body
        assert not session.locked(LOGIN)
    finally:
        session.close()
    assert secret_tool(bus, "lookup", "kept", "across").stdout == b"still here"


def repeat_requests(daemon):
    """The (SETREPEAT, SETREPEATERROR) texts sent before each GETPIN that had them."""
    repeat, error, asked = None, None, []
    for line in daemon.pinentry_log().splitlines():
        entry = json.loads(line)
        if entry["command"] == "SETREPEAT":
            repeat = entry["argument"]
        elif entry["command"] == "SETREPEATERROR":
            error = entry["argument"]
        elif entry["command"] == "GETPIN" and repeat is not None:
            asked.append((repeat, error))
        elif entry["command"] == "BYE":
            repeat, error = None, None
    return asked


@pytest.mark.parametrize("pinentry_kind", ["no SETREPEAT", "repeat not confirmed"])
def test_a_new_password_is_asked_twice_when_the_pinentry_does_not_confirm_it(make_daemon, bus, pinentry_kind):
    """A pinentry that does not know SETREPEAT (it answers an error), or took it and answered without
    `S PIN_REPEATED`: a second dialog asks for the new password again, and the change needs both alike."""
    pytest.importorskip("gi")
    new = "password new login" if pinentry_kind == "no SETREPEAT" else "password-unrepeated new login"
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}", new, "password new login"],
                         extra_env={"SCRIPTED_PINENTRY_NO_REPEAT": "1"} if pinentry_kind == "no SETREPEAT" else {})
    daemon.start()
    result = subprocess.run(
        ["/usr/bin/python3", "-c", SEAHORSE_CHANGE, LOGIN],
        env=bus.env(SCRIPTED_PINENTRY_ANSWERS=str(daemon.answers), SCRIPTED_PINENTRY_LOG=str(daemon.log)),
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    asked = pinentry_requests(daemon)
    assert len(asked) == 3, asked
    assert "new password" in asked[1].lower() and "again" in asked[2]
    session = DHSession(bus)
    try:
        session.lock(LOGIN)
        assert not session.unlock(LOGIN, "new login").is_error
    finally:
        session.close()


def test_a_cancelled_change_prompt_changes_nothing(make_daemon, bus):
    pytest.importorskip("gi")
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}", "cancel"]).start()
    result = subprocess.run(
        ["/usr/bin/python3", "-c", SEAHORSE_CHANGE, LOGIN],
        env=bus.env(SCRIPTED_PINENTRY_ANSWERS=str(daemon.answers), SCRIPTED_PINENTRY_LOG=str(daemon.log)),
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # libsecret's prompt call returns without an error either way: what counts is that nothing changed.
    assert result.stdout.startswith("changed"), result.stdout
    assert len(pinentry_requests(daemon)) == 2
    session = DHSession(bus)
    try:
        session.lock(LOGIN)
        assert not session.unlock(LOGIN, LOGIN_PASSWORD).is_error
    finally:
        session.close()


def test_master_password_methods_in_a_dh_session(make_daemon, bus):
    daemon = make_daemon().start()
    session = DHSession(bus)
    try:
        properties = {"org.freedesktop.Secret.Collection.Label": ("s", "Travel")}
        reply = session.call("CreateWithMasterPassword", "a{sv}(oayays)", (properties, session.secret("passport")))
        assert not reply.is_error, reply.body
        [travel] = reply.body
        assert travel == "/org/freedesktop/secrets/collection/travel"
        assert not session.locked(travel)
        # The item's secret, sent in the DH session too.
        iv, value = session.dh.encrypt(b"boarding pass")
        item = session.client.create_item(session.path, {"trip": "porto"}, value, label="Porto", collection=travel,
                                          parameters=iv)
        assert item.startswith(travel + "/")

        session.lock(travel, LOGIN)
        assert session.unlock(travel, "not it").error_name == DENIED
        assert session.unlock(travel, LOGIN_PASSWORD).error_name == DENIED
        assert session.locked(travel)
        assert not session.unlock(travel, "passport").is_error
        assert not session.locked(travel)
        # The login keychain stayed locked: the travel keychain has a password of its own.
        assert session.locked(LOGIN)

        assert session.change(travel, "wrong", "visa").error_name == DENIED
        reply = session.change(travel, "passport", "visa")
        assert not reply.is_error, reply.body
        # A secret from a session that is not the caller's is refused.
        other = Client(bus.address)
        try:
            refused = other.call(SERVICE, PRIVATE, "UnlockWithMasterPassword", "o(oayays)",
                                 (travel, session.secret("visa")))
            assert refused.error_name == "org.freedesktop.Secret.Error.NoSession"
        finally:
            other.close()
    finally:
        session.close()

    # After a restart the keychain is served again, locked, and opens with its new password only.
    daemon.stop()
    daemon.own_passwords.append("visa")
    daemon.start()
    session = DHSession(bus)
    try:
        assert session.locked("/org/freedesktop/secrets/collection/travel")
        assert session.unlock(travel, "passport").error_name == DENIED
        assert not session.unlock(travel, "visa").is_error
    finally:
        session.close()
    assert secret_tool(bus, "lookup", "trip", "porto").stdout == b"boarding pass"
