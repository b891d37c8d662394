import Foundation
import KeychainCore
import Posix
import Testing

@testable import KeychainStore

/// The secret of an item with a password of its own (``ItemPasswordEnvelope``): it opens with its password for
/// its own item only; anything else altered, cut, of another version or another item does not open; a keychain
/// counts wrong item passwords and a right one does not reset the count.
@Suite struct ItemPasswordEnvelopeTests {
    let item = ItemReference(itemClass: .genericPassword, identifier: Data(repeating: 0x11, count: 16))
    let kdf = KDFParameters.insecureForTesting

    private func seal(_ secret: String, _ password: String, for item: ItemReference? = nil) throws -> Data {
        try Array(secret.utf8).withUnsafeBytes { bytes in
            try Array(password.utf8).withUnsafeBytes { typed in
                try ItemPasswordEnvelope.seal(bytes, password: typed, item: item ?? self.item, kdf: kdf)
            }
        }
    }

    private func open(_ envelope: Data, _ password: String, for item: ItemReference? = nil) throws -> [UInt8] {
        let opened = try Array(password.utf8).withUnsafeBytes { typed in
            SharedSecret(try ItemPasswordEnvelope.open(envelope, password: typed, item: item ?? self.item))
        }
        return opened.withUnsafeBytes { [UInt8]($0) }
    }

    private func status(_ body: () throws -> Void) -> KeychainStatus? {
        do {
            try body()
            return nil
        } catch {
            return (error as? KeychainError)?.status ?? .internalComponent
        }
    }

    @Test func itOpensWithItsPasswordAndHoldsNoPlainSecret() throws {
        let envelope = try seal("the secret", "item pass")
        #expect(try open(envelope, "item pass") == Array("the secret".utf8))
        #expect(Array(envelope.prefix(5)) == Array("lkip".utf8) + [1])
        #expect(envelope.range(of: Data("the secret".utf8)) == nil)
        // A fresh salt and nonce each time.
        #expect(try seal("the secret", "item pass") != envelope)
        #expect(try open(try seal("", "item pass"), "item pass").isEmpty)
    }

    @Test func aWrongPasswordOrAnotherItemDoesNotOpen() throws {
        let envelope = try seal("the secret", "item pass")
        #expect(status { _ = try open(envelope, "item pas") } == .authFailed)
        let other = ItemReference(itemClass: .genericPassword, identifier: Data(repeating: 0x22, count: 16))
        #expect(status { _ = try open(envelope, "item pass", for: other) } == .authFailed)
        let otherClass = ItemReference(itemClass: .internetPassword, identifier: item.identifier)
        #expect(status { _ = try open(envelope, "item pass", for: otherClass) } == .authFailed)
    }

    @Test func everyAlteredByteFailsAndNothingOpens() throws {
        let envelope = try seal("the secret", "item pass")
        for index in envelope.indices {
            var altered = envelope
            altered[index] ^= 0x01
            let got = status { _ = try open(altered, "item pass") }
            // The header's marks and parameters make it unreadable (or not one); the rest fails authentication.
            #expect(got == .authFailed || got == .decode, "byte \(index)")
        }
    }

    @Test func cutOrOfAnotherVersionItIsNotRead() throws {
        let envelope = try seal("the secret", "item pass")
        for length in [0, 4, 14, 30, 31, 58, envelope.count - 1] {
            let got = status { _ = try open(Data(envelope.prefix(length)), "item pass") }
            #expect(got == .decode || got == .authFailed, "cut to \(length)")
        }
        #expect(status { _ = try open(Data(envelope.prefix(31 + 12 + 15)), "item pass") } == .decode)
        var version2 = envelope
        version2[4] = 2
        #expect(status { _ = try open(version2, "item pass") } == .decode)
        // scrypt parameters out of bounds (log2 N = 40) are refused before anything runs.
        var costly = envelope
        costly[5] = 40
        #expect(status { _ = try open(costly, "item pass") } == .decode)
        #expect(status { _ = try open(Data("not an envelope at all, just bytes".utf8), "item pass") } == .decode)
    }

    @Test func aKeychainCountsWrongItemPasswordsAndARightOneDoesNotResetTheCount() throws {
        let directory = try TemporaryDirectory()
        let keychain = try Keychain.create(at: directory.file("items.keychain-db"), password: "pw", kdf: kdf)
        let envelope = try seal("the secret", "item pass")
        func open(_ password: String) -> KeychainStatus? {
            status {
                _ = try Array(password.utf8).withUnsafeBytes { typed in
                    try keychain.openItemSecret(envelope, password: typed, item: item)
                }
            }
        }
        #expect(open("wrong") == .authFailed)
        #expect(open("wrong") == .authFailed)
        // The right one opens, and leaves the count at two wrong ones: with one more, the next try waits.
        #expect(open("item pass") == nil)
        #expect(keychain.passwordRetryWait() == 0)
        #expect(open("wrong") == .authFailed)
        #expect(keychain.passwordRetryWait() > 0)
        // Refused without trying while it waits, the right password too.
        #expect(open("item pass") == .authFailed)
    }
}
