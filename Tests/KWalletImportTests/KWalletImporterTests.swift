import Foundation
import KWalletFormat
import KWalletImport
import KeychainCore
import KeychainStore
import Posix
import Testing

/// A temporary keychain, removed with its directory when released.
private final class ScratchKeychain {
    let directory: ScratchDirectory
    let keychain: Keychain

    init() throws {
        directory = try ScratchDirectory()
        keychain = try Keychain.create(at: directory.path + "/login.keychain-db", password: Array("pw".utf8))
    }

    /// Every item: label, Secret Service attributes, secret text, content type, creation date.
    func items() throws -> [String: (attributes: [String: String], secret: Data, type: String, created: Date?)] {
        let found = try keychain.items(
            matching: ItemQuery(.genericPassword, synchronizable: .any, limit: .all, returning: [.attributes, .data]))
        var result: [String: (attributes: [String: String], secret: Data, type: String, created: Date?)] = [:]
        for item in found {
            let attributes = try #require(item.attributes)
            guard case .string(let label)? = attributes[.label], case .string(let type)? = attributes[.contentType]
            else { throw KeychainError(.decode, "no label or content type") }
            var created: Date?
            if case .date(let date)? = attributes[.creationDate] { created = date }
            result[label] = (
                AttributeMapping.secretServiceAttributes(attributes, of: .genericPassword), item.secret ?? Data(), type,
                created
            )
        }
        return result
    }
}

@Suite struct KWalletImporterTests {
    @Test func everyEntryBecomesAnItemInKDEsSchemeAndASecondImportAddsNothing() throws {
        let scratch = try ScratchKeychain()
        let file = try walletFixture("kdewallet.kwl")
        let contents = try open(file, kdewalletPassword)
        let outcome = try KWalletImporter.importWallet(
            contents, from: file, attributes: KWalletAttributes(), into: scratch.keychain)
        guard case .imported(let record) = outcome else { throw KeychainError(.decode, "\(outcome)") }
        #expect(record.added == 4 && record.alreadyPresent == 0 && record.skipped == 1)
        #expect(record.wallet == "kdewallet" && record.size == file.bytes.count && record.digest == file.digest)
        let items = try scratch.items()
        #expect(
            Set(items.keys) == [
                "Passwords/mail@example.org", "Passwords/empty", "Form Data/https://example.org/login", "Binary/blob",
            ])
        let mail = try #require(items["Passwords/mail@example.org"])
        #expect(mail.attributes == ["server": "Passwords", "user": "mail@example.org", "type": "plaintext"])
        #expect(String(decoding: mail.secret, as: UTF8.self) == "sëcret ☃ mail")
        #expect(mail.type == "text/plain")
        #expect(items["Passwords/empty"]?.secret == Data())
        let map = try #require(items["Form Data/https://example.org/login"])
        #expect(map.attributes["type"] == "map")
        #expect(String(decoding: map.secret, as: UTF8.self) == #"{"nothing":"","pass":"p@ss wörd","user":"alice"}"#)
        let blob = try #require(items["Binary/blob"])
        #expect(blob.attributes["type"] == "base64")
        #expect(Data(base64Encoded: blob.secret) == Data([0, 1, 0] + Array("binary".utf8) + [0xFF, 0]))
        // What the KWallet face reads back: a map's QMap and a stream's bytes.
        let wire = try KWalletScheme.wireValue(stored: try SecretBytes(copying: Array(blob.secret)), form: .base64)
        let same = wire.hasSameBytes(as: [0, 1, 0] + Array("binary".utf8) + [0xFF, 0])
        #expect(same)
        // The same file again: nothing.
        let again = try KWalletImporter.importWallet(
            contents, from: file, attributes: KWalletAttributes(), into: scratch.keychain)
        #expect(again == .alreadyImported(record))
        #expect(try scratch.items().count == 4)
        #expect(try KWalletImporter.records(in: scratch.keychain) == [record])
        // A changed file (another path, the same wallet): every entry is there already.
        let moved = try KWalletFile(path: "/elsewhere/kdewallet.kwl", bytes: file.bytes, modified: file.modified)
        guard
            case .imported(let second) = try KWalletImporter.importWallet(
                contents, from: moved, attributes: KWalletAttributes(), into: scratch.keychain)
        else { throw KeychainError(.decode, "not imported") }
        #expect(second.added == 0 && second.alreadyPresent == 4)
    }

    @Test func secretServiceItemsGetTheirAttributesBack() throws {
        let scratch = try ScratchKeychain()
        let file = try walletFixture("kdewallet.kwl")
        let contents = try open(file, kdewalletPassword)
        // As kwalletfreedesktopattributes.cpp writes it (QJsonDocument, dates as decimal text).
        let json = """
            {
                "$fdo_created": "1700000000",
                "$fdo_modified": "1700000500",
                "Passwords/mail@example.org": {
                    "$fdo_created": "1700000100",
                    "$fdo_mime_type": "text/plain",
                    "$fdo_modified": "1700000200",
                    "attributes": {"service": "imap", "username": "bob", "xdg:schema": "org.example.Mail", "n": 3}
                },
                "Nowhere": {"attributes": {"a": "b"}}
            }
            """
        let attributes = KWalletAttributes(json: Array(json.utf8))
        #expect(attributes.items.count == 1)
        _ = try KWalletImporter.importWallet(contents, from: file, attributes: attributes, into: scratch.keychain)
        let items = try scratch.items()
        let mail = try #require(items["Passwords/mail@example.org"])
        #expect(mail.attributes == ["service": "imap", "username": "bob", "xdg:schema": "org.example.Mail"])
        #expect(mail.created == Date(timeIntervalSince1970: 1_700_000_100))
        #expect(String(decoding: mail.secret, as: UTF8.self) == "sëcret ☃ mail")
        // The others stay KWallet entries.
        #expect(items["Binary/blob"]?.attributes["server"] == "Binary")
        // Not JSON, or not an object: no items, no failure.
        #expect(KWalletAttributes(json: Array("[1,2]".utf8)).items.isEmpty)
        #expect(KWalletAttributes(json: [0xFF, 0x00]).items.isEmpty)
    }

    @Test func aWalletThatDoesNotOpenWritesNothing() throws {
        let scratch = try ScratchKeychain()
        let file = try walletFixture("kdewallet.kwl")
        var bytes = file.bytes
        bytes[bytes.count - 3] ^= 1
        let damaged = try KWalletFile(path: file.path, bytes: bytes, modified: 0)
        expectKWalletError(.wrongPassword) { _ = try open(damaged, kdewalletPassword) }
        #expect(try scratch.items().isEmpty)
        #expect(try KWalletImporter.records(in: scratch.keychain).isEmpty)
    }

    @Test func theLoginPlanOpensTheWalletsTheLoginPasswordOpens() throws {
        let scratch = try ScratchKeychain()
        let wallets = try ScratchDirectory()
        try wallets.copy("kdewallet.kwl")
        try wallets.copy("Work ;C3;BC;2F2.kwl")
        try wallets.copy("legacy.kwl")  // no salt: not tried at login
        #expect(mkfifo(wallets.path + "/x.kwl", 0o600) == 0)
        let locations = KWalletLocations(directory: wallets.path, configuration: wallets.path + "/kwalletrc")
        let password = try SharedSecret(copying: Array(kdewalletPassword.utf8))
        let plan = KWalletLoginImport.plan(locations: locations, password: password, keychains: [scratch.keychain])
        #expect(plan.map(\.file.walletName) == ["kdewallet"])
        #expect(plan.map(\.destination) == [.login])
        let first = try #require(plan.first)
        let outcome = try #require(KWalletLoginImport.run(first, into: scratch.keychain))
        guard case .imported(let record) = outcome else { throw KeychainError(.decode, "\(outcome)") }
        #expect(record.added == 4)
        // Recorded: a second login opens nothing.
        #expect(
            KWalletLoginImport.plan(locations: locations, password: password, keychains: [scratch.keychain]).isEmpty)
        // The other wallet goes into the collection of its name; kwalletrc can make it the default.
        let work = try SharedSecret(copying: Array(workPassword.utf8))
        #expect(
            KWalletLoginImport.plan(locations: locations, password: work, keychains: []).map(\.destination) == [
                .collection(label: "Work ü/2")
            ])
        try "[Wallet]\nDefault Wallet=Work ü/2\n".write(
            toFile: locations.configuration, atomically: true, encoding: .utf8)
        #expect(
            KWalletLoginImport.plan(locations: locations, password: work, keychains: []).map(\.destination) == [.login])
    }
}
