import Foundation
import KeychainCore
import KeychainStore
import Posix
import Testing

/// `Keychain.importItems(_:replacing:dryRun:)`: one transaction, duplicates by primary key (Secret Service items
/// by their attributes) reported or replaced, a dry run that writes nothing.
@Suite struct ImportItemsTests {
    let directory: TemporaryDirectory
    let keychain: Keychain

    init() throws {
        directory = try TemporaryDirectory()
        keychain = try Keychain.create(at: directory.file("import.keychain-db"), password: "pw")
    }

    private func password(_ account: String, _ secret: String) -> NewItem {
        NewItem(
            .genericPassword, attributes: [.service: .string("import"), .account: .string(account)],
            secret: Data(secret.utf8))
    }

    private func secretServiceItem(_ user: String, _ secret: String) -> NewItem {
        NewItem(
            .genericPassword,
            attributes: [
                .secretServiceItem: .string("1"), AttributeKey(rawValue: "ss:user"): .string(user),
                .label: .string(user),
            ], secret: Data(secret.utf8))
    }

    private func secrets() throws -> [String] {
        try keychain.items(matching: ItemQuery(.genericPassword, limit: .all, returning: [.data])).compactMap {
            $0.secret.map { String(decoding: $0, as: UTF8.self) }
        }.sorted()
    }

    @Test func duplicatesAreReportedAndLeftAsTheyAre() throws {
        try keychain.add([password("a", "old a"), secretServiceItem("alice", "old alice")])
        let outcome = try keychain.importItems(
            [
                password("a", "new a"), password("b", "b"), password("b", "b again"), secretServiceItem("alice", "x"),
                secretServiceItem("bob", "bob"),
            ],
            replacing: false, dryRun: false)
        #expect(outcome.dispositions == [.duplicate, .added, .duplicate, .duplicate, .added])
        #expect(try secrets() == ["b", "bob", "old a", "old alice"])
    }

    @Test func replaceOverwritesInTheSameTransaction() throws {
        try keychain.add([password("a", "old a"), secretServiceItem("alice", "old alice")])
        let outcome = try keychain.importItems(
            [password("a", "new a"), secretServiceItem("alice", "new alice")], replacing: true, dryRun: false)
        #expect(outcome.replaced == 2 && outcome.added == 0)
        #expect(try secrets() == ["new a", "new alice"])
    }

    @Test func aSecretPortalKeyIsNeverReplaced() throws {
        // The daemon's key for a Flatpak application (marked lk:portal-key): a file's item with its attributes
        // would make the application's own keyring unreadable.
        var portalKey = secretServiceItem("org.example.App", "portal key")
        portalKey.attributes[.portalKey] = .string("1")
        try keychain.add([portalKey])
        let outcome = try keychain.importItems(
            [secretServiceItem("org.example.App", "planted")], replacing: true, dryRun: false)
        #expect(outcome.dispositions == [.duplicate])
        #expect(try secrets() == ["portal key"])
    }

    @Test func aDryRunWritesNothing() throws {
        try keychain.add([password("a", "old a")])
        let outcome = try keychain.importItems(
            [password("a", "new a"), password("b", "b")], replacing: true, dryRun: true)
        #expect(outcome.dispositions == [.replaced, .added])
        #expect(try secrets() == ["old a"])
    }

    @Test func aBatchWithABadItemImportsNothing() throws {
        let bad = NewItem(.genericPassword, attributes: [.server: .string("not a genp attribute")], secret: nil)
        #expect(throws: KeychainError.self) {
            try keychain.importItems([password("a", "a"), bad], replacing: false, dryRun: false)
        }
        #expect(try secrets() == [])
    }

    @Test func anImportOfOtherCountsThanApprovedWritesNothing() throws {
        try keychain.add([password("a", "old a")])
        #expect(throws: KeychainError.self) {
            _ = try keychain.importItems(
                [password("a", "new a"), password("b", "b")], replacing: true, dryRun: false,
                expecting: (added: 2, replaced: 0))
        }
        #expect(try secrets() == ["old a"])
        let outcome = try keychain.importItems(
            [password("a", "new a"), password("b", "b")], replacing: true, dryRun: false,
            expecting: (added: 1, replaced: 1))
        #expect(outcome.added == 1 && outcome.replaced == 1)
        #expect(try secrets() == ["b", "new a"])
    }

    @Test func anUpdateWithSecretsOfTheirOwnIsOneTransaction() throws {
        let a = try keychain.add(
            .genericPassword, attributes: [.service: .string("s"), .account: .string("a")],
            secret: Data("a".utf8))
        let b = try keychain.add(
            .genericPassword, attributes: [.service: .string("s"), .account: .string("b")],
            secret: Data("b".utf8))
        _ = try keychain.add(
            .genericPassword, attributes: [.service: .string("t"), .account: .string("b")],
            secret: Data("c".utf8))
        var both = ItemQuery(.genericPassword, limit: .all)
        both.references = [a.reference, b.reference]
        // b would take c's primary key: nothing changes, a's own secret neither.
        #expect(throws: KeychainError.self) {
            _ = try keychain.update(
                matching: both, with: ItemChanges(attributes: [.service: .string("t")]),
                secrets: [a.reference: try SharedSecret(copying: Data("own a".utf8))])
        }
        #expect(try secrets() == ["a", "b", "c"])
        let count = try keychain.update(
            matching: both, with: ItemChanges(attributes: [.comment: .string("c")], secret: Data("new".utf8)),
            secrets: [a.reference: try SharedSecret(copying: Data("own a".utf8))])
        #expect(count == 2)
        #expect(try secrets() == ["c", "new", "own a"])
    }
}
