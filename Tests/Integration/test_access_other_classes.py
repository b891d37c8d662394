"""Items of the classes the Secret Service does not show (keys, certificates) are guarded like passwords on
org.latchkey.Keychain1: a program their access list does not trust is asked before it reads, changes or
deletes one. Two python3 scripts at other paths are two applications; the scripted pinentry answers."""

import json
import subprocess
import sys
import time

import pytest

# Keychain1 Add of a key item (class "keys") with a secret. Access lists are kept only on passwords, and an
# identified caller's new item gets its list, so the key is added by a caller the daemon no longer identifies:
# the script is identified by a first call, forks, and its child adds the key once the identified process ended
# (as an item written into the file directly, or imported, the key trusts no application).
ADD_KEY_SCRIPT = """
import os, sys, time
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
connection = open_dbus_connection(bus="SESSION")
address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                      interface="org.latchkey.Keychain1")
connection.send_and_get_reply(new_method_call(address, "Status"), timeout=60)
parent = os.getpid()
if os.fork() != 0:
    os._exit(0)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        with open(f"/proc/{parent}/stat") as file:
            if file.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                break
    except FileNotFoundError:
        break
    time.sleep(0.01)
attributes = {"labl": ("s", "signing key")}
reply = connection.send_and_get_reply(
    new_method_call(address, "Add", "sa{sv}ayb", ("keys", attributes, b"key secret", True)), timeout=60)
print(reply.header.message_type.name, reply.body, flush=True)
"""

# Keychain1 Search (with data), Update or Delete of every key item; prints the secrets found or the error.
CALL_SCRIPT = """
import sys
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
connection = open_dbus_connection(bus="SESSION")
address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                      interface="org.latchkey.Keychain1")
query = {"class": ("s", "keys"), "attributes": ("a{sv}", {}), "synchronizable": ("s", "any"),
         "limit": ("x", 0), "returning": ("u", 1 | 2)}
method = sys.argv[1]
if method == "Search":
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
    creator.write_text(ADD_KEY_SCRIPT)
    added = python(creator, bus)
    assert added.returncode == 0 and added.stdout.startswith("method_return"), added.stdout + added.stderr
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
