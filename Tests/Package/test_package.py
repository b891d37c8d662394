"""The Debian package: its file list, lintian, apt-get install, a login of a
real user through the system's common-auth/common-session/common-password as
pam-auth-update wrote them, the login keychain unlocked on that user's bus,
and removal leaving the keychain in place. Needs root; the .deb comes from
scripts/build-deb (dist/, or $LATCHKEY_DEB)."""

import glob
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))

from conftest import SCRIPTED_PINENTRY  # noqa: E402
from test_pam import PASSWORD, User  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: installs the package, creates users")

PAM_FILES = ["common-auth", "common-session", "common-password"]


def deb_path():
    given = os.environ.get("LATCHKEY_DEB")
    found = [given] if given else sorted(glob.glob(str(ROOT / "dist" / "latchkey_*_amd64.deb")))
    if not found or not os.path.exists(found[-1]):
        pytest.fail("no latchkey_*_amd64.deb: run scripts/build-deb first")
    return found[-1]


def installed_packages(*names):
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *names],
                         capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}


def pam_lines():
    return {name: (pathlib.Path("/etc/pam.d") / name).read_text() for name in PAM_FILES}


def apt(*args):
    result = subprocess.run(["apt-get", "-y", "-q", *args], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_file_list():
    listing = subprocess.run(["dpkg", "-c", deb_path()], capture_output=True, text=True, check=True).stdout
    paths = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    for expected in ["/usr/bin/latchkey", "/usr/bin/latchkeyd",
                     "/usr/lib/x86_64-linux-gnu/security/pam_latchkey.so",
                     "/usr/share/dbus-1/services/org.freedesktop.secrets.service",
                     "/usr/share/dbus-1/services/org.kde.kwalletd5.service",
                     "/usr/share/dbus-1/services/org.kde.kwalletd6.service",
                     "/usr/share/xdg-desktop-portal/portals/latchkey.portal",
                     "/usr/lib/systemd/user/latchkeyd.service", "/usr/lib/systemd/user/latchkeyd.socket",
                     "/usr/share/pam-configs/latchkey", "/usr/share/man/man1/latchkey.1.gz",
                     "/usr/share/man/man8/latchkeyd.8.gz", "/usr/share/man/man8/pam_latchkey.8.gz",
                     "/usr/share/doc/latchkey/README.md", "/usr/share/doc/latchkey/copyright",
                     "/usr/lib/systemd/user/gnome-keyring-daemon.service.d/latchkey.conf",
                     "/etc/xdg/autostart/latchkey-update-environment.desktop"]:
        assert expected in paths, f"{expected} not in the package"
    control = subprocess.run(["dpkg-deb", "-f", deb_path(), "Depends", "Conflicts"], capture_output=True,
                             text=True, check=True).stdout
    assert "libdbus-1-3" in control and "libsqlite3-0" in control and "Conflicts" not in control
    assert "swift" not in control.lower()


def test_installs_beside_gnome_keyring_and_seahorse_without_removing_anything():
    """GNOME depends on gnome-keyring: installing latchkey beside it, libpam-gnome-keyring and seahorse
    must remove nothing (apt-get's simulation, which needs only the package lists)."""
    result = subprocess.run(["apt-get", "install", "-s", "-q", deb_path(), "gnome-keyring", "libpam-gnome-keyring",
                             "seahorse"], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [line for line in result.stdout.splitlines() if line.startswith("Remv ")], result.stdout
    assert any(line.startswith("Inst latchkey ") for line in result.stdout.splitlines()), result.stdout


def test_lintian_reports_no_error():
    result = subprocess.run(["lintian", "--fail-on", "error", deb_path()], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "E: " not in result.stdout


@pytest.fixture
def package():
    """The package installed with apt-get; afterwards purged, and gnome-keyring put back if it was there."""
    had_gnome_keyring = "gnome-keyring" in installed_packages("gnome-keyring")
    before = pam_lines()
    assert all("pam_latchkey" not in text for text in before.values())
    apt("install", deb_path())
    yield
    if installed_packages("latchkey"):
        apt("purge", "latchkey")
    if had_gnome_keyring:
        apt("install", "--no-install-recommends", "gnome-keyring")


@pytest.fixture
def pinentry_directory():
    directory = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-package-"))
    os.chmod(directory, 0o755)
    shutil.copy(SCRIPTED_PINENTRY, directory / "scripted-pinentry")
    os.chmod(directory / "scripted-pinentry", 0o755)
    yield directory
    shutil.rmtree(directory)


def test_install_login_and_remove(package, pinentry_directory):
    # pam-auth-update (from postinst) put the module in the common stacks, optional, and the socket is enabled.
    stacks = pam_lines()
    assert "optional\tpam_latchkey.so" in stacks["common-auth"]
    assert "optional\tpam_latchkey.so auto_start" in stacks["common-session"]
    assert "optional\tpam_latchkey.so" in stacks["common-password"]
    assert os.path.islink("/etc/systemd/user/sockets.target.wants/latchkeyd.socket")

    # Beside gnome-keyring (installed in CI): its activation file for org.freedesktop.secrets and its
    # secrets autostart entry are diverted out of the way; its other parts stay.
    services = pathlib.Path("/usr/share/dbus-1/services")
    assert "Exec=/usr/bin/latchkeyd" in (services / "org.freedesktop.secrets.service").read_text()
    diversions = subprocess.run(["dpkg-divert", "--list", "latchkey"], capture_output=True, text=True).stdout
    assert "org.freedesktop.secrets.service" in diversions and "gnome-keyring-secrets.desktop" in diversions
    if installed_packages("gnome-keyring"):
        assert "gnome-keyring-daemon" in (services / "org.freedesktop.secrets.service.gnome-keyring").read_text()
        assert not os.path.exists("/etc/xdg/autostart/gnome-keyring-secrets.desktop")
        assert os.path.exists("/etc/xdg/autostart/gnome-keyring-pkcs11.desktop")

    user = User(pinentry_directory)
    service = pathlib.Path("/etc/pam.d") / ("latchkey-package-" + secrets.token_hex(4))
    service.write_text("@include common-auth\n@include common-account\n@include common-session\n"
                       "@include common-password\n")
    try:
        login = subprocess.run(["pamtester", service.name, user.name, "authenticate", "open_session"],
                               input=PASSWORD + "\n", capture_output=True, text=True, timeout=30)
        assert login.returncode == 0, login.stdout + login.stderr
        # The daemon answers the login's hand-over at once ("creating the login keychain") and makes the
        # file on its worker: it appears shortly after.
        user.wait_for_name()
        user.wait_for_keychain()
        assert not user.login_locked()
        stored = user.secret_tool("store", "--label=After install", "service", "pkg", "account", user.name,
                                  input="package secret")
        assert stored.returncode == 0, stored.stderr
        assert user.secret_tool("lookup", "service", "pkg").stdout == "package secret"
        info = user.run(["latchkey", "show-keychain-info", "--json"])
        assert '"heldByDaemon" : true' in info.stdout and '"locked" : false' in info.stdout, info.stderr

        # The latchkey command is not on secret-tool's item's list: it is asked about. The daemon started at
        # login has no display yet, so no prompt can show, and the read is denied.
        user.set_pinentry_answers(["ok"])
        read = ["latchkey", "find-generic-password", "-s", "pkg", "-w"]
        denied = user.run(read)
        assert denied.returncode == 1 and "no way to ask" in denied.stderr, denied.stdout + denied.stderr
        # The desktop starts the package's autostart entry, with its display and the user's pinentry (a
        # graphical one: it needs the display). From then on prompts show, and the person allows the read.
        autostart = pathlib.Path("/etc/xdg/autostart/latchkey-update-environment.desktop").read_text()
        command = next(line[len("Exec="):] for line in autostart.splitlines() if line.startswith("Exec="))
        desktop_pinentry = pinentry_directory / "desktop-pinentry"
        desktop_pinentry.write_text(
            f"#!/bin/sh\nSCRIPTED_PINENTRY_NEEDS_DISPLAY=1 SCRIPTED_PINENTRY_ANSWERS={user.pinentry_answers} "
            f"SCRIPTED_PINENTRY_LOG={user.pinentry_log} exec {pinentry_directory / 'scripted-pinentry'} \"$@\"\n")
        desktop_pinentry.chmod(0o755)
        started = user.run(["env", "DISPLAY=:0", f"PINENTRY={desktop_pinentry}", *command.split()])
        assert started.returncode == 0, started.stderr
        allowed = user.run(read)
        assert allowed.returncode == 0 and allowed.stdout == "package secret\n", allowed.stderr
        # An item the command adds trusts it: read back without a prompt (none is left to answer).
        added = user.run(["latchkey", "add-generic-password", "-s", "own", "-a", user.name, "--stdin"],
                         input="its own\n")
        assert added.returncode == 0, added.stderr
        own = user.run(["latchkey", "find-generic-password", "-s", "own", "-w"])
        assert own.returncode == 0 and own.stdout == "its own\n", own.stderr

        apt("remove", "latchkey")
        assert not os.path.exists("/usr/bin/latchkeyd")
        assert all("pam_latchkey" not in text for text in pam_lines().values())
        assert user.keychain.exists()
        apt("purge", "latchkey")
        assert user.keychain.exists() and user.keychain.stat().st_size > 0
        # gnome-keyring has its files back, and with them the name.
        assert "latchkey" not in subprocess.run(["dpkg-divert", "--list"], capture_output=True, text=True).stdout
        if installed_packages("gnome-keyring"):
            assert "gnome-keyring-daemon" in (services / "org.freedesktop.secrets.service").read_text()
            assert os.path.exists("/etc/xdg/autostart/gnome-keyring-secrets.desktop")
    finally:
        service.unlink()
        user.remove()


KDE_SERVICES = [pathlib.Path("/usr/share/dbus-1/services") / f"org.kde.kwalletd{v}.service" for v in (5, 6)]


def file_state(path):
    """The bytes and mode of `path`, None when it does not exist."""
    return (path.read_bytes(), path.stat().st_mode) if path.exists() else None


@pytest.mark.skipif(not installed_packages("libkf5wallet-bin"), reason="needs KDE's kwalletd5 (libkf5wallet-bin)")
def test_kwallet_activation_files_are_diverted_and_put_back(tmp_path):
    """KDE's org.kde.kwalletd5 activation file (libkf5wallet-bin) is diverted on install, latchkeyd's takes its
    path and the bus activates latchkeyd for that name; remove puts KDE's file back byte for byte."""
    before = {path: file_state(path) for path in KDE_SERVICES}
    assert b"Exec=/usr/bin/kwalletd5" in before[KDE_SERVICES[0]][0]
    apt("install", deb_path())
    try:
        diversions = subprocess.run(["dpkg-divert", "--list", "latchkey"], capture_output=True, text=True).stdout
        for path in KDE_SERVICES:
            assert f"diversion of {path} to {path}.kwalletd by latchkey" in diversions, diversions
            lines = path.read_text().splitlines()
            assert lines[1:] == [f"Name={path.stem}", "Exec=/usr/bin/latchkeyd --foreground",
                                 "SystemdService=latchkeyd.service"], lines
        assert file_state(pathlib.Path(f"{KDE_SERVICES[0]}.kwalletd")) == before[KDE_SERVICES[0]]
        # libkf5wallet-bin still lists its file, and still has everything else.
        assert str(KDE_SERVICES[0]) in subprocess.run(["dpkg", "-L", "libkf5wallet-bin"], capture_output=True,
                                                      text=True).stdout
        assert os.path.exists("/usr/bin/kwalletd5")
        assert_activation_starts_latchkeyd(tmp_path)
        apt("remove", "latchkey")
        assert {path: file_state(path) for path in KDE_SERVICES} == before
        assert not any(pathlib.Path(f"{path}.kwalletd").exists() for path in KDE_SERVICES)
    finally:
        # Purged also after a remove (the package is then in state config-files, not installed).
        apt("purge", "latchkey")
    assert "latchkey" not in subprocess.run(["dpkg-divert", "--list"], capture_output=True, text=True).stdout
    assert {path: file_state(path) for path in KDE_SERVICES} == before


def assert_activation_starts_latchkeyd(directory):
    """A private bus reading the system's session service directory: a call for org.kde.kwalletd5 starts the
    installed latchkeyd (through the Exec line: the bus runs without systemd), which then owns the three names."""
    config = directory / "bus.conf"
    config.write_text("""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>/usr/share/dbus-1/services</servicedir>
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
  </policy>
</busconfig>
""")
    runtime = directory / "run"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, HOME=str(directory), XDG_DATA_HOME=str(directory / "data"), XDG_RUNTIME_DIR=str(runtime),
               DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={directory}/none")
    out = subprocess.run(["dbus-daemon", f"--config-file={config}", "--fork", "--print-address=1", "--print-pid=1"],
                         env=env, check=True, capture_output=True, text=True).stdout.split()
    address, bus_pid = out[0], int(out[1])
    bus_env = dict(env, DBUS_SESSION_BUS_ADDRESS=address)

    def ask(member, *args):
        return subprocess.run(["dbus-send", "--session", "--print-reply=literal", "--dest=org.freedesktop.DBus",
                               "/org/freedesktop/DBus", f"org.freedesktop.DBus.{member}", *args],
                              env=bus_env, capture_output=True, text=True, timeout=60)

    pid = None
    try:
        started = ask("StartServiceByName", "string:org.kde.kwalletd5", "uint32:0")
        assert started.returncode == 0, started.stderr
        pid = int(ask("GetConnectionUnixProcessID", "string:org.kde.kwalletd5").stdout.split()[-1])
        assert os.readlink(f"/proc/{pid}/exe") == "/usr/bin/latchkeyd"
        deadline = time.monotonic() + 15
        while True:
            owners = {ask("GetNameOwner", f"string:{name}").stdout.strip()
                      for name in ("org.freedesktop.secrets", "org.kde.kwalletd5", "org.kde.kwalletd6")}
            if len(owners) == 1 and "" not in owners or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(owners) == 1 and "" not in owners, owners
    finally:
        if pid:
            os.kill(pid, signal.SIGTERM)
        os.kill(bus_pid, signal.SIGTERM)


def bus_owner_executable(user):
    """The executable of the process owning org.freedesktop.secrets on the user's bus, or None."""
    out = user.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.freedesktop.secrets"])
    if out.returncode != 0:
        return None
    pid = int(out.stdout.split()[-1])
    return os.readlink(f"/proc/{pid}/exe")


def autostart_commands():
    """The Exec lines of gnome-keyring's autostart entries still in place (its secrets one is diverted)."""
    commands = []
    for entry in sorted(glob.glob("/etc/xdg/autostart/gnome-keyring-*.desktop")):
        for line in pathlib.Path(entry).read_text().splitlines():
            if line.startswith("Exec="):
                commands.append(line[len("Exec="):].split())
    return commands


@pytest.mark.skipif(not shutil.which("gnome-keyring-daemon") or not os.path.exists(
    "/usr/lib/x86_64-linux-gnu/security/pam_gnome_keyring.so"), reason="gnome-keyring and its PAM module are needed")
def test_latchkeyd_owns_the_name_beside_gnome_keyring_every_time(package, pinentry_directory, tmp_path):
    """A login through a stack with both pam_gnome_keyring (auto_start) and pam_latchkey, then gnome-keyring's
    autostart commands as a session runs them: org.freedesktop.secrets is latchkeyd's, every time."""
    assert not any("--components=secrets" in " ".join(c) for c in autostart_commands())
    for attempt in range(3):
        user = User(pinentry_directory)
        env_file = tmp_path / f"env-{attempt}"
        env_file.write_text(f"XDG_RUNTIME_DIR={user.runtime}\nDBUS_SESSION_BUS_ADDRESS={user.bus_address}\n")
        service = pathlib.Path("/etc/pam.d") / ("latchkey-race-" + secrets.token_hex(4))
        service.write_text("auth optional pam_gnome_keyring.so\n@include common-auth\n@include common-account\n"
                           f"session required pam_env.so readenv=1 envfile={env_file}\n"
                           "@include common-session\nsession optional pam_gnome_keyring.so auto_start\n")
        try:
            login = subprocess.run(["pamtester", service.name, user.name, "authenticate", "open_session"],
                                   input=PASSWORD + "\n", capture_output=True, text=True, timeout=30)
            assert login.returncode == 0, login.stdout + login.stderr
            # gnome-keyring really runs for this user: the test means something.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and subprocess.run(
                    ["pgrep", "-u", str(user.uid), "gnome-keyring-d"], capture_output=True).returncode != 0:
                time.sleep(0.1)
            assert subprocess.run(["pgrep", "-u", str(user.uid), "gnome-keyring-d"]).returncode == 0
            for command in autostart_commands():
                user.run(command, timeout=30)
            user.wait_for_name()
            time.sleep(0.5)
            assert bus_owner_executable(user) == "/usr/bin/latchkeyd", attempt
            # A client activates nothing else either: the name stays latchkeyd's across a call.
            assert user.secret_tool("store", "--label=race", "attempt", str(attempt), input="x").returncode == 0
            assert bus_owner_executable(user) == "/usr/bin/latchkeyd", attempt
        finally:
            service.unlink()
            user.remove()
