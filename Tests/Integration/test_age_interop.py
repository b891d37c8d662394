"""The age container against the real age (Debian's /usr/bin/age and age-keygen, 1.1.1): the real age opens
what AgeEncryption writes (to an X25519 recipient and to a passphrase, binary and armored) and AgeEncryption
opens what the real age writes (`age -r`, `age -a`, `age -p`), at the sizes where the chunking changes.
`age -p` and `age -d` read a passphrase only from a terminal: they are driven through a pseudo-terminal, and
ours reads it from file descriptor 3, so no passphrase is ever on a command line. Our side is
Tests/AgeFileTool (age-file-tool), AgeFile between stdin and stdout."""

import os
import subprocess

import pytest

from conftest import binary
from test_cli import run_on_terminal

AGE = "/usr/bin/age"
AGE_KEYGEN = "/usr/bin/age-keygen"
PASSPHRASE = "pässphrase for the real age ✓"
# Empty, one byte, one chunk less one, exactly one chunk, one more than a chunk, two chunks and a bit.
SIZES = [0, 1, 65535, 65536, 65537, 2 * 65536 + 100]

pytestmark = pytest.mark.skipif(not os.path.exists(AGE), reason="the real age is not installed (apt install age)")


def plaintext(size):
    return bytes((i * 31 + (i >> 16)) & 0xFF for i in range(size))


def tool(*args, input=b"", passphrase=None, check=True):
    """Runs age-file-tool; the passphrase, if any, is written to its file descriptor 3."""
    pass_fds = ()
    read_end = None
    if passphrase is not None:
        read_end, write_end = os.pipe()
        os.write(write_end, passphrase.encode())
        os.close(write_end)
        pass_fds = (read_end, 3)
    try:
        result = subprocess.run(
            [binary("age-file-tool"), *args], input=input, capture_output=True, timeout=120, pass_fds=pass_fds,
            preexec_fn=(lambda: os.dup2(read_end, 3)) if read_end is not None else None)
    finally:
        if read_end is not None:
            os.close(read_end)
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def in_terminal(args, typed):
    """Runs the real age on a pseudo-terminal, typing each (prompt, text) of `typed` and a line end. Returns
    (exit status, everything the terminal showed)."""
    return run_on_terminal(args[0], args, dict(os.environ), [(prompt, text + "\n") for prompt, text in typed],
                           timeout=120)


@pytest.fixture
def key(tmp_path):
    """A key file made by the real age-keygen, and its recipient."""
    path = tmp_path / "key.txt"
    subprocess.run([AGE_KEYGEN, "-o", str(path)], check=True, capture_output=True)
    recipient = subprocess.run([AGE_KEYGEN, "-y", str(path)], check=True, capture_output=True, text=True)
    return path, recipient.stdout.strip()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("armor", [False, True])
def test_the_real_age_decrypts_what_we_encrypt_to_its_recipient(tmp_path, key, size, armor):
    path, recipient = key
    ours = tool("encrypt", recipient, *(["--armor"] if armor else []), input=plaintext(size)).stdout
    assert ours.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----\n" if armor else b"age-encryption.org/v1\n-> X25519 ")
    (tmp_path / "ours.age").write_bytes(ours)
    opened = subprocess.run([AGE, "-d", "-i", str(path), str(tmp_path / "ours.age")], capture_output=True)
    assert opened.returncode == 0, opened.stderr.decode()
    assert opened.stdout == plaintext(size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("armor", [False, True])
def test_we_decrypt_what_the_real_age_encrypts_to_a_recipient(tmp_path, key, size, armor):
    path, recipient = key
    (tmp_path / "plain").write_bytes(plaintext(size))
    theirs = subprocess.run([AGE, "-r", recipient, *(["-a"] if armor else []), str(tmp_path / "plain")],
                            check=True, capture_output=True).stdout
    assert tool("requirement", input=theirs).stdout == b"identity\n"
    assert tool("decrypt", str(path), input=theirs).stdout == plaintext(size)


def test_the_real_age_decrypts_our_passphrase_file(tmp_path):
    ours = tool("encrypt-passphrase", "18", input=plaintext(70000), passphrase=PASSPHRASE).stdout
    assert b"\n-> scrypt " in ours and b" 18\n" in ours
    (tmp_path / "ours.age").write_bytes(ours)
    status, shown = in_terminal([AGE, "-d", "-o", str(tmp_path / "out"), str(tmp_path / "ours.age")],
                                [("Enter passphrase", PASSPHRASE)])
    assert status == 0, shown
    assert (tmp_path / "out").read_bytes() == plaintext(70000)


@pytest.mark.parametrize("armor", [False, True])
def test_we_decrypt_what_age_p_encrypts(tmp_path, armor):
    (tmp_path / "plain").write_bytes(plaintext(70000))
    status, shown = in_terminal(
        [AGE, "-p", *(["-a"] if armor else []), "-o", str(tmp_path / "theirs.age"), str(tmp_path / "plain")],
        [("Enter passphrase", PASSPHRASE), ("Confirm passphrase", PASSPHRASE)])
    assert status == 0, shown
    theirs = (tmp_path / "theirs.age").read_bytes()
    assert tool("requirement", input=theirs).stdout == b"passphrase\n"
    assert tool("decrypt-passphrase", input=theirs, passphrase=PASSPHRASE).stdout == plaintext(70000)
    wrong = tool("decrypt-passphrase", input=theirs, passphrase=PASSPHRASE + "!", check=False)
    assert wrong.returncode == 1 and wrong.stdout == b""
    assert b"wrongPassphrase: wrong passphrase" in wrong.stderr
    # age's default work factor is 18: a caller allowing only 2^17 is refused before any derivation.
    refused = tool("decrypt-passphrase", "17", input=theirs, passphrase=PASSPHRASE, check=False)
    assert refused.returncode == 1 and b"workFactorTooHigh" in refused.stderr


def test_a_tampered_or_cut_file_of_the_real_age_gives_nothing(tmp_path, key):
    """A hostile file: what the real age wrote, then altered in its header, in each chunk, or cut at a chunk
    boundary. Each gives one line naming the problem and no plaintext."""
    path, recipient = key
    (tmp_path / "plain").write_bytes(plaintext(2 * 65536 + 100))
    theirs = subprocess.run([AGE, "-r", recipient, str(tmp_path / "plain")], check=True, capture_output=True).stdout
    header_end = theirs.index(b"\n---") + 1
    payload = theirs.index(b"\n", header_end) + 1 + 16
    cases = {
        "a chunk": (theirs[:payload + 70000] + bytes([theirs[payload + 70000] ^ 1]) + theirs[payload + 70001:],
                    b"tampered: chunk 2"),
        "the last chunk": (theirs[:-1] + bytes([theirs[-1] ^ 1]), b"tampered: the age file's last chunk"),
        "the MAC": (theirs[:header_end + 4] + (b"A" if theirs[header_end + 4:header_end + 5] != b"A" else b"B")
                    + theirs[header_end + 5:], b": the age file's header"),
        "a chunk boundary": (theirs[:payload + 2 * (65536 + 16)], b"truncated: the age file ends after chunk 2"),
        "the header": (theirs[:header_end], b"truncated: the age file ends inside its header"),
    }
    for name, (file, message) in cases.items():
        result = tool("decrypt", str(path), input=file, check=False)
        assert result.returncode == 1, name
        assert result.stdout == b"", name
        assert message in result.stderr, (name, result.stderr)
        assert result.stderr.count(b"\n") == 1, name
