"""One store, two faces: SecItem (Security module, talking to the daemon over
org.latchkey.Keychain1) and the Secret Service see the same items."""

import subprocess

from conftest import LOGIN_PASSWORD, binary, secret_tool


def secitem(bus, *args):
    return subprocess.run([binary("secitem-client"), *args], env=bus.env(), capture_output=True, text=True,
                          timeout=30)


def test_item_stored_by_secret_tool_is_found_by_secitem(daemon, bus):
    secret_tool(bus, "store", "--label=Mail", "service", "mail.example.com", "account", "alice", input=b"from ss")
    found = secitem(bus, "find-generic", "mail.example.com", "alice")
    assert found.returncode == 0, found.stdout
    assert found.stdout == "from ss\n"


def test_item_added_by_secitem_is_found_by_secret_tool(daemon, bus):
    added = secitem(bus, "add-generic", "api.example.com", "bob", "from secitem")
    assert added.returncode == 0, added.stdout
    assert secret_tool(bus, "lookup", "service", "api.example.com", "account", "bob").stdout == b"from secitem"
    listing = secret_tool(bus, "search", "--all", "service", "api.example.com")
    assert "label = added by secitem-client" in listing.stdout.decode()


def test_internet_passwords_map_server_and_port(daemon, bus):
    assert secitem(bus, "add-internet", "www.example.com", "carol", "web secret", "8443").returncode == 0
    assert secret_tool(bus, "lookup", "server", "www.example.com", "port", "8443").stdout == b"web secret"
    assert secret_tool(bus, "lookup", "server", "www.example.com", "protocol", "htps").stdout == b"web secret"
    found = secitem(bus, "find-internet", "www.example.com")
    assert found.stdout == "carol 8443 web secret\n"


def test_secitem_duplicate_and_not_found_statuses_come_through(daemon, bus):
    assert secitem(bus, "add-generic", "dup.example.com", "d", "1").returncode == 0
    again = secitem(bus, "add-generic", "dup.example.com", "d", "2")
    assert again.returncode == 1 and again.stdout == "status -25299\n"
    missing = secitem(bus, "find-generic", "nothing.example.com")
    assert missing.stdout == "status -25300\n"
    assert secitem(bus, "delete-generic", "dup.example.com").returncode == 0
    assert secret_tool(bus, "lookup", "service", "dup.example.com", check=False).returncode != 0


def test_secitem_on_a_locked_daemon_gets_interaction_not_allowed(daemon, bus):
    secret_tool(bus, "store", "--label=x", "service", "locked.example.com", input=b"v")
    subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                    "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
                    "array:objpath:/org/freedesktop/secrets/collection/login"], env=bus.env(), check=True,
                   capture_output=True)
    assert secitem(bus, "find-generic", "locked.example.com").stdout == "status -25308\n"


def test_secitem_semantics_of_issue_16_through_the_daemon(daemon, bus):
    # Every match's data at once, an account given as bytes, an access control,
    # and a persistent reference without kSecClass, all through org.latchkey.Keychain1.
    # The guarded item's access control (biometryAny or devicePasscode) asks the password once (no reader here).
    daemon.set_pinentry_answers([f"password {LOGIN_PASSWORD}"])
    run = secitem(bus, "apple-semantics", "apple.example.com")
    assert run.returncode == 0, run.stdout
    lines = run.stdout.splitlines()
    assert lines[0] == "all-data one,two"
    assert "bytes-account binary" in lines
    assert "access-control aku 16402 aku equal=true" in lines
    assert lines[-1] == "by-reference one"
    # The Secret Service face sees the account given as bytes as its text.
    assert secret_tool(bus, "lookup", "service", "apple.example.com", "account", "binary").stdout == b"one"


def test_wrapper_semantics_of_issue_27_through_the_daemon(daemon, bus):
    """What keychain wrappers rely on, through org.latchkey.Keychain1: attributes and persistent references of
    synchronizable items, then each item's data by its reference alone (Valet's migration); accounts stored as
    bytes read from [AnyHashable: Any] results by the CFString key (SwiftKeychainWrapper's allKeys); a query of
    CFString values equal to the same query in strings (SimpleKeychain's tests)."""
    run = secitem(bus, "wrapper-semantics", "wrappers.example")
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines() == [
        "migrated first=secret of first", "migrated second=secret of second", "queries-equal true"]


def test_secitem_add_with_an_access_object_sets_the_items_list_through_the_daemon(daemon, bus, tmp_path):
    """kSecAttrAccess given to SecItemAdd is the item's stored list (not the adding program, which the daemon
    trusts only when no list is given), as latchkey list-access reads it, and kSecReturnAttributes gives it
    back; a path that names no file is errSecParam."""
    import json
    import os
    true = os.path.realpath("/bin/true")
    assert secitem(bus, "add-trusting", "acl.example", "s1", "/bin/true").returncode == 0
    assert secitem(bus, "show-access", "acl.example").stdout == true + "\n"
    assert secitem(bus, "add-trusting", "any.example", "s2", "any").returncode == 0
    assert secitem(bus, "show-access", "any.example").stdout == "any\n"
    missing = secitem(bus, "add-trusting", "bad.example", "s3", str(tmp_path / "missing"))
    assert (missing.returncode, missing.stdout) == (1, "status -50\n")

    env = bus.env(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "unused-data"))
    listing = subprocess.run([binary("latchkey"), "list-access", "--json", str(daemon.keychains / "login.keychain-db")],
                             env=env, capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0, listing.stderr
    lists = {entry["service"]: entry for entry in json.loads(listing.stdout)}
    assert [application["name"] for application in lists["acl.example"]["trusted"]] == [true]
    assert lists["any.example"]["anyApplication"] is True
