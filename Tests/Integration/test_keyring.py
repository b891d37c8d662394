"""python3-keyring (SecretService backend) against latchkeyd."""

import pytest


@pytest.fixture
def kr(daemon, session_env):
    import keyring
    from keyring.backends import SecretService
    backend = SecretService.Keyring()
    keyring.set_keyring(backend)
    return keyring


def test_set_get_delete_password(kr):
    kr.set_password("example.com", "alice", "s3cret")
    assert kr.get_password("example.com", "alice") == "s3cret"
    kr.set_password("example.com", "alice", "changed")
    assert kr.get_password("example.com", "alice") == "changed"
    assert kr.get_password("example.com", "bob") is None
    kr.delete_password("example.com", "alice")
    assert kr.get_password("example.com", "alice") is None


def test_credentials_and_unicode(kr):
    kr.set_password("svc ✓", "üser", "pässword ✓")
    assert kr.get_password("svc ✓", "üser") == "pässword ✓"
    credential = kr.get_credential("svc ✓", None)
    assert credential.username == "üser" and credential.password == "pässword ✓"


def test_delete_of_nothing_raises(kr):
    import keyring.errors
    with pytest.raises(keyring.errors.PasswordDeleteError):
        kr.delete_password("nothing", "here")
