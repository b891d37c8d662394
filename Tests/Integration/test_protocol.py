"""The Secret Service protocol at the message level: sessions, errors, bounds."""

import pytest

from dbus_client import DEFAULT, SERVICE, Client, DHClient

ITEM = "org.freedesktop.Secret.Item"
COLLECTION = "org.freedesktop.Secret.Collection"
PROPS = "org.freedesktop.DBus.Properties"


@pytest.fixture
def client(daemon, bus):
    c = Client(bus.address)
    yield c
    c.close()


@pytest.fixture
def other(daemon, bus):
    c = Client(bus.address)
    yield c
    c.close()


def test_plain_session_round_trip(client):
    session = client.open_plain()
    item = client.create_item(session, {"p": "1"}, b"plain secret")
    (secret,) = client.ok(item, ITEM, "GetSecret", "o", (session,))
    assert secret == (session, b"", b"plain secret", "text/plain")


@pytest.mark.parametrize("length", [128, 127, 2])
def test_dh_session_with_client_keys_of_any_length(client, length):
    # 128 and 127 bytes: random keys (127 needs a leading zero byte, one in 256);
    # 2 bytes: private key 8 gives public key 2^8 = 256.
    dh = DHClient(private=8) if length == 2 else DHClient(public_length=length)
    assert len(dh.public_bytes) == length
    output, session = client.service("OpenSession", "sv", ("dh-ietf1024-sha256-aes128-cbc-pkcs7",
                                                            ("ay", dh.public_bytes)))
    assert output[0] == "ay" and len(output[1]) == 128
    dh.derive(output[1])
    iv, ciphertext = dh.encrypt(b"dh secret \xe2\x9c\x93")
    item = client.create_item(session, {"dh": str(length)}, ciphertext, parameters=iv)
    (secret,) = client.ok(item, ITEM, "GetSecret", "o", (session,))
    assert secret[0] == session and len(secret[1]) == 16 and secret[1] != iv
    assert dh.decrypt(secret[1], secret[2]) == b"dh secret \xe2\x9c\x93"
    plain = client.open_plain()
    assert client.ok(item, ITEM, "GetSecret", "o", (plain,))[0][2] == b"dh secret \xe2\x9c\x93"


def test_unknown_algorithm_is_not_supported(client):
    reply = client.call(SERVICE, "org.freedesktop.Secret.Service", "OpenSession", "sv", ("rot13", ("s", "")))
    assert reply.error_name == "org.freedesktop.DBus.Error.NotSupported"


@pytest.mark.parametrize("key", [b"", b"\x00" * 129, b"\x01", (b"\xff" * 128)])
def test_bad_dh_keys_are_invalid_args(client, key):
    reply = client.call(SERVICE, "org.freedesktop.Secret.Service", "OpenSession", "sv",
                        ("dh-ietf1024-sha256-aes128-cbc-pkcs7", ("ay", key)))
    assert reply.error_name == "org.freedesktop.DBus.Error.InvalidArgs"


def test_secret_that_fails_to_decrypt_is_invalid_args_and_stores_nothing(client):
    dh = DHClient()
    output, session = client.service("OpenSession", "sv", ("dh-ietf1024-sha256-aes128-cbc-pkcs7",
                                                            ("ay", dh.public_bytes)))
    properties = {"org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"bad": "crypto"})}
    # A block that decrypts, under the session's key, to bytes whose PKCS#7 padding is invalid (a last byte of
    # 0); random ciphertext would decrypt to valid padding about once in 256 runs.
    dh.derive(output[1])
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    iv = b"\x07" * 16
    encryptor = Cipher(algorithms.AES(dh.key), modes.CBC(iv)).encryptor()
    bad_padding = encryptor.update(b"\x00" * 16) + encryptor.finalize()
    for parameters, value in [(iv, bad_padding), (b"short", b"\x00" * 16), (b"\x00" * 16, b"\x00" * 5)]:
        reply = client.call(DEFAULT, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                            (properties, (session, parameters, value, "text/plain"), False))
        assert reply.error_name == "org.freedesktop.DBus.Error.InvalidArgs"
    assert client.ok(DEFAULT, COLLECTION, "SearchItems", "a{ss}", ({"bad": "crypto"},)) == ([],)


def test_foreign_and_closed_sessions_are_no_session(client, other):
    mine = client.open_plain()
    item = client.create_item(mine, {"s": "x"}, b"v")
    theirs = other.open_plain()
    reply = client.call(item, ITEM, "GetSecret", "o", (theirs,))
    assert reply.error_name == "org.freedesktop.Secret.Error.NoSession"
    reply = client.call(SERVICE, "org.freedesktop.Secret.Service", "GetSecrets", "aoo", ([item], theirs))
    assert reply.error_name == "org.freedesktop.Secret.Error.NoSession"
    # Another client cannot close it (review of issue 24: any client could end every other client's session).
    reply = other.call(mine, "org.freedesktop.Secret.Session", "Close")
    assert reply.error_name == "org.freedesktop.DBus.Error.AccessDenied", reply.error_name
    assert client.ok(item, ITEM, "GetSecret", "o", (mine,))[0][2] == b"v"
    client.ok(mine, "org.freedesktop.Secret.Session", "Close", None, ())
    assert client.call(item, ITEM, "GetSecret", "o", (mine,)).error_name == "org.freedesktop.Secret.Error.NoSession"
    assert client.call(item, ITEM, "GetSecret", "o", ("/not/a/session",)).error_name == \
        "org.freedesktop.Secret.Error.NoSession"


def test_sessions_of_a_departed_client_are_dropped(client, bus):
    leaving = Client(bus.address)
    session = leaving.open_plain()
    leaving.close()
    import time
    time.sleep(0.2)
    reply = client.call(session, "org.freedesktop.Secret.Session", "Close")
    assert reply.error_name == "org.freedesktop.Secret.Error.NoSuchObject"


def test_get_secrets_leaves_out_locked_items(client, daemon):
    session = client.open_plain()
    unlocked = client.create_item(session, {"g": "1"}, b"login item")
    temp = client.create_item(session, {"g": "2"}, b"session item",
                              collection="/org/freedesktop/secrets/aliases/session")
    client.service("Lock", "ao", (["/org/freedesktop/secrets/collection/login"],))
    (secrets,) = client.service("GetSecrets", "aoo", ([unlocked, temp], session))
    assert list(secrets) == [temp]
    assert client.call(unlocked, ITEM, "GetSecret", "o", (session,)).error_name == \
        "org.freedesktop.Secret.Error.IsLocked"
    unlocked_list, locked_list = client.service("SearchItems", "a{ss}", ({"g": "1"},))
    assert (unlocked_list, locked_list) == ([], [unlocked])
    assert client.ok(unlocked, PROPS, "Get", "ss", (ITEM, "Locked")) == (("b", True),)


@pytest.mark.parametrize("path,interface,member,signature,body,error", [
    (SERVICE, "org.freedesktop.Secret.Service", "OpenSession", "s", ("plain",), "InvalidArgs"),
    (SERVICE, "org.freedesktop.Secret.Service", "SearchItems", "as", (["a"],), "InvalidArgs"),
    (SERVICE, "org.freedesktop.Secret.Service", "Unlock", "s", ("x",), "InvalidArgs"),
    (SERVICE, "org.freedesktop.Secret.Service", "NoSuchMethod", None, (), "UnknownMethod"),
    (DEFAULT, COLLECTION, "CreateItem", "a{sv}", ({},), "InvalidArgs"),
    ("/org/freedesktop/secrets/collection/nope", COLLECTION, "SearchItems", "a{ss}", ({},), "NoSuchObject"),
    ("/org/freedesktop/secrets/collection/login/genp00", ITEM, "Delete", None, (), "NoSuchObject"),
    ("/org/freedesktop/secrets/collection/login/genp" + "0" * 32, ITEM, "Delete", None, (), "NoSuchObject"),
    ("/elsewhere", "org.freedesktop.Secret.Service", "Lock", "ao", ([],), "NoSuchObject"),
    (SERVICE, PROPS, "Get", "ss", ("org.freedesktop.Secret.Service", "Nope"), "UnknownProperty"),
    (DEFAULT, PROPS, "Set", "ssv", (COLLECTION, "Locked", ("b", False)), "PropertyReadOnly"),
    (DEFAULT, PROPS, "Set", "ssv", (COLLECTION, "Label", ("u", 3)), "InvalidArgs"),
    (SERVICE, "org.freedesktop.Secret.Service", "SetAlias", "so", ("bad alias!", "/"), "InvalidArgs"),
    (SERVICE, "org.freedesktop.Secret.Service", "SetAlias", "so",
     ("x", "/org/freedesktop/secrets/collection/none"), "NoSuchObject"),
])
def test_bad_calls_get_the_documented_error(client, path, interface, member, signature, body, error):
    reply = client.call(path, interface, member, signature, body)
    assert reply.is_error
    assert reply.error_name.endswith("." + error), reply.error_name


def test_limits_on_input_and_nothing_is_lost(client, daemon):
    session = client.open_plain()
    keep = client.create_item(session, {"keep": "me"}, b"precious")
    huge = {f"k{i}": "v" for i in range(10_000)}
    props = {"org.freedesktop.Secret.Item.Attributes": ("a{ss}", huge)}
    reply = client.call(DEFAULT, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                        (props, (session, b"", b"x", "text/plain"), False))
    assert reply.error_name == "org.freedesktop.DBus.Error.InvalidArgs"
    assert client.call(SERVICE, "org.freedesktop.Secret.Service", "SearchItems", "a{ss}", (huge,)).error_name == \
        "org.freedesktop.DBus.Error.InvalidArgs"
    big = b"\x42" * (16 * 1024 * 1024)
    reply = client.call(DEFAULT, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                        ({}, (session, b"", big, "text/plain"), False), timeout=60)
    assert reply.error_name == "org.freedesktop.DBus.Error.InvalidArgs"
    reply = client.call(keep, ITEM, "SetSecret", "(oayays)", ((session, b"", big, "text/plain"),), timeout=60)
    assert reply.error_name == "org.freedesktop.DBus.Error.InvalidArgs"
    just_fits = b"\x01" * (1024 * 1024)
    fits = client.create_item(session, {"size": "1MiB"}, just_fits)
    assert client.ok(fits, ITEM, "GetSecret", "o", (session,))[0][2] == just_fits
    long_value = {"long": "x" * (16 * 1024 + 1)}
    props = {"org.freedesktop.Secret.Item.Attributes": ("a{ss}", long_value)}
    assert client.call(DEFAULT, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                       (props, (session, b"", b"x", "text/plain"), False)).error_name.endswith("InvalidArgs")
    assert daemon.alive()
    assert client.ok(keep, ITEM, "GetSecret", "o", (session,))[0][2] == b"precious"


def test_alias_path_works_like_the_collection(client, daemon):
    assert client.service("ReadAlias", "s", ("default",)) == ("/org/freedesktop/secrets/collection/login",)
    assert client.service("ReadAlias", "s", ("nothing",)) == ("/",)
    via_alias = client.ok(DEFAULT, PROPS, "GetAll", "s", (COLLECTION,))[0]
    direct = client.ok("/org/freedesktop/secrets/collection/login", PROPS, "GetAll", "s", (COLLECTION,))[0]
    assert via_alias == direct
    client.service("SetAlias", "so", ("mine", "/org/freedesktop/secrets/collection/session"))
    assert client.service("ReadAlias", "s", ("mine",)) == ("/org/freedesktop/secrets/collection/session",)
    # Removing an alias that points at a collection is confirmed by the person (test_client_guards.py).
    daemon.set_pinentry_answers(["confirm"])
    client.service("SetAlias", "so", ("mine", "/"))
    assert client.service("ReadAlias", "s", ("mine",)) == ("/",)


def test_introspection_lists_interfaces_and_children(client):
    (xml,) = client.ok(SERVICE, "org.freedesktop.DBus.Introspectable", "Introspect")
    assert '<interface name="org.freedesktop.Secret.Service">' in xml
    assert '<node name="collection"/>' in xml
    (xml,) = client.ok("/org/freedesktop/secrets/collection", "org.freedesktop.DBus.Introspectable", "Introspect")
    assert '<node name="login"/>' in xml and '<node name="session"/>' in xml


def test_unlock_prompt_dismiss_sends_completed_dismissed(client, bus):
    from jeepney import MatchRule, message_bus, new_method_call as call
    from jeepney.io.blocking import Proxy
    client.service("Lock", "ao", (["/org/freedesktop/secrets/collection/login"],))
    unlocked, prompt = client.service("Unlock", "ao", (["/org/freedesktop/secrets/collection/login"],))
    assert unlocked == [] and prompt.startswith("/org/freedesktop/secrets/prompt/")
    rule = MatchRule(type="signal", interface="org.freedesktop.Secret.Prompt", member="Completed", path=prompt)
    Proxy(message_bus, client.connection).AddMatch(rule)
    with client.connection.filter(rule) as queue:
        client.ok(prompt, "org.freedesktop.Secret.Prompt", "Dismiss")
        signal = client.connection.recv_until_filtered(queue, timeout=10)
    assert signal.body == (True, ("ao", []))
    assert client.ok("/org/freedesktop/secrets/collection/login", PROPS, "Get", "ss",
                     (COLLECTION, "Locked")) == (("b", True),)
    assert client.call(prompt, "org.freedesktop.Secret.Prompt", "Dismiss").error_name.endswith("NoSuchObject")


def test_unlock_prompt_completes_with_the_unlocked_objects(client, daemon):
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    daemon.set_pinentry_answers(["password login password"])
    login = "/org/freedesktop/secrets/collection/login"
    session_collection = "/org/freedesktop/secrets/collection/session"
    client.service("Lock", "ao", ([login, session_collection],))
    unlocked, prompt = client.service("Unlock", "ao", ([login, session_collection],))
    assert unlocked == [session_collection]
    rule = MatchRule(type="signal", interface="org.freedesktop.Secret.Prompt", member="Completed", path=prompt)
    Proxy(message_bus, client.connection).AddMatch(rule)
    with client.connection.filter(rule) as queue:
        client.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", "s", ("",))
        signal = client.connection.recv_until_filtered(queue, timeout=20)
    assert signal.body == (False, ("ao", [login, session_collection]))


def test_spoofed_bus_signals_are_ignored(client, other, daemon, bus):
    from jeepney import new_signal, DBusAddress
    from jeepney.low_level import HeaderFields
    session = other.open_plain()
    bus_address = DBusAddress("/org/freedesktop/DBus", interface="org.freedesktop.DBus")
    for member, signature, body in [("NameLost", "s", ("org.freedesktop.secrets",)),
                                    ("NameOwnerChanged", "sss", (other.unique_name, other.unique_name, ""))]:
        message = new_signal(bus_address, member, signature, body)
        message.header.fields[HeaderFields.destination] = "org.freedesktop.secrets"
        client.connection.send(message)
    import time
    time.sleep(0.3)
    assert daemon.alive() and bus.has_owner()
    assert not other.call(session, "org.freedesktop.Secret.Session", "Close").is_error


def test_keychain1_refuses_a_60_mib_attribute_like_the_secret_service(client, daemon):
    """org.latchkey.Keychain1 has the Secret Service face's input bounds: a 60 MiB attribute sent over the real
    bus is refused with the status error (errSecDataTooLarge), nothing is stored, and the daemon still serves."""
    native = "/org/latchkey/keychain/login"
    huge = "a" * (60 * 1024 * 1024)
    reply = client.call(native, "org.latchkey.Keychain1", "Add", "sa{sv}ayb",
                        ("genp", {"acct": ("s", huge), "svce": ("s", "bounds.example")}, b"x", True), timeout=120)
    assert reply.error_name == "org.latchkey.Keychain1.Error.Status", reply.error_name
    assert reply.body[0].startswith("-25302 "), reply.body  # errSecDataTooLarge

    def search(service):
        query = {"class": ("s", "genp"), "attributes": ("a{sv}", {"svce": ("s", service)}),
                 "synchronizable": ("s", "any"), "limit": ("x", 0), "returning": ("u", 0)}
        return client.ok(native, "org.latchkey.Keychain1", "Search", "a{sv}", (query,))[0]

    assert search("bounds.example") == []
    client.ok(native, "org.latchkey.Keychain1", "Add", "sa{sv}ayb",
              ("genp", {"acct": ("s", "small"), "svce": ("s", "fits.example")}, b"x", True))
    assert len(search("fits.example")) == 1
    assert daemon.alive()
