"""Files shipped beside the code agree with it."""

import pathlib
import subprocess
import xml.dom.minidom

from conftest import ROOT, binary


def test_introspection_file_matches_the_daemon():
    printed = subprocess.run([binary("latchkeyd"), "--print-introspection"], check=True, capture_output=True,
                             text=True).stdout
    assert (ROOT / "dbus" / "org.freedesktop.Secrets.xml").read_text() == printed
    document = xml.dom.minidom.parseString(printed)
    names = {i.getAttribute("name") for i in document.getElementsByTagName("interface")}
    assert names == {f"org.freedesktop.Secret.{n}" for n in ("Service", "Collection", "Item", "Session", "Prompt")} | {
        "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"}


def test_activation_file_names_the_bus_name_and_the_daemon():
    text = (ROOT / "dbus" / "org.freedesktop.secrets.service").read_text()
    assert "Name=org.freedesktop.secrets" in text.splitlines()
    assert any(line.startswith("Exec=") and "latchkeyd" in line for line in text.splitlines())
