"""Items of the classes the Secret Service does not show (keys, certificates) are guarded like passwords on
org.latchkey.Keychain1: a program their access list does not trust is asked before it reads, changes or
deletes one. The program that adds a key is on its access list, as on macOS, and reads it back unasked. Two python3
scripts at other paths are two applications; the scripted pinentry answers."""

import json
import os
import subprocess
import sys

import pytest
from conftest import binary

# Keychain1 Add of a key item (class "keys") with a secret, or Search (with data), Update or Delete of every key
# item; prints the secrets found or the error. The script is identified (a python3 script at its path), so the key it
# adds trusts it.
CALL_SCRIPT = """
import sys
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
connection = open_dbus_connection(bus="SESSION", auth_timeout=30)
address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                      interface="org.latchkey.Keychain1")
query = {"class": ("s", "keys"), "attributes": ("a{sv}", {}), "synchronizable": ("s", "any"),
         "limit": ("x", 0), "returning": ("u", 1 | 2)}
method = sys.argv[1]
if method == "Add":
    attributes = {"labl": ("s", "signing key"), "atag": ("ay", b"signing")}
    call = new_method_call(address, "Add", "sa{sv}ayb", ("keys", attributes, b"key secret", True))
elif method == "Search":
    call = new_method_call(address, "Search", "a{sv}", (query,))
elif method == "Update":
    call = new_method_call(address, "Update", "a{sv}a{sv}ayb", (query, {"labl": ("s", "renamed")}, b"", False))
else:
    call = new_method_call(address, "Delete", "a{sv}", (query,))
reply = connection.send_and_get_reply(call, timeout=60)
if reply.header.message_type.name == "error":
    print("ERROR", reply.header.fields, reply.body, file=sys.stderr)
    sys.exit(2)
if method == "Search":
    for item in reply.body[0]:
        print(bytes(item["secret"][1]).decode())
else:
    print(reply.body)
"""


@pytest.fixture
def prompting(make_daemon):
    return make_daemon(access_policy="prompt").start()


def confirms(daemon):
    return [json.loads(line) for line in daemon.pinentry_log().splitlines()
            if json.loads(line)["command"] == "CONFIRM"]


def python(script, bus, *args):
    return subprocess.run([sys.executable, str(script), *args], env=bus.env(), capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def key_item(prompting, bus, tmp_path):
    """A key item made by one script; another script at another path, to read or change it."""
    creator = tmp_path / "creator.py"
    creator.write_text(CALL_SCRIPT)
    added = python(creator, bus, "Add")
    assert added.returncode == 0, added.stdout + added.stderr
    other = tmp_path / "other.py"
    other.write_text(CALL_SCRIPT)
    return other


def test_another_program_is_asked_before_it_reads_a_key_item(prompting, bus, key_item):
    """On 782a338 the search was asked about once, but when its turn came the prompt's re-check read the item
    through the Secret Service's classes only (passwords), found nothing, took that for "trusted meanwhile"
    and handed the key's secret over without showing the prompt."""
    prompting.set_pinentry_answers(["cancel"])
    search = python(key_item, bus, "Search")
    assert "key secret" not in search.stdout, "a key's secret went to an untrusted program unasked"
    assert search.returncode == 2 and "-128" in search.stderr, search.stderr
    assert len(confirms(prompting)) == 1


@pytest.mark.parametrize("method", ["Update", "Delete"])
def test_another_program_is_asked_before_it_changes_or_deletes_a_key_item(prompting, bus, key_item, method):
    prompting.set_pinentry_answers(["cancel"])
    changed = python(key_item, bus, method)
    assert changed.returncode == 2 and "-128" in changed.stderr, changed.stdout + changed.stderr
    assert len(confirms(prompting)) == 1
    # Nothing changed: allowed once, the search finds the key as it was.
    prompting.set_pinentry_answers(["ok"])
    search = python(key_item, bus, "Search")
    assert search.returncode == 0 and search.stdout == "key secret\n", search.stderr


def test_the_program_that_added_a_key_reads_it_back_unasked(prompting, bus, key_item):
    """On 1dbbbc4 the Add itself failed (-25303, "attribute 'lk:any-app' does not exist for class 'keys'"): the
    creator's access list was put into a class that could not hold one."""
    creator = key_item.parent / "creator.py"
    search = python(creator, bus, "Search")
    assert search.returncode == 0 and search.stdout == "key secret\n", search.stderr
    assert confirms(prompting) == []


@pytest.mark.parametrize("answer", ["cancel", "ok"])
def test_secitemadd_of_a_key_trusts_its_creator_and_asks_another_program(prompting, bus, tmp_path, answer):
    """SecItemAdd of a kSecClassKey item through the daemon, by a compiled program (secitem-client): it reads the key
    back without a prompt, its path on the key's kSecAttrAccess; a python3 script is asked, and gets the key only if
    the user allows it."""
    secitem = str(binary("secitem-client"))
    added = subprocess.run([secitem, "add-key", "signing", "key secret"], env=bus.env(), capture_output=True,
                           text=True, timeout=60)
    assert added.returncode == 0, added.stdout
    found = subprocess.run([secitem, "find-key", "signing"], env=bus.env(), capture_output=True, text=True,
                           timeout=60)
    assert found.returncode == 0, found.stdout
    secret, *trusted = found.stdout.splitlines()
    assert secret == "key secret"
    assert trusted == [os.path.realpath(secitem)]
    assert confirms(prompting) == []
    # latchkey list-access shows the key's list (the one remove-access narrows).
    login = prompting.keychains / "login.keychain-db"
    listed = subprocess.run([binary("latchkey"), "list-access", "--json", str(login)], env=bus.env(),
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    keys = [entry for entry in json.loads(listed.stdout) if entry["class"] == "key"]
    assert [[application["name"] for application in entry["trusted"]] for entry in keys] == [[trusted[0]]]

    other = tmp_path / "other.py"
    other.write_text(CALL_SCRIPT)
    prompting.set_pinentry_answers([answer])
    search = python(other, bus, "Search")
    assert len(confirms(prompting)) == 1
    if answer == "cancel":
        assert search.returncode == 2 and "-128" in search.stderr and "key secret" not in search.stdout
    else:
        assert search.returncode == 0 and search.stdout == "key secret\n", search.stderr


def test_an_allow_all_keychain_hands_a_key_to_another_program_unasked(make_daemon, bus, tmp_path):
    """allow-all (gnome-keyring's behaviour) needs no list: another program reads the key with no prompt."""
    daemon = make_daemon().start()
    secitem = str(binary("secitem-client"))
    added = subprocess.run([secitem, "add-key", "signing", "key secret"], env=bus.env(), capture_output=True,
                           text=True, timeout=60)
    assert added.returncode == 0, added.stdout
    other = tmp_path / "other.py"
    other.write_text(CALL_SCRIPT)
    search = python(other, bus, "Search")
    assert search.returncode == 0 and search.stdout == "key secret\n", search.stderr
    assert confirms(daemon) == []


@pytest.mark.parametrize("answer", ["cancel", "ok"])
def test_a_persistent_reference_to_a_synchronizable_item_is_no_way_around_the_prompt(prompting, bus, tmp_path,
                                                                                        answer):
    """A query by persistent reference alone finds a synchronizable item (issue 27, Valet's migration). The
    reference is an identifier, not a permission: the program that added the item reads it unasked; a copy of the
    same program at another path (another application) that got hold of the reference is asked, and gets the secret
    only if the user allows it."""
    import shutil
    secitem = str(binary("secitem-client"))
    added = subprocess.run([secitem, "add-synchronizable", "sync.example", "synced secret"], env=bus.env(),
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stdout
    reference = added.stdout.strip()
    own = subprocess.run([secitem, "read-by-reference", reference], env=bus.env(), capture_output=True, text=True,
                         timeout=60)
    assert own.returncode == 0 and own.stdout == "synced secret\n", own.stdout
    assert confirms(prompting) == []
    other = tmp_path / "other-client"
    shutil.copy2(secitem, other)
    prompting.set_pinentry_answers([answer])
    read = subprocess.run([str(other), "read-by-reference", reference], env=bus.env(), capture_output=True,
                          text=True, timeout=60)
    assert len(confirms(prompting)) == 1
    if answer == "cancel":
        assert read.returncode == 1 and "synced secret" not in read.stdout, read.stdout
    else:
        assert read.returncode == 0 and read.stdout == "synced secret\n", read.stdout
