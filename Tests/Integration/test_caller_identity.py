"""latchkeyd identifies its D-Bus clients (GetConnectionCredentials, /proc) and records the application that
creates an item in the item's access list; the list is Latchkey's own: Secret Service clients neither see nor
set it, and `latchkey list-access` shows it."""

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from conftest import secret_tool
from test_cli import Cli


def sha256_of(path):
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


@pytest.fixture
def cli(tmp_path, bus, make_daemon):
    c = Cli(tmp_path, bus)
    make_daemon(keychains=c.keychains).start()
    return c


def access_of(cli, service):
    return {entry["service"]: entry for entry in cli.json("list-access")}[service]


CREATE_SCRIPT = """
import secretstorage, sys
connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
collection.create_item("made by a script", {"service": sys.argv[1]}, b"from python")
"""


def test_secret_tool_is_recorded_as_the_creator(cli, bus):
    secret_tool(bus, "store", "--label=tool", "service", "by-secret-tool", input=b"x")
    program = os.path.realpath(shutil.which("secret-tool"))
    access = access_of(cli, "by-secret-tool")
    assert access["anyApplication"] is False
    assert access["trusted"] == [{"name": program, "sha256": sha256_of(program)}]
    # The list is not an attribute Secret Service clients see.
    listing = secret_tool(bus, "search", "--all", "service", "by-secret-tool")
    shown = listing.stdout.decode() + listing.stderr.decode()
    assert "service = by-secret-tool" in shown and "lk:" not in shown


def test_a_python_script_is_recorded_by_its_script(cli, bus, tmp_path):
    script = tmp_path / "make-item.py"
    script.write_text(CREATE_SCRIPT)
    # This interpreter, finding secretstorage where this test process found it.
    env = dict(bus.env(), PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    subprocess.run([sys.executable, str(script), "by-script"], env=env, check=True, timeout=30, cwd=tmp_path)
    access = access_of(cli, "by-script")
    # Named with its interpreter: the same file run by another program is another application.
    name = f"{os.path.realpath(sys.executable)} {script}"
    assert access["trusted"] == [{"name": name, "sha256": sha256_of(script)}]


def test_a_client_cannot_see_or_set_the_list(cli, bus, monkeypatch):
    import secretstorage
    from jeepney.wrappers import DBusErrorResponse

    secret_tool(bus, "store", "--label=tool", "service", "guarded", input=b"x")
    before = access_of(cli, "guarded")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    connection = secretstorage.dbus_init()
    try:
        collection = secretstorage.get_default_collection(connection)
        [item] = list(collection.search_items({"service": "guarded"}))
        assert item.get_attributes() == {"service": "guarded"}
        assert list(collection.search_items({"lk:any-app": "0"})) == []
        with pytest.raises(DBusErrorResponse) as refused:
            item.set_attributes({"service": "guarded", "lk:trusted-apps": sys.executable, "lk:any-app": "1"})
        assert refused.value.name == "org.freedesktop.DBus.Error.InvalidArgs"
        with pytest.raises(DBusErrorResponse):
            collection.create_item("sneaky", {"service": "sneaky", "lk:any-app": "1"}, b"y")
    finally:
        connection.close()
    assert access_of(cli, "guarded") == before
    assert cli.run("find-generic-password", "-s", "sneaky").returncode == 44
