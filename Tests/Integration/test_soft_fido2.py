"""Tests/Support/soft-fido2 against an independent CTAP2 client, Yubico's python-fido2 (Debian's 0.9.1), over the
seam's framing: what the Swift tests cannot reach through Latchkey's API (setPIN, changePIN, reset as CTAP commands)
and a check that the soft key's attestation and signatures are what a client verifies. Debian's fido2-token cannot
be pointed at a `unix:` device, so this is the cross-check the test authenticator gets."""

import hashlib
import os

import pytest
from fido2.attestation import PackedAttestation
from fido2.cose import ES256
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.extensions import HmacSecretExtension
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2

from soft_fido2 import SocketCtapDevice, SoftFido2

RP = {"id": "latchkey:test", "name": "latchkey"}
USER = {"id": b"user", "name": "user"}
ES256_PARAMS = [{"type": "public-key", "alg": -7}]


@pytest.fixture
def key(tmp_path):
    soft = SoftFido2(tmp_path / "key")
    yield soft
    soft.stop()


def client(soft):
    return Ctap2(SocketCtapDevice(soft.socket_path))


def test_get_info_says_what_the_key_can_do(key):
    info = client(key).get_info()
    assert "FIDO_2_1" in info.versions
    assert {"hmac-secret", "credProtect"} <= set(info.extensions)
    assert len(info.aaguid) == 16
    assert info.options["clientPin"] is False
    assert set(info.pin_uv_protocols) == {1, 2}


def token(pins, pin):
    """A PIN token for getAssertion (CTAP 2.1 wants permissions with the PIN: python-fido2 0.9.1 sends none unless
    asked, and a 2.1 key refuses that)."""
    return pins.get_pin_token(pin, permissions=ClientPin.PERMISSION.GET_ASSERTION, permissions_rpid=RP["id"])


@pytest.mark.parametrize("protocol", [PinProtocolV1, PinProtocolV2])
def test_set_change_and_count_pins(key, protocol):
    pins = ClientPin(client(key), protocol())
    pins.set_pin("1234")
    assert pins.get_pin_retries()[0] == 8
    assert token(pins, "1234")
    with pytest.raises(CtapError) as wrong:
        token(pins, "9999")
    assert wrong.value.code == CtapError.ERR.PIN_INVALID
    assert ClientPin(client(key), protocol()).get_pin_retries()[0] == 7
    pins = ClientPin(client(key), protocol())
    pins.change_pin("1234", "56789")
    with pytest.raises(CtapError) as old:
        token(pins, "1234")
    assert old.value.code == CtapError.ERR.PIN_INVALID
    assert token(ClientPin(client(key), protocol()), "56789")
    # A PIN cannot be set twice (changePIN is for that).
    with pytest.raises(CtapError):
        ClientPin(client(key), protocol()).set_pin("0000")


def test_attestation_and_signatures_verify_and_reset_forgets_everything(key):
    ctap = client(key)
    cdh = hashlib.sha256(b"client data").digest()
    made = ctap.make_credential(cdh, RP, USER, ES256_PARAMS, extensions={"hmac-secret": True})
    PackedAttestation().verify(made.att_statement, made.auth_data, cdh)  # self attestation: raises if wrong
    assert made.auth_data.extensions == {"hmac-secret": True}
    credential = made.auth_data.credential_data
    assert len(credential.credential_id) > 16
    descriptor = {"type": "public-key", "id": credential.credential_id}
    asserted = ctap.get_assertion(RP["id"], cdh, [descriptor])
    asserted.verify(cdh, ES256(credential.public_key))
    assert asserted.auth_data.counter > made.auth_data.counter
    # Another rp id, or bytes of a credential id flipped: not this key's.
    with pytest.raises(CtapError) as other:
        ctap.get_assertion("latchkey:other", cdh, [descriptor])
    assert other.value.code == CtapError.ERR.NO_CREDENTIALS
    flipped = bytearray(credential.credential_id)
    flipped[-1] ^= 1
    with pytest.raises(CtapError):
        ctap.get_assertion(RP["id"], cdh, [{"type": "public-key", "id": bytes(flipped)}])
    ClientPin(ctap).set_pin("1234")
    ctap.reset()
    with pytest.raises(CtapError) as gone:
        client(key).get_assertion(RP["id"], cdh, [descriptor])
    assert gone.value.code == CtapError.ERR.NO_CREDENTIALS
    assert client(key).get_info().options["clientPin"] is False


def test_no_touch_times_out(key):
    key.set_touch(False)
    with pytest.raises(CtapError) as timeout:
        client(key).make_credential(os.urandom(32), RP, USER, ES256_PARAMS)
    assert timeout.value.code == CtapError.ERR.USER_ACTION_TIMEOUT


def test_two_state_files_are_two_keys_and_a_restart_is_the_same_key(tmp_path):
    first, second = SoftFido2(tmp_path / "a"), SoftFido2(tmp_path / "b")
    try:
        cdh = os.urandom(32)
        made = client(first).make_credential(cdh, RP, USER, ES256_PARAMS)
        descriptor = {"type": "public-key", "id": made.auth_data.credential_data.credential_id}
        assert client(first).get_info().aaguid != client(second).get_info().aaguid
        with pytest.raises(CtapError):
            client(second).get_assertion(RP["id"], cdh, [descriptor], options={"up": False})
        first.restart()
        client(first).get_assertion(RP["id"], cdh, [descriptor], options={"up": False})
    finally:
        first.stop()
        second.stop()


@pytest.mark.parametrize("protocol", [PinProtocolV1, PinProtocolV2])
def test_hmac_secret_with_one_and_two_salts(key, protocol):
    ctap = client(key)
    cdh = os.urandom(32)
    made = ctap.make_credential(cdh, RP, USER, ES256_PARAMS, extensions={"hmac-secret": True})
    descriptor = {"type": "public-key", "id": made.auth_data.credential_data.credential_id}
    salt1, salt2 = b"\x01" * 32, b"\x02" * 32

    def outputs(**salts):
        extension = HmacSecretExtension(ctap, protocol())
        request = extension.process_get_input({"hmacGetSecret": salts})
        asserted = ctap.get_assertion(RP["id"], cdh, [descriptor], extensions={"hmac-secret": request})
        return extension.process_get_output(asserted.auth_data)["hmacGetSecret"]

    both = outputs(salt1=salt1, salt2=salt2)
    assert both["output1"] == outputs(salt1=salt1)["output1"]
    assert both["output2"] == outputs(salt1=salt2)["output1"]
    assert both["output1"] != both["output2"] and len(both["output1"]) == 32
