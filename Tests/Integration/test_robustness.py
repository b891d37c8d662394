"""Fault and load tests with small counts (scripts/stress runs them with the full ones and prints figures):
SIGKILL during writes, concurrent clients, sessions and calls and prompts left mid-way, a prompt storm with
the right password, a full disk; and prompts on a real bus: callers that leave end their pinentry at once,
and the next request gets its own turn. The properties are asserted, not the timings (the bound on how long
a pinentry outlives its caller is far below the pinentry's own timeout, not a speed target)."""

import json
import os
import pathlib
import sys
import time

import pytest

from conftest import LOGIN_PASSWORD, binary
from dbus_client import Client

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "Benchmarks"))
import robustness  # noqa: E402

LOGIN = "/org/freedesktop/secrets/collection/login"
PROMPT = "org.freedesktop.Secret.Prompt"


@pytest.fixture
def latchkeyd():
    return binary("latchkeyd")


def test_sigkill_during_writes_loses_nothing_acknowledged(latchkeyd):
    figures = robustness.scenario_kill("latchkeyd", latchkeyd, kills=4, clients=3, seed=7)
    assert figures["acknowledged"] > 0 and figures["restarts"] == 4, figures
    for name in ("lost", "resurrected", "wrong", "duplicates", "integrity_failures", "restart_failures"):
        assert figures[name] == 0, figures


def test_concurrent_clients_get_no_error_and_lose_no_write(latchkeyd):
    figures = robustness.scenario_load("latchkeyd", latchkeyd, clients=8, seconds=3)
    assert figures["operations"] > 0 and figures["items_checked"] > 0, figures
    assert figures["errors"] == 0 and figures["lost_writes"] == 0 and figures["alive"], figures


def test_sessions_calls_and_prompts_left_midway_leave_nothing_behind(latchkeyd):
    figures = robustness.scenario_sessions("latchkeyd", latchkeyd, sessions=1000, connections=20, mid_call=50,
                                           mid_prompt=40, timed_prompts=5, workers=8)
    before = figures["before"]
    for phase in ("after_sessions", "after_mid_call", "after_mid_prompt"):
        for name in ("fds", "threads", "children"):
            assert figures[phase][name] <= before[name], (phase, figures)
    assert figures["one_second_after_burst"]["children"] == 0, figures
    # One pinentry at a time, ended when its caller left (its own timeout is 120 s).
    assert figures["burst_peak_children"] <= 1, figures
    assert figures["pinentry_outlived_caller_ms"]["count"] == 5, figures
    assert figures["pinentry_outlived_caller_ms"]["max"] < 10_000, figures
    assert figures["alive"], figures


def test_prompt_storm_with_the_right_password_never_completes_dismissed(latchkeyd):
    figures = robustness.scenario_prompts(latchkeyd, clients=5, per_client=3, lock_every=0.05)
    assert figures["errors"] == 0 and figures["completed"] == figures["prompts"], figures
    assert figures["dismissed"] == 0, figures
    assert figures["peak_children"] <= 1, figures
    assert figures["pinentries"] < figures["prompts"], figures
    for name in ("fds", "threads", "children"):
        assert figures["after"][name] <= figures["before"][name], figures


def test_a_prompt_flood_of_one_application_does_not_keep_another_waiting(latchkeyd):
    """Docs/robustness.md, "Fair prompts": with 10 questions of one application waiting (asked again whenever
    they end), another application's question is shown next, not after the flood."""
    figures = robustness.scenario_prompt_flood(latchkeyd, flood=10, answer_seconds=0.5)
    assert figures["real_outcome"] == "secret", figures
    assert figures["shown_before_real"] is not None and figures["shown_before_real"] <= 1, figures
    assert figures["real_waited_s"] < 10, figures


def test_own_password_prompt_storm_takes_turns_never_completes_dismissed_and_leaves_no_pinentry(latchkeyd):
    figures = robustness.scenario_own_prompts(latchkeyd, clients=4, per_client=3, lock_every=0.05)
    assert figures["errors"] == 0 and figures["completed"] == figures["prompts"], figures
    assert figures["dismissed"] == 0, figures
    # One pinentry at a time, and concurrent Unlocks of the collection share one.
    assert figures["peak_children"] <= 1, figures
    left = figures["left"]
    assert left["peak_children"] <= 1, figures
    assert left["pinentries_one_second_after"] == 0, figures
    for name in ("fds", "threads", "children"):
        assert figures["after"][name] <= figures["before"][name], figures
        assert left["after"][name] <= figures["before"][name], figures
    assert figures["alive"], figures


def test_a_change_prompts_pinentry_ends_within_a_second_of_its_caller_leaving(make_daemon, bus):
    daemon = make_daemon(answers=["hang"]).start()
    client = Client(bus.address)
    collection = robustness.create_own_password_collection(client, "Own", "own password")
    prompt = robustness.own_password_prompt(client, collection, change=True)
    client.ok(prompt, PROMPT, "Prompt", "s", ("",))
    assert wait_until(lambda: hanging_pinentries(daemon)), daemon.pinentry_log()
    (pid,) = hanging_pinentries(daemon)
    client.close()
    assert wait_until(lambda: robustness.gone(pid), seconds=1.0), "still alive a second after its caller left"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_full_disk_refuses_writes_clearly_serves_reads_and_loses_nothing(latchkeyd):
    figures = robustness.scenario_full_disk(latchkeyd, size_mib=8, items_before=10)
    assert figures["writes_refused"] > 0, figures
    assert all("errSecDiskFull" in error for error in figures["refusal_errors"]), figures
    assert figures["alive_while_full"], figures
    read, total = figures["reads_while_full"].split("/")
    assert read == total, figures
    assert figures["writes_after_freeing"] == "10/10", figures
    assert figures["lost"] == 0 and figures["integrity"] == "ok", figures


def hanging_pinentries(daemon):
    return [json.loads(line)["pid"] for line in daemon.pinentry_log().splitlines()
            if json.loads(line)["command"] == "HANGING"]


def wait_until(condition, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def show_unlock_prompt(bus):
    client = Client(bus.address)
    unlocked, prompt = client.service("Unlock", "ao", ([LOGIN],))
    assert unlocked == [] and prompt != "/"
    client.ok(prompt, PROMPT, "Prompt", "s", ("",))
    return client, prompt


def test_a_pinentry_ends_when_its_last_caller_leaves_and_the_next_gets_its_turn(make_daemon, bus):
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    daemon = make_daemon(answers=["hang", f"password {LOGIN_PASSWORD}"]).start()
    locker = Client(bus.address)
    locker.service("Lock", "ao", ([LOGIN],))
    before = robustness.probe(daemon.process.pid)

    first, _ = show_unlock_prompt(bus)
    assert wait_until(lambda: hanging_pinentries(daemon)), daemon.pinentry_log()
    (pid,) = hanging_pinentries(daemon)
    second, _ = show_unlock_prompt(bus)
    first.close()
    time.sleep(0.5)
    assert robustness.children_of(daemon.process.pid) == [pid], "the second caller still waits for it"
    second.close()
    assert wait_until(lambda: robustness.gone(pid), seconds=10), "ended once nobody waits for it"
    assert hanging_pinentries(daemon) == [pid], "both callers shared one pinentry"

    third = Client(bus.address)
    _, prompt = third.service("Unlock", "ao", ([LOGIN],))
    rule = MatchRule(type="signal", interface=PROMPT, member="Completed", path=prompt)
    Proxy(message_bus, third.connection).AddMatch(rule)
    with third.connection.filter(rule) as queue:
        third.ok(prompt, PROMPT, "Prompt", "s", ("",))
        completed = third.connection.recv_until_filtered(queue, timeout=30)
    assert completed.body == (False, ("ao", [LOGIN]))
    third.close()
    locker.close()
    after = robustness.settle_probe(daemon.process.pid, before)
    assert after["children"] == 0 and after["threads"] <= before["threads"], (before, after)
