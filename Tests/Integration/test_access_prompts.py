"""An item's secret is handed only to the applications it trusts; any other application gets it after the
person allows it in a pinentry prompt (Allow once, Always allow, Deny), on a real bus with real clients: a
small libsecret program and a copy of it with other bytes at another path (two applications), python3
scripts (identified by their script), and the latchkey command."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import binary, secret_tool

SOURCE = pathlib.Path(__file__).with_name("access_client.c")


@pytest.fixture(scope="module")
def creator_program(tmp_path_factory):
    output = tmp_path_factory.mktemp("access") / "creator"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libsecret-1"], check=True, capture_output=True,
                           text=True).stdout.split()
    subprocess.run(["gcc", "-Wall", "-Werror", "-o", str(output), str(SOURCE), *flags], check=True)
    return output


@pytest.fixture
def programs(creator_program, tmp_path):
    """The creator, and another application: the same program at another path with other bytes."""
    other = tmp_path / "other-app"
    other.write_bytes(creator_program.read_bytes() + b"\0another application")
    other.chmod(0o755)
    return creator_program, other


@pytest.fixture
def prompting(make_daemon):
    """latchkeyd whose keychains keep the default policy: prompt."""
    return make_daemon(access_policy="prompt").start()


def run(program, bus, *args, timeout=60):
    return subprocess.run([str(program), *args], env=bus.env(), capture_output=True, text=True, timeout=timeout)


def lookup(program, bus, key="k"):
    return run(program, bus, "lookup", key)


def pinentry_entries(daemon):
    return [json.loads(line) for line in daemon.pinentry_log().splitlines()]


def arguments(daemon, command):
    return [entry["argument"] for entry in pinentry_entries(daemon) if entry["command"] == command]


def test_the_creator_reads_without_a_prompt_another_application_is_asked_and_deny_refuses(programs, prompting, bus):
    creator, other = programs
    assert run(creator, bus, "store", "k", "the secret").returncode == 0
    read = lookup(creator, bus)
    assert read.returncode == 0 and read.stdout == "the secret\n", read.stderr
    assert arguments(prompting, "CONFIRM") == []

    prompting.set_pinentry_answers(["cancel"])
    denied = lookup(other, bus)
    assert denied.returncode == 2 and denied.stdout == ""
    assert "org.freedesktop.DBus.Error.AccessDenied" in denied.stderr
    assert len(arguments(prompting, "CONFIRM")) == 1
    description = arguments(prompting, "SETDESC")[-1]
    assert str(other) in description and "“k”" in description
    assert arguments(prompting, "SETOK") == ["Allow once"]
    assert arguments(prompting, "SETNOTOK") == ["Always allow"]
    assert arguments(prompting, "SETCANCEL") == ["Deny"]


def test_allow_once_hands_it_over_once(programs, prompting, bus):
    creator, other = programs
    run(creator, bus, "store", "k", "the secret")
    prompting.set_pinentry_answers(["ok", "cancel"])
    assert lookup(other, bus).stdout == "the secret\n"
    again = lookup(other, bus)
    assert again.returncode == 2 and "AccessDenied" in again.stderr
    assert len(arguments(prompting, "CONFIRM")) == 2


def test_always_allow_is_kept_across_a_restart_and_a_changed_binary_is_asked_again(
        programs, make_daemon, bus):
    creator, other = programs
    daemon = make_daemon(access_policy="prompt").start()
    run(creator, bus, "store", "k", "the secret")
    # The third button, then the explicit confirmation that follows it.
    daemon.set_pinentry_answers(["notok", "ok"])
    assert lookup(other, bus).stdout == "the secret\n"
    assert lookup(other, bus).stdout == "the secret\n"
    assert len(arguments(daemon, "CONFIRM")) == 2

    daemon.stop()
    daemon.start()
    assert lookup(other, bus).stdout == "the secret\n", "still trusted after a restart"
    assert len(arguments(daemon, "CONFIRM")) == 2

    # An upgrade: same path, other bytes. Asked again, told it changed; Allow once leaves the list as it was.
    other.write_bytes(other.read_bytes() + b"\0version 2")
    daemon.set_pinentry_answers(["ok", "cancel"])
    assert lookup(other, bus).stdout == "the secret\n"
    assert len(arguments(daemon, "CONFIRM")) == 3
    assert "CHANGED" in arguments(daemon, "SETDESC")[-1]
    assert lookup(other, bus).returncode == 2


READ_SCRIPT = """
import secretstorage, sys
connection = secretstorage.dbus_init()
item = next(secretstorage.get_default_collection(connection).search_items({"key": sys.argv[1]}))
try:
    print(item.get_secret().decode())
except secretstorage.exceptions.SecretStorageException as error:
    print(error, file=sys.stderr)
    sys.exit(2)
except Exception as error:
    print(type(error).__name__, error, file=sys.stderr)
    sys.exit(2)
"""


def test_a_python_script_is_identified_by_its_script(programs, prompting, bus, tmp_path):
    creator, _ = programs
    run(creator, bus, "store", "k", "the secret")
    script = tmp_path / "reader.py"
    script.write_text(READ_SCRIPT)
    prompting.set_pinentry_answers(["notok", "ok"])
    env = bus.env()
    result = subprocess.run([sys.executable, str(script), "k"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "the secret\n", result.stderr
    description = arguments(prompting, "SETDESC")[-1]
    assert str(script) in description and "python3" in description
    # Trusted as that script: the same interpreter with another script is asked again.
    other_script = tmp_path / "other-reader.py"
    other_script.write_text(READ_SCRIPT)
    prompting.set_pinentry_answers(["cancel"])
    denied = subprocess.run([sys.executable, str(other_script), "k"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert denied.returncode == 2 and "AccessDenied" in denied.stderr
    assert str(other_script) in arguments(prompting, "SETDESC")[-1]
    assert subprocess.run([sys.executable, str(script), "k"], env=env, capture_output=True, text=True,
                          timeout=60).stdout == "the secret\n"
    assert len(arguments(prompting, "CONFIRM")) == 3


def test_allow_all_asks_nothing(programs, make_daemon, bus):
    creator, other = programs
    daemon = make_daemon(access_policy="allow-all").start()
    run(creator, bus, "store", "k", "the secret")
    assert lookup(other, bus).stdout == "the secret\n"
    assert arguments(daemon, "CONFIRM") == []


def test_with_no_way_to_ask_the_request_is_denied_at_once_and_logged(programs, make_daemon, bus):
    creator, other = programs
    daemon = make_daemon(access_policy="prompt", extra_env={"PATH": "/nonexistent"},
                         extra_args=["--pinentry", "/nonexistent/pinentry"]).start()
    run(creator, bus, "store", "k", "the secret")
    started = time.monotonic()
    denied = lookup(other, bus)
    assert time.monotonic() - started < 10
    assert denied.returncode == 2 and "AccessDenied" in denied.stderr and "no way to ask" in denied.stderr
    log = daemon.stderr.read_text()
    lines = [line for line in log.splitlines() if "no way to ask" in line]
    assert len(lines) == 1 and str(other) in lines[0] and "“k”" in lines[0]
    assert "the secret" not in log


def starve_of_descriptors(daemon):
    """Lowers the running daemon's descriptor limit to its lowest free descriptor number: every descriptor it
    opens from now on fails with EMFILE, as once a flood has used them all up (issue 31, item 1)."""
    import resource
    pid = daemon.process.pid
    used = {int(name) for name in os.listdir("/proc/%d/fd" % pid)}
    lowest_free = min(set(range(len(used) + 1)) - used)
    _, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, hard))


def test_a_prompt_that_cannot_start_says_why_in_the_denial(programs, prompting, bus):
    """With no descriptor left for the prompt's own pipe, the denial names why (before: "was not allowed", as if
    the person had denied it, with the reason nowhere)."""
    creator, other = programs
    run(creator, bus, "store", "k", "the secret")
    starve_of_descriptors(prompting)
    denied = lookup(other, bus)
    assert denied.returncode == 2 and "AccessDenied" in denied.stderr, denied.stderr
    assert "no way to ask (pinentry: cannot create a pipe" in denied.stderr, denied.stderr
    assert "Too many open files" in denied.stderr, denied.stderr
    assert "no prompt could be shown: pinentry: cannot create a pipe" in prompting.stderr.read_text()


def test_another_application_neither_answers_nor_dismisses_the_first_ones_prompt(programs, prompting, bus, tmp_path):
    creator, other = programs
    third = tmp_path / "third-app"
    third.write_bytes(creator.read_bytes() + b"\0a third application")
    third.chmod(0o755)
    run(creator, bus, "store", "k", "the secret")
    # The first prompt waits a moment before its answer; meanwhile a third application asks, then leaves.
    prompting.set_pinentry_answers(["wait 6 ok", "hang"])
    first = subprocess.Popen([str(other), "lookup", "k"], env=bus.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not arguments(prompting, "CONFIRM") and time.monotonic() < deadline:
        time.sleep(0.05)
    intruder = subprocess.Popen([str(third), "lookup", "k"], env=bus.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    # Gone well before the queue's 3 s hold would show its prompt beside the first one.
    time.sleep(1)
    intruder.kill()
    intruder.wait()
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0 and out == "the secret\n", err
    # The first prompt was the other application's alone: one showing for it, none shared with the third.
    descriptions = arguments(prompting, "SETDESC")
    assert str(other) in descriptions[0] and str(third) not in descriptions[0]
    # The third application's prompt, queued behind, went with it: it never showed.
    time.sleep(1)
    assert len(arguments(prompting, "CONFIRM")) == 1


def test_the_latchkey_command_through_the_daemon_is_asked_about(make_daemon, bus, tmp_path):
    """The command reads through Keychain1.Search, which asks too. (As root, the daemon identifies the command
    whatever its dumpable state: the test below runs as a user.)"""
    from test_cli import Cli
    cli = Cli(tmp_path, bus)
    daemon = make_daemon(keychains=cli.keychains, access_policy="prompt").start()
    secret_tool(bus, "store", "--label=made by secret-tool", "service", "by-tool", input=b"the secret")
    daemon.set_pinentry_answers(["ok"])
    result = subprocess.run([binary("latchkey"), "find-generic-password", "-s", "by-tool", "-w"], env=cli.env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "the secret\n", result.stderr
    description = arguments(daemon, "SETDESC")[-1]
    assert os.path.realpath(binary("latchkey")) in description and "could not identify" not in description


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a user account")
def test_the_latchkey_command_is_identified_by_a_daemon_of_its_own_user(tmp_path):
    """As root, latchkeyd reads any process's /proc/PID/exe; run as a user, as in real life, it reads only
    dumpable processes of its user: latchkey must still be dumpable when the daemon identifies it."""
    import pwd
    import secrets
    name = "lk" + secrets.token_hex(4)
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
    entry = pwd.getpwnam(name)
    home = pathlib.Path(entry.pw_dir)
    as_user = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"]
    processes = []
    try:
        bus_address = f"unix:path={home}/bus"
        out = subprocess.run(as_user + ["dbus-daemon", "--session", f"--address={bus_address}", "--fork",
                                        "--print-pid=1"], check=True, capture_output=True, text=True).stdout
        processes.append(int(out.split()[0]))
        (home / "answers").write_text("ok\n")
        os.chown(home / "answers", entry.pw_uid, entry.pw_gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "DBUS_SESSION_BUS_ADDRESS": bus_address,
               "XDG_RUNTIME_DIR": str(home), "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={home}/no-system-bus",
               "SCRIPTED_PINENTRY_ANSWERS": str(home / "answers"), "SCRIPTED_PINENTRY_LOG": str(home / "log"),
               "PINENTRY": str(pathlib.Path(__file__).parents[1] / "Support" / "scripted-pinentry")}
        daemon = subprocess.Popen(
            as_user + [binary("latchkeyd"), "--foreground", "--unlock", "--pinentry", env["PINENTRY"]],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "daemon.err", "wb"))
        daemon.stdin.write(b"user login password")
        daemon.stdin.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            owner = subprocess.run(as_user + ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                              "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                              "string:org.freedesktop.secrets"], env=env, capture_output=True,
                                   text=True).stdout
            if "boolean true" in owner:
                break
            assert daemon.poll() is None, (tmp_path / "daemon.err").read_text()
            time.sleep(0.05)
        stored = subprocess.run(as_user + ["secret-tool", "store", "--label=made by secret-tool", "service", "k"],
                                env=env, input="the secret", capture_output=True, text=True, timeout=30)
        assert stored.returncode == 0, stored.stderr
        read = subprocess.run(as_user + [binary("latchkey"), "find-generic-password", "-s", "k", "-w"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert read.returncode == 0 and read.stdout == "the secret\n", read.stderr
        log = [json.loads(line) for line in (home / "log").read_text().splitlines()]
        description = [e["argument"] for e in log if e["command"] == "SETDESC"][-1]
        assert os.path.realpath(binary("latchkey")) in description, description
        assert "could not identify" not in description
        # An item the command adds with its secret on standard input (read before any keychain is reached)
        # trusts the command, which reads it back without being asked.
        asked = len(log)
        added = subprocess.run(as_user + [binary("latchkey"), "add-generic-password", "-s", "own", "-a", "me",
                                          "--stdin"], env=env, input="its own\n", capture_output=True, text=True,
                               timeout=60)
        assert added.returncode == 0, added.stderr
        listed = subprocess.run(as_user + [binary("latchkey"), "list-access"], env=env, capture_output=True,
                                text=True, timeout=60).stdout
        own_entry = listed[listed.index('"own"'):]
        assert os.path.realpath(binary("latchkey")) in own_entry.splitlines()[1], listed
        read = subprocess.run(as_user + [binary("latchkey"), "find-generic-password", "-s", "own", "-w"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert read.returncode == 0 and read.stdout == "its own\n", read.stderr
        assert len((home / "log").read_text().splitlines()) == asked, "the command was asked about its own item"
        processes.append(daemon.pid)
    finally:
        for pid in reversed(processes):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if processes and "daemon" in locals():
            daemon.wait(timeout=10)
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


def test_the_prompt_names_the_debian_package_of_the_program(programs, prompting, bus):
    creator, _ = programs
    run(creator, bus, "store", "k", "the secret")
    prompting.set_pinentry_answers(["cancel"])
    denied = secret_tool(bus, "lookup", "key", "k", check=False)
    assert denied.returncode != 0 and b"the secret" not in denied.stdout
    description = arguments(prompting, "SETDESC")[-1]
    assert os.path.realpath(shutil.which("secret-tool")) in description
    assert "(package libsecret-tools)" in description


def test_not_confirmed_alone_is_deny_never_always_allow(programs, prompting, bus):
    """pinentry answers CONFIRM with GPG_ERR_NOT_CONFIRMED for the third button and for anything else that ended
    in neither OK nor Cancel (its catch-all): by itself it is Deny. Here the question that follows it (Always
    allow?) is cancelled, and the application stays untrusted."""
    creator, other = programs
    run(creator, bus, "store", "k", "the secret")
    prompting.set_pinentry_answers(["deny", "cancel", "cancel"])
    denied = lookup(other, bus)
    assert denied.returncode == 2 and denied.stdout == "" and "AccessDenied" in denied.stderr, denied.stdout
    again = lookup(other, bus)
    assert again.returncode == 2 and "AccessDenied" in again.stderr, "asked again: nothing was trusted"


def test_always_allow_needs_an_explicit_second_confirmation(programs, prompting, bus):
    creator, other = programs
    run(creator, bus, "store", "k", "the secret")
    prompting.set_pinentry_answers(["notok", "ok"])
    assert lookup(other, bus).stdout == "the secret\n"
    assert lookup(other, bus).stdout == "the secret\n"
    assert len(arguments(prompting, "CONFIRM")) == 2
    assert "every time" in arguments(prompting, "SETDESC")[-1]
    assert arguments(prompting, "SETOK")[-1] == "Always allow" and arguments(prompting, "SETCANCEL")[-1] == "Deny"


def test_a_long_label_with_line_breaks_and_bidi_controls_cannot_bury_the_changed_warning(programs, prompting, bus):
    """A label is the item creator's text: its line breaks and bidi controls are replaced, it is cut to a bounded
    length, and the warning comes first, so a 4 KiB label cannot push it out of pinentry's 1,000-byte line."""
    creator, other = programs
    head = "Bank\nAlways allow is safe here\u202Etxt.exe\u2066"
    label = head + "x" * (4096 - len(head.encode()))
    assert run(creator, bus, "store", label, "the secret").returncode == 0
    prompting.set_pinentry_answers(["notok", "ok"])
    assert lookup(other, bus, key=label).stdout == "the secret\n"
    other.write_bytes(other.read_bytes() + b"\0version 2")
    prompting.set_pinentry_answers(["cancel"])
    assert lookup(other, bus, key=label).returncode == 2
    description = arguments(prompting, "SETDESC")[-1]
    lines = description.splitlines()
    assert "CHANGED" in lines[0], description
    assert "\u202E" not in description and "\u2066" not in description
    assert not any(line.startswith("Always allow is safe") for line in lines), description
    label_line = next(line for line in lines if "Bank" in line)
    assert "Always allow is safe" in label_line and len(label_line) < 300 and "…" in label_line
    assert len(description.encode()) < 1000


INLINE_STORE = """
import secretstorage, sys
connection = secretstorage.dbus_init()
secretstorage.get_default_collection(connection).create_item(sys.argv[1], {"key": sys.argv[1]}, b"made inline")
"""


def test_inline_code_is_asked_about_as_a_tool_any_program_runs_and_never_trusted_for_good(prompting, bus):
    """`python3 -c CODE` is identified as python3 itself, which any program can run with code of its choice: the
    item it makes trusts no application, and its prompt says so and offers no Always allow."""
    env = bus.env()
    made = subprocess.run([sys.executable, "-c", INLINE_STORE, "inline"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert made.returncode == 0, made.stderr
    prompting.set_pinentry_answers(["cancel"])
    read = subprocess.run([sys.executable, "-c", READ_SCRIPT, "inline"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert read.returncode == 2 and "AccessDenied" in read.stderr, "the creator's interpreter was trusted"
    description = arguments(prompting, "SETDESC")[-1]
    assert "any program" in description.lower() and "code" in description.lower(), description
    assert arguments(prompting, "SETNOTOK") == []


def test_secret_tool_is_named_as_a_tool_any_program_can_run(programs, prompting, bus):
    creator, _ = programs
    run(creator, bus, "store", "k", "the secret")
    prompting.set_pinentry_answers(["cancel"])
    assert secret_tool(bus, "lookup", "key", "k", check=False).returncode != 0
    description = arguments(prompting, "SETDESC")[-1]
    assert "any program can run" in description.lower(), description
    # Offered all the same (as macOS offers it for security(1)): docs/threat-model.md says why.
    assert arguments(prompting, "SETNOTOK") == ["Always allow"]


# A program of the user reading through org.latchkey.Keychain1: Search for every generic password of the login
# keychain with their secrets; prints each secret found, or the error.
SEARCH_ALL_SCRIPT = """
import sys
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
connection = open_dbus_connection(bus="SESSION", auth_timeout=30)
address = DBusAddress("/org/latchkey/keychain/login", bus_name="org.freedesktop.secrets",
                      interface="org.latchkey.Keychain1")
query = {"class": ("s", "genp"), "attributes": ("a{sv}", {}), "synchronizable": ("s", "any"),
         "limit": ("x", 0), "returning": ("u", 1 | 2)}
reply = connection.send_and_get_reply(new_method_call(address, "Search", "a{sv}", (query,)), timeout=60)
if reply.header.message_type.name == "error":
    print("ERROR", reply.header.fields, file=sys.stderr)
    sys.exit(2)
for item in reply.body[0]:
    print(bytes(item["secret"][1]).decode())
"""


def test_a_search_allowed_for_the_items_asked_about_hands_over_only_those(prompting, bus, tmp_path):
    """Review of issue 24: a Keychain1 Search with data is asked about for the items it matched; once allowed,
    it used to run the query again and hand over whatever matched by then, an item made meanwhile too (never
    asked about)."""
    secret_tool(bus, "store", "--label=guest wifi", "service", "wifi", input=b"wifi secret")
    script = tmp_path / "search-all.py"
    script.write_text(SEARCH_ALL_SCRIPT)
    # The person takes a moment before allowing the search of “guest wifi”; meanwhile another item is made.
    prompting.set_pinentry_answers(["wait 4 ok"])
    search = subprocess.Popen([sys.executable, str(script)], env=bus.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not arguments(prompting, "CONFIRM") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "“guest wifi”" in arguments(prompting, "SETDESC")[-1]
    secret_tool(bus, "store", "--label=bank", "service", "bank", input=b"bank secret")
    out, err = search.communicate(timeout=60)
    assert search.returncode == 0 and "wifi secret" in out, err
    assert "bank secret" not in out, "handed over an item nobody was asked about"
    assert len(arguments(prompting, "CONFIRM")) == 1


def another_application(creator, tmp_path, name):
    """A copy of the client with other bytes at another path: another application to the daemon."""
    path = tmp_path / name
    path.write_bytes(creator.read_bytes() + b"\0" + name.encode())
    path.chmod(0o755)
    return path


def flood(program, bus, keys):
    """One lookup per key, all at once, each its own process (and connection) of the same application."""
    return [subprocess.Popen([str(program), "lookup", key], env=bus.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for key in keys]


def wait_for_confirms(daemon, count, timeout=30):
    deadline = time.monotonic() + timeout
    while len(arguments(daemon, "CONFIRM")) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(arguments(daemon, "CONFIRM")) >= count


def test_a_flooding_application_cannot_bury_another_applications_prompt(programs, prompting, bus, tmp_path):
    """Clients take turns at the prompt: with 30 questions of one application waiting, another application's
    question is the next one shown, long before its D-Bus call's 25-second timeout (docs/robustness.md, "Fair
    prompts"). First come first shown, it was the 31st."""
    creator, flooder = programs
    real = another_application(creator, tmp_path, "real-app")
    keys = ["k%d" % n for n in range(30)]
    for key in keys + ["real"]:
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    # The first question waits long enough for the other 29 to queue behind it; each later one is allowed at once.
    prompting.set_pinentry_answers(["wait 8 ok"] + ["wait 0.3 ok"] * 40)
    flooding = flood(flooder, bus, keys)
    wait_for_confirms(prompting, 1)
    time.sleep(5)
    started = time.monotonic()
    read = lookup(real, bus, key="real")
    waited = time.monotonic() - started
    assert read.returncode == 0 and read.stdout == "secret of real\n", read.stderr
    descriptions = arguments(prompting, "SETDESC")
    shown = next(n for n, text in enumerate(descriptions) if str(real) in text)
    print("the real application's prompt came %d of %d, its answer after %.1f s" % (shown + 1, len(descriptions),
                                                                                     waited))
    assert shown <= 1, "the real application's prompt came %d after the flood's" % (shown + 1)
    assert waited < 15
    # The flood's own requests are served in their turns (those behind too many others time out on their side).
    for process in flooding:
        process.communicate(timeout=120)


def test_deny_offers_to_deny_all_of_the_applications_waiting_questions(programs, prompting, bus, tmp_path):
    """After Deny, when the same application has more questions waiting, the person is asked whether to deny
    them all: OK denies every one of them at once (each request gets AccessDenied); another application's
    question still comes in its turn (asked while the first shows for longer than the queue's hold limit, it is
    shown beside it: docs/robustness.md, "Prompts in several places")."""
    creator, flooder = programs
    real = another_application(creator, tmp_path, "real-app")
    keys = ["k%d" % n for n in range(10)]
    for key in keys + ["real"]:
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    prompting.set_pinentry_answers(["wait 8 cancel", "ok", "ok"])
    flooding = flood(flooder, bus, keys)
    wait_for_confirms(prompting, 1)
    time.sleep(5)
    reading = flood(real, bus, ["real"])
    for process in flooding:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 2 and out == "" and "AccessDenied" in err, (out, err)
    out, err = reading[0].communicate(timeout=60)
    assert reading[0].returncode == 0 and out == "secret of real\n", err
    descriptions = arguments(prompting, "SETDESC")
    assert len(arguments(prompting, "CONFIRM")) == 3, descriptions
    assert str(flooder) in descriptions[0]
    # Each pinentry's words, by process: the Deny-all question, and the other application's own question.
    shown = {}
    for entry in pinentry_entries(prompting):
        shown.setdefault(entry["pid"], {})[entry["command"]] = entry["argument"]
    deny_all = [words for words in shown.values() if "more questions" in words.get("SETDESC", "")]
    assert len(deny_all) == 1, descriptions
    assert str(flooder) in deny_all[0]["SETDESC"] and "9 more questions" in deny_all[0]["SETDESC"]
    assert deny_all[0]["SETOK"] == "Deny all 9"
    assert deny_all[0]["SETCANCEL"] == "Ask each"
    assert sum(str(real) in words.get("SETDESC", "") for words in shown.values()) == 1, descriptions


def test_ask_each_after_deny_asks_the_applications_other_questions_in_turn(programs, prompting, bus):
    creator, flooder = programs
    for key in ("a", "b"):
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    prompting.set_pinentry_answers(["wait 5 cancel", "cancel", "ok"])
    flooding = flood(flooder, bus, ["a", "b"])
    outcomes = sorted((p.communicate(timeout=60)[0], p.returncode) for p in flooding)
    assert sorted(code for _, code in outcomes) == [0, 2], outcomes
    assert len(arguments(prompting, "CONFIRM")) == 3
    assert "1 more question" in arguments(prompting, "SETDESC")[1]
    assert arguments(prompting, "SETOK")[1] == "Deny it too"


def locked_own_password_collection(bus):
    """A client, and a collection with a password of its own ("own password"), locked."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "Benchmarks"))
    import robustness
    from dbus_client import Client
    client = Client(bus.address)
    collection = robustness.create_own_password_collection(client, "own", "own password")
    client.service("Lock", "ao", ([collection],))
    return client, collection


def unlock_and_check_it_came_second(daemon, client, collection):
    """Asks to unlock `collection`, answered with its password by the second pinentry: whether it unlocked, and the
    pinentry commands that asked, in order."""
    import robustness
    prompt = robustness.own_password_prompt(client, collection, change=False)
    client.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", "s", ("",))
    deadline = time.monotonic() + 20
    locked = True
    while locked and time.monotonic() < deadline:
        locked = client.ok(collection, "org.freedesktop.DBus.Properties", "Get", "ss",
                           ("org.freedesktop.Secret.Collection", "Locked"))[0][1]
        time.sleep(0.1)
    asked = [e["command"] for e in pinentry_entries(daemon) if e["command"] in ("CONFIRM", "GETPIN")]
    assert not locked and asked[:2] == ["CONFIRM", "GETPIN"], asked


def test_an_unlock_prompt_is_not_buried_by_one_applications_questions(programs, prompting, bus):
    """The daemon's own prompts (unlocks, confirmations) take their turn as one client: an Unlock asked while one
    application has 10 questions waiting is the next prompt shown."""
    creator, flooder = programs
    keys = ["k%d" % n for n in range(10)]
    for key in keys:
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    client, collection = locked_own_password_collection(bus)
    prompting.set_pinentry_answers(["wait 6 ok", "password own password"] + ["ok"] * 20)
    flooding = flood(flooder, bus, keys)
    wait_for_confirms(prompting, 1)
    time.sleep(3)
    unlock_and_check_it_came_second(prompting, client, collection)
    client.close()
    for process in flooding:
        process.communicate(timeout=120)


def test_an_unlock_prompt_is_not_buried_by_one_applications_confirmations(prompting, bus):
    """A confirmation a client's request needs (here Keychain1.SetAccessPolicy allow-all, asked 10 times at once)
    waits in that client's turn, not in the daemon's own: an Unlock asked meanwhile is the next prompt shown."""
    import threading
    from dbus_client import Client
    client, collection = locked_own_password_collection(bus)
    prompting.set_pinentry_answers(["wait 6 cancel", "password own password"] + ["cancel"] * 20)
    asking = [Client(bus.address) for _ in range(10)]
    threads = [threading.Thread(target=lambda c=c: c.call("/org/latchkey/keychain/login", "org.latchkey.Keychain1",
                                                            "SetAccessPolicy", "s", ("allow-all",), timeout=120))
               for c in asking]
    for thread in threads:
        thread.start()
    wait_for_confirms(prompting, 1)
    time.sleep(3)
    unlock_and_check_it_came_second(prompting, client, collection)
    for thread in threads:
        thread.join(timeout=120)
    for c in asking:
        c.close()
    client.close()


def test_the_deny_all_question_ends_when_the_applications_requests_leave(programs, prompting, bus):
    """The question whether to deny all of an application's waiting questions belongs to them: once every one of
    its requests left the bus, its pinentry is ended (not left to its 20-second timeout)."""
    creator, flooder = programs
    for key in ("a", "b", "c"):
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    prompting.set_pinentry_answers(["wait 3 cancel", "hang"])
    flooding = flood(flooder, bus, ["a", "b", "c"])
    wait_for_confirms(prompting, 2)
    hanging = [e["pid"] for e in pinentry_entries(prompting) if e["command"] == "CONFIRM"][1:]
    assert "2 more questions" in arguments(prompting, "SETDESC")[-1]
    time.sleep(0.5)
    for process in flooding:
        process.kill()
        process.wait()
    left = time.monotonic()
    while os.path.exists("/proc/%d" % hanging[0]) and time.monotonic() - left < 10:
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % hanging[0]), "the deny-all question outlived the requests it was about"
    assert time.monotonic() - left < 3


def test_a_hung_prompt_holds_another_applications_prompt_for_a_few_seconds_only(programs, prompting, bus, tmp_path):
    """A pinentry that never answers one application's question keeps another application's unrelated question
    waiting for the queue's hold limit (3 s), not for the first one's whole 20 s: it is then shown beside it
    (docs/robustness.md, "Prompts in several places"). On 1321345 the second waited the 20 s."""
    creator, other = programs
    third = another_application(creator, tmp_path, "third-app")
    for key in ("k", "m"):
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    prompting.set_pinentry_answers(["hang", "ok"])
    hung = subprocess.Popen([str(other), "lookup", "k"], env=bus.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_confirms(prompting, 1)
        asked = time.monotonic()
        answered = lookup(third, bus, "m")
        waited = time.monotonic() - asked
        print("the other application's prompt answered after %.1f s" % waited)
        assert answered.returncode == 0 and answered.stdout == "secret of m\n", answered.stderr
        assert waited < 10, "held %.1f s by the hung prompt" % waited
        # Shown beside it: the first one's pinentry still shows, its call still waits.
        assert hung.poll() is None
        descriptions = arguments(prompting, "SETDESC")
        assert len(descriptions) == 2 and str(third) in descriptions[1]
        out, err = hung.communicate(timeout=40)
        assert hung.returncode == 2 and "AccessDenied" in err, err
    finally:
        hung.kill()
        hung.wait()


def test_a_flooding_application_shows_one_prompt_at_a_time_however_long_it_hangs(programs, prompting, bus, tmp_path):
    """Prompts show beside a hung one, but never an application's beside its own: one flooding the queue with
    questions nobody answers has one dialog up however long they wait (it cannot fill the screen), and another
    application's question shows beside it at once (docs/robustness.md, "Prompts in several places")."""
    creator, flooder = programs
    real = another_application(creator, tmp_path, "real-app")
    keys = ["k%d" % n for n in range(5)]
    for key in keys + ["real"]:
        assert run(creator, bus, "store", key, "secret of " + key).returncode == 0
    prompting.set_pinentry_answers(["hang", "ok"])
    flooding = flood(flooder, bus, keys)
    try:
        wait_for_confirms(prompting, 1)
        time.sleep(4)
        assert len(arguments(prompting, "CONFIRM")) == 1, "the flood's other questions wait behind its first"
        asked = time.monotonic()
        read = lookup(real, bus, "real")
        waited = time.monotonic() - asked
        assert read.returncode == 0 and read.stdout == "secret of real\n", read.stderr
        assert waited < 5, "the other application waited %.1f s" % waited
        descriptions = arguments(prompting, "SETDESC")
        assert len(descriptions) == 2 and str(real) in descriptions[1], descriptions
    finally:
        for process in flooding:
            process.kill()
            process.wait()
