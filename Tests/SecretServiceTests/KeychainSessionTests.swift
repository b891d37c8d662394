import DBus
import Foundation
import KeychainCore
import Posix
import Testing

@testable import Keychain1
@testable import SecretService

/// `org.latchkey.Keychain1`'s sessions in-process, with the client's half of the exchange (``DHClientKey``)
/// that `DaemonKeychain` uses: secrets sealed both ways, the session the caller's alone, replaced by a second
/// `OpenSession`, gone when the bus (not a client) says its owner left.
@Suite struct KeychainSessionTests {
    let login = "/org/latchkey/keychain/login"

    /// Opens a Diffie-Hellman session for `sender` and finishes the exchange as the client does.
    func open(_ daemon: InProcessDaemon, sender: String) throws -> (cipher: DHSessionCipher, path: String) {
        let key = try DHClientKey()
        let reply = try daemon.ok(
            Keychain1Interface.rootPath, Keychain1Interface.interface, "OpenSession",
            [.string(Keychain1Interface.sessionAlgorithm), .variant(.bytes(key.publicKey))], sender: sender)
        guard case .bytes(let serverKey) = try #require(reply.first).unwrapped, case .objectPath(let path)? = reply.last
        else { throw KeychainError(.decode, "OpenSession gave \(reply)") }
        return (try DHSessionCipher(serverPublicKey: serverKey, clientKey: key), path)
    }

    func add(_ daemon: InProcessDaemon, service: String, secret: [UInt8], sender: String) throws {
        try daemon.ok(
            login, Keychain1Interface.interface, "Add",
            [
                .string("genp"), Keychain1Interface.encode([.service: .string(service)] as ItemAttributes),
                .bytes(secret),
                .bool(true),
            ], sender: sender)
    }

    /// The secret bytes a `Search` for `service` returns to `sender`, as they crossed.
    func read(_ daemon: InProcessDaemon, service: String, sender: String) throws -> [UInt8] {
        var query = ItemQuery(.genericPassword)
        query.attributes = [.service: .string(service)]
        query.returning = [.data]
        let reply = try daemon.ok(
            login, Keychain1Interface.interface, "Search", [Keychain1Interface.encode(query)], sender: sender)
        guard case .array(_, let items)? = reply.first, let item = items.first,
            case .bytes(let bytes)? = item.unwrapped.variantPairs?["secret"]
        else { throw KeychainError(.decode, "Search gave \(reply)") }
        return bytes
    }

    func plaintext(_ cipher: DHSessionCipher, _ sealed: [UInt8]) throws -> [UInt8] {
        try cipher.unseal(sealed).withUnsafeBytes { [UInt8]($0) }
    }

    @Test func secretsAreSealedBothWaysForTheOwnerOnly() throws {
        let daemon = try InProcessDaemon()
        let (cipher, _) = try open(daemon, sender: ":1.40")
        let secret = Array("sealed in-process".utf8)
        try add(daemon, service: "one", secret: try secret.withUnsafeBytes { try cipher.seal($0) }, sender: ":1.40")
        let sealed = try read(daemon, service: "one", sender: ":1.40")
        #expect(sealed != secret && sealed.count == 16 + 32)
        #expect(try plaintext(cipher, sealed) == secret)
        // Another caller reads and writes plain: the session is not its own.
        #expect(try read(daemon, service: "one", sender: ":1.41") == secret)
        try add(daemon, service: "two", secret: Array("plain".utf8), sender: ":1.41")
        #expect(try plaintext(cipher, try read(daemon, service: "two", sender: ":1.40")) == Array("plain".utf8))
        // What does not decrypt under the owner's key: InvalidArgs.
        #expect(
            try daemon.errorName(
                login, Keychain1Interface.interface, "Unlock", [.bytes(Array("not sealed, 16+".utf8))], sender: ":1.40")
                == "org.freedesktop.DBus.Error.InvalidArgs")
    }

    @Test func aSecondOpenSessionReplacesTheFirstAndTheBusAloneEndsIt() throws {
        let daemon = try InProcessDaemon()
        try add(daemon, service: "one", secret: Array("kept".utf8), sender: ":1.50")
        let first = try open(daemon, sender: ":1.50")
        let second = try open(daemon, sender: ":1.50")
        #expect(
            try daemon.errorName(first.path, "org.freedesktop.Secret.Session", "Close", sender: ":1.50")
                == "org.freedesktop.Secret.Error.NoSuchObject")
        #expect(try plaintext(second.cipher, try read(daemon, service: "one", sender: ":1.50")) == Array("kept".utf8))
        // A client's word that the owner left is not believed; the bus's is.
        let forged = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            arguments: [.string(":1.50"), .string(":1.50"), .string("")])
        forged.stampAsDelivered(from: ":1.51", serial: 100)
        _ = daemon.daemon.handle(forged)
        #expect(daemon.daemon.keychainSessions[":1.50"] != nil)
        try daemon.leave(":1.50")
        #expect(daemon.daemon.keychainSessions.isEmpty && daemon.daemon.sessions.isEmpty)
    }
}
