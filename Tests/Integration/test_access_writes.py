"""Changing or deleting an item is decided as reading its secret is: an application the item trusts does it
at once, any other is asked in a pinentry prompt that says it will CHANGE or DELETE the item, and a Deny
changes nothing. Deleting a collection needs it unlocked and a confirmation, whoever asks. On a real bus with
real clients: secret-tool, a libsecret program, python secretstorage scripts, the SecItem client, the latchkey
command."""

import subprocess
import sys

import pytest

from conftest import binary, secret_tool
from dbus_client import SERVICE, Client
from test_access_prompts import arguments, creator_program, programs, prompting, run  # noqa: F401

WRITE_SCRIPT = """
import secretstorage, sys
connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
operation, key = sys.argv[1], sys.argv[2]
try:
    if operation == "create":
        collection.create_item(sys.argv[3], {"key": key}, sys.argv[4].encode(), replace=True)
    else:
        item = next(collection.search_items({"key": key}))
        if operation == "set-secret":
            item.set_secret(sys.argv[3].encode())
        elif operation == "delete":
            item.delete()
        elif operation == "set-label":
            item.set_label(sys.argv[3])
        elif operation == "set-attributes":
            item.set_attributes({"key": key, "planted": sys.argv[3]})
except Exception as error:
    print(type(error).__name__, repr(error), file=sys.stderr)
    sys.exit(2)
"""

ITEM = "org.freedesktop.Secret.Item"
PROPERTIES = "org.freedesktop.DBus.Properties"
COLLECTION = "org.freedesktop.Secret.Collection"


def items(bus, attributes):
    """(label, attributes) of each unlocked item whose attributes include `attributes`, read without secrets."""
    client = Client(bus.address)
    try:
        unlocked, _ = client.service("SearchItems", "a{ss}", (attributes,))
        found = []
        for path in unlocked:
            label = client.ok(path, PROPERTIES, "Get", "ss", (ITEM, "Label"))[0][1]
            found.append((label, dict(client.ok(path, PROPERTIES, "Get", "ss", (ITEM, "Attributes"))[0][1])))
        return found
    finally:
        client.close()


def confirms(daemon):
    return len(arguments(daemon, "CONFIRM"))


def store_as_creator(creator, bus):
    assert run(creator, bus, "store", "k", "the secret").returncode == 0
    return items(bus, {"key": "k"})


def assert_intact(creator, bus, before):
    """The creator's item is as it was: its label and attributes, and its secret (read without a prompt)."""
    assert items(bus, {"key": "k"}) == before
    read = run(creator, bus, "lookup", "k")
    assert read.returncode == 0 and read.stdout == "the secret\n", read.stderr


def test_secret_tool_store_over_another_applications_item_is_asked_and_deny_keeps_it(programs, prompting, bus):
    creator, _ = programs
    before = store_as_creator(creator, bus)
    prompting.set_pinentry_answers(["cancel"])
    refused = secret_tool(bus, "store", "--label=planted", "key", "k", input=b"substitute", check=False)
    assert refused.returncode != 0 and b"was not allowed" in refused.stderr, refused.stderr
    assert confirms(prompting) == 1
    description = arguments(prompting, "SETDESC")[-1]
    assert "wants to CHANGE" in description and "secret-tool" in description and "“k”" in description
    # A change is asked about each time: no Always allow to give.
    assert arguments(prompting, "SETNOTOK") == []
    assert_intact(creator, bus, before)
    assert confirms(prompting) == 1, "the creator reads its own item unasked"

    prompting.set_pinentry_answers(["ok"])
    secret_tool(bus, "store", "--label=replaced", "key", "k", input=b"allowed")
    assert confirms(prompting) == 2
    # Replaced in place: one item, its attributes now secret-tool's (without the creator's schema).
    assert items(bus, {"key": "k"}) == [("replaced", {"key": "k"})]


def test_secret_tool_clear_of_another_applications_item_is_asked_and_deny_keeps_it(programs, prompting, bus):
    creator, _ = programs
    before = store_as_creator(creator, bus)
    prompting.set_pinentry_answers(["cancel"])
    refused = secret_tool(bus, "clear", "key", "k", check=False)
    assert refused.returncode != 0 and b"was not allowed" in refused.stderr, refused.stderr
    assert "wants to DELETE" in arguments(prompting, "SETDESC")[-1]
    assert_intact(creator, bus, before)

    prompting.set_pinentry_answers(["ok"])
    secret_tool(bus, "clear", "key", "k")
    assert items(bus, {"key": "k"}) == []
    assert confirms(prompting) == 2


def test_an_application_changes_and_deletes_its_own_items_unasked(programs, prompting, bus):
    creator, other = programs
    store_as_creator(creator, bus)
    assert run(creator, bus, "store", "k", "second").returncode == 0
    assert run(creator, bus, "lookup", "k").stdout == "second\n"
    assert run(creator, bus, "clear", "k").returncode == 0
    assert items(bus, {"key": "k"}) == []
    # Another application's own item, the same.
    assert run(other, bus, "store", "o", "its own").returncode == 0
    assert run(other, bus, "clear", "o").returncode == 0
    assert confirms(prompting) == 0


@pytest.mark.parametrize("operation, argument", [
    ("set-secret", "substitute"), ("delete", None), ("set-label", "Bank (official)"), ("set-attributes", "x")])
def test_secretstorage_writes_to_another_applications_item_are_asked_and_deny_changes_nothing(
        programs, prompting, bus, tmp_path, operation, argument):
    creator, _ = programs
    before = store_as_creator(creator, bus)
    script = tmp_path / "writer.py"
    script.write_text(WRITE_SCRIPT)
    prompting.set_pinentry_answers(["cancel"])
    command = [sys.executable, str(script), operation, "k"] + ([argument] if argument else [])
    refused = subprocess.run(command, env=bus.env(), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "AccessDenied" in refused.stderr, refused.stderr
    assert confirms(prompting) == 1
    description = arguments(prompting, "SETDESC")[-1]
    verb = "DELETE" if operation == "delete" else "CHANGE"
    assert f"wants to {verb}" in description and str(script) in description
    assert_intact(creator, bus, before)


def test_secretstorage_writes_to_its_own_item_are_not_asked(prompting, bus, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITE_SCRIPT)

    def write(*args):
        result = subprocess.run([sys.executable, str(script), *args], env=bus.env(), capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr

    write("create", "mine", "Mine", "first")
    write("create", "mine", "Mine again", "second")
    write("set-secret", "mine", "third")
    write("set-label", "mine", "Relabelled")
    write("set-attributes", "mine", "y")
    assert items(bus, {"key": "mine"}) == [("Relabelled", {"key": "mine", "planted": "y"})]
    write("delete", "mine")
    assert items(bus, {"key": "mine"}) == []
    assert confirms(prompting) == 0


def test_an_allow_all_keychain_asks_nothing_for_writes(programs, make_daemon, bus):
    creator, other = programs
    daemon = make_daemon(access_policy="allow-all").start()
    store_as_creator(creator, bus)
    assert run(other, bus, "store", "k", "by the other").returncode == 0
    assert run(creator, bus, "lookup", "k").stdout == "by the other\n"
    secret_tool(bus, "store", "--label=replaced", "key", "k", input=b"by secret-tool")
    secret_tool(bus, "clear", "key", "k")
    assert items(bus, {"key": "k"}) == []
    assert confirms(daemon) == 0


def test_one_question_covers_a_bulk_keychain1_delete_or_update(prompting, bus):
    for account in ("a", "b", "c"):
        secret_tool(bus, "store", f"--label=bulk {account}", "service", "bulk", "account", account,
                    input=account.encode())
    secitem = binary("secitem-client")
    prompting.set_pinentry_answers(["cancel", "cancel"])
    deleted = subprocess.run([secitem, "delete-generic", "bulk"], env=bus.env(), capture_output=True, text=True,
                             timeout=60)
    assert (deleted.returncode, deleted.stdout) == (1, "status -128\n")
    assert confirms(prompting) == 1
    description = arguments(prompting, "SETDESC")[-1]
    assert "wants to DELETE" in description
    assert all(f"“bulk {account}”" in description for account in "abc")
    updated = subprocess.run([secitem, "update-generic", "bulk", "substitute"], env=bus.env(), capture_output=True,
                             text=True, timeout=60)
    assert (updated.returncode, updated.stdout) == (1, "status -128\n")
    assert confirms(prompting) == 2 and "wants to CHANGE" in arguments(prompting, "SETDESC")[-1]
    for account in "abc":
        assert secret_tool(bus, "lookup", "service", "bulk", "account", account).stdout == account.encode()

    prompting.set_pinentry_answers(["ok"])
    assert subprocess.run([secitem, "delete-generic", "bulk"], env=bus.env(), timeout=60).returncode == 0
    assert items(bus, {"service": "bulk"}) == []
    assert confirms(prompting) == 3


def test_the_latchkey_command_deleting_through_the_daemon_is_asked(make_daemon, bus, tmp_path):
    from test_cli import Cli
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains, access_policy="prompt").start()
    secret_tool(bus, "store", "--label=made by secret-tool", "service", "by-tool", input=b"the secret")
    daemon.set_pinentry_answers(["cancel"])
    refused = cli.run("delete-generic-password", "-s", "by-tool")
    assert refused.returncode != 0 and refused.stderr.startswith("latchkey: "), refused.stderr
    assert "wants to DELETE" in arguments(daemon, "SETDESC")[-1]
    assert secret_tool(bus, "lookup", "service", "by-tool").stdout == b"the secret"
    assert confirms(daemon) == 1

    daemon.set_pinentry_answers(["ok"])
    cli.ok("delete-generic-password", "-s", "by-tool")
    assert items(bus, {"service": "by-tool"}) == []


def collections(client):
    return client.ok(SERVICE, PROPERTIES, "Get", "ss", ("org.freedesktop.Secret.Service", "Collections"))[0][1]


def test_deleting_a_collection_needs_it_unlocked_and_a_confirmation(daemon, bus):
    """Whoever asks, and on an allow-all keychain too: a collection holds other applications' items."""
    client = Client(bus.address)
    try:
        work = client.service("CreateCollection", "a{sv}s",
                              ({"org.freedesktop.Secret.Collection.Label": ("s", "Work")}, ""))[0]
        session = client.open_plain()
        client.create_item(session, {"team": "x"}, b"work secret", collection=work)
        daemon.set_pinentry_answers(["cancel"])
        refused = client.call(work, COLLECTION, "Delete", timeout=30)
        assert refused.error_name == "org.freedesktop.DBus.Error.AccessDenied", refused.body
        assert confirms(daemon) == 1
        description = arguments(daemon, "SETDESC")[-1]
        assert "DELETE the keychain “Work”" in description
        assert work in collections(client)
        found = client.ok(work, COLLECTION, "SearchItems", "a{ss}", ({"team": "x"},))[0]
        assert len(found) == 1

        # Locked: refused before anything is asked.
        client.service("Lock", "ao", ([work],))
        locked = client.call(work, COLLECTION, "Delete", timeout=30)
        assert locked.error_name == "org.freedesktop.Secret.Error.IsLocked", locked.body
        assert confirms(daemon) == 1
        client.service("Unlock", "ao", ([work],))

        # The login collection is never deleted, and nothing is asked.
        login = client.call("/org/freedesktop/secrets/collection/login", COLLECTION, "Delete")
        assert login.error_name == "org.freedesktop.DBus.Error.NotSupported"
        assert confirms(daemon) == 1

        daemon.set_pinentry_answers(["ok"])
        assert client.ok(work, COLLECTION, "Delete", timeout=30) == ("/",)
        assert work not in collections(client)
        assert confirms(daemon) == 2
    finally:
        client.close()


def test_a_collections_label_cannot_write_lines_into_its_deletion_confirmation(daemon, bus):
    """The label of a collection is its creator's: in the deletion's confirmation it is one bounded line with
    line breaks and bidi controls replaced, so it cannot add a line that reads as the daemon's own (found by the
    review of the merged branches: this prompt came from a branch the sanitising had not reached). A label that
    long once failed the collection's creation ("File name too long"): the file's name is bounded now."""
    client = Client(bus.address)
    try:
        label = "Work\nAsked by: /usr/bin/seahorse (package seahorse)\u202e" + "x" * 500
        made = client.service("CreateCollection", "a{sv}s",
                              ({"org.freedesktop.Secret.Collection.Label": ("s", label)}, ""))[0]
        daemon.set_pinentry_answers(["cancel"])
        refused = client.call(made, COLLECTION, "Delete", timeout=30)
        assert refused.error_name == "org.freedesktop.DBus.Error.AccessDenied", refused.body
        description = arguments(daemon, "SETDESC")[-1]
        lines = description.split("\n")
        assert not any(line.startswith("Asked by: /usr/bin/seahorse") for line in lines), lines
        assert "\u202e" not in description and "x" * 60 not in description
        assert "DELETE the keychain “Work\ufffdAsked by: /usr/bin/seahorse" in description
    finally:
        client.close()
