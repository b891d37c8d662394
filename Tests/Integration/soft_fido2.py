"""Starts Tests/Support/soft-fido2, the software CTAP2 authenticator, for a test: one security key on a unix
socket, reached by Latchkey as the device `unix:PATH` (LATCHKEY_FIDO2_DEVICE or --device). Its state file makes
it the same key after a restart; another directory is another key."""

import json
import os
import pathlib
import signal
import socket
import struct
import subprocess

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "Support" / "soft-fido2"


class SoftFido2:
    def __init__(self, directory, *args):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket_path = str(self.directory / "key.sock")
        self.state_path = str(self.directory / "state.json")
        self.control_path = str(self.directory / "control.json")
        self.control = {}
        self.process = None
        self.start(*args)

    @property
    def device(self):
        """The device name Latchkey takes: `unix:PATH`."""
        return "unix:" + self.socket_path

    def start(self, *args):
        """Starts it on its state file with `args` (`--set-pin PIN`, `--block-pin`, `--reset`, ...)."""
        self.process = subprocess.Popen(
            ["/usr/bin/python3", str(SCRIPT), "--socket", self.socket_path, "--state", self.state_path,
             "--control", self.control_path, *args],
            stdout=subprocess.PIPE)
        line = self.process.stdout.readline()
        if line.strip() != b"ready":
            self.stop()
            raise RuntimeError("soft-fido2 did not start")

    def stop(self):
        """Unplugs it (its state file stays)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        if self.process and self.process.stdout:
            self.process.stdout.close()

    def restart(self, *args):
        self.stop()
        self.start(*args)

    def set_touch(self, touched, no_touch_delay=0.05, touch_delay=0.0):
        """Whether it is touched when asked (else USER_ACTION_TIMEOUT after `no_touch_delay` seconds)."""
        self.control.update(touch=touched, no_touch_delay=no_touch_delay, touch_delay=touch_delay)
        self._write_control()

    def events(self):
        """What the key recorded: "cancelled" for each wait for a touch the platform cancelled."""
        try:
            with open(self.control_path + ".events") as file:
                return file.read().split()
        except OSError:
            return []

    def reinsert(self):
        """Unplugged and plugged in again without a restart: it forgets its wrong PINs in a row."""
        self.control["insertion"] = self.control.get("insertion", 0) + 1
        self._write_control()

    def _write_control(self):
        temporary = self.control_path + ".tmp"
        with open(temporary, "w") as file:
            json.dump(self.control, file)
        os.replace(temporary, self.control_path)


class SocketCtapDevice:
    """python-fido2's CtapDevice over the seam's framing, so Yubico's own CTAP2 client can talk to the soft key."""

    def __init__(self, path):
        self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.connection.settimeout(10)
        self.connection.connect(path)
        self.capabilities = 0x04 | 0x08  # CBOR, NMSG

    def call(self, cmd, data=b"", event=None, on_keepalive=None):
        self.connection.sendall(bytes([cmd & 0x7F]) + struct.pack(">I", len(data)) + data)
        length = struct.unpack(">I", self._read(4))[0]
        return self._read(length)

    def _read(self, count):
        data = b""
        while len(data) < count:
            chunk = self.connection.recv(count - len(data))
            if not chunk:
                raise ConnectionError("soft-fido2 closed the connection")
            data += chunk
        return data

    def close(self):
        self.connection.close()
