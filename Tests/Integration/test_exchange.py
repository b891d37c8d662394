"""`latchkey export` and `latchkey import` (CXF 1.0, age-encrypted; docs/export-import.md) through latchkeyd
(`org.latchkey.Keychain1` Export/Import, asked of the person) and on keychain files with no daemon: the round trip
of every class and attribute kind, interoperability with the real `age`, the bad inputs (one line, nothing
imported), duplicates and --replace, --dry-run, and what another program or a Flatpak app can do with Export and
Import (docs/threat-model.md, "Export and import")."""

import json
import os
import pathlib
import pty
import shutil
import subprocess
import time

import pytest

from test_keychain_sessions import open_dh, sealed
from conftest import LOGIN_PASSWORD, ROOT, binary
from dbus_client import Client, Reply
from flatpak_caller import as_flatpak, needs_root
from test_cli import FILE_PASSWORD, Cli

PASSPHRASE = "correct horse battery staple"
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"
STATUS_ERROR = "org.latchkey.Keychain1.Error.Status"
LIMITS_EXCEEDED = "org.freedesktop.DBus.Error.LimitsExceeded"
KEYCHAIN1 = "org.latchkey.Keychain1"
FIXTURES = ROOT / "Tests" / "Fixtures" / "exchange"
needs_age = pytest.mark.skipif(shutil.which("age") is None, reason="age is not installed")


@pytest.fixture(params=["daemon", "file"])
def cli(request, tmp_path, bus, make_daemon):
    """A latchkey command whose login keychain holds an item of every class and attribute kind, held by
    latchkeyd (which asks about every export and import: the scripted pinentry confirms), or a file with no
    daemon; and a second, empty keychain `other` to import into."""
    if request.param == "daemon":
        c = Cli(tmp_path, bus)
        c.daemon = make_daemon(keychains=c.keychains).start()
        c.password = LOGIN_PASSWORD
    else:
        c = Cli(tmp_path)
        c.ok("create-keychain", "--stdin", "login", input=FILE_PASSWORD + "\n")
        c.password = FILE_PASSWORD
    c.ok("create-keychain", "--stdin", "other", input=FILE_PASSWORD + "\n")
    writer(c.keychains / "login.keychain-db", "--every-kind", password=c.password)
    c.mode = request.param
    c.confirm = lambda count=1: c.daemon.set_pinentry_answers(["confirm"] * count) if c.mode == "daemon" else None
    return c


def writer(path, *args, password):
    result = subprocess.run([binary("keychain-writer"), str(path), *args], input=password + "\n",
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def dump(cli, name, password=None):
    """Every item of keychain `name` (class, attributes, secret), one JSON object a line, sorted."""
    return [json.loads(line) for line in writer(cli.keychains / f"{name}.keychain-db", "--dump",
                                                 password=password or cli.password).splitlines()]


def exported_items(items):
    """The items an export carries: not the ThisDeviceOnly ones."""
    return [item for item in items if not item["attributes"].get("pdmn", "").startswith("s:ak")
            or item["attributes"]["pdmn"] in ("s:ak",)]


def without_device_only(items):
    return [item for item in items if item["attributes"].get("pdmn") not in ("s:aku", "s:cku", "s:akpu")]


def export(cli, *args, input=None):
    cli.confirm()
    stdin_lines = (input or "") + FILE_PASSWORD + "\n" + cli.password + "\n"
    return cli.run("export", *args, "--stdin", input=stdin_lines)


def import_(cli, *args, input=""):
    cli.confirm()
    return cli.run("import", *args, "--stdin", input=input + FILE_PASSWORD + "\n" + cli.password + "\n")


def one_line_failure(result):
    assert result.returncode not in (0, 2), result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("latchkey: "), result.stderr
    return lines[0]


def test_unencrypted_round_trip_keeps_every_class_and_attribute_kind(cli, tmp_path):
    out = tmp_path / "everything.json"
    result = export(cli, "login", "--to", str(out), "--unencrypted", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    before = dump(cli, "login")
    assert summary["exported"] == len(before) - 1 and summary["leftOut"] == 1, summary
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    document = json.loads(out.read_text())
    assert document["version"]["major"] == 1
    result = import_(cli, str(out), "other", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == len(before) - 1
    # Item by item: class, every attribute (dates too) and the secret; the ThisDeviceOnly item stayed home.
    assert dump(cli, "other", FILE_PASSWORD) == without_device_only(before)
    if cli.mode == "daemon":
        # Through the daemon, which asked the person.
        assert "Export Keychain Items" in cli.daemon.pinentry_log()


def test_passphrase_round_trip(cli, tmp_path):
    out = tmp_path / "login.age"
    result = export(cli, "--to", str(out), input=PASSPHRASE + "\n")
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(b"age-encryption.org/v1\n-> scrypt ")
    assert b"svce value" not in out.read_bytes()
    result = import_(cli, str(out), "other", input=PASSPHRASE + "\n")
    assert result.returncode == 0, result.stderr
    assert dump(cli, "other", FILE_PASSWORD) == without_device_only(dump(cli, "login"))


def test_export_all_takes_every_keychain(cli, tmp_path):
    writer(cli.keychains / "other.keychain-db", "--every-kind", password=FILE_PASSWORD)
    out = tmp_path / "all.json"
    result = export(cli, "--all", "--to", str(out), "--unencrypted", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    login, other = dump(cli, "login"), dump(cli, "other", FILE_PASSWORD)
    if cli.mode == "daemon":
        # The daemon exports the keychains it holds: the login keychain (other is a file beside it).
        assert summary["keychains"] == ["login"] and summary["exported"] == len(login) - 1, summary
    else:
        assert sorted(summary["keychains"]) == ["login", "other"], summary
        assert summary["exported"] == len(login) + len(other) - 2 and summary["leftOut"] == 2, summary
    assert len(json.loads(out.read_text())["accounts"][0]["items"]) == summary["exported"]


def test_export_refuses_to_overwrite_a_file_unless_forced(cli, tmp_path):
    out = tmp_path / "kept.json"
    out.write_text("mine")
    result = export(cli, "--to", str(out), "--unencrypted", "--yes")
    assert "exists" in one_line_failure(result)
    assert out.read_text() == "mine"
    result = export(cli, "--to", str(out), "--unencrypted", "--yes", "--force")
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["version"]["major"] == 1


def test_unencrypted_needs_a_typed_confirmation(cli, tmp_path):
    out = tmp_path / "clear.json"
    # No terminal and no --yes: refused before anything is read.
    result = cli.run("export", "--to", str(out), "--unencrypted", "--stdin", input=cli.password + "\n")
    assert "typed on a terminal" in one_line_failure(result)
    assert not out.exists()


def test_duplicates_are_reported_and_replace_overwrites(cli, tmp_path):
    out = tmp_path / "everything.json"
    assert export(cli, "--to", str(out), "--unencrypted", "--yes").returncode == 0
    before = dump(cli, "login")
    # Back into the keychain it came from (through the daemon when it holds it): every item is a duplicate (a
    # Secret Service item by its attributes), nothing is asked or written, exit status 2.
    again = import_(cli, str(out), "login", "--json")
    assert again.returncode == 2, again.stderr
    summary = json.loads(again.stdout)
    assert summary["added"] == 0 and len(summary["duplicates"]) == len(before) - 1, summary
    assert dump(cli, "login") == before
    # One secret changed in the file: --replace puts it in place of the one there (asked of the person first).
    document = json.loads(out.read_text())
    item = next(i for i in document["accounts"][0]["items"] if i["title"] == "trusting")
    old = next(c for c in item["credentials"] if c["type"] == "basic-auth")["password"]["value"]
    changed = tmp_path / "changed.json"
    changed.write_text(out.read_text().replace(json.dumps(old), json.dumps("replaced secret")))
    result = import_(cli, str(changed), "login", "--replace", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["replaced"] == len(before) - 1
    after = dump(cli, "login")
    secrets = {bytes.fromhex(i["secret"]) for i in after if i["secret"]}
    assert b"replaced secret" in secrets and b"trusted" not in secrets
    assert len(after) == len(before)
    if cli.mode == "daemon":
        assert "Import Keychain Items" in cli.daemon.pinentry_log()


def test_dry_run_writes_nothing(cli, tmp_path):
    out = tmp_path / "everything.json"
    assert export(cli, "--to", str(out), "--unencrypted", "--yes").returncode == 0
    before = (cli.keychains / "other.keychain-db").read_bytes()
    result = cli.run("import", str(out), "other", "--dry-run", "--json", "--stdin",
                     input=FILE_PASSWORD + "\n" + cli.password + "\n")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["dryRun"] and summary["added"] == len(dump(cli, "login")) - 1
    assert dump(cli, "other", FILE_PASSWORD) == []
    assert (cli.keychains / "other.keychain-db").read_bytes() == before


@pytest.mark.parametrize("damage", ["truncated", "tampered", "wrong passphrase", "unknown major version",
                                   "not a file we know"])
def test_bad_inputs_fail_in_one_line_and_import_nothing(cli, tmp_path, damage):
    plain = tmp_path / "plain.json"
    assert export(cli, "--to", str(plain), "--unencrypted", "--yes").returncode == 0
    sealed = tmp_path / "sealed.age"
    assert export(cli, "--to", str(sealed), input=PASSPHRASE + "\n").returncode == 0
    bad = tmp_path / "bad"
    passphrase = PASSPHRASE
    if damage == "truncated":
        bad.write_bytes(sealed.read_bytes()[:-40])
    elif damage == "tampered":
        data = bytearray(sealed.read_bytes())
        data[-20] ^= 1
        bad.write_bytes(bytes(data))
    elif damage == "wrong passphrase":
        bad.write_bytes(sealed.read_bytes())
        passphrase = "not it"
    elif damage == "unknown major version":
        document = json.loads(plain.read_text())
        document["version"]["major"] = 2
        bad.write_text(json.dumps(document))
    else:
        bad.write_text("name,colour\nfoo,blue\n")
    result = import_(cli, str(bad), "other", input=passphrase + "\n")
    one_line_failure(result)
    assert dump(cli, "other", FILE_PASSWORD) == []


def test_a_file_cannot_mark_an_item_as_an_applications_portal_key(cli, tmp_path):
    """lk:portal-key is set only by the Secret portal's backend: an imported file's item never carries it."""
    out = tmp_path / "everything.json"
    assert export(cli, "--to", str(out), "--unencrypted", "--yes").returncode == 0
    document = json.loads(out.read_text())
    item = next(i for i in document["accounts"][0]["items"] if i["title"] == "trusting")
    item["extensions"][0]["attributes"].append({"key": "lk:portal-key", "kind": "string", "value": "org.example.App"})
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(document))
    result = import_(cli, str(planted), "other", "--json")
    assert result.returncode == 0, result.stderr
    items = dump(cli, "other", FILE_PASSWORD)
    assert any(i["attributes"].get("acct") == "s:trusting" for i in items)
    assert not any("lk:portal-key" in i["attributes"] for i in items), items


@needs_age
def test_the_real_age_decrypts_our_export_to_its_recipient(cli, tmp_path):
    key = tmp_path / "key.txt"
    subprocess.run(["age-keygen", "-o", str(key)], check=True, capture_output=True)
    public = next(line.split(": ")[1] for line in key.read_text().splitlines() if "public key" in line)
    out = tmp_path / "to-recipient.age"
    result = export(cli, "--to", str(out), "--recipient", public)
    assert result.returncode == 0, result.stderr
    clear = subprocess.run(["age", "-d", "-i", str(key), str(out)], check=True, capture_output=True).stdout
    document = json.loads(clear)
    titles = {item["title"] for item in document["accounts"][0]["items"]}
    assert {"labl value ✓", "Secret Service item", "trusting"} <= titles
    # Our own import reads it back with the identity.
    result = import_(cli, str(out), "other", "--identity", str(key))
    assert result.returncode == 0, result.stderr
    assert dump(cli, "other", FILE_PASSWORD) == without_device_only(dump(cli, "login"))


@needs_age
def test_files_the_real_age_made_are_imported(cli, tmp_path):
    plain = tmp_path / "plain.json"
    assert export(cli, "--to", str(plain), "--unencrypted", "--yes").returncode == 0
    key = tmp_path / "key.txt"
    subprocess.run(["age-keygen", "-o", str(key)], check=True, capture_output=True)
    public = next(line.split(": ")[1] for line in key.read_text().splitlines() if "public key" in line)
    to_recipient = tmp_path / "r.age"
    subprocess.run(["age", "-r", public, "-o", str(to_recipient), str(plain)], check=True)
    # age -p asks for the passphrase on a terminal only: typed into a pseudo-terminal.
    to_passphrase = tmp_path / "p.age"
    age_with_passphrase(plain, to_passphrase, PASSPHRASE)
    result = import_(cli, str(to_recipient), "other", "--identity", str(key), "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == len(dump(cli, "login")) - 1
    result = import_(cli, str(to_passphrase), "other", input=PASSPHRASE + "\n")
    assert result.returncode == 0, result.stderr
    assert dump(cli, "other", FILE_PASSWORD) == without_device_only(dump(cli, "login"))


def age_with_passphrase(source, target, passphrase):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("age", ["age", "-p", "-o", str(target), str(source)])
    deadline = time.monotonic() + 30
    seen = b""
    typed = 0
    while time.monotonic() < deadline and typed < 2:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        seen += chunk
        if seen.count(b"passphrase") > typed:
            os.write(fd, passphrase.encode() + b"\n")
            typed += 1
    while True:
        try:
            if not os.read(fd, 1024):
                break
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert target.read_bytes().startswith(b"age-encryption.org/v1\n-> scrypt ")


@pytest.mark.skipif(not FIXTURES.is_dir() or not any(FIXTURES.glob("*.csv")), reason="no CSV fixtures")
def test_csv_fixtures_and_another_exporters_cxf_are_imported(cli):
    fixtures = sorted(FIXTURES.glob("*.csv")) + sorted(FIXTURES.glob("*.cxf.json"))
    assert len(fixtures) >= 6
    count = 0
    for fixture in fixtures:
        result = import_(cli, str(fixture), "other", "--json")
        assert result.returncode == 0, (fixture.name, result.stderr)
        summary = json.loads(result.stdout)
        expected = "cxf" if fixture.name.endswith(".json") else "csv"
        assert expected in summary["format"] and summary["added"] > 0, (fixture.name, summary)
        count += summary["added"]
        # Every item added is there, with its secret; nothing else.
        items = dump(cli, "other", FILE_PASSWORD)
        assert len(items) == count and all(item["secret"] for item in items), fixture.name
        if fixture.name == "other-exporter.cxf.json":
            # The passkey no item can hold is listed, never dropped silently.
            assert "passkey" in {skipped["type"] for skipped in summary["skipped"]}, summary


# What another program of the user, or a Flatpak app, can do with Export and Import.

@pytest.fixture
def held(tmp_path, bus, make_daemon):
    c = Cli(tmp_path, bus)
    c.daemon = make_daemon(keychains=c.keychains).start()
    c.password = LOGIN_PASSWORD
    writer(c.keychains / "login.keychain-db", "--every-kind", password=c.password)
    return c


def test_an_export_the_person_declines_gives_no_bytes(held, tmp_path):
    held.daemon.set_pinentry_answers(["cancel"])
    out = tmp_path / "out.age"
    result = held.run("export", "--to", str(out), "--stdin", input=PASSPHRASE + "\n")
    one_line_failure(result)
    assert not out.exists()
    # A program of the same user calling Export itself, with nobody to say yes: an error, no bytes.
    held.daemon.set_pinentry_answers(["cancel"])
    client = Client(held.bus.address)
    dh, _ = open_dh(client)
    reply = client.call("/org/latchkey/keychain", KEYCHAIN1, "Export", "asasayb",
                        ([], [], sealed(dh, b"pass"), False), timeout=60)
    assert reply.is_error and reply.error_name == STATUS_ERROR and reply.body[0].startswith("-128 "), reply.body
    # And the person was asked each time, naming the keychain and the count.
    asked = [json.loads(line) for line in held.daemon.pinentry_log().splitlines()]
    descriptions = [entry["argument"] for entry in asked if entry["command"] == "SETDESC"]
    assert len(descriptions) == 2 and all("export" in d and "“Login”" in d for d in descriptions), descriptions


def test_an_unencrypted_export_never_crosses_the_bus_in_clear(held):
    """Nor a passphrase, nor a file to import or its key: in a plain session each is refused before anyone is
    asked or anything is read (a bus monitor, which any process of the user may run, would see them)."""
    held.daemon.set_pinentry_answers(["confirm"])
    client = Client(held.bus.address)
    for path, signature, body in [
            ("/org/latchkey/keychain", "asasayb", ([], [], b"", True)),
            ("/org/latchkey/keychain", "asasayb", ([], [], b"pass", False)),
            ("/org/latchkey/keychain/login", "ayaysbb", (b"name,url,username,password\nx,https://x,u,p\n", b"",
                                                          "none", False, False)),
            ("/org/latchkey/keychain/login", "ayaysbb", (b"age-encryption.org/v1\n", b"pass", "passphrase", False,
                                                          False))]:
        member = "Export" if signature == "asasayb" else "Import"
        reply = client.call(path, KEYCHAIN1, member, signature, body, timeout=60)
        assert reply.is_error and reply.error_name == ACCESS_DENIED, (member, reply.body)
        assert "Keychain1 session" in reply.body[0]
    assert "GETPIN" not in held.daemon.pinentry_log() and "CONFIRM" not in held.daemon.pinentry_log()


def test_a_hostile_file_into_import_is_one_error_and_nothing_written(held):
    before = dump(held, "login")
    client = Client(held.bus.address)
    dh, _ = open_dh(client)
    # An age header asking for scrypt with 2^30 (16 GiB): refused before anything is derived.
    greedy = (b"age-encryption.org/v1\n-> scrypt " + b"A" * 22 + b" 30\n" + b"A" * 43 + b"\n--- " + b"A" * 43
              + b"\n" + bytes(48))
    for hostile, kind in [(b"{" * 100000, "none"),
                          (b'{"version":{"major":1,"minor":0},"accounts":[{"items":[{"id":' + b"1" * 5000, "none"),
                          (greedy, "passphrase"), (b"\xff\xfe\x00garbage", "none")]:
        held.daemon.set_pinentry_answers(["confirm"])
        started = time.monotonic()
        reply = client.call("/org/latchkey/keychain/login", KEYCHAIN1, "Import", "ayaysbb",
                            (sealed(dh, hostile), sealed(dh, b"pass"), kind, False, False), timeout=60)
        assert time.monotonic() - started < 10
        assert reply.is_error and reply.error_name == STATUS_ERROR, (hostile[:20], reply.body)
        assert "\n" not in reply.body[0]
        if hostile is greedy:
            assert "work factor 2^30" in reply.body[0], reply.body
    assert held.daemon.alive()
    assert dump(held, "login") == before
    # Nothing was asked: the file failed before the person was.
    assert "CONFIRM" not in held.daemon.pinentry_log()


def test_exports_and_imports_under_way_are_bounded(held, tmp_path):
    """Each holds a file of up to 64 MiB, parses it and may run scrypt on the worker every unlock waits for: two of
    all clients' at once, one per connection; the others get LimitsExceeded at once. Dry runs of files to a
    passphrase (scrypt 2^18 each, one after the other on the worker) are under way long enough to see it."""
    from jeepney import DBusAddress, new_method_call
    plain = tmp_path / "one.csv"
    plain.write_text("name,url,username,password\nx,https://x.example,u,p\n")
    encrypted = tmp_path / "one.age"
    age_with_passphrase(plain, encrypted, PASSPHRASE)
    clients = [Client(held.bus.address) for _ in range(4)]
    sessions = [open_dh(client)[0] for client in clients]
    login = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets", interface=KEYCHAIN1)

    def dry_run(index):
        return new_method_call(login, "Import", "ayaysbb", (
            sealed(sessions[index], encrypted.read_bytes()), sealed(sessions[index], PASSPHRASE.encode()),
            "passphrase", True, False))

    def refused(reply):
        return reply.is_error and reply.error_name == LIMITS_EXCEEDED

    from jeepney.low_level import HeaderFields, MessageType
    serials = {}
    for index in (0, 1):
        serials[index] = 900 + index
        clients[index].connection.send(dry_run(index), serial=serials[index])
    # A third connection, and a second call of the first, while two are under way.
    third = Reply(clients[2].connection.send_and_get_reply(dry_run(2), timeout=60))
    again = Reply(clients[0].connection.send_and_get_reply(dry_run(0), timeout=60))
    assert refused(third), third.body
    assert refused(again), again.body
    # Once they are answered, another is taken.
    for index in (0, 1):
        while True:  # the reply to that call (the bus's NameAcquired may come first)
            message = clients[index].connection.receive(timeout=60)
            if message.header.message_type in (MessageType.method_return, MessageType.error) and \
                    message.header.fields.get(HeaderFields.reply_serial) == serials[index]:
                break
        assert message.header.message_type == MessageType.method_return, message.body
    later = Reply(clients[3].connection.send_and_get_reply(dry_run(3), timeout=60))
    assert not later.is_error, later.body
    assert held.daemon.alive()


@needs_root
def test_a_flatpak_application_can_neither_export_nor_import(held, bus, tmp_path):
    held.daemon.set_pinentry_answers(["confirm"] * 4)
    calls = [["/org/latchkey/keychain", KEYCHAIN1, "Export", "(asasayb)", [[], [], {"bytes": "pass"}, False]],
             ["/org/latchkey/keychain/login", KEYCHAIN1, "Import", "(ayaysbb)",
              [{"bytes": "name,url,username,password\nx,https://x.example,u,p\n"}, {"bytes": ""}, "none", False,
               False]]]
    assert as_flatpak(bus, tmp_path, calls) == [ACCESS_DENIED, ACCESS_DENIED]
    # Refused outright: nobody was asked.
    assert "CONFIRM" not in held.daemon.pinentry_log()


def peak_mib(pid):
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024


def test_the_daemon_derives_a_passphrase_key_outside_its_own_memory(held, tmp_path):
    """age's scrypt takes 256 MiB (2^18): through the daemon it runs in a worker of its deriver (docs/threat-model.md,
    "scrypt in a process of its own"), for the export and for the import alike."""
    held.daemon.set_pinentry_answers(["confirm"])
    out = tmp_path / "out.age"
    result = held.run("export", "--to", str(out), "--stdin", input=PASSPHRASE + "\n")
    assert result.returncode == 0, result.stderr
    result = held.run("import", str(out), "login", "--dry-run", "--stdin", "--json", input=PASSPHRASE + "\n")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["duplicates"]) > 0
    assert peak_mib(held.daemon.process.pid) < 256 * 0.75


def test_an_import_through_the_daemon_tells_secret_service_clients(held):
    """Items imported through the daemon are announced as any Keychain1 write is (CollectionChanged, the
    collection's Items invalidated), so a Secret Service client sees them."""
    from jeepney import MatchRule
    from jeepney.io.blocking import open_dbus_connection, Proxy
    from jeepney.bus_messages import message_bus
    watcher = open_dbus_connection(bus=held.bus.address)
    rule = MatchRule(type="signal", interface="org.freedesktop.Secret.Service", member="CollectionChanged")
    Proxy(message_bus, watcher).AddMatch(rule)
    held.daemon.set_pinentry_answers(["confirm"])
    with watcher.filter(rule) as queue:
        result = held.run("import", str(FIXTURES / "chrome.csv"), "login", "--json", "--stdin", input="")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["added"] > 0
        signal = watcher.recv_until_filtered(queue, timeout=10)
    assert signal.body == ("/org/freedesktop/secrets/collection/login",)
    watcher.close()


def test_an_import_counts_against_the_collections_byte_quota(tmp_path, bus, make_daemon):
    """The items a file adds count against the collection's bytes (`--max-collection-bytes`), as a `CreateItem`'s
    do: over it, the import is refused whole (LimitsExceeded), nothing written, nobody asked."""
    c = Cli(tmp_path, bus)
    c.daemon = make_daemon(keychains=c.keychains, extra_args=["--max-collection-bytes", "120"]).start()
    c.password = LOGIN_PASSWORD
    c.daemon.set_pinentry_answers(["confirm"])
    result = c.run("import", str(FIXTURES / "chrome.csv"), "login", "--stdin", input="")
    line = one_line_failure(result)
    assert "bytes" in line, line
    assert dump(c, "login") == []
    assert "CONFIRM" not in c.daemon.pinentry_log()


def test_an_import_writes_exactly_what_the_person_allowed(tmp_path, bus, make_daemon):
    """The person is asked about a dry run's counts; the keychain changes while the question waits (an item of
    the file that was a duplicate is deleted): the import would now add more than was shown, so it writes
    nothing and says so in one line."""
    c = Cli(tmp_path, bus)
    c.daemon = make_daemon(keychains=c.keychains).start()
    c.password = LOGIN_PASSWORD
    one = tmp_path / "one.csv"
    one.write_text("name,url,username,password\nx,https://x.example,u,p\n")
    two = tmp_path / "two.csv"
    two.write_text(one.read_text() + "y,https://y.example,v,q\n")
    c.daemon.set_pinentry_answers(["confirm"])
    assert c.run("import", str(one), "login", "--stdin", input="").returncode == 0
    c.daemon.set_pinentry_answers(["wait 2 confirm"])
    importing = subprocess.Popen([binary("latchkey"), "import", str(two), "login", "--stdin"], env=c.env(),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while "CONFIRM" not in c.daemon.pinentry_log() and time.monotonic() < deadline:
        time.sleep(0.05)
    asked = [json.loads(line)["argument"] for line in c.daemon.pinentry_log().splitlines()
             if json.loads(line)["command"] == "SETDESC"]
    assert "import 1 item from" in asked[-1], asked
    deleted = c.run("delete-internet-password", "-s", "x.example", "-a", "u")
    assert deleted.returncode == 0, deleted.stderr
    out, err = importing.communicate(timeout=60)
    assert importing.returncode not in (0, 2), out
    # (a line saying what it waits for comes first: the question waited 2 s)
    assert err.strip().splitlines()[-1].startswith("latchkey: the keychain changed since the import was allowed"), err
    assert dump(c, "login") == []


def test_an_export_question_after_an_unlock_goes_when_its_caller_leaves(held):
    """The keychain is locked: the export asks for its password, then the export question. The caller leaves the
    bus while that question shows: it is withdrawn (its pinentry ended), not left for the person to answer."""
    client = Client(held.bus.address)
    client.call("/org/latchkey/keychain/login", KEYCHAIN1, "Lock")
    held.daemon.set_pinentry_answers(["password " + LOGIN_PASSWORD, "hang"])
    dh, _ = open_dh(client)
    from jeepney import DBusAddress, new_method_call
    keychain = DBusAddress("/org/latchkey/keychain", bus_name="org.freedesktop.secrets", interface=KEYCHAIN1)
    client.connection.send(new_method_call(keychain, "Export", "asasayb", ([], [], sealed(dh, b"pass"), False)))
    deadline = time.monotonic() + 20
    while "CONFIRM" not in held.daemon.pinentry_log() and time.monotonic() < deadline:
        time.sleep(0.05)
    asked = [json.loads(line) for line in held.daemon.pinentry_log().splitlines()]
    showing = [entry["pid"] for entry in asked if entry["command"] == "CONFIRM"]
    assert "GETPIN" in held.daemon.pinentry_log()
    assert len(showing) == 1 and os.path.exists(f"/proc/{showing[0]}")
    client.close()
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{showing[0]}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{showing[0]}"), "the export question outlived its caller"
    assert held.daemon.alive()
