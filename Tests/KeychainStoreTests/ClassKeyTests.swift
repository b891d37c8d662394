import Foundation
import KeychainCore
import Posix
import Testing

@testable import KeychainStore

/// Accessibility classes as keys (docs/key-hierarchy.md): each class's key wrapped by the keychain key, items
/// sealed under their class's key, and `AfterFirstUnlock` keys outlasting a lock.
@Suite struct ClassKeyTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.file("classes.keychain-db")
    }

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Fixtures")

    func newKeychain() throws -> Keychain {
        try Keychain.create(at: path, password: "pw", kdf: .production)
    }

    func add(_ keychain: Keychain, _ account: String, _ accessibility: Accessibility?) throws {
        var attributes: ItemAttributes = [.account: .string(account), .service: .string("svc")]
        if let accessibility { attributes[.accessible] = .string(accessibility.rawValue) }
        try keychain.add(.genericPassword, attributes: attributes, secret: Data("secret \(account)".utf8))
    }

    func secret(_ keychain: Keychain, _ account: String) throws -> Data? {
        try keychain.items(matching: genericQuery(account, returning: .data)).first?.secret
    }

    @Test func afterFirstUnlockItemsStayReadableWhileLocked() throws {
        let keychain = try newKeychain()
        try add(keychain, "plain", nil)
        try add(keychain, "wu", .whenUnlocked)
        try add(keychain, "afu", .afterFirstUnlock)
        try add(keychain, "afu-tdo", .afterFirstUnlockThisDeviceOnly)
        try add(keychain, "wu-tdo", .whenUnlockedThisDeviceOnly)

        keychain.lock()
        #expect(keychain.isLocked)
        #expect(
            keychain.readableClasses == [
                .afterFirstUnlock, .always, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
            ])
        #expect(try secret(keychain, "afu") == Data("secret afu".utf8))
        #expect(try secret(keychain, "afu-tdo") == Data("secret afu-tdo".utf8))
        for account in ["plain", "wu", "wu-tdo"] {
            #expect(statusOf { _ = try secret(keychain, account) } == .interactionNotAllowed, "\(account)")
        }
        // A query over every item returns the readable ones with their attributes; references alone, all of them.
        let all = ItemQuery(
            .genericPassword, attributes: [.service: .string("svc")], limit: .all, returning: .attributes)
        let readable = try keychain.items(matching: all).compactMap { $0.attributes?[.account] }
        #expect(Set(readable) == [.string("afu"), .string("afu-tdo")])
        let references = ItemQuery(.genericPassword, attributes: [.service: .string("svc")], limit: .all)
        #expect(try keychain.items(matching: references).count == 5)
        // Changes still need the keychain unlocked.
        #expect(
            statusOf { try keychain.update(matching: genericQuery("afu"), with: ItemChanges(secret: Data("x".utf8))) }
                == .interactionNotAllowed)

        // Logout, the daemon's exit, `lock-keychain --all-classes`: every class key goes.
        keychain.lock(allClasses: true)
        #expect(keychain.readableClasses.isEmpty)
        #expect(statusOf { _ = try secret(keychain, "afu") } == .interactionNotAllowed)

        try keychain.unlock(password: "pw")
        #expect(keychain.readableClasses == Set(Accessibility.allCases))
        for account in ["plain", "wu", "afu", "afu-tdo", "wu-tdo"] {
            #expect(try secret(keychain, account) == Data("secret \(account)".utf8))
        }
    }

    @Test func aFileOpenedLockedReadsNoClassUntilItsFirstUnlock() throws {
        let made = try newKeychain()
        try add(made, "afu", .afterFirstUnlock)
        let keychain = try Keychain(opening: path)
        #expect(keychain.readableClasses.isEmpty)
        #expect(statusOf { _ = try secret(keychain, "afu") } == .interactionNotAllowed)
        try keychain.unlock(password: "pw")
        keychain.lock()
        #expect(try secret(keychain, "afu") == Data("secret afu".utf8))
    }

    @Test func eachItemIsSealedUnderItsClassKeyAndAnUpdateMovesIt() throws {
        let keychain = try newKeychain()
        try add(keychain, "a", nil)
        let raw = try RawFile(path)
        #expect(try raw.blobs("SELECT pclass FROM items") == [Data("ak".utf8)])
        let names = try raw.blobs("SELECT name FROM meta WHERE name LIKE 'class-key-%' ORDER BY name")
        #expect(Set(names) == Set(Accessibility.allCases.map { Data("class-key-\($0.rawValue)".utf8) }))

        try keychain.update(
            matching: genericQuery("a"), with: ItemChanges(attributes: [.accessible: .string("ck")]))
        #expect(try raw.blobs("SELECT pclass FROM items") == [Data("ck".utf8)])
        keychain.lock()
        #expect(try secret(keychain, "a") == Data("secret a".utf8), "re-sealed under AfterFirstUnlock's key")

        try keychain.unlock(password: "pw")
        try keychain.update(matching: genericQuery("a"), with: ItemChanges(removing: [.accessible]))
        #expect(try raw.blobs("SELECT pclass FROM items") == [Data("ak".utf8)])
        keychain.lock()
        #expect(statusOf { _ = try secret(keychain, "a") } == .interactionNotAllowed)
    }

    /// A file made by the build before class keys (main 013497f, format 2; Fixtures/README.md) is brought to
    /// format 3 at its first unlock: class keys made, every item re-sealed under WhenUnlocked's.
    @Test func aFormat2FileIsUpgradedAtUnlock() throws {
        try FileManager.default.copyItem(
            atPath: Self.fixtures.appendingPathComponent("format2.keychain-db").path, toPath: path)
        let raw = try RawFile(path)
        #expect(try raw.blobs("PRAGMA user_version") == [Data("2".utf8)])
        let keychain = try Keychain(opening: path)
        let one = ItemQuery(.genericPassword, attributes: [.service: .string("one.example")])
        #expect(try keychain.items(matching: one).count == 1, "searched while locked as before")
        #expect(try raw.blobs("PRAGMA user_version") == [Data("2".utf8)], "opening alone changes nothing")

        try keychain.unlock(password: "fixture password")
        #expect(try raw.blobs("PRAGMA user_version") == [Data("3".utf8)])
        #expect(try raw.blobs("SELECT DISTINCT pclass FROM items") == [Data("ak".utf8)])
        #expect(try raw.blobs("SELECT DISTINCT version FROM items") == [Data("2".utf8)])
        #expect(try raw.blobs("SELECT count(*) FROM meta WHERE name LIKE 'class-key-%'") == [Data("7".utf8)])
        let found = try #require(
            try keychain.items(
                matching: ItemQuery(
                    .genericPassword, attributes: [.service: .string("one.example")], returning: [.data, .attributes])
            ).first)
        #expect(found.secret == Data("secret one".utf8))
        #expect(found.attributes?[.label] == .string("One"))
        let web = ItemQuery(.internetPassword, attributes: [.server: .string("web.example")], returning: .data)
        #expect(try keychain.items(matching: web).first?.secret == Data("web secret".utf8))
        #expect(try keychain.count() == 3)

        // Locked again, the upgraded WhenUnlocked items are not readable.
        keychain.lock()
        #expect(statusOf { _ = try keychain.items(matching: web) } == .interactionNotAllowed)
        let reopened = try Keychain(opening: path)
        try reopened.unlock(password: "fixture password")
        let two = ItemQuery(.genericPassword, attributes: [.account: .string("bob")], returning: .data)
        #expect(try reopened.items(matching: two).first?.secret == Data("secret two".utf8))
    }

    /// A TPM that is there but cannot seal (an owner hierarchy with a password, a TPM error): the keychain is made
    /// and used as where there is no TPM, not refused.
    @Test func aTPMThatCannotSealLeavesTheKeychainUsable() throws {
        struct RefusingSealing: DeviceSealing {
            func seal(_ secret: borrowing SecretBytes) throws(KeychainError) -> Data {
                throw KeychainError(.internalComponent, "the TPM refused to seal")
            }
            func unseal(_ sealed: Data) throws(KeychainError) -> SecretBytes {
                throw KeychainError(.internalComponent, "the TPM refused to unseal")
            }
        }
        try Keychain.$deviceSealingHere.withValue(RefusingSealing()) {
            let keychain = try newKeychain()
            try add(keychain, "here", .whenUnlockedThisDeviceOnly)
            #expect(try secret(keychain, "here") == Data("secret here".utf8))
            let raw = try RawFile(path)
            #expect(try raw.blobs("SELECT count(*) FROM meta WHERE name = 'class-device'") == [Data("0".utf8)])
        }
    }

    /// A row damaged before the format-3 upgrade cannot be sealed again under a class key (it cannot be opened):
    /// it keeps no class, and queries that reach it leave it out, as format 2 did, instead of failing whole.
    @Test func aRowTheUpgradeCouldNotOpenIsLeftOutNotAnErrorForEveryQuery() throws {
        try FileManager.default.copyItem(
            atPath: Self.fixtures.appendingPathComponent("format2.keychain-db").path, toPath: path)
        let raw = try RawFile(path)
        try raw.run(
            "UPDATE items SET attributes = ?1 WHERE id = (SELECT min(id) FROM items WHERE class = 'genp')",
            [Data(repeating: 0x5A, count: 64)])
        let keychain = try Keychain(opening: path)
        try keychain.unlock(password: "fixture password")
        #expect(try raw.blobs("PRAGMA user_version") == [Data("3".utf8)])
        #expect(try raw.blobs("SELECT count(*) FROM items WHERE pclass = ''") == [Data("1".utf8)])
        let everyGeneric = ItemQuery(.genericPassword, limit: .all, returning: [.attributes, .data])
        let found = try keychain.items(matching: everyGeneric)
        #expect(found.count == 1, "the undamaged generic password, and not the damaged one")
        let web = ItemQuery(.internetPassword, attributes: [.server: .string("web.example")], returning: .data)
        #expect(try keychain.items(matching: web).first?.secret == Data("web secret".utf8))
    }

    /// A hostile edit of a class-key row: the keychain still unlocks, the other classes read, the class whose row
    /// was altered gives errSecDecode saying why (never a new key that would orphan its items), and the row put
    /// back gives everything back.
    @Test func anAlteredClassKeyRowIsAClearErrorAndLosesNothing() throws {
        let keychain = try newKeychain()
        try add(keychain, "wu", nil)
        try add(keychain, "afu", .afterFirstUnlock)
        let raw = try RawFile(path)
        let row = try #require(try raw.blobs("SELECT value FROM meta WHERE name = 'class-key-ck'").first)
        var flipped = row
        flipped[flipped.count - 1] ^= 1

        for altered in [flipped, Data(), try raw.blobs("SELECT value FROM meta WHERE name = 'class-key-ak'")[0]] {
            try raw.run("UPDATE meta SET value = ?1 WHERE name = 'class-key-ck'", [altered])
            let opened = try Keychain(opening: path)
            try opened.unlock(password: "pw")
            #expect(try secret(opened, "wu") == Data("secret wu".utf8))
            var reason = ""
            do {
                _ = try secret(opened, "afu")
            } catch let error as KeychainError {
                #expect(error.status == .decode)
                reason = error.reason
            }
            #expect(reason.contains("class-key-ck"), "\(reason)")
            // No new key is made over the altered row: adding to the class is refused too.
            #expect(statusOf { try add(opened, "afu2", .afterFirstUnlock) } == .decode)
        }
        // Deleted outright while the class has items: refused the same way.
        try raw.run("DELETE FROM meta WHERE name = 'class-key-ck'")
        let deleted = try Keychain(opening: path)
        try deleted.unlock(password: "pw")
        #expect(statusOf { try add(deleted, "afu2", .afterFirstUnlock) } == .decode)
        #expect(statusOf { _ = try secret(deleted, "afu") } == .decode)

        try raw.run("INSERT INTO meta (name, value) VALUES ('class-key-ck', ?1)", [row])
        let restored = try Keychain(opening: path)
        try restored.unlock(password: "pw")
        #expect(try secret(restored, "afu") == Data("secret afu".utf8))
    }

    /// An item's `pclass` moved to another class by someone who can write the file: its values do not open under
    /// that class's key (errSecDecode), and a row whose class names none is refused likewise.
    @Test func anAlteredItemClassDoesNotOpen() throws {
        let keychain = try newKeychain()
        try add(keychain, "wu", nil)
        try add(keychain, "other", nil)
        let raw = try RawFile(path)
        // Someone hoping to make a WhenUnlocked item readable while locked.
        try raw.run("UPDATE items SET pclass = 'ck' WHERE id = (SELECT min(id) FROM items)")
        keychain.lock()
        #expect(statusOf { _ = try secret(keychain, "wu") } == .decode)
        try keychain.unlock(password: "pw")
        #expect(statusOf { _ = try secret(keychain, "wu") } == .decode)
        #expect(try secret(keychain, "other") == Data("secret other".utf8))
        try raw.run("UPDATE items SET pclass = 'zz' WHERE id = (SELECT min(id) FROM items)")
        #expect(statusOf { _ = try secret(keychain, "wu") } == .decode)
        try raw.run("UPDATE items SET pclass = 'ak' WHERE id = (SELECT min(id) FROM items)")
        #expect(try secret(keychain, "wu") == Data("secret wu".utf8))
    }

    /// WhenPasscodeSetThisDeviceOnly needs a password: refused (errSecNotAvailable) in a keychain opened by key
    /// slots alone, and its items go when the password is removed.
    @Test func whenPasscodeSetNeedsAPassword() throws {
        let keychain = try newKeychain()
        try add(keychain, "passcode", .whenPasscodeSetThisDeviceOnly)
        try add(keychain, "kept", .afterFirstUnlock)
        #expect(try secret(keychain, "passcode") == Data("secret passcode".utf8))
        let slotKey = try SecretBytes(copying: [UInt8](repeating: 7, count: 32))
        _ = try keychain.addKeySlot(.recovery, parameters: Data(), slotKey: slotKey)
        try keychain.removeKeySlot(id: 0)

        #expect(try keychain.items(matching: genericQuery("passcode")).isEmpty, "deleted with the password")
        #expect(try secret(keychain, "kept") == Data("secret kept".utf8))
        #expect(statusOf { try add(keychain, "again", .whenPasscodeSetThisDeviceOnly) } == .notAvailable)
        #expect(
            statusOf {
                try keychain.update(
                    matching: genericQuery("kept"), with: ItemChanges(attributes: [.accessible: .string("akpu")]))
            } == .notAvailable)
        let raw = try RawFile(path)
        #expect(try raw.blobs("SELECT count(*) FROM meta WHERE name = 'class-key-akpu'") == [Data("0".utf8)])
    }
}
