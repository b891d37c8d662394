"""A fingerprint reader for tests: the real fprintd from Debian on a private system bus, with the real polkitd
deciding what fprintd asks it, and libfprint's virtual device (the `virtual_device` driver, FP_VIRTUAL_DEVICE)
standing in for the hardware.

    with FprintdSystem() as system:           # or the `fprintd_system` fixture
        system.enroll("nobody", "right-index-finger", "print-a")
        verdict = system.verify_as("nobody", scan="print-a")     # "matched"

The pieces, as on a real machine but private to the test:
- dbus-daemon with a system bus configuration (type system, EXTERNAL auth, the system bus's default deny
  policy) that includes /usr/share/dbus-1/system.d, so fprintd's and polkit's own bus policies apply: only root
  may own net.reactivated.Fprint, only the polkitd user org.freedesktop.PolicyKit1.
- polkitd (it switches to its own user as on the system) in a mount namespace of its own in which a directory
  of this test is bind-mounted over /etc/polkit-1/rules.d: a rule that says yes to the net.reactivated.fprint.*
  actions for the users given (the machine's own rules stay untouched; /usr/share/polkit-1/rules.d still loads).
- fprintd as root (`-t`: no idle exit) with STATE_DIRECTORY in the test directory, FP_DRIVERS_ALLOWLIST limited
  to the virtual driver and FP_VIRTUAL_DEVICE naming its socket (libfprint's and fprintd's own tests' protocol:
  one command per connection, `SCAN <id>`, `SET_ENROLL_STAGES <n>`, `SLEEP <ms>`, ...; a print matches a scan
  of the same id). Without a device (device=False) fprintd runs with no reader at all.
The virtual device gives up on an action that waits more than 500 ms for a command: send `SCAN` soon after
fprintd starts waiting (`verify_as` does it when the client prints "touch").
"""

import contextlib
import os
import pathlib
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
from jeepney import DBusAddress, MatchRule, MessageType, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

SERVICE = "net.reactivated.Fprint"
MANAGER = DBusAddress("/net/reactivated/Fprint/Manager", bus_name=SERVICE, interface="net.reactivated.Fprint.Manager")
DEVICE_INTERFACE = "net.reactivated.Fprint.Device"
FPRINTD = "/usr/libexec/fprintd"
POLKITD = "/usr/lib/polkit-1/polkitd"

SYSTEM_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <!-- The system bus's default policy (/usr/share/dbus-1/system.conf): nobody owns a name or calls a method
       unless a service's own policy file says so. -->
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Peer"/>
  </policy>
  {extra}
  <includedir>/usr/share/dbus-1/system.d</includedir>
</busconfig>
"""

# A bus on which anyone may own net.reactivated.Fprint (the system bus lets only root): for the fake that is not
# root's.
FAKE_OWNER_POLICY = '<policy context="default"><allow own="net.reactivated.Fprint"/></policy>'

POLKIT_RULE = """// Written by Tests/Integration/fprintd_system.py for one test.
polkit.addRule(function(action, subject) {{
    if (action.id.indexOf("net.reactivated.fprint.device.") == 0 && {users}.indexOf(subject.user) >= 0) {{
        return polkit.Result.YES;
    }}
}});
"""


class FprintdSystem:
    """A private system bus with polkitd and fprintd on it, and the virtual reader (see the module's text)."""

    def __init__(self, allowed_users=("root", "nobody"), device=True, fprintd=True, polkit=True, extra_policy=""):
        # A directory every user may enter (a test's tmp_path is root's alone), for the bus socket the
        # unprivileged client connects to.
        self.directory = pathlib.Path(tempfile.mkdtemp(prefix="latchkey-fprintd-"))
        self.directory.chmod(0o755)
        self.socket = self.directory / "system_bus_socket"
        self.address = f"unix:path={self.socket}"
        self.device_socket = self.directory / "virtual-device.socket" if device else None
        self.processes = []
        self.logs = {}
        try:
            self._start_bus(extra_policy)
            if polkit:
                self._start_polkitd(allowed_users)
            if fprintd:
                self._start_fprintd()
        except BaseException:
            self.stop()
            raise

    # -- the pieces

    def _spawn(self, name, argv, env=None, **kwargs):
        log = open(self.directory / f"{name}.log", "wb")
        self.logs[name] = self.directory / f"{name}.log"
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, **kwargs)
        log.close()
        self.processes.append(process)
        return process

    def _start_bus(self, extra_policy):
        config = self.directory / "system-bus.conf"
        config.write_text(SYSTEM_BUS_CONFIG.format(socket=self.socket, extra=extra_policy))
        self.bus = self._spawn("dbus-daemon", ["dbus-daemon", "--nofork", f"--config-file={config}"])
        self._wait(lambda: self.socket.exists(), "the private system bus")

    def _start_polkitd(self, users):
        rules = self.directory / "polkit-rules.d"
        rules.mkdir(mode=0o755)
        rules.chmod(0o755)
        quoted = "[" + ", ".join(f'"{user}"' for user in users) + "]"
        (rules / "10-latchkey-fprintd-test.rules").write_text(POLKIT_RULE.format(users=quoted))
        (rules / "10-latchkey-fprintd-test.rules").chmod(0o644)
        script = f'mount --bind "{rules}" /etc/polkit-1/rules.d && exec {POLKITD} --no-debug'
        self.polkitd = self._spawn("polkitd", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                   env=self.env())
        self._wait(lambda: self.has_owner("org.freedesktop.PolicyKit1"), "polkitd on the private bus")

    def _start_fprintd(self):
        state = self.directory / "state"
        state.mkdir(mode=0o700, exist_ok=True)
        run = self.directory / "run"
        run.mkdir(mode=0o700, exist_ok=True)
        env = self.env(STATE_DIRECTORY=str(state), RUNTIME_DIRECTORY=str(run), FP_DRIVERS_ALLOWLIST="virtual_device",
                       FP_DRIVERS_WHITELIST="virtual_device", G_MESSAGES_DEBUG="all")
        env.pop("FP_VIRTUAL_DEVICE", None)
        if self.device_socket:
            env["FP_VIRTUAL_DEVICE"] = str(self.device_socket)
        self.fprintd = self._spawn("fprintd", [FPRINTD, "-t"], env=env)
        # The virtual device's socket appears when the device is opened (Claim), not before.
        self._wait(lambda: self.has_owner(SERVICE), "fprintd on the private bus")

    def start_fake(self, mode, user="root"):
        """Tests/Integration/fake_fprintd.py MODE as `user` on this bus (for a fake that owns the name as
        someone other than root, make the bus with FAKE_OWNER_POLICY); waits until it is ready."""
        name = f"fake-{mode}-{len(self.processes)}"
        script = pathlib.Path(__file__).with_name("fake_fprintd.py")
        self._spawn(name, ["/usr/bin/python3", str(script), mode], env=self.env(), user=user, group=_group_of(user),
                    extra_groups=[])
        self._wait(lambda: "ready" in self.logs[name].read_text(), f"fake_fprintd.py {mode}")

    def _wait(self, condition, what, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited ({process.returncode}) before {what} was up:\n"
                                       + self.log_text())
            time.sleep(0.05)
        raise RuntimeError(f"{what} did not come up in {timeout} s:\n" + self.log_text())

    def log_text(self):
        return "\n".join(f"--- {name}\n{path.read_text(errors='replace')[-3000:]}"
                         for name, path in self.logs.items() if path.exists())

    def env(self, **extra):
        env = dict(os.environ)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = self.address
        env.update(extra)
        return env

    def stop(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes = []
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- the bus, as root

    @contextlib.contextmanager
    def connection(self):
        connection = open_dbus_connection(self.address, auth_timeout=30.0)
        try:
            yield connection
        finally:
            connection.close()

    def has_owner(self, name):
        if not self.socket.exists():
            return False
        try:
            with self.connection() as connection:
                reply = connection.send_and_get_reply(message_bus.NameHasOwner(name), timeout=5)
                return reply.body[0]
        except (OSError, ConnectionError, TimeoutError):
            return False

    def call(self, connection, member, signature=None, body=(), path=None, interface=DEVICE_INTERFACE, timeout=10):
        """A method of fprintd's default device (or of `path`); its reply's body, or RuntimeError with fprintd's
        error name."""
        path = path or self.default_device(connection)
        message = new_method_call(DBusAddress(path, bus_name=SERVICE, interface=interface), member, signature, body)
        reply = connection.send_and_get_reply(message, timeout=timeout)
        if reply.header.message_type == MessageType.error:
            raise RuntimeError(f"{reply.header.fields.get(4)}: {reply.body}")
        return reply.body

    def default_device(self, connection):
        reply = connection.send_and_get_reply(new_method_call(MANAGER, "GetDefaultDevice"), timeout=10)
        if reply.header.message_type == MessageType.error:
            raise RuntimeError(f"{reply.header.fields.get(4)}: {reply.body}")
        return reply.body[0]

    # -- the virtual device

    def device_command(self, command):
        """One command to the virtual device (one connection each, as libfprint's listener reads one); its answer
        (LIST's lines) as text."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(self.device_socket))
            connection.sendall(command.encode())
            chunks = []
            while chunk := connection.recv(1024):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def enroll(self, user, finger, print_id, stages=2):
        """Enrolls `finger` of `user` as root does it (fprintd-enroll's calls: Claim, EnrollStart, the
        EnrollStatus signals until done, EnrollStop, Release): the virtual reader reads the print `print_id` at
        each stage. A later scan of the same id matches it."""
        with self.connection() as connection:
            device = self.default_device(connection)
            rule = MatchRule(type="signal", interface=DEVICE_INTERFACE, member="EnrollStatus", path=device)
            connection.send_and_get_reply(message_bus.AddMatch(rule), timeout=10)
            with connection.filter(rule) as statuses:
                self.call(connection, "Claim", "s", (user,), path=device)
                try:
                    # The device's socket exists while it is open (claimed). Scans are queued after Claim
                    # (opening the device drops earlier ones) and read one per stage.
                    self.device_command(f"SET_ENROLL_STAGES {stages}")
                    for _ in range(stages):
                        self.device_command(f"SCAN {print_id}")
                    self.call(connection, "EnrollStart", "s", (finger,), path=device)
                    while True:
                        result, done = connection.recv_until_filtered(statuses, timeout=20).body
                        if done:
                            break
                    self.call(connection, "EnrollStop", path=device)
                finally:
                    self.call(connection, "Release", path=device)
        if result != "enroll-completed":
            raise RuntimeError(f"enrolling {finger} of {user} ended with {result}")

    def delete(self, user, finger=None):
        """Deletes one enrolled finger of `user`, or all of them."""
        with self.connection() as connection:
            device = self.default_device(connection)
            self.call(connection, "Claim", "s", (user,), path=device)
            try:
                if finger:
                    self.call(connection, "DeleteEnrolledFinger", "s", (finger,), path=device)
                else:
                    self.call(connection, "DeleteEnrolledFingers2", path=device)
            finally:
                self.call(connection, "Release", path=device)

    def enrolled(self, user):
        with self.connection() as connection:
            try:
                return sorted(self.call(connection, "ListEnrolledFingers", "s", (user,))[0])
            except RuntimeError as error:
                if "NoEnrolledPrints" in str(error):
                    return []
                raise

    # -- the client under test (Tests/FingerprintCheck), as an unprivileged user

    def run_check(self, program, user, *arguments, timeout=30):
        """`fingerprint-check ARGUMENTS` as `user` on this bus; its output's last line."""
        result = subprocess.run([program, *arguments], env=self.env(), user=user, group=_group_of(user),
                                extra_groups=[], capture_output=True, text=True, timeout=timeout)
        return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else f"(no output) {result.stderr}"

    def verify_as(self, program, user, scan=None, seconds=10, device_commands=()):
        """`fingerprint-check verify USER SECONDS` as `user`; when it says "touch" (fprintd waits for a finger),
        the virtual reader reads `scan` (or the `device_commands` are sent). (verdict line, seconds taken)."""
        started = time.monotonic()
        process = subprocess.Popen([program, "verify", user, str(seconds)], env=self.env(), user=user,
                                   group=_group_of(user), extra_groups=[], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line.strip()) for line in process.stdout] + [lines.put(None)],
                         daemon=True).start()
        # A client that never answers fails the test after its own deadline and 30 s more, not never.
        give_up = started + seconds + 30
        try:
            line = lines.get(timeout=max(0.1, give_up - time.monotonic()))
            if line == "touch":
                for command in ([f"SCAN {scan}"] if scan else []) + list(device_commands):
                    self.device_command(command)
                line = lines.get(timeout=max(0.1, give_up - time.monotonic()))
            process.wait(timeout=max(0.1, give_up - time.monotonic()))
        except queue.Empty:
            line = "(no verdict in time)"
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return line, time.monotonic() - started


def _group_of(user):
    import grp
    import pwd
    return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name


@pytest.fixture
def fprintd_system():
    """The real fprintd with the virtual reader on a private system bus, polkit allowing root and nobody."""
    system = FprintdSystem()
    try:
        yield system
    finally:
        system.stop()
