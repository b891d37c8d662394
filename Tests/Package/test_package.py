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
import subprocess
import sys
import tempfile

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
                     "/usr/lib/systemd/user/latchkeyd.service", "/usr/lib/systemd/user/latchkeyd.socket",
                     "/usr/share/pam-configs/latchkey", "/usr/share/man/man1/latchkey.1.gz",
                     "/usr/share/man/man8/latchkeyd.8.gz", "/usr/share/man/man8/pam_latchkey.8.gz",
                     "/usr/share/doc/latchkey/README.md", "/usr/share/doc/latchkey/copyright"]:
        assert expected in paths, f"{expected} not in the package"
    control = subprocess.run(["dpkg-deb", "-f", deb_path(), "Depends", "Conflicts"], capture_output=True,
                             text=True, check=True).stdout
    assert "libdbus-1-3" in control and "libsqlite3-0" in control and "Conflicts: gnome-keyring" in control
    assert "swift" not in control.lower()


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

    user = User(pinentry_directory)
    service = pathlib.Path("/etc/pam.d") / ("latchkey-package-" + secrets.token_hex(4))
    service.write_text("@include common-auth\n@include common-account\n@include common-session\n"
                       "@include common-password\n")
    try:
        login = subprocess.run(["pamtester", service.name, user.name, "authenticate", "open_session"],
                               input=PASSWORD + "\n", capture_output=True, text=True, timeout=30)
        assert login.returncode == 0, login.stdout + login.stderr
        assert user.keychain.exists()
        user.wait_for_name()
        assert not user.login_locked()
        stored = user.secret_tool("store", "--label=After install", "service", "pkg", "account", user.name,
                                  input="package secret")
        assert stored.returncode == 0, stored.stderr
        assert user.secret_tool("lookup", "service", "pkg").stdout == "package secret"
        info = user.run(["latchkey", "show-keychain-info", "--json"])
        assert '"heldByDaemon" : true' in info.stdout and '"locked" : false' in info.stdout, info.stderr
        assert user.run(["latchkey", "find-generic-password", "-s", "pkg", "-w"]).stdout == "package secret\n"

        apt("remove", "latchkey")
        assert not os.path.exists("/usr/bin/latchkeyd")
        assert all("pam_latchkey" not in text for text in pam_lines().values())
        assert user.keychain.exists()
        apt("purge", "latchkey")
        assert user.keychain.exists() and user.keychain.stat().st_size > 0
    finally:
        service.unlink()
        user.remove()
