"""Locking under a KWallet client, and the prompt it reopens through (docs/kwallet.md §3, "Locking and prompts,
as built"): a KF5 program on KWallet::Wallet (kwallet_client.cpp) holds the network wallet open while the login
keychain is locked through the Secret Service; it sees its wallet closed and reopens through the unlock prompt
(the scripted pinentry), parented by the window id it passed, which no other client's prompt gets. A client
that leaves takes its handles with it; pamOpen, whatever it is sent, unlocks, creates and changes nothing."""

import json
import os
import pathlib
import select
import shutil
import signal
import subprocess
import time

import pytest
from jeepney import DBusAddress, new_method_call
from jeepney.low_level import MessageType

from conftest import LOGIN_PASSWORD, binary
from kwallet_daemons import WALLET, SignalWatch, _hex, build_client, start_daemon, wallet_hash

LOGIN = "/org/freedesktop/secrets/collection/login"
# kdewallet.kwl made by the real kwalletd5 (Tests/KWalletImportTests/Fixtures/README.md), with its password.
FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "KWalletImportTests" / "Fixtures"
FIXTURE_PASSWORD = "Pässwörd ✓ for kdewallet"


@pytest.fixture
def kwallet(tmp_path):
    """latchkeyd on a private bus, its login keychain unlocked, the scripted pinentry."""
    with start_daemon("latchkeyd", tmp_path / "latchkeyd") as daemon:
        yield daemon
        assert daemon.alive(), f"latchkeyd died: {daemon.stderr_text()}"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return build_client(tmp_path_factory.mktemp("kwallet-client"))


class LiveClient:
    """The KF5 client kept running, driven one step at a time (its lines as in kwallet_client.cpp)."""

    def __init__(self, executable, daemon):
        self.process = subprocess.Popen([str(executable)], env=daemon.env(), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def step(self, command, *args, timeout=60):
        line = "\t".join([command, *(str(a) if isinstance(a, int) else _hex(a) for a in args)])
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        assert ready, f"kwallet_client did not answer {line!r} within {timeout} s"
        fields = self.process.stdout.readline().rstrip("\n").split("\t")
        assert fields[0] == command, f"kwallet_client answered {fields!r} to {line!r}"
        return fields[1:]

    def kill(self):
        """Leaves without a word (no close: the library's destructor never runs)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def secret_service(kwallet, member, signature=None, *body, path="/org/freedesktop/secrets",
                   interface="org.freedesktop.Secret.Service"):
    connection = kwallet.connect()
    try:
        reply = connection.send_and_get_reply(new_method_call(
            DBusAddress(path, bus_name="org.freedesktop.secrets", interface=interface), member, signature, body),
            timeout=30)
    finally:
        connection.close()
    assert reply.header.message_type != MessageType.error, f"{member}: {reply.body}"
    return reply.body


def lock_login(kwallet, through="secret-service"):
    """Locks the login keychain through the Secret Service's Lock, or as the person does: `latchkey
    lock-keychain` (the CLI asks the daemon over org.latchkey.Keychain1)."""
    if through == "latchkey":
        keychain = kwallet.latchkeyd.keychains / "login.keychain-db"
        locked = subprocess.run([binary("latchkey"), "lock-keychain", str(keychain)], env=kwallet.env(),
                                capture_output=True, text=True, timeout=60)
        assert locked.returncode == 0, locked.stderr
    else:
        secret_service(kwallet, "Lock", "ao", [LOGIN])
    assert login_locked(kwallet)


def login_locked(kwallet):
    return secret_service(kwallet, "Get", "ss", "org.freedesktop.Secret.Collection", "Locked", path=LOGIN,
                          interface="org.freedesktop.DBus.Properties")[0][1]


def collections(kwallet):
    return sorted(secret_service(kwallet, "Get", "ss", "org.freedesktop.Secret.Service", "Collections",
                                 interface="org.freedesktop.DBus.Properties")[0][1])


def prompts_since(kwallet, offset):
    """The pinentry runs logged after `offset` characters of the log: {pid: [(command, argument)…]}."""
    runs = {}
    for line in kwallet.latchkeyd.pinentry_log()[offset:].splitlines():
        entry = json.loads(line)
        runs.setdefault(entry["pid"], []).append((entry["command"], entry["argument"]))
    return runs


def parent_windows(run):
    return [argument for command, argument in run if command == "OPTION" and argument.startswith("parent-wid")]


@pytest.mark.parametrize("through", ["secret-service", "latchkey"])
def test_a_kf5_client_sees_its_wallet_closed_at_a_lock_and_reopens_through_the_prompt(kwallet, program, through):
    client = LiveClient(program, kwallet)
    watch = SignalWatch(kwallet)
    try:
        assert client.step("open-sync", WALLET) == ["1"]
        assert client.step("create-folder", "Mail") == ["1"]
        assert client.step("set-folder", "Mail") == ["1"]
        assert client.step("write-password", "alice", "kept across the lock") == ["0"]
        watch.drain()
        kwallet.latchkeyd.set_pinentry_answers([f"password {LOGIN_PASSWORD}"])
        logged = len(kwallet.latchkeyd.pinentry_log())

        lock_login(kwallet, through)
        # The handle's signals (walletClosedId, walletClosed(i)) go to the owner only: another connection
        # gets the broadcast walletClosed(s) and, the last handle gone, allWalletsClosed.
        seen = watch.drain(settle=1.0)
        assert ("walletClosed", (WALLET,)) in seen, seen
        assert ("allWalletsClosed", ()) in seen, seen
        assert not [s for s in seen if s[0] == "walletClosedId" or (s[0] == "walletClosed" and s[1] != (WALLET,))]

        # The client's Wallet object emits walletClosed (its handle's signal reached it), then reopens: the
        # keychain is locked, so the open waits for the unlock prompt, answered with the login password.
        assert client.step("wait-closed-reopen", WALLET, 0) == ["1", "1"]
        runs = prompts_since(kwallet, logged)
        assert len(runs) == 1 and any(command == "GETPIN" for command, _ in next(iter(runs.values()))), runs
        assert not login_locked(kwallet)
        assert client.step("set-folder", "Mail") == ["1"]
        assert client.step("read-password", "alice") == ["0", _hex("kept across the lock")]
    finally:
        watch.close()
        client.close()


def test_a_client_that_leaves_takes_its_handles_with_it(kwallet, program):
    leaver = LiveClient(program, kwallet)
    watch = SignalWatch(kwallet)
    try:
        assert leaver.step("open-sync", WALLET) == ["1"]
        leaver.kill()
        # Another connection sees nothing of its handles: no signal carries them, users lists no appid of it.
        seen = watch.drain(settle=1.0)
        assert not [s for s in seen if s[0] in ("walletClosedId", "applicationDisconnected")
                    or (s[0] == "walletClosed" and s[1] != (WALLET,))], seen
        assert kwallet.value("users", "s", WALLET) == []
        # Nor does the daemon hold any: a lock now ends no handle, so no allWalletsClosed follows it (it would
        # if the leaver's handle were still counted).
        lock_login(kwallet)
        seen = watch.drain(settle=1.0)
        assert ("walletClosed", (WALLET,)) in seen, seen
        assert ("allWalletsClosed", ()) not in seen, seen
    finally:
        watch.close()
        leaver.close()


def test_the_window_id_of_an_open_parents_that_clients_prompt_only(kwallet, program):
    first, second = LiveClient(program, kwallet), LiveClient(program, kwallet)
    try:
        lock_login(kwallet)
        kwallet.latchkeyd.set_pinentry_answers([f"password {LOGIN_PASSWORD}"] * 3)
        logged = len(kwallet.latchkeyd.pinentry_log())
        assert first.step("open-sync-window", WALLET, 4242) == ["1"]
        runs = list(prompts_since(kwallet, logged).values())
        assert len(runs) == 1 and parent_windows(runs[0]) == ["parent-wid=4242"], runs

        # Another client's prompt never gets the first one's window: none when it passes 0, nor below 0.
        for window in (0, -7):
            lock_login(kwallet)
            logged = len(kwallet.latchkeyd.pinentry_log())
            assert second.step("open-sync-window", WALLET, window) == ["1"]
            runs = list(prompts_since(kwallet, logged).values())
            assert len(runs) == 1 and parent_windows(runs[0]) == [], runs
    finally:
        first.close()
        second.close()


def test_change_password_prompts_are_parented_by_its_window_id(kwallet):
    kwallet.latchkeyd.set_pinentry_answers(["cancel"])
    logged = len(kwallet.latchkeyd.pinentry_log())
    assert kwallet.call("changePassword", "sxs", WALLET, 5151, "test-app", timeout=60) == ()
    runs = list(prompts_since(kwallet, logged).values())
    assert len(runs) == 1 and parent_windows(runs[0]) == ["parent-wid=5151"], runs


def test_pam_open_never_unlocks_creates_or_changes_a_keychain(kwallet):
    """pamOpen is any program's to call: with garbage, or a hash for a wallet, it unlocks, makes and changes no
    keychain (docs/kwallet.md §5): here no wallet file is there to import."""
    keychains = kwallet.latchkeyd.keychains
    before = {p.name: p.read_bytes() for p in keychains.iterdir() if p.is_file()}
    made = collections(kwallet)
    lock_login(kwallet)
    logged = len(kwallet.latchkeyd.pinentry_log())
    replies = [kwallet.call("pamOpen", "sayi", wallet, key, 0, timeout=60) for wallet, key in (
        (WALLET, b"\x00" * 56), (WALLET, os.urandom(56)), ("newwallet", os.urandom(56)),
        (WALLET, LOGIN_PASSWORD.encode()), (WALLET, b""), ("", os.urandom(1 << 16)))]
    assert prompts_since(kwallet, logged) == {}
    assert login_locked(kwallet)
    assert kwallet.value("isOpen", "s", WALLET) is False
    assert collections(kwallet) == made
    after = {p.name: p.read_bytes() for p in keychains.iterdir() if p.is_file()}
    assert after == before
    # Unlocked, the same: no wallet made for a name no collection has, no keychain file touched.
    kwallet.latchkeyd.set_pinentry_answers([f"password {LOGIN_PASSWORD}"])
    assert kwallet.value("open", "sxs", WALLET, 0, "unlocker", timeout=60) > 0
    assert not login_locked(kwallet)
    before = {p.name: p.read_bytes() for p in keychains.iterdir() if p.is_file()}
    logged = len(kwallet.latchkeyd.pinentry_log())
    replies += [kwallet.call("pamOpen", "sayi", wallet, key, 0, timeout=60) for wallet, key in (
        ("newwallet", os.urandom(56)), (WALLET, os.urandom(56)))]
    assert collections(kwallet) == made
    assert prompts_since(kwallet, logged) == {}
    assert {p.name: p.read_bytes() for p in keychains.iterdir() if p.is_file()} == before
    assert replies == [()] * 8, replies
    assert kwallet.alive()



def login_items(kwallet, attributes):
    return secret_service(kwallet, "SearchItems", "a{ss}", attributes)[0]


def test_pam_open_imports_the_local_wallet_its_key_opens_once_into_an_unlocked_login(kwallet):
    wallets = kwallet.data_home / "kwalletd"
    for name in ("kdewallet.kwl", "kdewallet.salt"):
        shutil.copy(FIXTURES / name, wallets / name)
    files = {p.name: p.read_bytes() for p in wallets.iterdir()}
    key = wallet_hash(FIXTURE_PASSWORD, (wallets / "kdewallet.salt").read_bytes())
    entry = {"server": "Passwords", "user": "mail@example.org"}
    everything = {}

    # Locked: the right key imports nothing and unlocks nothing.
    lock_login(kwallet)
    assert kwallet.call("pamOpen", "sayi", WALLET, key, 0) == ()
    time.sleep(1)
    assert login_locked(kwallet)
    kwallet.latchkeyd.set_pinentry_answers([f"password {LOGIN_PASSWORD}"])
    assert kwallet.value("open", "sxs", WALLET, 0, "unlocker", timeout=60) > 0
    assert login_items(kwallet, entry) == []
    # Unlocked: a wrong key, a key of the wrong length, another wallet's name import nothing.
    for wallet, wrong in ((WALLET, bytes(56)), (WALLET, key[:55]), (WALLET, key + b"\0"), ("other", key)):
        assert kwallet.call("pamOpen", "sayi", wallet, wrong, 0) == ()
    time.sleep(1)
    assert login_items(kwallet, entry) == []
    before = len(login_items(kwallet, everything))

    # The key that wallet's salt made: its entries come into the login keychain, once.
    assert kwallet.call("pamOpen", "sayi", WALLET, key, 0) == ()
    deadline = time.monotonic() + 20
    while not login_items(kwallet, entry):
        assert time.monotonic() < deadline, kwallet.stderr_text()[-2000:]
        time.sleep(0.1)
    imported = len(login_items(kwallet, everything))
    assert imported > before
    assert kwallet.call("pamOpen", "sayi", WALLET, key, 0) == ()
    time.sleep(1)
    assert len(login_items(kwallet, everything)) == imported
    assert {p.name: p.read_bytes() for p in wallets.iterdir()} == files
    assert kwallet.alive()
