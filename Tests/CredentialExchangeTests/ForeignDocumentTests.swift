import Foundation
import KeychainCore
import KeychainStore
import Posix
import Testing

@testable import CredentialExchange

/// The item whose label is `label` (the one of `itemClass` when given).
func item(_ reading: ExchangeReading, _ label: String, _ itemClass: ItemClass? = nil) throws -> NewItem {
    try #require(
        reading.items.first {
            $0.attributes[.label] == .string(label) && (itemClass == nil || $0.itemClass == itemClass)
        }, "no item \(label)")
}

/// The secret of `item` as text.
func secretText(_ item: NewItem) -> String? { item.secret.map { String(decoding: $0, as: UTF8.self) } }

@Suite struct ForeignDocumentTests {
    @Test func anotherExportersDocumentBecomesItemsAndListsWhatItSkips() throws {
        let reading = try CXFDocument.decode(try fixture("other-exporter.cxf.json"))
        #expect(reading.format == "cxf-1.1")
        #expect(reading.keychainNames.allSatisfy { $0 == nil })

        let mail = try item(reading, "Example Mail", .internetPassword)
        #expect(mail.attributes[.server] == .string("mail.example.com"))
        #expect(mail.attributes[.protocol] == .string("htps"))
        #expect(mail.attributes[.port] == .number(8443))
        #expect(mail.attributes[.path] == .string("/inbox"))
        #expect(mail.attributes[.account] == .string("jane"))
        #expect(mail.attributes[.comment] == .string("recovery codes are in the safe"))
        #expect(secretText(mail) == "päss \"wörd\" 🔑")
        #expect(mail.creationDate == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(mail.modificationDate == Date(timeIntervalSince1970: 1_710_000_000))

        let totp = try #require(reading.items.first { $0.attributes[.itemDescription] == .string("TOTP") })
        #expect(totp.itemClass == .genericPassword)
        #expect(
            secretText(totp)
                == "otpauth://totp/Example%20Mail:jane?secret=JBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30"
                + "&issuer=Example%20Mail")

        let token = try item(reading, "Deploy token")
        #expect(token.itemClass == .genericPassword)
        #expect(token.attributes[.account] == .string("ci"))
        #expect(token.attributes[.secretService("key-type")] == .string("bearer"))
        #expect(token.attributes[.secretService("url")] == .string("https://api.example.com"))
        #expect(secretText(token) == "tok_123")

        let pin = try #require(reading.items.first { $0.attributes[.account] == .string("PIN") })
        #expect(secretText(pin) == "console-pin")
        #expect(pin.attributes[.secretService("Location")] == .string("rack 4"))

        let note = try item(reading, "Shopping notes")
        #expect(secretText(note) == "size 42")
        #expect(reading.items.count == 5)

        #expect(
            reading.skipped.map { "\($0.title)/\($0.credentialType)" }.sorted() == [
                "Example Mail/passkey", "Lab server/ssh-key", "Visa/credit-card", "Visa/hologram",
            ])
        #expect(reading.skipped.allSatisfy { !$0.reason.isEmpty })
    }

    @Test func aDocumentOfMajorVersionTwoIsRefusedInOneLine() throws {
        let document = try secret(#"{"version":{"major":2,"minor":0},"accounts":[]}"#)
        let error = exchangeError { _ = try CXFDocument.decode(document) }
        #expect(error?.kind == .unsupportedVersion)
        #expect(error?.message == "CXF document: version 2.0 is not supported (this reads 1.x)")
    }

    @Test(arguments: [
        (
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"x","credentials":["#,
            ExchangeError.Kind.malformed, "ends early"
        ),
        (#"{"version":{"major":"1","minor":0},"accounts":[]}"#, .invalid, "version.major is not a number at byte 20"),
        (#"{"version":{"major":1,"minor":0},"accounts":{}}"#, .invalid, "accounts is not an array"),
        (
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":5,"credentials":[]}]}]}"#, .invalid,
            "title is not a string"
        ),
        (#"{"version":{"major":1,"minor":0},"accounts":[]} x"#, .malformed, "data after the JSON value"),
        (
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"\ud800","credentials":[]}]}]}"#,
            .malformed, "lone surrogate"
        ),
        (#"{"version":{"major":1,"minor":0},"accounts":[01]}"#, .malformed, "expected ',' or ']'"),
        (#"{"accounts":[]}"#, .invalid, "version is missing"),
        // Dates no face can show (a daemon once trapped converting them to D-Bus's unsigned seconds).
        (
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"x","credentials":[],"#
                + #""creationAt":9223372036854775807}]}]}"#, .invalid, "creationAt is not a date of years 1 to 9999"
        ),
        (
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"x","credentials":[],"#
                + #""extensions":[{"name":"latchkey","version":1,"class":"genp","attributes":["#
                + #"{"key":"cdat","kind":"date","value":"1e300"}]}]}]}]}"#, .invalid,
            "attribute cdat is not a date of years 1 to 9999"
        ),
        ("{\"a\":\"\u{1}\"}", .malformed, "control character in a string"),
    ])
    func badDocumentsGetOneLineNamingTheFault(document: String, kind: ExchangeError.Kind, words: String) throws {
        let error = exchangeError { _ = try CXFDocument.decode(try! secret(document)) }
        #expect(error?.kind == kind)
        #expect(error?.message.contains(words) == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains("\n") == false)
    }

    @Test func deepNestingIsRefusedWithoutExhaustingTheStack() throws {
        let document = try secret(String(repeating: "[", count: 100_000))
        let error = exchangeError { _ = try CXFDocument.decode(document) }
        #expect(error?.kind == .tooLarge)
        #expect(error?.message == "CXF document: nested deeper than 64 at byte 64")
    }

    @Test func hugeCountsAreRefused() throws {
        // The count is the reader's (4 million values by default; a thousand here, to be quick).
        let document = try secret("[" + String(repeating: "0,", count: 1000) + "0]")
        let error = exchangeError {
            _ = try document.withUnsafeBytes { (bytes) throws(ExchangeError) in
                try JSONReader.parse(bytes, what: "CXF document", valueLimit: 1000)
            }
        }
        #expect(error?.kind == .tooLarge)
        #expect(error?.message == "CXF document: more than 1000 values")
        let items = try secret(
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":["#
                + String(repeating: "{},", count: CXFDocument.maxItems) + "{}]}]}")
        let tooMany = exchangeError { _ = try CXFDocument.decode(items) }
        #expect(tooMany?.message == "CXF document: more than 1000000 items")
    }

    @Test func aLatchkeyExtensionWithAWrongKindIsRefused() throws {
        let document = try secret(
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"x","credentials":[],"#
                + #""extensions":[{"name":"latchkey","version":1,"class":"genp","attributes":["#
                + #"{"key":"pdmn","kind":"number","value":"3"}]}]}]}]}"#)
        let error = exchangeError { _ = try CXFDocument.decode(document) }
        #expect(error?.kind == .invalid)
        #expect(error?.message.hasPrefix("CXF document: attribute pdmn has the wrong kind at byte") == true)
    }

    @Test func aFileNeverMakesASecretPortalKey() throws {
        let document = try secret(
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"x","credentials":[],"#
                + #""extensions":[{"name":"latchkey","version":1,"class":"genp","secret":"AAEC","attributes":["#
                + #"{"key":"lk:portal-key","kind":"string","value":"org.example.App"},"#
                + #"{"key":"svce","kind":"string","value":"x"}]}]}]}]}"#)
        let reading = try CXFDocument.decode(document)
        #expect(reading.items.count == 1)
        #expect(reading.items[0].attributes == [.service: .string("x")])
        #expect(reading.items[0].secret == Data([0, 1, 2]))
    }

    @Test func everyURLOfAnItemIsKeptAndWrittenBackInOrder() throws {
        let document = try secret(
            #"{"version":{"major":1,"minor":0},"accounts":[{"items":[{"title":"Shop","scope":{"urls":["#
                + #""https://shop.example:8443/login","https://www.shop.example/","app://shop"]},"#
                + #""credentials":[{"type":"basic-auth","username":{"fieldType":"string","value":"ann"},"#
                + #""password":{"fieldType":"concealed-string","value":"pw"}}]}]}]}"#)
        let reading = try CXFDocument.decode(document)
        let shop = try item(reading, "Shop", .internetPassword)
        // The first URL (naming a host) is the server; the others are kept, in order, one a line.
        #expect(shop.attributes[.server] == .string("shop.example"))
        #expect(shop.attributes[.port] == .number(8443))
        #expect(
            shop.attributes[.secretService(CXFDocument.otherURLs)]
                == .string("https://www.shop.example/\napp://shop"))
        // Exported, the item's scope has its server's URL first, then the others.
        let keychain = try Keychain.createInMemory(password: Array("pw".utf8))
        try keychain.add(reading.items)
        let export = try CXFDocument.encode(
            [ExportedKeychain(name: "login", items: try everything(in: keychain))], exporter: "Latchkey",
            at: Date(timeIntervalSince1970: 1_800_000_000))
        let json = String(decoding: export.document.withUnsafeBytes { Data($0) }, as: UTF8.self)
        #expect(
            json.contains(
                #""urls":["https://shop.example:8443/login","https://www.shop.example/","app://shop"]"#))
    }
}
