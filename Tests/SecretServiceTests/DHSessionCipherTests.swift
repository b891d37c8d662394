import Foundation
import Posix
import ProcessMemoryMaps
import Testing

@testable import Keychain1
@testable import SecretService

/// Checks `DHSessionCipher` against an independent client: python's `cryptography` package, the one
/// python-secretstorage uses, doing the client side of dh-ietf1024-sha256-aes128-cbc-pkcs7.
extension DHSessionCipher {
    /// The decrypted secret as an array, to compare (tests only).
    fileprivate func decryptedBytes(parameters: [UInt8], value: [UInt8]) throws(SessionCryptoError) -> [UInt8] {
        try decrypt(parameters: parameters, value: value).withUnsafeBytes { [UInt8]($0) }
    }
}

@Suite struct DHSessionCipherTests {
    /// Secrets of interesting lengths: empty, short, exactly one block, and several blocks.
    static let sampleSecrets: [[UInt8]] = [
        [],
        Array("hunter2".utf8),
        Array("0123456789abcdef".utf8),
        (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) },
    ]

    /// Secrets the server encrypts are decrypted by the python client.
    @Test func serverSecretsDecryptInPythonClient() throws {
        let client = try PythonClient.generateKey()
        let session = try DHSessionCipher(clientPublicKey: client.publicKey)
        let sealed = try Self.sampleSecrets.map { try session.encrypt($0) }
        let result = try client.exchange(serverPublicKey: session.serverPublicKey, fromServer: sealed)
        #expect(result.decrypted == Self.sampleSecrets)
    }

    /// Secrets the python client encrypts are decrypted by the server.
    @Test func pythonClientSecretsDecryptInServer() throws {
        let client = try PythonClient.generateKey()
        let session = try DHSessionCipher(clientPublicKey: client.publicKey)
        let result = try client.exchange(serverPublicKey: session.serverPublicKey, toServer: Self.sampleSecrets)
        let decrypted = try result.encrypted.map {
            try session.decryptedBytes(parameters: $0.parameters, value: $0.value)
        }
        #expect(decrypted == Self.sampleSecrets)
    }

    /// The empty secret is one block of padding on the wire and round-trips both ways.
    @Test func emptySecretRoundTrips() throws {
        let client = try PythonClient.generateKey()
        let session = try DHSessionCipher(clientPublicKey: client.publicKey)
        let sealed = try session.encrypt([])
        #expect(sealed.parameters.count == 16)
        #expect(sealed.value.count == 16)
        let result = try client.exchange(
            serverPublicKey: session.serverPublicKey, fromServer: [sealed], toServer: [[]])
        #expect(result.decrypted == [[]])
        let fromClient = try #require(result.encrypted.first)
        #expect(fromClient.value.count == 16)
        #expect(try session.decryptedBytes(parameters: fromClient.parameters, value: fromClient.value) == [])
    }

    /// A client public key whose big-endian encoding is 127 bytes or fewer (as secretstorage sends it, without
    /// leading zeros) is accepted, both as is and left-padded to 128 bytes, and both work.
    @Test func shortClientPublicKeyWorks() throws {
        let client = try PythonClient.generateKey(short: true)
        #expect((1...127).contains(client.publicKey.count))
        let padded = [UInt8](repeating: 0, count: 128 - client.publicKey.count) + client.publicKey
        for publicKey in [client.publicKey, padded] {
            try Self.expectRoundTrip(client: client, session: DHSessionCipher(clientPublicKey: publicKey))
        }
    }

    /// Tiny client public keys (private key 1 gives public key 2, one byte; 8 gives 256, two bytes) are valid
    /// group elements and work.
    @Test(arguments: [(1, [UInt8]([2])), (8, [1, 0])])
    func tinyClientPublicKeyWorks(privateKey: Int, expectedPublicKey: [UInt8]) throws {
        let client = try PythonClient.generateKey(privateKey: String(privateKey, radix: 16))
        #expect(client.publicKey == expectedPublicKey)
        try Self.expectRoundTrip(client: client, session: DHSessionCipher(clientPublicKey: client.publicKey))
    }

    /// The server public key is always 128 bytes, and each session has a fresh server key pair.
    @Test func serverPublicKeyIs128BytesAndFresh() throws {
        var seen = Set<[UInt8]>()
        for _ in 0..<64 {
            let session = try DHSessionCipher(clientPublicKey: [2])
            #expect(session.serverPublicKey.count == 128)
            seen.insert(session.serverPublicKey)
        }
        #expect(seen.count == 64)
    }

    /// Server private keys are 256-bit numbers at least 2: short enough to keep OpenSession cheap, long
    /// enough for the group (twice its 80-bit strength and more), and spread over the whole range.
    @Test func serverPrivateKeysAreDrawnFromTwoTo2Pow256() throws {
        var lengths: [Int] = []
        for _ in 0..<256 {
            let key = try OwnedNumber.secure()
            try DHSessionCipher.drawPrivateKey(into: key)
            lengths.append(key.bitCount)
        }
        #expect(lengths.allSatisfy { (2...DHSessionCipher.privateKeyBits).contains($0) })
        #expect(DHSessionCipher.privateKeyBits == 256)
        // Half of all draws have the top bit set; 256 draws without one would mean a skewed range.
        #expect(lengths.contains(256))
        #expect(lengths.filter { $0 == 256 }.count > 64)
    }

    /// A server public key below 2^1016 is sent left-padded with a zero byte to 128 bytes, and the client
    /// can use it.
    @Test func smallServerPublicKeyIsLeftPadded() throws {
        let client = try PythonClient.generateKey()
        let server = try PythonClient.serverKey(withLeadingZeroFor: nil)
        let session = try DHSessionCipher(clientPublicKey: client.publicKey, serverPrivateKey: server.privateKey)
        #expect(session.serverPublicKey == server.publicKey)
        #expect(session.serverPublicKey.count == 128)
        #expect(session.serverPublicKey.first == 0)
        try Self.expectRoundTrip(client: client, session: session)
    }

    /// A shared secret below 2^1016 is left-padded to 128 bytes before HKDF (as libsecret and gnome-keyring
    /// do): the client, which pads, gets the same AES key.
    @Test func shortSharedSecretIsLeftPadded() throws {
        let client = try PythonClient.generateKey()
        let server = try PythonClient.serverKey(withLeadingZeroFor: client)
        let session = try DHSessionCipher(clientPublicKey: client.publicKey, serverPrivateKey: server.privateKey)
        let result = try Self.expectRoundTrip(client: client, session: session)
        #expect(result.sharedSecretHasLeadingZero)
    }

    /// A client public key that must be rejected, named in test output instead of dumped.
    struct InvalidKey: CustomTestStringConvertible, Sendable {
        /// What is wrong with it.
        let name: String
        /// Its bytes.
        let bytes: [UInt8]
        /// The name.
        var testDescription: String { name }

        /// All the cases.
        static let all: [InvalidKey] = [
            InvalidKey(name: "empty", bytes: []),
            InvalidKey(name: "129 bytes: p after a zero byte", bytes: [0] + PythonClient.prime),
            InvalidKey(name: "129 bytes with a valid value", bytes: [UInt8](repeating: 0, count: 128) + [2]),
            InvalidKey(name: "0", bytes: [0]),
            InvalidKey(name: "0 in 128 bytes", bytes: [UInt8](repeating: 0, count: 128)),
            InvalidKey(name: "1", bytes: [1]),
            InvalidKey(name: "1 in 128 bytes", bytes: [UInt8](repeating: 0, count: 127) + [1]),
            InvalidKey(name: "p-1", bytes: PythonClient.prime.dropLast() + [PythonClient.prime[127] - 1]),
            InvalidKey(name: "p", bytes: PythonClient.prime),
            InvalidKey(name: "2^1024-1", bytes: [UInt8](repeating: 0xFF, count: 128)),
        ]
    }

    /// Public keys that are empty, too long, or outside [2, p-2] are rejected.
    @Test(arguments: InvalidKey.all)
    func invalidPublicKeyIsRejected(_ key: InvalidKey) throws {
        let error = #expect(throws: SessionCryptoError.self, "\(key.name)") {
            try DHSessionCipher(clientPublicKey: key.bytes)
        }
        #expect(Self.isInvalidPublicKey(error), "\(key.name): \(String(describing: error))")
    }

    /// The boundary values just inside [2, p-2] are accepted.
    @Test func publicKeyBoundsAreAccepted() throws {
        let primeMinusTwo = PythonClient.prime.dropLast() + [PythonClient.prime[127] - 2]
        for publicKey in [[2], Array(primeMinusTwo)] {
            #expect(try DHSessionCipher(clientPublicKey: publicKey).serverPublicKey.count == 128)
        }
    }

    /// Secrets with an IV that is not 16 bytes, or a ciphertext that is not a non-zero multiple of 16 bytes,
    /// are rejected; the same secret with correct lengths decrypts.
    @Test func malformedSecretIsRejected() throws {
        let session = try DHSessionCipher(clientPublicKey: [2])
        let sealed = try session.encrypt(Array("a secret".utf8))
        #expect(
            try session.decryptedBytes(parameters: sealed.parameters, value: sealed.value) == Array("a secret".utf8))
        let cases: [(String, [UInt8], [UInt8])] = [
            ("15-byte IV", Array(sealed.parameters.prefix(15)), sealed.value),
            ("17-byte IV", sealed.parameters + [0], sealed.value),
            ("empty IV", [], sealed.value),
            ("17-byte ciphertext", sealed.parameters, sealed.value + [0]),
            ("15-byte ciphertext", sealed.parameters, Array(sealed.value.prefix(15))),
            ("empty ciphertext", sealed.parameters, []),
        ]
        for (name, parameters, value) in cases {
            let error = #expect(throws: SessionCryptoError.self, "\(name)") {
                try session.decryptedBytes(parameters: parameters, value: value)
            }
            #expect(Self.isInvalidSecret(error), "\(name): \(String(describing: error))")
        }
    }

    /// Flipping bits of the last padding byte through the block before it (the IV for a one-block secret)
    /// makes it 0x00 or 0x11, which is certainly bad padding.
    @Test func tamperedPaddingIsRejected() throws {
        let session = try DHSessionCipher(clientPublicKey: [2])
        for plaintext in [[], Array("0123456789abcdef".utf8)] {
            let sealed = try session.encrypt(plaintext)
            #expect(try session.decryptedBytes(parameters: sealed.parameters, value: sealed.value) == plaintext)
            for mask: UInt8 in [0x01, 0x10] {
                var parameters = sealed.parameters
                var value = sealed.value
                if value.count == 16 {
                    parameters[15] ^= mask
                } else {
                    value[value.count - 17] ^= mask
                }
                let error = #expect(throws: SessionCryptoError.self) {
                    try session.decryptedBytes(parameters: parameters, value: value)
                }
                #expect(Self.isInvalidSecret(error), "\(String(describing: error))")
            }
        }
    }

    /// Blocks the python client encrypts without padding, whose last bytes are not valid PKCS#7 padding, are
    /// rejected; a control block with valid padding decrypts.
    @Test func clientBlockWithBadPaddingIsRejected() throws {
        let client = try PythonClient.generateKey()
        let session = try DHSessionCipher(clientPublicKey: client.publicKey)
        let body = [UInt8](repeating: 0x41, count: 14)
        let blocks: [[UInt8]] = [
            body + [0x41, 0x01],  // valid: one byte of padding
            body + [0x41, 0x00],  // a zero padding length
            body + [0x41, 0x11],  // a padding length above 16
            body + [0x41, 0xFF],
            body + [0x03, 0x02],  // claims two bytes of 0x02, but the other one is 0x03
            [UInt8](repeating: 0x10, count: 15) + [0x0F],  // claims 15 bytes of 0x0F
        ]
        let result = try client.exchange(serverPublicKey: session.serverPublicKey, rawBlocks: blocks)
        let control = try #require(result.raw.first)
        #expect(try session.decryptedBytes(parameters: control.parameters, value: control.value) == body + [0x41])
        for (block, sealed) in zip(blocks.dropFirst(), result.raw.dropFirst()) {
            let error = #expect(throws: SessionCryptoError.self, "\(block)") {
                try session.decryptedBytes(parameters: sealed.parameters, value: sealed.value)
            }
            #expect(Self.isInvalidSecret(error), "\(block): \(String(describing: error))")
        }
    }

    /// Every tamper of the last ciphertext block's last byte is accepted or rejected exactly as the python
    /// client's PKCS#7 check decides, and at least one of them is rejected with `invalidSecret`.
    @Test func tamperedLastBlockMatchesClientVerdict() throws {
        let client = try PythonClient.generateKey()
        let session = try DHSessionCipher(clientPublicKey: client.publicKey)
        let sealed = try session.encrypt(Array("correct horse battery staple".utf8))
        let tampered = (1...255).map { (mask: UInt8) -> (parameters: [UInt8], value: [UInt8]) in
            var value = sealed.value
            value[value.count - 1] ^= mask
            return (sealed.parameters, value)
        }
        let verdicts = try client.exchange(serverPublicKey: session.serverPublicKey, fromServer: tampered).decrypted
        #expect(verdicts.count == tampered.count)
        var rejected = 0
        for (secret, verdict) in zip(tampered, verdicts) {
            do throws(SessionCryptoError) {
                let plaintext = try session.decryptedBytes(parameters: secret.parameters, value: secret.value)
                #expect(plaintext == verdict)
            } catch {
                rejected += 1
                #expect(Self.isInvalidSecret(error), "\(error)")
                #expect(verdict == nil)
            }
        }
        #expect(rejected > 0)
    }

    /// Each encryption uses a fresh IV, so equal secrets do not look equal on the wire.
    @Test func encryptionUsesFreshIV() throws {
        let session = try DHSessionCipher(clientPublicKey: [2])
        let first = try session.encrypt(Array("same".utf8))
        let second = try session.encrypt(Array("same".utf8))
        #expect(first.parameters.count == 16)
        #expect(first.parameters != second.parameters)
        #expect(first.value != second.value)
    }

    /// Runs a round trip of `sampleSecrets` both ways between `session` and the python `client`, expecting
    /// both sides to read what the other wrote; returns the python side's report.
    @discardableResult
    static func expectRoundTrip(client: PythonClient, session: DHSessionCipher) throws -> PythonClient.Exchange {
        let sealed = try sampleSecrets.map { try session.encrypt($0) }
        let result = try client.exchange(
            serverPublicKey: session.serverPublicKey, fromServer: sealed, toServer: sampleSecrets)
        #expect(result.decrypted == sampleSecrets)
        let decrypted = try result.encrypted.map {
            try session.decryptedBytes(parameters: $0.parameters, value: $0.value)
        }
        #expect(decrypted == sampleSecrets)
        return result
    }
}

extension DHSessionCipherTests {
    /// Whether `error` is `invalidPublicKey`, whatever its message.
    static func isInvalidPublicKey(_ error: SessionCryptoError?) -> Bool {
        if case .invalidPublicKey = error { return true }
        return false
    }

    /// Whether `error` is `invalidSecret`, whatever its message.
    static func isInvalidSecret(_ error: SessionCryptoError?) -> Bool {
        if case .invalidSecret = error { return true }
        return false
    }
}

extension DHSessionCipherTests {
    /// The client side of the session algorithm, done by `/usr/bin/python3` with the `cryptography` package.
    ///
    /// Each call runs the script once with a JSON request on standard input; the client private key travels
    /// between calls as hex.
    struct PythonClient {
        /// The RFC 2409 Second Oakley Group prime (section 6.2), big-endian, written out independently of OpenSSL.
        static let prime: [UInt8] = bytes(
            fromHex: "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"
                + "020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"
                + "4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
                + "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF")

        /// The client private key, hex.
        let privateKey: String
        /// The client public key, big-endian without leading zeros (as secretstorage sends it).
        let publicKey: [UInt8]

        /// What the python client reports after deriving the AES key from a server public key.
        struct Exchange {
            /// Whether the 128-byte shared secret starts with a zero byte.
            let sharedSecretHasLeadingZero: Bool
            /// The secrets from the server as the client decrypted them; nil where the padding was bad.
            let decrypted: [[UInt8]?]
            /// The secrets the client encrypted for the server (IV and padded ciphertext).
            let encrypted: [(parameters: [UInt8], value: [UInt8])]
            /// The raw blocks the client encrypted without padding.
            let raw: [(parameters: [UInt8], value: [UInt8])]
        }

        /// A server key pair chosen by the python side.
        struct ServerKey {
            /// The server private key, big-endian.
            let privateKey: [UInt8]
            /// The server public key it gives, 128 bytes.
            let publicKey: [UInt8]
        }

        /// Generates a client key pair: a random one whose public key is 127 bytes or fewer if `short`, a random
        /// one if not, or the one for `privateKey` (hex) if given.
        static func generateKey(short: Bool = false, privateKey: String? = nil) throws -> PythonClient {
            let response = try run(Request(op: "keygen", privateKey: privateKey, short: short))
            let publicKey = bytes(fromHex: try #require(response.publicKey))
            return PythonClient(privateKey: try #require(response.privateKey), publicKey: publicKey)
        }

        /// Finds a random server private key whose public key (if `client` is nil) or whose shared secret with
        /// `client` is below 2^1016, so that its 128-byte encoding starts with a zero byte.
        static func serverKey(withLeadingZeroFor client: PythonClient?) throws -> ServerKey {
            let response = try run(Request(op: "serverkey", privateKey: client?.privateKey))
            return ServerKey(
                privateKey: bytes(fromHex: try #require(response.serverPrivateKey)),
                publicKey: bytes(fromHex: try #require(response.serverPublicKey)))
        }

        /// Derives the AES key from the server public key, decrypts `fromServer`, encrypts `toServer` with padding
        /// and `rawBlocks` (each 16 bytes) without.
        func exchange(
            serverPublicKey: [UInt8], fromServer: [(parameters: [UInt8], value: [UInt8])] = [],
            toServer: [[UInt8]] = [], rawBlocks: [[UInt8]] = []
        ) throws -> Exchange {
            let request = Request(
                op: "exchange", privateKey: privateKey, serverPublicKey: Self.hex(serverPublicKey),
                fromServer: fromServer.map { Sealed(iv: Self.hex($0.parameters), ciphertext: Self.hex($0.value)) },
                toServer: toServer.map(Self.hex), rawBlocks: rawBlocks.map(Self.hex))
            let response = try Self.run(request)
            let unseal = { (sealed: Sealed) in
                (parameters: Self.bytes(fromHex: sealed.iv), value: Self.bytes(fromHex: sealed.ciphertext))
            }
            return Exchange(
                sharedSecretHasLeadingZero: try #require(response.sharedLeadingZero as Bool?),
                decrypted: try #require(response.decrypted).map { $0.map { Self.bytes(fromHex: $0) } },
                encrypted: try #require(response.encrypted).map(unseal),
                raw: try #require(response.raw).map(unseal))
        }

        /// An encrypted secret as hex.
        struct Sealed: Codable {
            /// The IV, hex.
            var iv: String
            /// The ciphertext, hex.
            var ciphertext: String
        }

        /// A request to the python script.
        struct Request: Encodable {
            /// "keygen", "serverkey" or "exchange".
            var op: String
            /// The client private key, hex.
            var privateKey: String?
            /// For "keygen": whether the public key must be 127 bytes or fewer.
            var short = false
            /// For "exchange": the server public key, hex.
            var serverPublicKey: String?
            /// For "exchange": secrets to decrypt.
            var fromServer: [Sealed] = []
            /// For "exchange": secrets to encrypt with padding, hex.
            var toServer: [String] = []
            /// For "exchange": 16-byte blocks to encrypt without padding, hex.
            var rawBlocks: [String] = []
        }

        /// A response of the python script.
        struct Response: Decodable {
            /// From "keygen": the client private key, hex.
            var privateKey: String?
            /// From "keygen": the client public key, minimal big-endian, hex.
            var publicKey: String?
            /// From "serverkey": the server private key, hex.
            var serverPrivateKey: String?
            /// From "serverkey": the expected server public key, 128 bytes, hex.
            var serverPublicKey: String?
            /// From "exchange": whether the padded shared secret starts with a zero byte.
            var sharedLeadingZero: Bool?
            /// From "exchange": decrypted secrets, hex, or nil for bad padding.
            var decrypted: [String?]?
            /// From "exchange": secrets encrypted with padding.
            var encrypted: [Sealed]?
            /// From "exchange": blocks encrypted without padding.
            var raw: [Sealed]?
        }

        /// A failure of the python script.
        struct Failure: Error, CustomStringConvertible {
            /// The script's exit status and standard error.
            var description: String
        }

        /// Runs the script with `request` and decodes its answer.
        static func run(_ request: Request) throws -> Response {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", script]
            let input = Pipe()
            let output = Pipe()
            let errors = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            try input.fileHandleForWriting.write(contentsOf: JSONEncoder().encode(request))
            try input.fileHandleForWriting.close()
            let answer = output.fileHandleForReading.readDataToEndOfFile()
            let diagnostics = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw Failure(
                    description: "python3 exited with \(process.terminationStatus): "
                        + String(decoding: diagnostics, as: UTF8.self))
            }
            return try JSONDecoder().decode(Response.self, from: answer)
        }

        /// The python client. It derives the key as libsecret does: the shared secret left-padded to 128 bytes,
        /// HKDF-SHA256 with empty salt and info, 16 bytes.
        static let script = #"""
            import json
            import os
            import sys

            from cryptography.hazmat.primitives import hashes, padding
            from cryptography.hazmat.primitives.asymmetric import dh
            from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            P = int("\#(hex(prime))", 16)
            GROUP = dh.DHParameterNumbers(P, 2)


            def minimal(n):
                return n.to_bytes((n.bit_length() + 7) // 8, "big")


            def client_key(x):
                return dh.DHPrivateNumbers(x, dh.DHPublicNumbers(pow(2, x, P), GROUP)).private_key()


            def encrypt(key, data, pad):
                if pad:
                    padder = padding.PKCS7(128).padder()
                    data = padder.update(data) + padder.finalize()
                iv = os.urandom(16)
                encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
                return {"iv": iv.hex(), "ciphertext": (encryptor.update(data) + encryptor.finalize()).hex()}


            def decrypt(key, sealed):
                decryptor = Cipher(algorithms.AES(key), modes.CBC(bytes.fromhex(sealed["iv"]))).decryptor()
                data = decryptor.update(bytes.fromhex(sealed["ciphertext"])) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                try:
                    return (unpadder.update(data) + unpadder.finalize()).hex()
                except ValueError:
                    return None


            request = json.load(sys.stdin)
            if request["op"] == "keygen":
                if request.get("privateKey"):
                    key = client_key(int(request["privateKey"], 16))
                else:
                    parameters = GROUP.parameters()
                    while True:
                        key = parameters.generate_private_key()
                        if not request["short"] or len(minimal(key.public_key().public_numbers().y)) <= 127:
                            break
                response = {
                    "privateKey": format(key.private_numbers().x, "x"),
                    "publicKey": minimal(key.public_key().public_numbers().y).hex(),
                }
            elif request["op"] == "serverkey":
                base = pow(2, int(request["privateKey"], 16), P) if request.get("privateKey") else 2
                for _ in range(100000):
                    s = 2 + int.from_bytes(os.urandom(128), "big") % (P - 3)
                    if pow(base, s, P) < 1 << 1016:
                        break
                else:
                    sys.exit("no server key found")
                response = {
                    "serverPrivateKey": minimal(s).hex(),
                    "serverPublicKey": pow(2, s, P).to_bytes(128, "big").hex(),
                }
            elif request["op"] == "exchange":
                server = dh.DHPublicNumbers(int(request["serverPublicKey"], 16), GROUP).public_key()
                shared = client_key(int(request["privateKey"], 16)).exchange(server)
                shared = int.from_bytes(shared, "big").to_bytes(128, "big")
                key = HKDF(algorithm=hashes.SHA256(), length=16, salt=b"", info=b"").derive(shared)
                response = {
                    "sharedLeadingZero": shared[0] == 0,
                    "decrypted": [decrypt(key, sealed) for sealed in request["fromServer"]],
                    "encrypted": [encrypt(key, bytes.fromhex(data), True) for data in request["toServer"]],
                    "raw": [encrypt(key, bytes.fromhex(data), False) for data in request["rawBlocks"]],
                }
            else:
                sys.exit("unknown op")
            json.dump(response, sys.stdout)
            """#

        /// Lowercase hex of `bytes`.
        static func hex(_ bytes: [UInt8]) -> String {
            bytes.map { String(format: "%02x", $0) }.joined()
        }

        /// The bytes of an even-length hex string (an odd length gets a leading zero nibble).
        static func bytes(fromHex text: String) -> [UInt8] {
            let digits = Array((text.count % 2 == 1 ? "0" : "") + text)
            return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16) ?? 0 }
        }
    }
}

/// A secret a client sends lands in secret memory, with nothing left behind in what it was decoded from.
@Suite struct SessionSecretMemoryTests {
    /// A plain session's secret is copied into secret memory and the array libdbus's decoding produced (shared
    /// with every copy of the message's value) is wiped in place, short or long.
    @Test(arguments: [4, 14, 15, 300])
    func aPlainSessionWipesTheDecodedArray(_ count: Int) throws {
        let session = SecretSession(path: "/s/1", owner: ":1.1", algorithm: .plain)
        let sent = (0..<count).map { UInt8(truncatingIfNeeded: 0x41 + $0 % 26) }
        // Storage of its own (Array(sent) would share sent's).
        var value: [UInt8] = []
        value.append(contentsOf: sent)
        let sharedCopy = value
        let secret = try session.decode(parameters: [], value: value)
        #expect(secret.withUnsafeBytes { $0.elementsEqual(sent) })
        #expect(sharedCopy.allSatisfy { $0 == 0 })
    }

    /// A DH session decrypts a client's secret straight into secret memory (pages no core dump holds).
    @Test func aDHSessionDecryptsIntoSecretMemory() throws {
        let client = try DHSessionCipherTests.PythonClient.generateKey()
        let cipher = try DHSessionCipher(clientPublicKey: client.publicKey)
        let text = Array("a secret sent through a DH session".utf8)
        let result = try client.exchange(serverPublicKey: cipher.serverPublicKey, fromServer: [], toServer: [text])
        let sent = try #require(result.encrypted.first)
        let session = SecretSession(path: "/s/2", owner: ":1.1", algorithm: .diffieHellman(cipher))
        let secret = try session.decode(parameters: sent.parameters, value: sent.value)
        #expect(secret.withUnsafeBytes { $0.elementsEqual(text) })
        let page = secret.bytes.pageAddress
        let address = try #require(page)
        #expect(try #require(mappingFlags(at: address)).contains("dd"))
    }
}
