"""A C program built against libsecret-1, against latchkeyd."""

import pathlib
import subprocess

import pytest

SOURCE = pathlib.Path(__file__).with_name("libsecret_client.c")


def compile_libsecret_program(source, tmp_path_factory):
    """`source` (a C file) built against libsecret-1 into a temporary directory; the program's path."""
    output = tmp_path_factory.mktemp("c") / source.stem
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libsecret-1"], check=True, capture_output=True,
                           text=True).stdout.split()
    subprocess.run(["gcc", "-Wall", "-Werror", "-o", str(output), str(source), *flags], check=True)
    return str(output)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return compile_libsecret_program(SOURCE, tmp_path_factory)


def test_schema_store_lookup_search_clear_proxy_and_alias(program, daemon, bus):
    result = subprocess.run([program], env=bus.env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "OK\n"
