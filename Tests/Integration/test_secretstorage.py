"""python3-secretstorage (jeepney, DH sessions) against latchkeyd."""

import time

import pytest
import secretstorage


@pytest.fixture
def conn(daemon, session_env):
    connection = secretstorage.dbus_init()
    yield connection
    connection.close()


def test_default_collection_is_login_and_unlocked(conn):
    collection = secretstorage.get_default_collection(conn)
    assert collection.collection_path == "/org/freedesktop/secrets/aliases/default"
    assert collection.get_label() == "Login"
    assert not collection.is_locked()
    paths = {c.collection_path for c in secretstorage.get_all_collections(conn)}
    assert "/org/freedesktop/secrets/collection/login" in paths
    assert "/org/freedesktop/secrets/collection/session" in paths


def test_create_search_secret_attributes_label_and_content_type(conn):
    collection = secretstorage.get_default_collection(conn)
    before = int(time.time())
    item = collection.create_item("My label", {"app": "demo", "user": "bob"}, b"\x00binary\xffsecret",
                                  content_type="application/octet-stream")
    found = list(collection.search_items({"app": "demo"}))
    assert [i.item_path for i in found] == [item.item_path]
    assert found[0].get_secret() == b"\x00binary\xffsecret"
    assert found[0].get_secret_content_type() == "application/octet-stream"
    assert found[0].get_attributes() == {"app": "demo", "user": "bob"}
    assert found[0].get_label() == "My label"
    assert before - 1 <= found[0].get_created() <= int(time.time()) + 1
    assert found[0].get_modified() >= found[0].get_created()
    assert list(collection.search_items({"app": "demo", "user": "carol"})) == []


def test_set_label_attributes_and_secret(conn):
    collection = secretstorage.get_default_collection(conn)
    item = collection.create_item("old", {"a": "1", "b": "2"}, b"old secret")
    item.set_label("new")
    item.set_attributes({"a": "9", "c": "3"})
    item.set_secret(b"new secret", content_type="text/x-note")
    again = next(collection.search_items({"c": "3"}))
    assert again.get_label() == "new"
    assert again.get_attributes() == {"a": "9", "c": "3"}
    assert again.get_secret() == b"new secret"
    assert again.get_secret_content_type() == "text/x-note"
    assert list(collection.search_items({"b": "2"})) == []


def test_replace_true_replaces_and_false_keeps_both(conn):
    collection = secretstorage.get_default_collection(conn)
    first = collection.create_item("one", {"k": "v"}, b"1")
    replaced = collection.create_item("two", {"k": "v"}, b"2", replace=True)
    assert replaced.item_path == first.item_path
    assert [i.get_secret() for i in collection.search_items({"k": "v"})] == [b"2"]
    collection.create_item("three", {"k": "v"}, b"3", replace=False)
    assert sorted(i.get_secret() for i in collection.search_items({"k": "v"})) == [b"2", b"3"]


def test_delete_item(conn):
    collection = secretstorage.get_default_collection(conn)
    item = collection.create_item("gone", {"del": "me"}, b"x")
    keep = collection.create_item("kept", {"del": "not me"}, b"y")
    item.delete()
    assert list(collection.search_items({"del": "me"})) == []
    assert [i.item_path for i in collection.get_all_items()] == [keep.item_path]


def test_created_collection_needs_no_password_and_survives(conn, daemon):
    collection = secretstorage.create_collection(conn, "Work ✓")
    assert collection.collection_path == "/org/freedesktop/secrets/collection/work_20_e2_9c_93"
    assert collection.get_label() == "Work ✓"
    assert not collection.is_locked()
    collection.create_item("w", {"team": "x"}, b"work secret")
    collection.set_label("Work")
    assert collection.get_label() == "Work"
    assert "GETPIN" not in daemon.pinentry_log()
    # Locking login and unlocking it again (one prompt) opens the child collection too.
    daemon.set_pinentry_answers(["password login password"])
    login = secretstorage.Collection(conn, "/org/freedesktop/secrets/collection/login")
    login.lock()
    collection.lock()
    assert collection.is_locked() and login.is_locked()
    dismissed = collection.unlock()
    assert not dismissed
    assert not collection.is_locked() and not login.is_locked()
    assert next(collection.search_items({"team": "x"})).get_secret() == b"work secret"


def test_collection_alias_is_reused_and_delete_removes(conn, daemon):
    created = secretstorage.create_collection(conn, "Temporary", alias="tmpalias")
    again = secretstorage.create_collection(conn, "Other label", alias="tmpalias")
    assert again.collection_path == created.collection_path
    daemon.set_pinentry_answers(["ok"])
    created.delete()
    assert "DELETE the keychain" in daemon.pinentry_log(), "a deletion is confirmed"
    paths = {c.collection_path for c in secretstorage.get_all_collections(conn)}
    assert created.collection_path not in paths
    with pytest.raises(secretstorage.exceptions.ItemNotFoundException):
        secretstorage.Collection(conn, "/org/freedesktop/secrets/aliases/tmpalias")


def test_lock_search_while_locked_then_unlock(conn, daemon):
    collection = secretstorage.get_default_collection(conn)
    collection.create_item("locked one", {"lk": "1"}, b"hidden")
    collection.lock()
    assert collection.is_locked()
    items = list(secretstorage.search_items(conn, {"lk": "1"}))
    assert len(items) == 1 and items[0].is_locked()
    with pytest.raises(secretstorage.exceptions.LockedException):
        items[0].get_secret()
    daemon.set_pinentry_answers(["password login password"])
    assert collection.unlock() is False
    assert items[0].get_secret() == b"hidden"


def test_dismissed_unlock_reports_dismissed(conn, daemon):
    collection = secretstorage.get_default_collection(conn)
    collection.lock()
    daemon.set_pinentry_answers(["cancel"])
    assert collection.unlock() is True
    assert collection.is_locked()


def test_session_collection_is_in_memory(conn):
    session = secretstorage.Collection(conn, "/org/freedesktop/secrets/aliases/session")
    item = session.create_item("temp", {"s": "1"}, b"ephemeral")
    session.lock()
    assert session.is_locked()
    assert session.unlock() is False  # no prompt: the daemon holds its key
    assert item.get_secret() == b"ephemeral"
