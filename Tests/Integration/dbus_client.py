"""A raw D-Bus client (jeepney) for protocol tests: any message, any signature."""

from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.low_level import MessageType, HeaderFields
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
import os

SERVICE = "/org/freedesktop/secrets"
DEFAULT = "/org/freedesktop/secrets/aliases/default"
PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF", 16)


class Reply:
    def __init__(self, message):
        self.message = message
        self.is_error = message.header.message_type == MessageType.error
        self.error_name = message.header.fields.get(HeaderFields.error_name)
        self.body = message.body


class Client:
    def __init__(self, address):
        self.connection = open_dbus_connection(bus=address)

    def close(self):
        self.connection.close()

    @property
    def unique_name(self):
        return self.connection.unique_name

    def call(self, path, interface, member, signature=None, body=(), timeout=10):
        address = DBusAddress(path, bus_name="org.freedesktop.secrets", interface=interface)
        message = new_method_call(address, member, signature, body)
        return Reply(self.connection.send_and_get_reply(message, timeout=timeout))

    def ok(self, *args, **kwargs):
        reply = self.call(*args, **kwargs)
        assert not reply.is_error, f"{args[2]} failed: {reply.error_name} {reply.body}"
        return reply.body

    def service(self, member, signature=None, body=()):
        return self.ok(SERVICE, "org.freedesktop.Secret.Service", member, signature, body)

    def open_plain(self):
        return self.service("OpenSession", "sv", ("plain", ("s", "")))[1]

    def create_item(self, session, attributes, secret, label="L", collection=DEFAULT, replace=False,
                    parameters=b"", content_type="text/plain"):
        properties = {"org.freedesktop.Secret.Item.Label": ("s", label),
                      "org.freedesktop.Secret.Item.Attributes": ("a{ss}", attributes)}
        return self.ok(collection, "org.freedesktop.Secret.Collection", "CreateItem", "a{sv}(oayays)b",
                       (properties, (session, parameters, secret, content_type), replace))[0]


class DHClient:
    """The client side of dh-ietf1024-sha256-aes128-cbc-pkcs7, with a chosen private key."""

    def __init__(self, private=None, public_length=None):
        while True:
            self.private = private or int.from_bytes(os.urandom(128), "big") % (PRIME - 3) + 2
            self.public = pow(2, self.private, PRIME)
            encoded = self.public.to_bytes((self.public.bit_length() + 7) // 8, "big")
            if public_length is None or len(encoded) == public_length:
                self.public_bytes = encoded
                return
            private = None

    def derive(self, server_public):
        shared = pow(int.from_bytes(server_public, "big"), self.private, PRIME).to_bytes(128, "big")
        self.key = HKDF(algorithm=hashes.SHA256(), length=16, salt=b"", info=b"").derive(shared)

    def encrypt(self, plaintext):
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        data = padder.update(plaintext) + padder.finalize()
        encryptor = Cipher(algorithms.AES(self.key), modes.CBC(iv)).encryptor()
        return iv, encryptor.update(data) + encryptor.finalize()

    def decrypt(self, iv, ciphertext):
        decryptor = Cipher(algorithms.AES(self.key), modes.CBC(iv)).decryptor()
        data = decryptor.update(ciphertext) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        return unpadder.update(data) + unpadder.finalize()
