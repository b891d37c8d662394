"""libsecret's own proxy cache across a lock and an unlock: a client that loaded its items while the
collection was locked (labels and attributes read as empty then) must see them once it is unlocked, as
Seahorse and git-credential-libsecret expect. Uses libsecret through GObject introspection."""

import subprocess
import textwrap

import pytest

from conftest import LOGIN_PASSWORD, secret_tool

CLIENT = textwrap.dedent("""
    import sys, time
    import gi
    gi.require_version("Secret", "1")
    from gi.repository import GLib, Secret

    service = Secret.Service.get_sync(Secret.ServiceFlags.LOAD_COLLECTIONS, None)
    login = next(c for c in service.get_collections() if c.get_object_path().endswith("/collection/login"))
    login.load_items_sync(None)
    [item] = login.get_items()
    print("locked:", login.get_locked(), repr(item.get_label()), sorted(item.get_attributes().items()))
    count, unlocked = service.unlock_sync([login], None)
    context = GLib.MainContext.default()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and item.get_label() != "Cached label":
        context.iteration(False)
        time.sleep(0.02)
    print("unlocked:", login.get_locked(), repr(item.get_label()), sorted(item.get_attributes().items()))
""")


def test_items_cached_while_locked_show_their_label_and_attributes_after_unlock(make_daemon, bus):
    pytest.importorskip("gi")
    daemon = make_daemon(answers=[f"password {LOGIN_PASSWORD}"]).start()
    secret_tool(bus, "store", "--label=Cached label", "cache", "me", "user", "alice", input=b"s3cret")
    # Started again without the password: the daemon never held the login keychain unlocked, so its items show
    # nothing while locked (a keychain locked after use shows what it showed then: test_locked_items.py).
    daemon.stop()
    daemon.start(unlock=False)
    result = subprocess.run(["/usr/bin/python3", "-c", CLIENT], env=daemon_env(daemon, bus), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    locked, unlocked = result.stdout.splitlines()
    assert locked.startswith("locked: True ''"), locked
    assert unlocked == "unlocked: False 'Cached label' [('cache', 'me'), ('user', 'alice')]", unlocked


def test_read_alias_login_is_the_login_collection(daemon, bus):
    out = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                          "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.ReadAlias", "string:login"],
                         env=bus.env(), check=True, capture_output=True, text=True).stdout
    assert 'object path "/org/freedesktop/secrets/collection/login"' in out


def daemon_env(daemon, bus):
    return bus.env(SCRIPTED_PINENTRY_ANSWERS=str(daemon.answers), SCRIPTED_PINENTRY_LOG=str(daemon.log))
