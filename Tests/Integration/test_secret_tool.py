"""secret-tool (libsecret) against latchkeyd."""

import subprocess

from conftest import secret_tool


def search_all(bus, *attributes, unlock=False):
    """`secret-tool search --all`: items on stdout, their attributes on stderr."""
    result = secret_tool(bus, "search", "--all", *(["--unlock"] if unlock else []), *attributes)
    return result.stdout.decode() + result.stderr.decode()


def item_count(listing):
    return sum(1 for line in listing.splitlines() if line.startswith("[/"))


def test_store_then_lookup(daemon, bus):
    secret_tool(bus, "store", "--label=Mail password", "service", "mail.example.com", "account", "alice",
                input=b"hunter2")
    assert secret_tool(bus, "lookup", "service", "mail.example.com", "account", "alice").stdout == b"hunter2"
    assert secret_tool(bus, "lookup", "service", "mail.example.com").stdout == b"hunter2"


def test_lookup_of_nothing_fails(daemon, bus):
    result = secret_tool(bus, "lookup", "service", "nowhere", check=False)
    assert result.returncode != 0
    assert result.stdout == b""


def test_store_replaces_an_item_with_the_same_attributes(daemon, bus):
    secret_tool(bus, "store", "--label=one", "app", "x", input=b"first")
    secret_tool(bus, "store", "--label=two", "app", "x", input=b"second")
    assert secret_tool(bus, "lookup", "app", "x").stdout == b"second"
    listing = search_all(bus, "app", "x")
    assert item_count(listing) == 1
    assert "label = two" in listing


def test_search_all_shows_label_secret_and_attributes(daemon, bus):
    secret_tool(bus, "store", "--label=A", "group", "g", "name", "a", input=b"sa")
    secret_tool(bus, "store", "--label=B", "group", "g", "name", "b", input=b"sb")
    listing = search_all(bus, "group", "g")
    assert item_count(listing) == 2
    assert "secret = sa" in listing and "secret = sb" in listing
    assert "attribute.name = a" in listing and "attribute.name = b" in listing
    assert "label = A" in listing


def test_clear_deletes_every_match(daemon, bus):
    secret_tool(bus, "store", "--label=A", "kind", "temp", "n", "1", input=b"1")
    secret_tool(bus, "store", "--label=B", "kind", "temp", "n", "2", input=b"2")
    secret_tool(bus, "store", "--label=C", "kind", "keep", input=b"3")
    secret_tool(bus, "clear", "kind", "temp")
    assert secret_tool(bus, "lookup", "kind", "temp", check=False).returncode != 0
    assert secret_tool(bus, "lookup", "kind", "keep").stdout == b"3"


def test_binary_and_unicode_secrets_round_trip(daemon, bus):
    value = "pässwörd ✓ \t with spaces".encode()
    secret_tool(bus, "store", "--label=Unicode ✓", "k", "ü", input=value)
    assert secret_tool(bus, "lookup", "k", "ü").stdout == value


def lock_login(bus):
    """Locks the login collection with dbus-send. (Debian 12's `secret-tool lock`
    segfaults after a correct reply, against gnome-keyring as well.)"""
    out = subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
         "org.freedesktop.Secret.Service.Lock", "array:objpath:/org/freedesktop/secrets/collection/login"],
        env=bus.env(), check=True, capture_output=True, text=True).stdout
    assert 'object path "/org/freedesktop/secrets/collection/login"' in out


def test_lock_then_search_unlock_prompts_through_pinentry(make_daemon, bus):
    daemon = make_daemon(answers=["password login password"]).start()
    secret_tool(bus, "store", "--label=L", "lock", "test", input=b"locked secret")
    lock_login(bus)
    locked = search_all(bus, "lock", "test")
    assert item_count(locked) == 1 and "locked secret" not in locked
    assert "GETPIN" not in daemon.pinentry_log()
    listing = search_all(bus, "lock", "test", unlock=True)
    assert "secret = locked secret" in listing
    assert "GETPIN" in daemon.pinentry_log()


def test_lookup_on_a_locked_keychain_unlocks_it_after_a_wrong_password(make_daemon, bus):
    daemon = make_daemon(answers=["password wrong guess", "password login password"]).start()
    secret_tool(bus, "store", "--label=L", "k", "v", input=b"s3")
    lock_login(bus)
    assert secret_tool(bus, "lookup", "k", "v").stdout == b"s3"
    log = daemon.pinentry_log()
    assert log.count("GETPIN") == 2
    assert "SETERROR" in log and "not correct" in log


def test_cancelled_prompt_leaves_the_keychain_locked(make_daemon, bus):
    daemon = make_daemon(answers=["cancel"]).start()
    secret_tool(bus, "store", "--label=L", "k", "v", input=b"s3")
    lock_login(bus)
    result = secret_tool(bus, "lookup", "k", "v", check=False)
    assert result.stdout == b""
    assert "GETPIN" in daemon.pinentry_log()
    assert "locked secret" not in search_all(bus, "k", "v")
