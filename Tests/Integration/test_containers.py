"""Callers inside containers (docs/containers.md), with a real podman container on a root made here from the
host's own files (no image registry is reachable: the root holds copies of secret-tool, sh and their
libraries), the test bus's socket bind-mounted into it as toolbox and distrobox mount the user's bus:

- a program in a container is named as being in it (`/usr/bin/secret-tool in podman container “NAME”`), in the
  prompt and in the access list (`container:podman:NAME:/usr/bin/secret-tool`), with no host package named;
- it never gets the trust of the host's program at the same path, even with the same bytes (the abuse test);
- an item it makes trusts it, in that container only; a script is named with the container's interpreter;
- a container with no name in its markers is named by the id in its cgroup.

Skipped, saying why, where podman cannot run a container (not installed, not root, no runtime that works
here)."""

import json
import os
import pathlib
import shutil
import subprocess
import sysconfig
import textwrap
import time

import pytest

from conftest import SCRIPTED_PINENTRY, Bus, binary
from test_access_prompts import arguments
from test_cli import Cli

# What the root holds: these programs and the libraries they load.
PYTHON = os.path.realpath("/usr/bin/python3")
PROGRAMS = ["/usr/bin/secret-tool", "/bin/sh", "/usr/bin/cat", "/usr/bin/sleep", PYTHON]
# Python's library and its modules (secretstorage, jeepney, cryptography), mounted read-only for the scripts'
# tests rather than copied, with the host's libraries.
PYTHON_MOUNTS = [f"{directory}:{directory}:ro" for directory in
                 [sysconfig.get_paths()["stdlib"], "/usr/lib/python3/dist-packages", "/usr/lib/x86_64-linux-gnu"]]
# Where the user's bus is inside, as toolbox mounts $XDG_RUNTIME_DIR.
INNER_BUS = "/run/user-bus/bus"


def copy_with_libraries(program, root):
    """Copies `program` and the shared libraries `ldd` lists into `root`, at the same paths (under /usr: the
    root's /lib, /lib64 and /bin are links into /usr, as Debian's merged /usr)."""
    listing = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    files = [program] + [word for line in listing.splitlines() for word in line.split() if word.startswith("/")]
    for file in files:
        inside = file[len("/usr"):] if file.startswith("/usr/") else file
        target = root / "usr" / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copy2(os.path.realpath(file), target)


def make_root(root):
    for directory in ["usr/bin", "etc", "tmp", "run/user-bus", "proc", "sys", "dev", "root", "app",
                      sysconfig.get_paths()["stdlib"].lstrip("/"), "usr/lib/python3/dist-packages"]:
        (root / directory).mkdir(parents=True, exist_ok=True)
    for link, target in [("lib", "usr/lib"), ("lib64", "usr/lib64"), ("bin", "usr/bin")]:
        (root / link).symlink_to(target)
    for program in PROGRAMS:
        copy_with_libraries(program, root)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    return root


class Podman:
    """Runs commands in containers on one root, with the runtime and options that work on this machine."""

    def __init__(self, root, options):
        self.root = root
        self.options = options

    def command(self, bus_socket, *command, name=None, privileged=True, terminal=False, cidfile=None, extra=()):
        args = ["podman", "run", "--rm", *self.options, *extra,
                "-v", f"{bus_socket}:{INNER_BUS}", "--env", f"DBUS_SESSION_BUS_ADDRESS=unix:path={INNER_BUS}"]
        args += ["--name", name] if name else []
        args += ["--privileged"] if privileged else []
        args += ["-it"] if terminal else ["-i"]
        args += ["--cidfile", str(cidfile)] if cidfile else []
        return args + ["--rootfs", str(self.root), *command]

    def run(self, bus_socket, *command, input=None, **options):
        return subprocess.run(self.command(bus_socket, *command, **options), input=input, capture_output=True,
                              text=True, timeout=90)


@pytest.fixture(scope="session")
def podman(tmp_path_factory):
    """podman with a root of the host's files, or a skip that says why it cannot run one here."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman runc): no container to call from")
    if os.geteuid() != 0:
        pytest.skip("these tests run podman as root (rootless podman needs subuids set up for the user)")
    root = make_root(tmp_path_factory.mktemp("container") / "root")
    # The host's network (no network set up per test); limits no higher than ours (raising them needs
    # CAP_SYS_RESOURCE, which a container runner may lack). crun refuses a hybrid cgroup hierarchy with a
    # controller on cgroup v2, which runc accepts: whichever runs `true` first is used.
    options = ["--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
    failures = []
    for runtime in [[], ["--runtime", "runc"]]:
        probe = subprocess.run(["podman", "run", "--rm", *runtime, *options, "--rootfs", str(root), "/bin/sh", "-c",
                                "exit 0"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return Podman(root, runtime + options)
        failures.append(probe.stderr.strip().splitlines()[-1:] or [f"exit {probe.returncode}"])
    pytest.skip(f"podman cannot run a container here: {failures}")


@pytest.fixture
def bus(tmp_path):
    """The user's bus at a socket path, which a container gets bind-mounted (an abstract socket would reach it
    only through the host's network namespace)."""
    b = Bus(f"unix:path={tmp_path}/bus")
    yield b
    b.stop()


@pytest.fixture
def socket_path(bus):
    return bus.address.split("unix:path=", 1)[1].split(",", 1)[0]


@pytest.fixture
def cli(tmp_path, bus, make_daemon):
    c = Cli(tmp_path, bus)
    c.daemon = make_daemon(keychains=c.keychains, access_policy="prompt").start()
    return c


def host_secret_tool(bus, *args, input=None):
    return subprocess.run(["secret-tool", *args], env=bus.env(), input=input, capture_output=True, text=True,
                          timeout=30)


def trusted(cli, key):
    entries = [entry for entry in cli.json("list-access") if entry.get("key") == key or entry.get("service") == key]
    assert len(entries) == 1, entries
    return [application["name"] for application in entries[0]["trusted"]]


def test_a_container_program_at_a_host_path_does_not_get_the_host_programs_trust(podman, cli, bus, socket_path):
    """The abuse test: the host's secret-tool made the item, so it is trusted; the container's
    /usr/bin/secret-tool, the same bytes at the same path but another file in a root the container's user
    controls, is asked about, named as being in its container and with no host package."""
    stored = host_secret_tool(bus, "store", "--label=host item", "service", "s1", input="the secret")
    assert stored.returncode == 0, stored.stderr
    assert host_secret_tool(bus, "lookup", "service", "s1").stdout == "the secret"
    assert arguments(cli.daemon, "CONFIRM") == []

    cli.daemon.set_pinentry_answers(["cancel"])
    inside = podman.run(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s1", name="c26-abuse")
    assert "the secret" not in inside.stdout, "a container's secret-tool got the host secret-tool's trust"
    assert inside.returncode != 0
    assert len(arguments(cli.daemon, "CONFIRM")) == 1
    description = arguments(cli.daemon, "SETDESC")[-1]
    assert "/usr/bin/secret-tool in podman container “c26-abuse”" in description, description
    assert "package" not in description, description


def test_another_program_at_a_host_programs_path_is_not_named_as_the_hosts_package(podman, cli, bus, socket_path,
                                                                                    tmp_path):
    """Other bytes at /usr/bin/secret-tool inside: the prompt names the container's program, not "changed"
    host secret-tool of the host's package libsecret-tools (dpkg knows the host's files only)."""
    host_secret_tool(bus, "store", "--label=host item", "service", "s6", input="the secret")
    other = tmp_path / "secret-tool"
    other.write_bytes(pathlib.Path("/usr/bin/secret-tool").read_bytes() + b"\0other bytes")
    other.chmod(0o755)
    cli.daemon.set_pinentry_answers(["cancel"])
    inside = podman.run(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s6", name="c26-other-bytes",
                        extra=["-v", f"{other}:/usr/bin/secret-tool:ro"])
    assert inside.stdout == ""
    description = arguments(cli.daemon, "SETDESC")[-1]
    assert "/usr/bin/secret-tool in podman container “c26-other-bytes”" in description, description
    assert "package" not in description and "changed" not in description.lower(), description



def test_a_deleted_program_bound_over_a_host_path_in_its_own_namespace_is_not_the_hosts(cli, bus, tmp_path):
    """The abuse test for the "(deleted)" exemption: a program of the user's own, bind-mounted over
    /usr/bin/secret-tool in a mount namespace of its own (root: `unshare -m`; a user: `unshare -rm`), run
    from there and then unlinked, shares the daemon's root and its exe link reads "/usr/bin/secret-tool
    (deleted)". A deleted program is taken for the host's path only in the daemon's own mount namespace, so
    this one is named in its namespace, not as a "changed" host secret-tool of the host's package."""
    host_secret_tool(bus, "store", "--label=host item", "service", "s8", input="the secret")
    own = tmp_path / "own-secret-tool"
    own.write_bytes(pathlib.Path("/usr/bin/secret-tool").read_bytes() + b"\0the user's own bytes")
    own.chmod(0o755)
    cli.daemon.set_pinentry_answers(["cancel"])
    # The shell binds, unlinks its copy and execs the bound path: the running file is deleted.
    script = f"mount --bind {own} /usr/bin/secret-tool && rm {own} && exec /usr/bin/secret-tool lookup service s8"
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    inside = subprocess.run([*unshare, "sh", "-c", script], env=bus.env(), capture_output=True, text=True,
                            timeout=30)
    assert not own.exists()
    assert "the secret" not in inside.stdout
    description = arguments(cli.daemon, "SETDESC")[-1]
    assert "/usr/bin/secret-tool in " in description and "mnt-" in description, description
    assert "package" not in description and "changed" not in description.lower(), description


SCRIPT = textwrap.dedent("""
    import sys
    import secretstorage
    collection = secretstorage.get_default_collection(secretstorage.dbus_init())
    if sys.argv[1] == "store":
        collection.create_item("scripted", {"service": "s7"}, b"from the script")
    else:
        print(next(collection.search_items({"service": "s7"})).get_secret().decode())
""")


def test_a_script_in_a_container_is_its_script_there(podman, cli, bus, socket_path, tmp_path):
    """A python script inside: named with the container's interpreter and its path inside, and read back by
    the same script in the same container unasked."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "keep.py").write_text(SCRIPT)
    mounts = [option for mount in PYTHON_MOUNTS + [f"{app}:/app:ro"] for option in ["-v", mount]]
    stored = podman.run(socket_path, PYTHON, "/app/keep.py", "store", name="c26-script", extra=mounts)
    assert stored.returncode == 0, stored.stderr
    assert trusted(cli, "s7") == [f"container:podman:c26-script:{PYTHON} /app/keep.py"]
    read = podman.run(socket_path, PYTHON, "/app/keep.py", "lookup", name="c26-script", extra=mounts)
    assert read.stdout == "from the script\n", read.stderr
    assert arguments(cli.daemon, "CONFIRM") == []


def test_an_item_made_in_a_container_trusts_that_containers_program_only(podman, cli, bus, socket_path):
    stored = podman.run(socket_path, "/usr/bin/secret-tool", "store", "--label=inner item", "service", "s2",
                        input="made inside", name="c26-maker")
    assert stored.returncode == 0, stored.stderr
    assert trusted(cli, "s2") == ["container:podman:c26-maker:/usr/bin/secret-tool"]

    # The same container (by name) reads it unasked.
    again = podman.run(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s2", name="c26-maker")
    assert again.stdout == "made inside", again.stderr
    assert arguments(cli.daemon, "CONFIRM") == []

    # The host's secret-tool, and another container's, are asked.
    cli.daemon.set_pinentry_answers(["cancel", "cancel"])
    assert host_secret_tool(bus, "lookup", "service", "s2").stdout == ""
    other = podman.run(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s2", name="c26-other")
    assert other.stdout == ""
    descriptions = arguments(cli.daemon, "SETDESC")
    assert len(arguments(cli.daemon, "CONFIRM")) == 2, descriptions
    assert "in podman container “c26-other”" in descriptions[-1], descriptions

    # `latchkey remove-access` takes the name as list-access shows it (a change to the item: confirmed).
    cli.daemon.set_pinentry_answers(["confirm"])
    cli.ok("remove-access", "-s", "s2", "container:podman:c26-maker:/usr/bin/secret-tool")
    assert trusted(cli, "s2") == []


def test_a_toolbox_container_sharing_the_hosts_pids_is_named_as_toolbox(podman, cli, bus, socket_path, tmp_path):
    """As toolbox runs its containers: --privileged, --pid host (the caller's pid is the host's own), with
    /run/.toolboxenv beside podman's marker."""
    host_secret_tool(bus, "store", "--label=host item", "service", "s5", input="the secret")
    marker = tmp_path / "toolboxenv"
    marker.write_text("")
    cli.daemon.set_pinentry_answers(["cancel"])
    try:
        inside = podman.run(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s5", name="c26-toolbox",
                            extra=["--pid", "host", "-v", f"{marker}:/run/.toolboxenv"])
    finally:
        # The mount point podman made in the shared root, which would make the next container a toolbox.
        (podman.root / "run" / ".toolboxenv").unlink(missing_ok=True)
    assert inside.stdout == ""
    description = arguments(cli.daemon, "SETDESC")[-1]
    assert "/usr/bin/secret-tool in toolbox container “c26-toolbox”" in description, description


def test_a_container_without_a_name_in_its_marker_is_named_by_its_cgroup_id(podman, cli, bus, socket_path,
                                                                              tmp_path):
    """podman writes the container's name into /run/.containerenv only for --privileged containers (toolbox's
    and distrobox's are): another is named by the id in its cgroup, as `podman ps` shows it."""
    host_secret_tool(bus, "store", "--label=host item", "service", "s3", input="the secret")
    cli.daemon.set_pinentry_answers(["cancel"])
    cidfile = tmp_path / "cid"
    inside = podman.run(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s3", privileged=False,
                        cidfile=cidfile)
    assert inside.stdout == ""
    container_id = cidfile.read_text().strip()
    description = arguments(cli.daemon, "SETDESC")[-1]
    assert f"/usr/bin/secret-tool in podman container “{container_id[:12]}”" in description, description


def test_a_caller_in_podman_run_it_is_asked_on_its_terminal(podman, make_daemon, bus, socket_path, tmp_path):
    """`podman run -it` in a terminal (tmux): with no prompter named and no display, the daemon asks on the
    caller's terminal (its pts, which podman's conmon holds on the host) for the keychain password, and the
    lookup then prints the secret there."""
    if shutil.which("tmux") is None or shutil.which("pinentry-curses") is None:
        pytest.skip("needs tmux and pinentry-curses")
    daemon = make_daemon(access_policy="prompt", pinentry=None,
                         extra_env={"DISPLAY": None, "WAYLAND_DISPLAY": None, "PINENTRY": None}).start()
    stored = host_secret_tool(bus, "store", "--label=host item", "service", "s4", input="the secret")
    assert stored.returncode == 0, stored.stderr
    session = f"c26-{os.getpid()}"
    command = podman.command(socket_path, "/usr/bin/secret-tool", "lookup", "service", "s4", name=session,
                             terminal=True)
    tmux = ["tmux", "-L", session]
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "30",
                    " ".join(command) + "; echo EXIT=$?; sleep 60"], check=True, env=bus.env(TERM="xterm"))
    try:
        def screen():
            return subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                                  text=True).stdout

        deadline = time.monotonic() + 30
        while "assword" not in screen() and "EXIT=" not in screen() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "assword" in screen(), screen()
        assert "c26-" in screen() or "container" in screen(), screen()
        subprocess.run([*tmux, "send-keys", "-t", session, daemon.password, "Enter"], check=True)
        while "EXIT=" not in screen() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "the secret" in screen() and "EXIT=0" in screen(), screen()
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
