"""Secrets in the daemon's memory: the daemon started the way pam_latchkey starts it (pamtester, a real
useradd user, a unique login password), used through a DH session and a plain one and locked, then dumped
with gdb's gcore. The dump must hold neither the login password, nor a secret, nor a label or attribute
value; the daemon must be non-dumpable and a SIGSEGV must leave no core file. Needs root and gdb.
LATCHKEY_KEEP_CORE=DIR keeps the dump, the daemon's maps and the values searched for in DIR, to find where a
value survived."""

import json
import os
import pathlib
import resource
import secrets
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ROOT
from test_pam import installed, login, make_service, service, user  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates users and PAM services"),
    pytest.mark.skipif(shutil.which("gcore") is None, reason="needs gdb (gcore)"),
]

# Runs as the user on the user's bus: stores two items (one per session kind), reads them back through both
# sessions, then locks the login collection. Prints what it read.
CLIENT = r"""
import json, sys
from dbus_client import Client, DHClient, SERVICE
values = json.loads(sys.stdin.read())
client = Client(sys.argv[1])
ITEM = "org.freedesktop.Secret.Item"
login = "/org/freedesktop/secrets/collection/login"
plain = client.open_plain()
dh = DHClient()
output, dh_session = client.service("OpenSession", "sv", ("dh-ietf1024-sha256-aes128-cbc-pkcs7", ("ay", dh.public_bytes)))
dh.derive(output[1])
read = {}
for kind in ("plain", "dh"):
    v = values[kind]
    secret = v["secret"].encode()
    if kind == "dh":
        iv, sealed = dh.encrypt(secret)
        item = client.create_item(dh_session, {v["attribute_name"]: v["attribute"]}, sealed, label=v["label"],
                                  collection=login, parameters=iv)
    else:
        item = client.create_item(plain, {v["attribute_name"]: v["attribute"]}, secret, label=v["label"],
                                  collection=login)
    found, _locked = client.service("SearchItems", "a{ss}", ({v["attribute_name"]: v["attribute"]},))
    (through_plain,) = client.ok(item, ITEM, "GetSecret", "o", (plain,))
    (through_dh,) = client.ok(item, ITEM, "GetSecret", "o", (dh_session,))
    (secrets_dh,) = client.service("GetSecrets", "aoo", ([item], dh_session))
    label = client.ok(item, "org.freedesktop.DBus.Properties", "Get", "ss", (ITEM, "Label"))[0][1]
    attributes = client.ok(item, "org.freedesktop.DBus.Properties", "Get", "ss", (ITEM, "Attributes"))[0][1]
    read[kind] = {
        "found": item in found,
        "plain": bytes(through_plain[2]).decode(),
        "dh": dh.decrypt(through_dh[1], through_dh[2]).decode(),
        "dh_many": dh.decrypt(secrets_dh[item][1], secrets_dh[item][2]).decode(),
        "label": label, "attributes": attributes,
    }
client.service("Lock", "ao", ([login],))
def locked(collection):
    return client.ok(collection, "org.freedesktop.DBus.Properties", "Get", "ss",
                     ("org.freedesktop.Secret.Collection", "Locked"))[0][1]
read["locked"] = locked(login)
passwords = values.get("passwords")
if passwords:
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    PRIVATE = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
    # Typed into pinentry: a wrong password (tried by scrypt on the worker, refused), then the right one.
    unlocked, prompt = client.service("Unlock", "ao", ([login],))
    rule = MatchRule(type="signal", interface="org.freedesktop.Secret.Prompt", member="Completed", path=prompt)
    Proxy(message_bus, client.connection).AddMatch(rule)
    with client.connection.filter(rule) as queue:
        client.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", "s", ("",))
        completed = client.connection.recv_until_filtered(queue, timeout=60)
    read["prompt_unlocked"] = completed.body == (False, ("ao", [login]))
    client.service("Lock", "ao", ([login],))
    # gnome-keyring's private interface: a collection made with its own password through the plain
    # session, locked, then unlocked with it through the DH session, and a wrong one refused.
    master = passwords["master"].encode()
    properties = {"org.freedesktop.Secret.Collection.Label": ("s", "memory test")}
    (made,) = client.call(SERVICE, PRIVATE, "CreateWithMasterPassword", "a{sv}(oayays)",
                          (properties, (plain, b"", master, "text/plain")), timeout=60).body
    client.service("Lock", "ao", ([made],))
    iv, sealed = dh.encrypt(passwords["wrong master"].encode())
    refused = client.call(SERVICE, PRIVATE, "UnlockWithMasterPassword", "o(oayays)",
                          (made, (dh_session, iv, sealed, "text/plain")), timeout=60)
    iv, sealed = dh.encrypt(master)
    client.ok(SERVICE, PRIVATE, "UnlockWithMasterPassword", "o(oayays)", (made, (dh_session, iv, sealed, "text/plain")),
              timeout=60)
    read["master_refused"] = refused.is_error
    read["master_unlocked"] = not locked(made)
    client.service("Lock", "ao", ([login, made],))
    read["all_locked"] = locked(login) and locked(made)
client.close()
print(json.dumps(read))
"""


def unique(kind, what):
    """A value of realistic length (well over Swift's 15-byte inline strings), found nowhere else."""
    return f"{kind}-{what}-" + secrets.token_hex(12)


def set_password(user, password):
    subprocess.run(["chpasswd"], input=f"{user.name}:{password}\n", text=True, check=True)


def use_the_daemon(user, values):
    """Stores and reads the items as the user (DH and plain sessions), then locks; what the client read."""
    (user.home / "dbus_client.py").write_bytes((ROOT / "Tests" / "Integration" / "dbus_client.py").read_bytes())
    (user.home / "memory_client.py").write_text(CLIENT)
    # The values go on standard input: a command line is no place for a secret (any process of the user reads it
    # in /proc), and the daemon reads its clients' command lines to tell who they are (docs/threat-model.md).
    out = user.run(["env", f"PYTHONPATH={user.home}", "python3", str(user.home / "memory_client.py"),
                    user.bus_address], input=json.dumps(values), timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def gcore(pid, directory):
    """The daemon's memory as gdb's gcore writes it (what a core dump would hold, minus MADV_DONTDUMP)."""
    prefix = directory / "core"
    out = subprocess.run(["gcore", "-o", str(prefix), str(pid)], capture_output=True, text=True, timeout=120)
    path = pathlib.Path(f"{prefix}.{pid}")
    assert path.exists(), out.stdout + out.stderr
    return path.read_bytes()


def test_a_dump_of_the_daemon_holds_no_password_or_secret(service, user, tmp_path):  # noqa: F811
    password = unique("login", "password")
    set_password(user, password)
    values = {kind: {"secret": unique(kind, "secret"), "label": unique(kind, "label"),
                     "attribute_name": unique(kind, "name"), "attribute": unique(kind, "attribute")}
              for kind in ("plain", "dh")}
    login(service, user, password=password)
    user.wait_for_name()
    assert not user.login_locked()
    read = use_the_daemon(user, values)
    # The client really stored and read them, through both sessions, and the keychain is locked.
    for kind, v in values.items():
        got = read[kind]
        assert got["found"] and got["plain"] == got["dh"] == got["dh_many"] == v["secret"], got
        assert got["label"] == v["label"] and got["attributes"] == {v["attribute_name"]: v["attribute"]}, got
    assert read["locked"] is True
    (pid,) = user.daemon_pids()
    time.sleep(0.5)  # let the loop finish the Lock's announcements
    assert_dump_holds_none(pid, tmp_path, {"login password": password}, values)


def assert_dump_holds_none(pid, tmp_path, passwords, values):
    """gcore of the daemon: none of `passwords` and none of the items' secrets is in it. Their labels and
    attributes may be: a locked collection the daemon held unlocked keeps showing them, from memory
    (docs/threat-model.md, "Item labels while locked")."""
    core = gcore(pid, tmp_path)
    if os.environ.get("LATCHKEY_KEEP_CORE"):
        keep = pathlib.Path(os.environ["LATCHKEY_KEEP_CORE"])
        keep.mkdir(exist_ok=True)
        (keep / "core").write_bytes(core)
        (keep / "maps").write_text(pathlib.Path(f"/proc/{pid}/maps").read_text())
        (keep / "values.json").write_text(json.dumps({**passwords, **values}))
    # The dump is a real one: it holds strings the daemon keeps for its whole life.
    assert b"org.freedesktop.secrets" in core
    wanted = dict(passwords)
    for kind, v in values.items():
        wanted[f"{kind} secret"] = v["secret"]
    found = {name: core.count(value.encode()) for name, value in wanted.items() if value.encode() in core}
    assert found == {}, f"the dump of latchkeyd holds {found}"


def test_a_dump_holds_no_password_typed_into_pinentry_or_sent_to_the_private_interface(service, user, tmp_path):  # noqa: F811
    """Passwords that went through a prompt thread (pinentry's answer, typed wrong then right), the key
    derivation on the worker (a wrong one refused), and gnome-keyring's private interface (a collection's own
    password sent through the plain session, then through the DH session, and a wrong one) are in no dump."""
    password = unique("login", "password")
    set_password(user, password)
    passwords = {"typed wrong": unique("typed", "wrong"), "master": unique("master", "password"),
                 "wrong master": unique("master", "wrong")}
    values = {kind: {"secret": unique(kind, "secret"), "label": unique(kind, "label"),
                     "attribute_name": unique(kind, "name"), "attribute": unique(kind, "attribute")}
              for kind in ("plain", "dh")}
    login(service, user, password=password)
    user.wait_for_name()
    user.set_pinentry_answers(["password " + passwords["typed wrong"], "password " + password])
    read = use_the_daemon(user, {**values, "passwords": passwords})
    assert read["locked"] is True and read["prompt_unlocked"] is True, read
    assert read["master_refused"] and read["master_unlocked"] and read["all_locked"], read
    # pinentry was really asked twice: the wrong answer was tried and refused.
    assert user.pinentry_log.read_text().count('"GETPIN"') == 2
    (pid,) = user.daemon_pids()
    time.sleep(0.5)
    assert_dump_holds_none(pid, tmp_path, {"login password": password, **passwords}, values)


def test_the_daemon_is_not_dumpable_and_a_crash_leaves_no_core(service, user):  # noqa: F811
    """Started from a PAM stack whose process allows core files of any size, in a working directory the
    daemon could write to (the user's home), a SIGSEGV still leaves no core file."""
    pattern = pathlib.Path("/proc/sys/kernel/core_pattern").read_text().strip()
    before = set(user.home.iterdir())
    unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    password = unique("login", "password")
    set_password(user, password)
    result = subprocess.run(["pamtester", service.name, user.name, "authenticate", "open_session"],
                            input=password + "\n", capture_output=True, text=True, timeout=30,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, unlimited))
    assert result.returncode == 0, result.stderr
    user.wait_for_name()
    (pid,) = user.daemon_pids()
    # Not dumpable: its /proc files belong to root although it runs as the user, and its core limit is 0.
    status = pathlib.Path(f"/proc/{pid}/status")
    uids = next(line for line in status.read_text().splitlines() if line.startswith("Uid:")).split()[1:]
    assert uids == [str(user.uid)] * 4
    assert status.stat().st_uid == 0
    limits = pathlib.Path(f"/proc/{pid}/limits").read_text()
    core = next(line for line in limits.splitlines() if line.startswith("Max core file size"))
    assert core.split()[4:6] == ["0", "0"], core
    assert os.readlink(f"/proc/{pid}/cwd") == str(user.home)

    os.kill(pid, signal.SIGSEGV)
    deadline = time.monotonic() + 10
    while pid in user.daemon_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid not in user.daemon_pids()
    time.sleep(0.5)
    appeared = {p.name for p in set(user.home.iterdir()) - before}
    # This container's core_pattern is "core": a core file would appear in the daemon's working directory.
    # With a pattern naming another place (a pipe to systemd-coredump, an absolute path) this part checks
    # less; the core limit and the dumpable state above still hold.
    if not pattern.startswith("|") and "/" not in pattern:
        prefix = pattern.split("%")[0] or "core"
        assert not any(name.startswith(prefix) for name in appeared), (pattern, appeared)
    assert not any(name.startswith("core") for name in appeared), (pattern, appeared)
