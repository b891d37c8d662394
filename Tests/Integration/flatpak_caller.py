"""A caller that latchkeyd identifies as a Flatpak application, for the tests of what such a caller may not
do: a process that chroots into a directory holding a `.flatpak-info` (which latchkeyd reads through
/proc/PID/root, as it reads a real sandbox's)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# A "sandboxed" caller: opens a socket to the bus, chroots into a root holding a .flatpak-info (what latchkeyd
# reads through /proc/PID/root), and only then says Hello on it (so that the daemon, which identifies a
# connection when it appears on the bus, sees the chroot); then makes the calls given as JSON [path, interface,
# member, signature, args] and prints one line per call: the error name or "ok". A plain session is opened first
# for the calls that send a secret (its path replaces "SESSION" in their arguments).
SANDBOXED_CALLER = textwrap.dedent("""
    import json, os, socket, sys
    import gi
    gi.require_version("Gio", "2.0")
    from gi.repository import Gio, GLib
    transport, _, rest = sys.argv[1].partition(":")
    entries = dict(entry.split("=", 1) for entry in rest.split(","))
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(entries["path"] if "path" in entries else "\\0" + entries["abstract"])
    os.chroot(sys.argv[2])
    os.chdir("/")
    stream = Gio.Socket.new_from_fd(raw.detach()).connection_factory_create_connection()
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    bus = Gio.DBusConnection.new_sync(stream, None, flags, None, None)
    def call(path, interface, member, signature, args):
        return bus.call_sync("org.freedesktop.secrets", path, interface, member,
                             GLib.Variant(signature, tuple(args)) if signature else None, None,
                             Gio.DBusCallFlags.NONE, 20000, None)
    session = call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession", "(sv)",
                   ["plain", GLib.Variant("s", "")]).unpack()[1]
    def fill(value):
        if value == "SESSION":
            return session
        if isinstance(value, list):
            return tuple(fill(v) for v in value)
        if isinstance(value, dict) and "bytes" in value:
            return value["bytes"].encode()
        if isinstance(value, dict):
            return {k: GLib.Variant(*v) if isinstance(v, list) else v for k, v in value.items()}
        return value
    for path, interface, member, signature, args in json.loads(sys.argv[3]):
        try:
            call(path, interface, member, signature, fill(args))
            print("ok", flush=True)
        except GLib.Error as error:
            print(Gio.DBusError.get_remote_error(error), flush=True)
""")

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="making a caller look like a Flatpak application needs chroot (root)")


def as_flatpak(bus, tmp_path, calls, app_id="org.example.Sneaky"):
    """Makes `calls` as a Flatpak application `app_id` (the root is made under `tmp_path`); the error name of
    each, or "ok"."""
    root = tmp_path / "app-root"
    root.mkdir(exist_ok=True)
    (root / ".flatpak-info").write_text(f"[Application]\nname={app_id}\nruntime=runtime/x/x86_64/1\n")
    result = subprocess.run([sys.executable, "-c", SANDBOXED_CALLER, bus.address, str(root), json.dumps(calls)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()
