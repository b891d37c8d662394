#!/usr/bin/python3
"""Makes the KWallet fixture wallets of Tests/KWalletImportTests with Debian's real kwalletd5 (libkf5wallet-bin
5.103): a private dbus-daemon, a scratch HOME/XDG_*, Qt's offscreen platform, the kwalletrc of docs/kwallet.md §6.

Each wallet is made without a dialog: its 56-byte salt file $XDG_DATA_HOME/kwalletd/NAME.salt is written first,
then pamOpen(NAME, PBKDF2-HMAC-SHA512(password, salt, 50000, 56), 0) makes kwalletd5 create and open it
(KWalletD::pamOpen -> Backend::openPreHashed, kwalletd.cpp/kwalletbackend.cc v5.103.0). Entries are written
through org.kde.KWallet with python3-dbus, the wallet is closed (which writes the file) and the .kwl/.salt are
copied here.

    Tests/KWalletImportTests/Fixtures/make-fixtures.py [OUTPUT_DIRECTORY]

Also used by Tests/Integration/test_kwallet_import.py (make_wallets) to make wallets during the test.

The legacy SHA-1/ECB fixture (minor 0, cipher 0, hash 0) cannot be made by Debian's kwalletd5, which writes only
CBC; it is the CBC fixture's plaintext re-encrypted by this script with the legacy key (password2hash of
kwalletbackend.cc) in ECB, with python3-cryptography's Blowfish: see README.md.
"""

import hashlib
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import time

KWALLETRC = """[Wallet]
First Use=false
Prompt on Open=false
Enabled=true
Close When Idle=false

[org.freedesktop.secrets]
apiEnabled={api}
"""

NULL = 0xFFFFFFFF


def qstring(text):
    """A QDataStream QString (None is the null string)."""
    if text is None:
        return struct.pack(">I", NULL)
    data = text.encode("utf-16-be")
    return struct.pack(">I", len(data)) + data


def qmap(pairs):
    """A QDataStream QMap<QString,QString>, in the order Qt 5 writes it (descending keys)."""
    out = struct.pack(">I", len(pairs))
    for key in sorted(pairs, reverse=True):
        out += qstring(key) + qstring(pairs[key])
    return out


def wallet_key(password, salt):
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 50000, 56)


# What the fixtures hold. Passwords are written with writePassword, maps with writeMap, streams with writeEntry.
WALLETS = {
    "kdewallet": {
        "password": "Pässwörd ✓ for kdewallet",
        "entries": [
            ("Passwords", "mail@example.org", "password", "sëcret ☃ mail"),
            ("Passwords", "empty", "password", ""),
            ("Form Data", "https://example.org/login", "map", {"user": "alice", "pass": "p@ss wörd", "nothing": None}),
            ("Binary", "blob", "stream", b"\x00\x01\x00binary\xff\x00"),
            ("Zzz", "unknown kind", 7, b"\x00\x00\x00\x04abcd"),
        ],
        "empty_folders": ["Empty Folder"],
    },
    "Work ü/2": {
        "password": "work-pass",
        "entries": [("Network", "vpn", "password", "vpn-secret")],
        "empty_folders": [],
    },
}


class Session:
    """kwalletd5 on a private bus in a scratch HOME."""

    def __init__(self, directory, api_enabled=False):
        self.directory = pathlib.Path(directory)
        self.home = self.directory / "home"
        self.config = self.home / ".config"
        self.data = self.home / ".local" / "share"
        self.wallets = self.data / "kwalletd"
        self.runtime = self.directory / "run"
        for d in (self.config, self.wallets):
            d.mkdir(parents=True, exist_ok=True)
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        (self.config / "kwalletrc").write_text(KWALLETRC.format(api="true" if api_enabled else "false"))
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                    "XDG_CONFIG_HOME": str(self.config), "XDG_DATA_HOME": str(self.data),
                    "XDG_RUNTIME_DIR": str(self.runtime), "QT_QPA_PLATFORM": "offscreen"}
        # The bus gets the same environment: a kwalletd5 it activates (a call before ours owns the name) is the
        # same as ours.
        self.bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env, text=True)
        self.address = self.bus.stdout.readline().strip()
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self.address
        self.kwalletd = subprocess.Popen(["kwalletd5"], env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=open(self.directory / "kwalletd5.log", "wb"))
        import dbus
        self.dbus = dbus
        self.connection = dbus.bus.BusConnection(self.address)
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.connection.name_has_owner("org.kde.kwalletd5"):
                    self.call("networkWallet", "")
                    break
            except dbus.exceptions.DBusException:
                pass
            if time.monotonic() > deadline or self.kwalletd.poll() is not None:
                raise SystemExit("kwalletd5 did not come up: " + (self.directory / "kwalletd5.log").read_text())
            time.sleep(0.1)

    def call(self, method, signature, *args):
        """One org.kde.KWallet call with an exact signature (the interface overloads names)."""
        return self.connection.call_blocking("org.kde.kwalletd5", "/modules/kwalletd5", "org.kde.KWallet", method,
                                             signature, args, timeout=60)

    def create(self, name, password, salt=None):
        """Makes wallet `name` with `password` through pamOpen; returns a handle for the appid `fixtures`."""
        encoded = encode_wallet_name(name)
        salt = salt if salt is not None else os.urandom(56)
        salt_file = self.wallets / (encoded + ".salt")
        salt_file.write_bytes(salt)
        salt_file.chmod(0o600)
        key = wallet_key(password, salt)
        try:
            self.call("pamOpen", "sayi", name, self.dbus.ByteArray(key), 0)
        except self.dbus.exceptions.DBusException:
            pass
        deadline = time.monotonic() + 30
        while not self.call("isOpen", "s", name):
            if time.monotonic() > deadline:
                raise SystemExit(f"pamOpen did not open {name}")
            time.sleep(0.05)
        handle = int(self.call("open", "sxs", name, 0, "fixtures"))
        assert handle > 0, handle
        return handle

    def fill(self, handle, spec):
        call, dbus = self.call, self.dbus
        for folder, key, kind, value in spec["entries"]:
            if kind == "password":
                rc = call("writePassword", "issss", handle, folder, key, value, "fixtures")
            elif kind == "map":
                rc = call("writeMap", "issays", handle, folder, key, dbus.ByteArray(qmap(value)), "fixtures")
            elif kind == "stream":
                rc = call("writeEntry", "issays", handle, folder, key, dbus.ByteArray(value), "fixtures")
            else:
                rc = call("writeEntry", "issayis", handle, folder, key, dbus.ByteArray(value), kind, "fixtures")
            assert rc == 0, (folder, key, rc)
        for folder in spec["empty_folders"]:
            assert call("createFolder", "iss", handle, folder, "fixtures")

    def close(self, name):
        """Closes the wallet for everyone, which writes its file."""
        self.call("close", "sb", name, True)
        time.sleep(0.2)

    def stop(self):
        self.kwalletd.kill()
        self.kwalletd.wait()
        self.bus.kill()
        self.bus.wait()


ALLOWED = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789^&'@{}[],$=!-#()%.+_\r\n\t\f\v ")


def encode_wallet_name(name):
    """Backend::encodeWalletName: percent-encoding of the UTF-8 with ';' for '%'."""
    return "".join(chr(b) if b in ALLOWED else ";%02X" % b for b in name.encode())


def make_wallets(output, wallets=None, salt=None):
    """Makes `wallets` (default WALLETS) with kwalletd5 and copies each NAME.kwl/NAME.salt into `output`."""
    wallets = wallets or WALLETS
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kwallet-fixtures.") as scratch:
        session = Session(scratch)
        try:
            for name, spec in wallets.items():
                handle = session.create(name, spec["password"], salt)
                session.fill(handle, spec)
                session.close(name)
            for name in wallets:
                encoded = encode_wallet_name(name)
                for suffix in (".kwl", ".salt"):
                    shutil.copyfile(session.wallets / (encoded + suffix), output / (encoded + suffix))
        finally:
            session.stop()


# --- The legacy fixture (re-encryption; see README.md) ---------------------------------------------------------


def kwallet_sha1(data):
    """KWallet's SHA-1 (sha1.cc, forced to its big-endian path on a little-endian machine): message words are
    loaded little-endian, the length is written big-endian into the last block and then loaded little-endian
    like the rest, and the five result words are stored little-endian."""
    rol = lambda x, n: ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF
    h = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0]
    bits = len(data) * 8
    padded = data + b"\x80" + b"\x00" * ((55 - len(data)) % 64) + struct.pack(">Q", bits)
    for start in range(0, len(padded), 64):
        w = list(struct.unpack("<16I", padded[start:start + 64]))
        for t in range(16, 80):
            w.append(rol(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1))
        a, b, c, d, e = h
        for t in range(80):
            if t < 20:
                f, k = (d ^ (b & (c ^ d))), 0x5A827999
            elif t < 40:
                f, k = b ^ c ^ d, 0x6ED9EBA1
            elif t < 60:
                f, k = (b & c) | (d & (b | c)), 0x8F1BBCDC
            else:
                f, k = b ^ c ^ d, 0xCA62C1D6
            a, b, c, d, e = (rol(a, 5) + f + e + k + w[t]) & 0xFFFFFFFF, a, rol(b, 30), c, d
        h = [(x + y) & 0xFFFFFFFF for x, y in zip(h, (a, b, c, d, e))]
    return struct.pack("<5I", *h)


def legacy_key(password):
    """password2hash (kwalletbackend.cc): 2000 rounds of KWallet's SHA-1 over each 16-byte chunk (the fourth takes
    the rest), joined 20 / 20+20 / 20+20+16 / 14+14+14+14."""
    pw = password.encode()

    def block(chunk):
        digest = kwallet_sha1(chunk)
        for _ in range(1999):
            digest = kwallet_sha1(digest)
        return digest

    blocks = [block(pw[:16])]
    if len(pw) > 16:
        blocks.append(block(pw[16:32]))
    if len(pw) > 32:
        blocks.append(block(pw[32:48]))
    if len(pw) > 48:
        blocks.append(block(pw[48:]))
    if len(blocks) == 1:
        return blocks[0]
    if len(blocks) == 2:
        return blocks[0] + blocks[1]
    if len(blocks) == 3:
        return blocks[0] + blocks[1] + blocks[2][:16]
    return b"".join(b[:14] for b in blocks)


def blowfish(key, mode, encrypt, data):
    import warnings
    warnings.simplefilter("ignore")
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    except ImportError:  # Debian 12's python3-cryptography 38
        from cryptography.hazmat.primitives.ciphers.algorithms import Blowfish
    from cryptography.hazmat.primitives.ciphers import Cipher, modes
    cipher = Cipher(Blowfish(key), modes.CBC(b"\x00" * 8) if mode == "cbc" else modes.ECB())
    op = cipher.encryptor() if encrypt else cipher.decryptor()
    return op.update(data) + op.finalize()


def split_wallet(data):
    """(header 16 bytes, the MD5 index, the ciphertext) of a .kwl."""
    offset = 16
    (folders,) = struct.unpack_from(">I", data, offset)
    offset += 4
    for _ in range(folders):
        offset += 16
        (keys,) = struct.unpack_from(">I", data, offset)
        offset += 4 + 16 * keys
    return data[:16], data[16:offset], data[offset:]


def make_legacy(cbc_wallet, cbc_salt, password, output):
    """Re-encrypts the CBC wallet's plaintext in ECB with the legacy key: minor 0, cipher 0, hash 0."""
    data = pathlib.Path(cbc_wallet).read_bytes()
    header, index, ciphertext = split_wallet(data)
    plain = blowfish(wallet_key(password, pathlib.Path(cbc_salt).read_bytes()), "cbc", False, ciphertext)
    (length,) = struct.unpack_from(">I", plain, 8)
    assert kwallet_sha1(plain[12:12 + length]) == plain[-20:], "the CBC wallet's SHA-1 does not check"
    legacy_header = header[:12] + bytes([0, 0, 0, 0])
    pathlib.Path(output).write_bytes(legacy_header + index + blowfish(legacy_key(password), "ecb", True, plain))


def main():
    output = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent)
    make_wallets(output)
    make_legacy(output / "kdewallet.kwl", output / "kdewallet.salt", WALLETS["kdewallet"]["password"],
                output / "legacy.kwl")
    print("made", ", ".join(sorted(p.name for p in output.iterdir() if p.suffix in (".kwl", ".salt"))))


if __name__ == "__main__":
    main()
