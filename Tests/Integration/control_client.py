"""A client of latchkeyd's control socket, written from docs/control-socket.md
(independently of the Swift one, so that the tests check the documented format)."""

import socket
import struct

VERSION = 1
OPEN_SESSION, CLOSE_SESSION, CHANGE_PASSWORD, STATUS, HAND_OVER = 1, 2, 3, 4, 5
STATUS_NAMES = {0: "ok", 1: "wrongPassword", 2: "tooManyAttempts", 3: "failed", 4: "badRequest"}


def field(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def request(opcode, *fields) -> bytes:
    body = bytes([VERSION, opcode]) + b"".join(field(f) for f in fields)
    return struct.pack(">I", len(body)) + body


def exchange(path, raw: bytes, timeout=5.0):
    """Sends raw bytes and returns (status name, message) of the reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(raw)
        header = recv_exactly(s, 4)
        (length,) = struct.unpack(">I", header)
        assert length <= 512, f"reply of {length} bytes"
        body = recv_exactly(s, length)
    return STATUS_NAMES[body[0]], body[1:].decode()


def recv_exactly(s, count):
    data = b""
    while len(data) < count:
        chunk = s.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def open_session(path, password=None):
    return exchange(path, request(OPEN_SESSION, *([password.encode()] if password is not None else [])))


def close_session(path, lock_if_last):
    return exchange(path, request(CLOSE_SESSION, bytes([1 if lock_if_last else 0])))


def change_password(path, old, new):
    return exchange(path, request(CHANGE_PASSWORD, old.encode(), new.encode()))


def hand_over(path, password=None):
    return exchange(path, request(HAND_OVER, *([password.encode()] if password is not None else [])))


def status(path):
    return exchange(path, request(STATUS))


def parse_reply(data: bytes):
    """(status name, message) of one framed reply, as a daemon writes it on standard output."""
    assert len(data) >= 5, f"reply of {len(data)} bytes"
    (length,) = struct.unpack(">I", data[:4])
    body = data[4:4 + length]
    return STATUS_NAMES[body[0]], body[1:].decode()
