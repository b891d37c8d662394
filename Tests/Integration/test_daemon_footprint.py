"""What latchkeyd keeps resident besides its data (docs/robustness.md, "Memory of a prompt storm"): its
relocations packed (lld's DT_RELR, Package.swift) and one malloc arena for all its threads."""

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import binary

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "Benchmarks"))
import robustness  # noqa: E402

ARENA_BYTES = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: each arena but the main one reserves this much.


@pytest.fixture
def latchkeyd():
    return binary("latchkeyd")


def dynamic_section(program):
    return subprocess.run(["readelf", "--dynamic", "--wide", program], capture_output=True, text=True,
                          check=True).stdout


def test_the_daemon_binary_carries_its_relative_relocations_packed(latchkeyd):
    """gold wrote 42,000 relative relocations as 1 MiB of Elf64_Rela, which the loader reads at every start and
    which then stay resident; DT_RELR packs them into a bitmap of a few KiB."""
    dynamic = dynamic_section(latchkeyd)
    assert "(RELR)" in dynamic, dynamic
    [rela] = re.findall(r"\(RELASZ\)\s+(\d+) \(bytes\)", dynamic) or ["0"]
    # What stays in RELA are the relocations against symbols (GLOB_DAT, JUMP_SLOT…), which grow with the libraries
    # linked (66 KiB with libfido2): far below the 1 MiB of relative ones that an unpacked link writes.
    assert int(rela) < 128 << 10, dynamic


def secondary_arenas(pid):
    """The glibc arenas other than the main one in process `pid`'s maps: an anonymous read-write mapping at a
    multiple of 64 MiB followed by the inaccessible rest of its 64 MiB reservation (a thread's stack is the
    other way round: its guard page first)."""
    mappings = []
    for line in open(f"/proc/{pid}/maps"):
        fields = line.split()
        start, end = (int(value, 16) for value in fields[0].split("-"))
        mappings.append((start, end, fields[1], fields[5] if len(fields) > 5 else ""))
    arenas = []
    for (start, end, perms, name), following in zip(mappings, mappings[1:] + [None]):
        if name or not perms.startswith("rw") or start % ARENA_BYTES:
            continue
        reserved = end
        if following and following[0] == end and following[2].startswith("---") and not following[3]:
            reserved = following[1]
        if reserved - start == ARENA_BYTES:
            arenas.append(hex(start))
    return arenas


def test_the_daemons_threads_allocate_from_one_arena(latchkeyd):
    """The serving thread, the workers and a prompt's thread each got an arena of their own from glibc (up to
    eight per core), each keeping its own free memory; latchkeyd has them share the main one."""
    scratch = tempfile.mkdtemp(prefix="footprint-")
    server = robustness.Latchkeyd(scratch, latchkeyd, answers=[f"password {robustness.PASSWORD}"] * 4)
    try:
        server.start()
        client = server.client()
        try:
            robustness.lock_login(client)
            # A prompt on its own thread, the key derivation's wait on the worker, replies on the serving thread.
            assert robustness.unlock_through_prompt(client, robustness.LOGIN) is True
        finally:
            client.close()
        assert robustness.proc_status(server.pid)["Threads"] >= 3
        assert secondary_arenas(server.pid) == []
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
