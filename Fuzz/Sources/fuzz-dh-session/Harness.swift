// Fuzzes the Diffie-Hellman session input of the Secret Service (dh-ietf1024-sha256-aes128-cbc-pkcs7): the
// client's public key as OpenSession receives it, and the encrypted secrets a client sends (IV and ciphertext).
//
// Input: one byte choosing what, then:
//   0: the client public key (the rest); a session made from it must round-trip a secret;
//   1: an IV (a field: 2-byte length and bytes) and a ciphertext (the rest), decrypted by an established session;
//   2: a plaintext (the rest), encrypted by the client's half and decrypted by the server's: it must come back.
import FuzzSupport

@testable import Keychain1
@testable import Posix
@testable import SecretService

/// Fixed server private keys, so that a crash reproduces.
let serverPrivateKey: [UInt8] = [0x5e, 0xc2, 0xe7] + [UInt8](repeating: 0x42, count: 29)
let clientPrivateKey: [UInt8] = [0x31, 0x9a] + [UInt8](repeating: 0x17, count: 30)

/// Both halves of one session: the daemon's and a client's.
struct SessionPair {
    let server: DHSessionCipher
    let client: DHSessionCipher

    init() throws {
        let serverPublic = try DHSessionCipher(clientPublicKey: [2], serverPrivateKey: serverPrivateKey).serverPublicKey
        let clientPublic = try DHSessionCipher(clientPublicKey: [2], serverPrivateKey: clientPrivateKey).serverPublicKey
        server = try DHSessionCipher(clientPublicKey: clientPublic, serverPrivateKey: serverPrivateKey)
        client = try DHSessionCipher(clientPublicKey: serverPublic, serverPrivateKey: clientPrivateKey)
    }
}

nonisolated(unsafe) var pair: SessionPair?

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    do {
        pair = try SessionPair()
    } catch {
        fatalError("fuzz-dh-session: cannot set up a session: \(error)")
    }
    SeedCorpus.writeIfAsked {
        guard let pair else { return [] }
        let clientPublic = try DHSessionCipher(clientPublicKey: [2], serverPrivateKey: clientPrivateKey).serverPublicKey
        let (iv, value) = try pair.client.encrypt(Array("a secret".utf8))
        var decrypt = SeedBuilder()
        decrypt.byte(1)
        decrypt.field(iv)
        decrypt.raw(value)
        return [
            ("public-key", [0] + clientPublic), ("public-key-short", [0, 2]), ("decrypt", decrypt.bytes),
            ("round-trip", [2] + Array("hunter2".utf8)),
        ]
    }
    return 0
}

/// What `session` decrypts, copied out of its secret memory to compare; nil when it refuses.
private func decrypted(_ session: DHSessionCipher, _ iv: [UInt8], _ value: [UInt8]) -> [UInt8]? {
    guard let plaintext = try? session.decrypt(parameters: iv, value: value) else { return nil }
    return plaintext.withUnsafeBytes { [UInt8]($0) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    guard let pair else { return 0 }
    var input = FuzzInput(start, count)
    switch input.byte() % 3 {
    case 0:
        guard let session = try? DHSessionCipher(clientPublicKey: input.rest(), serverPrivateKey: serverPrivateKey)
        else { return 0 }
        guard session.serverPublicKey.count == DHSessionCipher.primeLength,
            let (iv, value) = try? session.encrypt(Array("probe".utf8)),
            decrypted(session, iv, value) == Array("probe".utf8)
        else { fatalError("a session from an accepted public key does not round-trip") }
    case 1:
        let iv = input.field()
        _ = try? pair.server.decrypt(parameters: iv, value: input.rest())
    default:
        let plaintext = input.rest()
        guard let (iv, value) = try? pair.client.encrypt(plaintext),
            decrypted(pair.server, iv, value) == plaintext
        else { fatalError("a secret does not survive the session") }
    }
    return 0
}
