"""latchkeyd's org.kde.KWallet face on a private bus (docs/kwallet.md §6 steps 1 and 2), with real clients:
KDE's kwallet-query, python3-keyring's KWallet backend, secret-tool on the other face, and small jeepney
clients (kwallet_client.py) run as programs of their own. What one program can do to another's handles and
entries through this face is tested here too."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import pytest
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.low_level import MessageType

from conftest import LOGIN_PASSWORD, secret_tool
from flatpak_caller import SANDBOXED_CALLER, needs_root

CLIENT = pathlib.Path(__file__).with_name("kwallet_client.py")
PATH = "/modules/kwalletd5"
INTERFACE = "org.kde.KWallet"
NAME = "org.kde.kwalletd5"


class KWallet:
    """One connection to the KWallet face."""

    def __init__(self, bus, name=NAME):
        self.connection = open_dbus_connection(bus=bus.address)
        self.address = DBusAddress(PATH, bus_name=name, interface=INTERFACE)

    def send(self, member, signature=None, *body):
        """Sends a call without waiting; its serial."""
        message = new_method_call(self.address, member, signature, body)
        self.connection.send(message)
        return message

    def call(self, member, signature=None, *body, timeout=30):
        reply = self.connection.send_and_get_reply(
            new_method_call(self.address, member, signature, body), timeout=timeout)
        assert reply.header.message_type != MessageType.error, f"{member}: {reply.body}"
        return reply.body[0] if reply.body else None

    def open(self, wallet=None, appid="test"):
        return self.call("open", "sxs", wallet or self.call("networkWallet"), 0, appid, timeout=60)

    def close(self):
        self.connection.close()


def kde_env(bus, tmp_path, **extra):
    """The environment of a KDE client: the private bus, no display, a scratch home and configuration."""
    home = tmp_path / "kde-home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    return bus.env(QT_QPA_PLATFORM="offscreen", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"), XDG_RUNTIME_DIR=str(tmp_path / "run"), **extra)


def client(bus, *arguments, script=CLIENT, timeout=60):
    result = subprocess.run([sys.executable, str(script), *arguments], env=bus.env(), capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_for_kwallet_name(bus, timeout=10):
    deadline = time.monotonic() + timeout
    while not bus.has_owner(NAME):
        assert time.monotonic() < deadline, f"nobody owns {NAME}"
        time.sleep(0.02)


def lock_login(bus):
    connection = open_dbus_connection(bus=bus.address)
    try:
        address = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                              interface="org.freedesktop.Secret.Service")
        connection.send_and_get_reply(
            new_method_call(address, "Lock", "ao", (["/org/freedesktop/secrets/collection/login"],)), timeout=10)
    finally:
        connection.close()


@pytest.mark.skipif(shutil.which("kwallet-query") is None, reason="kwallet-query (libkf5wallet-bin) is not installed")
def test_kwallet_query_writes_what_secret_tool_reads_and_the_other_way_round(daemon, bus, tmp_path):
    wait_for_kwallet_name(bus)
    env = kde_env(bus, tmp_path)
    # kwallet-query -w only overwrites an entry that exists (of a known type), against kwalletd5 too.
    secret_tool(daemon.bus, "store", "--label", "old", "server", "Mail", "user", "alice@example.org", input=b"old")
    written = subprocess.run(["kwallet-query", "-f", "Mail", "-w", "alice@example.org", "kdewallet"],
                             input="from kwallet-query", env=env, capture_output=True, text=True, timeout=60)
    assert written.returncode == 0, written.stderr
    found = secret_tool(daemon.bus, "lookup", "server", "Mail", "user", "alice@example.org")
    assert found.stdout.decode() == "from kwallet-query"

    secret_tool(daemon.bus, "store", "--label", "from secret-tool", "server", "Mail", "user", "bob",
                input=b"from secret-tool")
    read = subprocess.run(["kwallet-query", "-f", "Mail", "-r", "bob", "kdewallet"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "from secret-tool"
    listed = subprocess.run(["kwallet-query", "-f", "Mail", "-l", "kdewallet"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) == {"alice@example.org", "bob"}


def test_python_keyrings_kwallet_backend_sets_gets_and_deletes(daemon, bus, tmp_path):
    wait_for_kwallet_name(bus)
    code = """
import sys
from keyring.backends import kwallet
backend = kwallet.DBusKeyring()
backend.set_password("example.com", "alice", "s3cret ✓")
print(backend.get_password("example.com", "alice"))
backend.delete_password("example.com", "alice")
print(backend.get_password("example.com", "alice"))
"""
    script = tmp_path / "keyring_kwallet.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], env=kde_env(bus, tmp_path), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["s3cret ✓", "None"]


def test_an_entry_written_through_kwallet_is_a_secret_service_item(daemon, bus):
    wait_for_kwallet_name(bus)
    assert client(bus, "write", "Web", "carol", "through kwallet")["result"] == 0
    found = secret_tool(bus, "search", "--all", "server", "Web", "user", "carol")
    text = found.stdout.decode() + found.stderr.decode()
    assert "through kwallet" in text and "type = plaintext" in text and "Web/carol" in text
    secret_tool(bus, "store", "--label", "x", "server", "Web", "user", "dave", input=b"through libsecret")
    assert client(bus, "read", "Web", "dave")["result"] == "through libsecret"


def test_network_wallet_answers_at_once_while_an_unlock_prompt_is_open(make_daemon, bus):
    daemon = make_daemon(answers=["hang"]).start()
    wait_for_kwallet_name(bus)
    lock_login(bus)
    waiting = KWallet(bus)
    waiting.send("open", "sxs", "kdewallet", 0, "waiting")
    deadline = time.monotonic() + 10
    while "GETPIN" not in daemon.pinentry_log():
        assert time.monotonic() < deadline, "the unlock prompt did not show"
        time.sleep(0.05)
    asking = KWallet(bus)
    timings = []
    for _ in range(20):
        started = time.monotonic()
        assert asking.call("networkWallet") == "kdewallet"
        timings.append(time.monotonic() - started)
    assert asking.call("isOpen", "s", "kdewallet") is False
    timings.sort()
    assert timings[len(timings) // 2] < 0.05 and timings[-1] < 0.5, timings
    waiting.close()
    asking.close()
    assert daemon.alive()


def test_a_locked_keychain_opens_through_the_unlock_prompt(make_daemon, bus):
    daemon = make_daemon(answers=[]).start()
    wait_for_kwallet_name(bus)
    first = KWallet(bus)
    before = first.open()
    assert before > 0 and first.call("isOpen", "i", before) is True
    lock_login(bus)
    assert first.call("isOpen", "i", before) is False
    daemon.set_pinentry_answers(["cancel", f"password {LOGIN_PASSWORD}"])
    assert first.open() == -1, "cancelled"
    handle = first.open()
    assert handle > 0 and handle != before
    first.call("writePassword", "issss", handle, "F", "k", "after unlock", "test")
    assert first.call("readPassword", "isss", handle, "F", "k", "test") == "after unlock"
    first.close()


def test_open_async_answers_an_id_and_signals_only_the_caller(daemon, bus):
    wait_for_kwallet_name(bus)
    from jeepney import MatchRule
    from jeepney.bus_messages import message_bus
    rule = MatchRule(type="signal", interface=INTERFACE, member="walletAsyncOpened")
    watcher = open_dbus_connection(bus=bus.address)
    watcher.send_and_get_reply(message_bus.AddMatch(rule), timeout=10)
    caller = KWallet(bus)
    caller.connection.send_and_get_reply(message_bus.AddMatch(rule), timeout=10)
    with caller.connection.filter(rule) as signals, watcher.filter(rule) as overheard:
        transaction = caller.call("openAsync", "sxsb", "kdewallet", 0, "async", True)
        assert transaction > 0
        signal = caller.connection.recv_until_filtered(signals, timeout=10)
        assert signal.body[0] == transaction and signal.body[1] > 0
        assert caller.call("isOpen", "i", signal.body[1]) is True
        # Another connection listening for the same signal gets nothing: it carries a handle.
        with pytest.raises(TimeoutError):
            watcher.recv_until_filtered(overheard, timeout=1)
    watcher.close()
    caller.close()


def test_another_process_can_neither_use_nor_close_a_handle(daemon, bus):
    wait_for_kwallet_name(bus)
    owner = KWallet(bus)
    handle = owner.open(appid="owner")
    assert owner.call("writePassword", "issss", handle, "F", "k", "owners secret", "owner") == 0
    tried = client(bus, "use-handle", str(handle), "F", "k")
    assert tried == {"isOpen": False, "readPassword": "", "writePassword": -1, "removeEntry": -1, "close": -1}
    assert owner.call("isOpen", "i", handle) is True
    assert owner.call("readPassword", "isss", handle, "F", "k", "owner") == "owners secret"
    owner.close()


def test_an_appid_is_no_identity_another_program_is_asked_as_for_get_secret(make_daemon, bus, tmp_path):
    """Program A writes an entry; program B, a different script claiming A's appid, is asked before it reads
    it (the item trusts A alone), and Deny leaves it with the empty value; Allow once gives it the value."""
    daemon = make_daemon(access_policy="prompt").start()
    wait_for_kwallet_name(bus)
    program_a = tmp_path / "program_a.py"
    program_b = tmp_path / "program_b.py"
    program_a.write_text(CLIENT.read_text())
    program_b.write_text(CLIENT.read_text() + "\n# another program\n")
    assert client(bus, "--appid", "A", "write", "Shop", "login", "A's password", script=program_a)["result"] == 0
    assert client(bus, "--appid", "A", "read", "Shop", "login", script=program_a)["result"] == "A's password"
    assert "CONFIRM" not in daemon.pinentry_log(), "the creator is trusted"
    daemon.set_pinentry_answers(["cancel"])
    denied = client(bus, "--appid", "A", "read", "Shop", "login", script=program_b)
    assert denied["handle"] > 0 and denied["result"] == ""
    prompts = [json.loads(line) for line in daemon.pinentry_log().splitlines()]
    descriptions = [entry["argument"] for entry in prompts if entry["command"] == "SETDESC"]
    assert descriptions and str(program_b) in descriptions[-1], descriptions
    daemon.set_pinentry_answers(["ok"])
    assert client(bus, "--appid", "A", "read", "Shop", "login", script=program_b)["result"] == "A's password"
    # Overwriting it is a change: asked too, and refused here.
    daemon.set_pinentry_answers(["cancel"])
    assert client(bus, "--appid", "A", "write", "Shop", "login", "B's", script=program_b)["result"] == -1
    assert client(bus, "read", "Shop", "login", script=program_a)["result"] == "A's password"


# A Flatpak application as flatpak_caller.py makes one, whose calls print their replies (KWallet answers
# failures as values, not errors); "HANDLE" in the arguments stands for the handle its last `open` gave.
KWALLET_SANDBOXED_CALLER = SANDBOXED_CALLER.replace(
    """        call(path, interface, member, signature, fill(args))
        print("ok", flush=True)""",
    """        if member == "sleep":
            time.sleep(args[0])
            continue
        reply = call(path, interface, member, signature, fill(args)).unpack()
        if member == "open":
            handle = reply[0]
        print(json.dumps(reply), flush=True)""").replace(
    """    if value == "SESSION":""",
    """    if value == "HANDLE":
        return handle
    if value == "SESSION":""").replace(
    """for path, interface, member, signature, args in json.loads(sys.argv[3]):""",
    """import time
handle = -1
for path, interface, member, signature, args in json.loads(sys.argv[3]):""")
assert KWALLET_SANDBOXED_CALLER.count("HANDLE") == 1 and "handle = -1" in KWALLET_SANDBOXED_CALLER


def as_flatpak_kwallet(bus, tmp_path, calls, app_id="org.kde.Sneaky"):
    """The replies of KWallet `calls` ([member, signature, args]) made as the Flatpak application `app_id`."""
    root = tmp_path / "app-root"
    root.mkdir(exist_ok=True)
    (root / ".flatpak-info").write_text(f"[Application]\nname={app_id}\nruntime=runtime/x/x86_64/1\n")
    full = [[PATH, INTERFACE, member, signature, args] for member, signature, args in calls]
    result = subprocess.run([sys.executable, "-c", KWALLET_SANDBOXED_CALLER, bus.address, str(root), json.dumps(full)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@needs_root
def test_a_flatpak_app_with_the_kwallet_name_is_asked_for_others_entries_and_new_wallets(make_daemon, bus, tmp_path):
    """KDE's Flatpak apps are commonly let talk to org.kde.kwalletd5/6: such an app opens the wallet and sees
    names, but another program's entry is the person's to give it, and so is a new wallet."""
    daemon = make_daemon(access_policy="prompt").start()
    wait_for_kwallet_name(bus)
    assert client(bus, "write", "Bank", "me", "the bank password")["result"] == 0
    daemon.set_pinentry_answers(["cancel", "cancel", "cancel"])
    replies = as_flatpak_kwallet(bus, tmp_path, [
        ["open", "(sxs)", ["kdewallet", 0, "org.kde.Sneaky"]],
        ["hasEntry", "(isss)", ["HANDLE", "Bank", "me", "x"]],
        ["readPassword", "(isss)", ["HANDLE", "Bank", "me", "x"]],
        ["writePassword", "(issss)", ["HANDLE", "Bank", "me", "overwritten", "x"]],
        ["open", "(sxs)", ["Sneaky wallet", 0, "org.kde.Sneaky"]],
    ])
    assert replies[0][0] > 0
    assert replies[1:] == [[True], [""], [-1], [-1]]
    descriptions = [json.loads(line)["argument"] for line in daemon.pinentry_log().splitlines()
                    if json.loads(line)["command"] == "SETDESC"]
    assert len(descriptions) == 3 and all("org.kde.Sneaky" in text for text in descriptions), descriptions
    assert client(bus, "read", "Bank", "me")["result"] == "the bank password"
    assert "Sneaky wallet" not in KWallet(bus).call("wallets")


@needs_root
def test_a_flatpak_app_queues_one_new_wallet_confirmation_at_a_time(make_daemon, bus, tmp_path):
    """As `CreateCollection`: while one "create keychain?" confirmation the app asked for waits, opening another
    new wallet answers -1 at once rather than queueing a prompt; once it is answered the app may ask again."""
    daemon = make_daemon(access_policy="prompt").start()
    wait_for_kwallet_name(bus)
    daemon.set_pinentry_answers(["wait 2 cancel"] + ["cancel"] * 12)
    calls = [["openAsync", "(sxsb)", [f"Flood {n}", 0, "org.kde.Sneaky", False]] for n in range(8)]
    calls += [["open", "(sxs)", ["Flood last", 0, "org.kde.Sneaky"]], ["sleep", "", [4]],
              ["open", "(sxs)", ["Flood again", 0, "org.kde.Sneaky"]]]
    started = time.monotonic()
    replies = as_flatpak_kwallet(bus, tmp_path, calls)
    assert all(reply[0] > 0 for reply in replies[:8]), replies
    assert replies[8:] == [[-1], [-1]]
    descriptions = [json.loads(line)["argument"] for line in daemon.pinentry_log().splitlines()
                    if json.loads(line)["command"] == "SETDESC"]
    assert len(descriptions) == 2, descriptions
    assert "Flood 0" in descriptions[0] and "Flood again" in descriptions[1], descriptions
    assert time.monotonic() - started < 15
    assert not [name for name in KWallet(bus).call("wallets") if name.startswith("Flood")]
