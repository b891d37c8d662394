import Foundation
import KeychainCore
import KeychainStore
import Posix
import ProcessMemoryMaps
import Testing

/// What someone who can write the keychain file can and cannot do to it (docs/file-format.md, "What a
/// file-writer can still do").
@Suite struct IntegrityTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.file("keychains/test.keychain-db")
    }

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    func account(_ name: String, _ returning: ReturnOptions = []) -> ItemQuery {
        ItemQuery(.genericPassword, attributes: [.account: .string(name)], returning: returning)
    }

    /// Each change of an item seals its values under a new version: the sealed secret or attributes it had
    /// before, put back in its row, fail authentication.
    @Test func anOlderSealedValuePutBackIsRefused() throws {
        let keychain = try Keychain.create(at: path, password: "pw")
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("first".utf8))
        try keychain.add(.genericPassword, attributes: [.account: .string("b")], secret: Data("other".utf8))
        let raw = try RawFile(path)
        let row = "WHERE id = (SELECT min(id) FROM items)"
        let oldSecret = try #require(try raw.blobs("SELECT secret FROM items \(row)").first)
        let oldAttributes = try #require(try raw.blobs("SELECT attributes FROM items \(row)").first)

        try keychain.update(matching: account("a"), with: ItemChanges(secret: Data("second".utf8)))
        try raw.run("UPDATE items SET secret = ?1 \(row)", [oldSecret])
        #expect(statusOf { _ = try keychain.items(matching: account("a", .data)) } == .decode)

        // A change of the attributes alone seals the secret again too.
        try keychain.update(matching: account("b"), with: ItemChanges(attributes: [.label: .string("B")]))
        try keychain.delete(matching: account("a"))
        try keychain.add(.genericPassword, attributes: [.account: .string("c")], secret: Data("third".utf8))
        let sealedThird = try #require(
            try raw.blobs("SELECT secret FROM items WHERE id = (SELECT max(id) FROM items)").first)
        try keychain.update(matching: account("c"), with: ItemChanges(attributes: [.label: .string("C")]))
        try raw.run("UPDATE items SET secret = ?1 WHERE id = (SELECT max(id) FROM items)", [sealedThird])
        #expect(statusOf { _ = try keychain.items(matching: account("c", .data)) } == .decode)

        // Older attributes put back are refused as well, and the other item stays readable.
        try keychain.add(.genericPassword, attributes: [.account: .string("d")], secret: Data("fourth".utf8))
        let dRow = "WHERE id = (SELECT max(id) FROM items)"
        let sealedAttributes = try #require(try raw.blobs("SELECT attributes FROM items \(dRow)").first)
        try keychain.update(matching: account("d"), with: ItemChanges(attributes: [.label: .string("D")]))
        try raw.run("UPDATE items SET attributes = ?1 \(dRow)", [sealedAttributes])
        #expect(statusOf { _ = try keychain.items(matching: account("d", .attributes)) } == .decode)
        #expect(try keychain.items(matching: account("b", .data)).first?.secret == Data("other".utf8))
        #expect(oldAttributes.count > 0)
    }

    /// An update that replaces the secret never opens the old one: an item whose stored secret no longer opens
    /// (damaged, or a value of another item put in its place) can still be given a new secret, which then
    /// reads back. An update that keeps the secret has to open it to seal it again, so it still refuses.
    @Test func anUpdateThatReplacesTheSecretDoesNotOpenTheOldOne() throws {
        let keychain = try Keychain.create(at: path, password: "pw", kdf: .insecureForTesting)
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("old".utf8))
        try keychain.add(.genericPassword, attributes: [.account: .string("b")], secret: Data("other".utf8))
        let raw = try RawFile(path)
        let aRow = "WHERE id = (SELECT min(id) FROM items)"
        var sealed = try #require(try raw.blobs("SELECT secret FROM items \(aRow)").first)
        sealed[sealed.count - 1] ^= 0x01
        try raw.run("UPDATE items SET secret = ?1 \(aRow)", [sealed])
        #expect(statusOf { _ = try keychain.items(matching: account("a", .data)) } == .decode)
        #expect(
            statusOf {
                try keychain.update(matching: account("a"), with: ItemChanges(attributes: [.label: .string("A")]))
            } == .decode)

        #expect(try keychain.update(matching: account("a"), with: ItemChanges(secret: Data("new".utf8))) == 1)
        #expect(try keychain.items(matching: account("a", .data)).first?.secret == Data("new".utf8))

        // An update of the attributes alone keeps the secret, sealed again under the item's next version.
        try keychain.update(matching: account("a"), with: ItemChanges(attributes: [.label: .string("A")]))
        let item = try #require(try keychain.items(matching: account("a", [.data, .attributes])).first)
        #expect(item.secret == Data("new".utf8))
        #expect(item.attributes?[.label] == .string("A"))
        #expect(try keychain.items(matching: account("b", .data)).first?.secret == Data("other".utf8))
    }

    /// A file written before format 2 (by the command of 0effc42) opens locked as it is, is brought to format
    /// 2 at its first unlock keeping every item and its settings, and from then on refuses older values.
    @Test func aFormat1FileOpensAndIsUpgradedAtUnlock() throws {
        try FileManager.default.createDirectory(
            atPath: directory.file("keychains"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: Self.fixtures.appendingPathComponent("format1.keychain-db").path, toPath: path)
        let raw = try RawFile(path)
        #expect(try raw.blobs("PRAGMA user_version") == [Data("1".utf8)])

        let keychain = try Keychain(opening: path)
        #expect(keychain.isLocked)
        let service = ItemQuery(.genericPassword, attributes: [.service: .string("one.example")])
        #expect(try keychain.items(matching: service).count == 1, "a locked format-1 file is searched as before")
        #expect(try keychain.settings() == KeychainSettings(lockTimeout: 600, lockOnSleep: true))
        #expect(try raw.blobs("PRAGMA user_version") == [Data("1".utf8)], "opening alone changes nothing")

        try keychain.unlock(password: "fixture password")
        #expect(try raw.blobs("PRAGMA user_version") == [Data("3".utf8)], "format 1 goes on to 3 (class keys)")
        #expect(try keychain.settings() == KeychainSettings(lockTimeout: 600, lockOnSleep: true))
        let one = ItemQuery(
            .genericPassword, attributes: [.service: .string("one.example")], returning: [.data, .attributes])
        let found = try #require(try keychain.items(matching: one).first)
        #expect(found.secret == Data("secret one".utf8))
        #expect(found.attributes?[.account] == .string("alice"))
        #expect(found.attributes?[.label] == .string("One"))
        let web = ItemQuery(.internetPassword, attributes: [.server: .string("web.example")], returning: .data)
        #expect(try keychain.items(matching: web).first?.secret == Data("web secret".utf8))
        #expect(try keychain.count() == 3)

        // A format-1 value put back after a change is refused.
        let row = "WHERE class = 'genp' AND id = (SELECT min(id) FROM items)"
        let legacySecret = try #require(try raw.blobs("SELECT secret FROM items \(row)").first)
        try keychain.update(matching: one, with: ItemChanges(secret: Data("changed".utf8)))
        // Version 0 (format 1), 1 when sealed under its class key, 2 after the change.
        #expect(try raw.blobs("SELECT version FROM items \(row)") == [Data("2".utf8)])
        try raw.run("UPDATE items SET secret = ?1 \(row)", [legacySecret])
        #expect(statusOf { _ = try keychain.items(matching: one) } == .decode)

        // Reopened, the upgraded file unlocks and reads as any other.
        let reopened = try Keychain(opening: path)
        try reopened.unlock(password: "fixture password")
        let two = ItemQuery(.genericPassword, attributes: [.account: .string("bob")], returning: .data)
        #expect(try reopened.items(matching: two).first?.secret == Data("secret two".utf8))
    }

    /// The sync flag, the primary-key hash and the attribute index are computed from the item's attributes
    /// under the index key; an unlocked keychain checks them, and an item whose entries were altered is not
    /// returned (a locked one still finds it: the check needs the key).
    @Test func alteredIndexEntriesLeaveTheItemOut() throws {
        let keychain = try Keychain.create(at: path, password: "pw")
        for name in ["a", "b", "c", "d"] {
            try keychain.add(
                .genericPassword, attributes: [.account: .string(name), .service: .string("svc-\(name)")],
                secret: Data("secret-\(name)".utf8))
        }
        let all = ItemQuery(.genericPassword, limit: .all, returning: .data)
        #expect(try keychain.items(matching: all).count == 4)
        let raw = try RawFile(path)
        let ids = try raw.blobs("SELECT id FROM items ORDER BY id")
        try #require(ids.count == 4)
        let (idA, idB, idC) = (ids[0], ids[1], ids[2])
        // a: the sync flag flipped. b: one of its tags removed. c: its primary-key hash replaced.
        try raw.run("UPDATE items SET sync = 1 WHERE id = CAST(?1 AS INTEGER)", [idA])
        try raw.run(
            "DELETE FROM attribute_index WHERE item = CAST(?1 AS INTEGER)"
                + " AND tag = (SELECT min(tag) FROM attribute_index WHERE item = CAST(?1 AS INTEGER))", [idB])
        try raw.run("UPDATE items SET pk = zeroblob(16) WHERE id = CAST(?1 AS INTEGER)", [idC])

        #expect(try keychain.items(matching: all).compactMap(\.secret) == [Data("secret-d".utf8)])
        for name in ["a", "b", "c"] {
            #expect(try keychain.items(matching: account(name, .data)).isEmpty, "\(name)")
        }
        var synchronizable = ItemQuery(.genericPassword, limit: .all)
        synchronizable.synchronizable = .yes
        #expect(try keychain.items(matching: synchronizable).isEmpty, "a flipped sync flag finds nothing")
        #expect(statusOf { try keychain.delete(matching: account("a")) } == .itemNotFound)

        keychain.lock()
        #expect(try keychain.items(matching: synchronizable).count == 1, "while locked the index is taken as it is")
        var everything = ItemQuery(.genericPassword, limit: .all)
        everything.synchronizable = .any
        #expect(try keychain.items(matching: everything).count == 4)
    }

    /// The settings carry a MAC under the keychain key: altered or removed, an unlocked keychain says so
    /// (`errSecDecode`); a locked one reads them as they are. Changing them needs the key.
    @Test func alteredSettingsAreDetected() throws {
        let keychain = try Keychain.create(at: path, password: "pw")
        #expect(try keychain.settings() == KeychainSettings())
        try keychain.setSettings(KeychainSettings(lockTimeout: 300, lockOnSleep: true))
        #expect(try keychain.settings() == KeychainSettings(lockTimeout: 300, lockOnSleep: true))
        let raw = try RawFile(path)
        try raw.run("UPDATE meta SET value = ?1 WHERE name = 'x-settings'", [Data("timeout=0\nsleep=0\n".utf8)])
        #expect(statusOf { _ = try keychain.settings() } == .decode)
        keychain.lock()
        #expect(try keychain.settings() == KeychainSettings(), "a locked keychain reads them unchecked")
        #expect(statusOf { try keychain.setSettings(KeychainSettings()) } == .interactionNotAllowed)

        try keychain.unlock(password: "pw")
        try keychain.setSettings(KeychainSettings(lockTimeout: 60))
        #expect(try keychain.settings() == KeychainSettings(lockTimeout: 60))
        try raw.run("DELETE FROM meta WHERE name IN ('x-settings', 'settings_mac')")
        #expect(statusOf { _ = try keychain.settings() } == .decode, "removed settings are not the defaults")
        #expect(
            KeychainSettings.afterTampering
                == KeychainSettings(lockTimeout: 300, lockOnSleep: true, lockOnScreenLock: true))
        #expect(statusOf { try keychain.setMetadata("settings", Data("timeout=0\n".utf8)) } == .param)
    }

    /// A delete leaves none of the item's index tags in the file or its write-ahead log.
    @Test func aDeletedItemLeavesNoTagsBehind() throws {
        let keychain = try Keychain.create(at: path, password: "pw")
        try keychain.add(
            .genericPassword, attributes: [.account: .string("gone"), .service: .string("gone.example")],
            secret: Data("x".utf8))
        try keychain.add(.genericPassword, attributes: [.account: .string("kept")], secret: Data("y".utf8))
        let raw = try RawFile(path)
        let tags = try raw.blobs("SELECT tag FROM attribute_index WHERE item = (SELECT min(id) FROM items)")
        let sealed = try raw.blobs("SELECT secret FROM items WHERE id = (SELECT min(id) FROM items)")
        #expect(tags.count >= 4)
        #expect(tags.allSatisfy { allBytes(of: path).range(of: $0) != nil })
        #expect(allBytes(of: path + "-wal").count > 0)

        try keychain.delete(matching: account("gone"))
        let bytes = allBytes(of: path)
        #expect(tags.allSatisfy { bytes.range(of: $0) == nil }, "a deleted item's tag is still on disk")
        #expect(sealed.allSatisfy { bytes.range(of: $0) == nil }, "a deleted item's sealed secret is still on disk")

        // A daemon defers the checkpoint to its worker: the keychain asks for it, and it leaves nothing either.
        keychain.deferCheckpoints()
        try keychain.add(.genericPassword, attributes: [.account: .string("later")], secret: Data("z".utf8))
        let laterTags = try raw.blobs("SELECT tag FROM attribute_index WHERE item = (SELECT max(id) FROM items)")
        #expect(!keychain.takeCheckpointRequest())
        try keychain.delete(matching: account("later"))
        #expect(keychain.takeCheckpointRequest())
        #expect(!keychain.takeCheckpointRequest())
        #expect(Keychain.checkpoint(at: path, waitMilliseconds: 0))
        #expect(laterTags.allSatisfy { allBytes(of: path).range(of: $0) == nil })
    }

    /// A password change is complete only when no copy of the key wrapped under the old password is left in
    /// the file or its log: a reader holding an older snapshot keeps it there, and the change waits for it.
    @Test func aPasswordChangeWaitsUntilTheOldWrappedKeyIsGone() throws {
        let keychain = try Keychain.create(at: path, password: "old")
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("s".utf8))
        #expect(Keychain.checkpoint(at: path, waitMilliseconds: 0))
        let raw = try RawFile(path)
        let oldWrapped = try #require(try raw.blobs("SELECT value FROM meta WHERE name = 'wrapped_key'").first)
        #expect(allBytes(of: path).range(of: oldWrapped) != nil)

        let reader = try RawFile(path)
        try reader.run("BEGIN")
        #expect(try reader.blobs("SELECT count(*) FROM items") == [Data("1".utf8)])
        try keychain.commit(try keychain.rewrap(from: Array("old".utf8), to: Array("new".utf8)))
        #expect(statusOf { try keychain.waitForEmptyLog(milliseconds: 1_000) } == .io)
        #expect(allBytes(of: path).range(of: oldWrapped) != nil, "the reader's snapshot keeps the old key")

        let held = HeldReader(reader)
        let released = Thread { try? held.reader.run("COMMIT") }
        Thread.sleep(forTimeInterval: 0.3)
        released.start()
        try keychain.waitForEmptyLog(milliseconds: 10_000)
        #expect(allBytes(of: path).range(of: oldWrapped) == nil, "the old wrapped key is still on disk")
        #expect(allBytes(of: path + "-wal").isEmpty)
        let reopened = try Keychain(opening: path)
        #expect(statusOf { try reopened.unlock(password: "old") } == .authFailed)
        try reopened.unlock(password: "new")
    }
}

/// A reader handed to the thread that ends its transaction.
private final class HeldReader: @unchecked Sendable {
    let reader: RawFile
    init(_ reader: RawFile) { self.reader = reader }
}

/// Item secrets the daemon hands to a session are decrypted straight into secret memory.
@Suite struct SecretMemoryReadTests {
    /// Short secrets (which `Data` would keep inline, where no wipe reaches) and long ones alike land in pages
    /// of their own that no core dump holds; the item itself carries no `Data` copy; a tampered secret is still
    /// refused.
    @Test(arguments: ["pin1", "a secret long enough to need storage of its own, 2026"])
    func itemWithSecretDecryptsIntoSecretMemory(_ text: String) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("keychains/test.keychain-db")
        let keychain = try Keychain.create(at: path, password: "pw")
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data(text.utf8))
        let query = ItemQuery(.genericPassword, attributes: [.account: .string("a")], returning: .attributes)
        let found = try #require(try keychain.itemWithSecret(matching: query))
        #expect(found.item.secret == nil)
        #expect(found.item.attributes?[.account] == .string("a"))
        let secret = try #require(found.secret)
        #expect(secret.withUnsafeBytes { $0.elementsEqual(Array(text.utf8)) })
        let page = secret.bytes.pageAddress
        let address = try #require(page)
        #expect(try #require(mappingFlags(at: address)).contains("dd"))

        let raw = try RawFile(path)
        let sealed = try #require(try raw.blobs("SELECT secret FROM items").first)
        var altered = sealed
        altered[altered.count - 1] ^= 1
        try raw.run("UPDATE items SET secret = ?1", [altered])
        #expect(statusOf { _ = try keychain.itemWithSecret(matching: query) } == .decode)
    }

    /// Several matches (as `org.latchkey.Keychain1` `Search` with data reads them): each secret in secret
    /// memory, none in the items; without data, no secret at all.
    @Test func itemsWithSecretsDecryptEachIntoSecretMemory() throws {
        let directory = try TemporaryDirectory()
        let keychain = try Keychain.create(at: directory.file("keychains/test.keychain-db"), password: "pw")
        let texts = ["pin1", "pin2", "a secret long enough to need storage of its own"]
        for (index, text) in texts.enumerated() {
            try keychain.add(
                .genericPassword, attributes: [.account: .string("a\(index)"), .service: .string("s")],
                secret: Data(text.utf8))
        }
        func query(_ returning: ReturnOptions) -> ItemQuery {
            ItemQuery(.genericPassword, attributes: [.service: .string("s")], limit: .all, returning: returning)
        }
        let found = try keychain.itemsWithSecrets(matching: query([.attributes, .data]))
        #expect(found.count == 3)
        for entry in found {
            #expect(entry.item.secret == nil)
            let secret = try #require(entry.secret)
            let account = try #require(entry.item.attributes?[.account])
            guard case .string(let name) = account, let index = Int(name.dropFirst()) else {
                Issue.record("unexpected account \(account)")
                continue
            }
            #expect(secret.withUnsafeBytes { $0.elementsEqual(Array(texts[index].utf8)) })
            let page = secret.bytes.pageAddress
            let address = try #require(page)
            #expect(try #require(mappingFlags(at: address)).contains("dd"))
        }
        #expect(try keychain.itemsWithSecrets(matching: query(.attributes)).allSatisfy { $0.secret == nil })
    }
}
