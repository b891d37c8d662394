"""FprintdFingerprints (Sources/Fingerprint) against the real fprintd from Debian, the real polkitd and libfprint's
virtual reader on a private system bus (fprintd_system.py), driven through Tests/FingerprintCheck as an
unprivileged user (nobody), as latchkeyd runs as its user; and against fakes that own fprintd's name and answer
garbage, nothing, or are not root's, and a forger of fprintd's VerifyStatus (fake_fprintd.py).
docs/fingerprint.md says what these checks mean."""

import time

import pytest

from conftest import binary
from fprintd_system import FAKE_OWNER_POLICY, FprintdSystem, fprintd_system  # noqa: F401 (the fixture)

USER = "nobody"


@pytest.fixture
def check():
    return binary("fingerprint-check")


def test_an_enrolled_finger_matches_and_another_does_not(fprintd_system, check):
    fprintd_system.enroll(USER, "right-index-finger", "print-a")
    assert fprintd_system.verify_as(check, USER, scan="print-a")[0] == "matched"
    assert fprintd_system.verify_as(check, USER, scan="print-b")[0] == "not-matched"
    # Each check released the reader: the next one claims it again.
    assert fprintd_system.verify_as(check, USER, scan="print-a")[0] == "matched"


def test_a_retry_goes_on_and_a_reader_error_is_unavailable(fprintd_system, check):
    fprintd_system.enroll(USER, "right-index-finger", "print-a")
    # RETRY 0 (a scan to do again, verify-retry-scan with done false), then the finger.
    assert fprintd_system.verify_as(check, USER, device_commands=["RETRY 0", "SCAN print-a"])[0] == "matched"
    assert fprintd_system.verify_as(check, USER, device_commands=["RETRY 1", "SCAN print-b"])[0] == "not-matched"
    # ERROR 0: the driver fails (verify-unknown-error).
    verdict, _ = fprintd_system.verify_as(check, USER, device_commands=["ERROR 0"])
    assert verdict == "unavailable: the fingerprint reader failed (verify-unknown-error)"
    assert fprintd_system.verify_as(check, USER, scan="print-a")[0] == "matched"


def test_the_digest_follows_the_enrolled_fingers(fprintd_system, check):
    def digest():
        return fprintd_system.run_check(check, USER, "digest", USER)

    assert digest() == "none"
    fprintd_system.enroll(USER, "right-index-finger", "print-a")
    one = digest()
    assert len(one) == 64 and one != "none"
    assert digest() == one, "the digest is stable while the fingers stay"
    fprintd_system.enroll(USER, "left-thumb", "print-b")
    assert fprintd_system.enrolled(USER) == ["left-thumb", "right-index-finger"]
    two = digest()
    assert two not in ("none", one)
    fprintd_system.delete(USER, "left-thumb")
    assert digest() == one
    fprintd_system.delete(USER)
    assert digest() == "none"
    verdict, _ = fprintd_system.verify_as(check, USER, scan="print-a")
    assert verdict == "unavailable: no enrolled finger"


def test_no_enrolled_finger_is_unavailable(fprintd_system, check):
    verdict, seconds = fprintd_system.verify_as(check, USER, scan="print-a", seconds=10)
    assert verdict == "unavailable: no enrolled finger"
    assert seconds < 5


def test_no_finger_by_the_deadline_is_unavailable_and_releases_the_reader(fprintd_system, check):
    fprintd_system.enroll(USER, "right-index-finger", "print-a")
    # The virtual reader sleeps a minute instead of reading: a person who never touches it.
    verdict, seconds = fprintd_system.verify_as(check, USER, seconds=2, device_commands=["SLEEP 60000"])
    assert verdict == "unavailable: no finger on the reader within 2 s"
    assert 1.9 < seconds < 4
    # VerifyStop and Release went out: the reader is free for the next check.
    assert fprintd_system.verify_as(check, USER, scan="print-a")[0] == "matched"


def test_a_reader_held_by_another_client_is_unavailable_at_once(fprintd_system, check):
    fprintd_system.enroll(USER, "right-index-finger", "print-a")
    with fprintd_system.connection() as holder:
        fprintd_system.call(holder, "Claim", "s", (USER,))
        verdict, seconds = fprintd_system.verify_as(check, USER, scan="print-a", seconds=10)
        assert verdict == "unavailable: the fingerprint reader is in use"
        assert seconds < 5
        fprintd_system.call(holder, "Release")


def test_polkit_decides_who_may_verify(fprintd_system, check):
    # The rule fprintd_system writes allows root and nobody; `daemon` is left to polkit's defaults, which want
    # an active local session (allow_active=yes) that a process of the test does not have.
    fprintd_system.enroll("daemon", "right-index-finger", "print-a")
    verdict, _ = fprintd_system.verify_as(check, "daemon", scan="print-a", seconds=10)
    assert verdict == "unavailable: fprintd refused (polkit did not allow net.reactivated.fprint.device.verify)"
    assert fprintd_system.run_check(check, "daemon", "digest", "daemon") == "none"
    # nobody, whom the rule names, gets through the same fprintd.
    fprintd_system.enroll(USER, "right-index-finger", "print-a")
    assert fprintd_system.verify_as(check, USER, scan="print-a")[0] == "matched"


def test_no_reader_is_unavailable(check):
    with FprintdSystem(device=False) as system:
        verdict, seconds = system.verify_as(check, USER, scan="print-a", seconds=10)
        assert verdict == "unavailable: no fingerprint reader"
        assert seconds < 5
        assert system.run_check(check, USER, "digest", USER) == "none"
        assert system.run_check(check, USER, "present") == "yes"


def test_no_fprintd_is_unavailable(check):
    with FprintdSystem(fprintd=False, polkit=False) as system:
        verdict, seconds = system.verify_as(check, USER, seconds=10)
        assert verdict == "unavailable: fprintd is not available"
        assert seconds < 5
        assert system.run_check(check, USER, "digest", USER) == "none"
        assert system.run_check(check, USER, "present") == "no"


@pytest.mark.parametrize("mode", ["silent", "garbage", "bad-status", "no-verdict"])
def test_a_fake_fprintd_that_answers_garbage_or_nothing_is_unavailable_in_time(check, mode):
    """Abuse: a service owning net.reactivated.Fprint (as root, so only its answers are odd) that never answers,
    answers the wrong types, sends a malformed VerifyStatus or none: unavailable by the deadline, no crash."""
    with FprintdSystem(fprintd=False, polkit=False) as system:
        system.start_fake(mode)
        verdict, seconds = system.verify_as(check, USER, seconds=2)
        assert verdict.startswith("unavailable: "), verdict
        assert seconds < 4
        if mode in ("silent", "garbage"):
            started = time.monotonic()
            assert system.run_check(check, USER, "digest", USER, timeout=15) == "none"
            assert time.monotonic() - started < 7, "the digest is bounded by its 5 s"


def test_a_forged_verify_status_is_not_a_match(check):
    """Abuse: another program of the same user sends fprintd's VerifyStatus("verify-match", done) from the
    device's path, broadcast and straight to every connection, while the real owner of the name (root's) is
    waiting for a finger: the check takes signals only from that owner's unique name, and times out."""
    with FprintdSystem(fprintd=False, polkit=False) as system:
        system.start_fake("no-verdict")
        system.start_fake("forge", user=USER)
        verdict, seconds = system.verify_as(check, USER, seconds=2)
        assert verdict == "unavailable: no finger on the reader within 2 s"
        assert seconds < 4


def test_fprintd_s_name_owned_by_someone_not_root_is_refused(check):
    """Abuse: on a bus that lets anyone own net.reactivated.Fprint (the system bus lets only root), a service of
    the user's own that says verify-match is not believed."""
    with FprintdSystem(fprintd=False, polkit=False, extra_policy=FAKE_OWNER_POLICY) as system:
        system.start_fake("match", user=USER)
        verdict, _ = system.verify_as(check, USER, seconds=5)
        assert verdict == "unavailable: net.reactivated.Fprint is owned by uid 65534, not root: not fprintd"
        assert system.run_check(check, USER, "digest", USER) == "none"
    # The same fake as root is believed: what refused it above is its owner, not its answers.
    with FprintdSystem(fprintd=False, polkit=False) as system:
        system.start_fake("match")
        assert system.verify_as(check, USER, seconds=5)[0] == "matched"
