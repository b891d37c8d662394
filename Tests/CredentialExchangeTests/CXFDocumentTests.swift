import Foundation
import KeychainCore
import KeychainStore
import Posix
import Testing

@testable import CredentialExchange

/// The bytes of `text` in secret memory.
func secret(_ text: String) throws -> SecretBytes { try SecretBytes(copying: Array(text.utf8)) }

/// The text of a secret buffer, for looking into documents in tests.
func text(_ bytes: borrowing SecretBytes) -> String { bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

/// A fixture of Tests/Fixtures/exchange in secret memory.
func fixture(_ name: String) throws -> SecretBytes {
    let directory = String(#filePath.prefix(upTo: #filePath.range(of: "/Tests/")!.upperBound))
    let path = directory + "Fixtures/exchange/" + name
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return try SecretBytes(copying: [UInt8](data))
}

/// Every item of every class in `keychain`, with attributes and secrets.
func everything(in keychain: Keychain) throws -> [(item: KeychainItem, secret: SharedSecret?)] {
    try ItemClass.allCases.flatMap { itemClass in
        try keychain.itemsWithSecrets(
            matching: ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: [.attributes, .data]))
    }
}

/// The error `body` throws, nil when it throws none or another type.
func exchangeError(_ body: () throws -> Void) -> ExchangeError? {
    do {
        try body()
        return nil
    } catch {
        return error as? ExchangeError
    }
}

@Suite struct CXFDocumentTests {
    static let created = Date(timeIntervalSinceReferenceDate: 700_000_000.123456)
    static let modified = Date(timeIntervalSinceReferenceDate: 710_000_000.987654)

    /// A keychain holding an item of every class and every attribute kind, Secret Service attributes among
    /// them, and one item of each `…ThisDeviceOnly` class.
    static func sourceKeychain() throws -> Keychain {
        let keychain = try Keychain.createInMemory(password: Array("pw".utf8))
        let items: [NewItem] = [
            NewItem(
                .genericPassword,
                attributes: [
                    .service: .string("mail"), .account: .string("ann"), .label: .string("Mail \"work\"\n"),
                    .generic: .data(Data([0, 1, 2, 0xFF])), .creator: .number(0x6C_6B_63_68),
                    .type: .number(-42), .isInvisible: .bool(true), .accessible: .string("ck"),
                    .accessGroup: .string("org.example.mail"), .synchronizable: .bool(true),
                    .comment: .string("a comment"), .itemDescription: .string("application password"),
                ],
                secret: Data("pässwörd \"quoted\" \\ 🔑\u{1}".utf8), creationDate: created, modificationDate: modified),
            NewItem(
                .genericPassword,
                attributes: AttributeMapping.secretServiceItem(
                    label: "GNOME Online Accounts",
                    attributes: ["xdg:schema": "org.gnome.OnlineAccounts", "goa-identity": "imap:ann@example.com"],
                    contentType: "text/plain"),
                secret: Data([0xFF, 0xFE, 0x00, 0x80]), creationDate: created, modificationDate: modified),
            NewItem(
                .internetPassword,
                attributes: [
                    .server: .string("example.com"), .protocol: .string("htps"), .port: .number(8443),
                    .path: .string("/login"), .account: .data(Data("bob".utf8)),
                    .authenticationType: .string("form"), .securityDomain: .string("realm"),
                    .accessible: .string("dk"),
                ],
                secret: Data("hunter2".utf8), creationDate: created, modificationDate: modified),
            NewItem(
                .key,
                attributes: [
                    .label: .string("signing key"), .keyClass: .number(1), .applicationTag: .data(Data("tag".utf8)),
                    .keySizeInBits: .number(256), .canSign: .bool(true), .canDecrypt: .bool(false),
                ],
                secret: Data((0..<32).map { UInt8($0) }), creationDate: created, modificationDate: modified),
            NewItem(
                .certificate,
                attributes: [
                    .label: .string("a certificate"), .certificateType: .number(3), .certificateEncoding: .number(3),
                    .subject: .data(Data([0x30, 0x00])), .issuer: .data(Data([0x30, 0x01])),
                    .serialNumber: .data(Data([7])),
                ],
                secret: Data([0x30, 0x82, 0x01, 0x00]), creationDate: created, modificationDate: modified),
            NewItem(
                .genericPassword,
                attributes: [.service: .string("device only"), .accessible: .string("aku")],
                secret: Data("local".utf8)),
            NewItem(
                .internetPassword,
                attributes: [.server: .string("device.example"), .accessible: .string("cku")],
                secret: Data("local".utf8)),
        ]
        _ = try keychain.add(items)
        return keychain
    }

    /// Attributes and secret of an item, its dates among the attributes, for comparing.
    static func comparable(_ item: KeychainItem, _ secret: SharedSecret?) -> String {
        let attributes = (item.attributes ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let bytes = secret.map { $0.withUnsafeBytes { Array($0) } } ?? []
        return "\(item.itemClass) \(attributes) \(bytes)"
    }

    @Test func aKeychainComesBackEqualItemByItem() throws {
        let source = try Self.sourceKeychain()
        let exported = try everything(in: source)
        #expect(exported.count == 7)
        let export = try CXFDocument.encode(
            [ExportedKeychain(name: "login", items: exported)], exporter: "Latchkey", at: Self.modified)
        #expect(export.leftOut == 2)
        let reading = try CXFDocument.decode(export.document)
        #expect(reading.format == "cxf-1.0")
        #expect(reading.skipped.isEmpty)
        #expect(reading.items.count == 5)
        #expect(reading.keychainNames == Array(repeating: "login", count: 5))

        let target = try Keychain.createInMemory(password: Array("pw".utf8))
        _ = try target.add(reading.items)
        let expected = exported.filter { $0.item.mayLeaveThisDevice == true }.map {
            Self.comparable($0.item, $0.secret)
        }
        let imported = try everything(in: target).map { Self.comparable($0.item, $0.secret) }
        #expect(imported.sorted() == expected.sorted())
    }

    @Test func eachItemComesBackWithItsKeychainAndAnyFileIsToldByContent() throws {
        let first = try Keychain.createInMemory(password: Array("pw".utf8))
        let second = try Keychain.createInMemory(password: Array("pw".utf8))
        _ = try first.add([NewItem(.genericPassword, attributes: [.service: .string("a")], secret: Data("1".utf8))])
        _ = try second.add([
            NewItem(.genericPassword, attributes: [.service: .string("b")], secret: nil),
            NewItem(.internetPassword, attributes: [.server: .string("c.example")], secret: Data("3".utf8)),
        ])
        let export = try CXFDocument.encode(
            [
                ExportedKeychain(name: "login", items: try everything(in: first)),
                ExportedKeychain(name: "Work ü", items: try everything(in: second)),
            ], exporter: "Latchkey", at: Self.modified)
        // A BOM and blanks before the document, as an editor may leave them.
        var bytes: [UInt8] = [0xEF, 0xBB, 0xBF, 0x0A, 0x20]
        export.document.withUnsafeBytes { bytes += $0 }
        let reading = try ExchangeFile.decode(try SecretBytes(copying: bytes))
        #expect(reading.format == "cxf-1.0")
        #expect(
            reading.items.map { $0.attributes[.service] ?? $0.attributes[.server] } == [
                .string("a"), .string("b"), .string("c.example"),
            ])
        #expect(reading.keychainNames == ["login", "Work ü", "Work ü"])
        #expect(reading.items.map { $0.secret } == [Data("1".utf8), nil, Data("3".utf8)])
        #expect(text(export.document).contains("\"collections\":[{\"id\":\"a2V5Y2hhaW4tMA\",\"title\":\"login\""))
    }

    @Test func thisDeviceOnlyItemsAreNeitherWrittenNorCounted() throws {
        let source = try Self.sourceKeychain()
        let export = try CXFDocument.encode(
            [ExportedKeychain(name: "login", items: try everything(in: source))], exporter: "Latchkey",
            at: Self.modified)
        #expect(export.leftOut == 2)
        let json = text(export.document)
        #expect(!json.contains("device only"))
        #expect(!json.contains("device.example"))

        // An access control whose protection is device-only, or that cannot be read, keeps the item home too.
        func found(_ service: String, _ accessControl: Data) -> (item: KeychainItem, secret: SharedSecret?) {
            let reference = ItemReference(itemClass: .genericPassword, identifier: Data(repeating: 1, count: 16))
            let attributes: ItemAttributes = [
                .service: .string(service), .accessible: .string("ak"), .accessControl: .data(accessControl),
            ]
            return (KeychainItem(reference: reference, attributes: attributes, secret: nil), nil)
        }
        let constrained = try CXFDocument.encode(
            [
                ExportedKeychain(
                    name: "login",
                    items: [
                        found("kept", AccessConstraints(protection: "ak", flags: 0).storedForm),
                        found("home", AccessConstraints(protection: "aku", flags: 0).storedForm),
                        found("unreadable", Data([1, 2, 3])),
                        // Checks at each read, or a password of its own: one confirmation of the export cannot
                        // stand for them.
                        found(
                            "asks",
                            AccessConstraints(protection: "ak", flags: AccessConstraints.userPresence).storedForm),
                        found(
                            "finger",
                            AccessConstraints(protection: "ak", flags: AccessConstraints.biometryAny).storedForm),
                        found(
                            "own password",
                            AccessConstraints(protection: "ak", flags: AccessConstraints.applicationPassword)
                                .storedForm),
                    ])
            ], exporter: "Latchkey", at: Self.modified)
        #expect(constrained.leftOut == 5)
        #expect(text(constrained.document).contains("\"kept\""))
        for service in ["home", "asks", "finger", "own password"] {
            #expect(!text(constrained.document).contains("\"\(service)\""))
        }
        #expect(json.contains("\"exporterDisplayName\":\"Latchkey\""))
    }

    @Test func otherImportersSeeBasicAuthWithTheURLInTheScope() throws {
        let source = try Self.sourceKeychain()
        let export = try CXFDocument.encode(
            [ExportedKeychain(name: "login", items: try everything(in: source))], exporter: "Latchkey",
            at: Self.modified)
        let json = text(export.document)
        #expect(json.contains("\"scope\":{\"urls\":[\"https://example.com:8443/login\"]"))
        #expect(
            json.contains(
                "{\"type\":\"basic-auth\",\"username\":{\"fieldType\":\"string\",\"value\":\"bob\"},"
                    + "\"password\":{\"fieldType\":\"concealed-string\",\"value\":\"hunter2\"}}"))
        #expect(json.contains("\"version\":{\"major\":1,\"minor\":0}"))
        // Written with every RFC 8259 escape it needs, the document is JSON Foundation reads.
        let parsed = try JSONSerialization.jsonObject(with: export.document.withUnsafeBytes { Data($0) })
        #expect(parsed is [String: Any])
    }
}
