import Foundation
import KeychainCore
import KeychainStore
import Posix
import Testing

@testable import CredentialExchange

@Suite struct PasswordCSVTests {
    @Test func chromeRowsWithQuotesCommasAndLineBreaksInCRLF() throws {
        let reading = try ExchangeFile.decode(try fixture("chrome.csv"))
        #expect(reading.format == "chrome-csv")
        #expect(reading.items.count == 3)
        let first = try item(reading, "accounts.example.com")
        #expect(first.itemClass == .internetPassword)
        #expect(first.attributes[.server] == .string("accounts.example.com"))
        #expect(first.attributes[.path] == .string("/signin"))
        #expect(first.attributes[.account] == .string("alice@example.com"))
        #expect(first.attributes[.comment] == .string("line one\r\nline two"))
        #expect(secretText(first) == "s3cret,with \"quotes\"")
        let second = try item(reading, "example.org")
        #expect(second.attributes[.port] == .number(8080))
        #expect(second.attributes[.account] == nil)
        #expect(secretText(second) == "pass-only")
        let app = try item(reading, "com.example.app")
        #expect(app.attributes[.protocol] == .string("android"))
    }

    @Test func firefoxRowsKeepTheirRealmAndTimes() throws {
        let reading = try ExchangeFile.decode(try fixture("firefox.csv"))
        #expect(reading.format == "firefox-csv")
        #expect(reading.items.count == 2)
        let first = try item(reading, "www.example.com")
        #expect(secretText(first) == "fx-päss")
        #expect(first.creationDate == Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(first.modificationDate == Date(timeIntervalSince1970: 1_700_000_400))
        #expect(first.attributes[.secretService("form-action-origin")] == .string("https://www.example.com"))
        let realm = try item(reading, "intranet.example.net")
        #expect(realm.attributes[.securityDomain] == .string("Intranet Login"))
    }

    @Test func bitwardenLoginsNotesFieldsAndTOTP() throws {
        let reading = try ExchangeFile.decode(try fixture("bitwarden.csv"))
        #expect(reading.format == "bitwarden-csv")
        let mail = try item(reading, "Mail", .internetPassword)
        #expect(mail.attributes[.server] == .string("mail.example.com"))
        // Custom fields (the CSV does not say which were hidden) are never attributes: items of their own.
        #expect(!mail.attributes.keys.contains(.secretService("PIN")))
        let pin = try #require(reading.items.first { $0.attributes[.account] == .string("PIN") })
        #expect(pin.itemClass == .genericPassword && pin.attributes[.service] == .string("Mail"))
        #expect(secretText(pin) == "1234")
        #expect(reading.items.contains { $0.attributes[.account] == .string("Recovery") && secretText($0) == "none" })
        #expect(mail.attributes[.secretService("group")] == .string("Work"))
        #expect(mail.attributes[.comment] == .string("remember: rotate\nevery year"))
        #expect(secretText(mail) == "bw-pass")
        let totp = try #require(
            reading.items.first { $0.itemClass == .genericPassword && secretText($0)?.hasPrefix("otpauth:") == true })
        #expect(
            secretText(totp)
                == "otpauth://totp/Mail:frank?secret=JBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30&issuer=Mail")
        let note = try item(reading, "Locker combination")
        #expect(secretText(note) == "12-34-56")
        #expect(note.attributes[.itemDescription] == .string("secure note"))
        let plain = try item(reading, "No URL")
        #expect(plain.itemClass == .genericPassword)
        #expect(plain.attributes[.service] == .string("No URL"))
        #expect(reading.items.count == 6)
    }

    @Test func keepassxcExportMadeByKeePassXC274() throws {
        let reading = try ExchangeFile.decode(try fixture("keepassxc-2.7.4.csv"))
        #expect(reading.format == "keepassxc-csv")
        #expect(reading.items.count == 3)
        let login = try item(reading, "Example Login")
        #expect(secretText(login) == "pa\"ss,word")
        #expect(login.attributes[.comment] == .string("first line\nsecond, \"quoted\" line"))
        #expect(login.attributes[.secretService("group")] == .string("Passwords/Internet"))
        #expect(login.attributes[.port] == .number(8443))
        let wifi = try item(reading, "Wi-Fi Büro")
        #expect(wifi.itemClass == .genericPassword)
        #expect(secretText(wifi) == "hunter2")
        let git = try item(reading, "Git server")
        #expect(git.attributes[.protocol] == .string("ssh "))
        #expect(secretText(git) == "über-sicher")
        #expect(git.creationDate == ISODate.parse("2026-11-26T09:34:03Z"))
    }

    @Test func keepassxcTOTPAndDates() throws {
        let reading = try ExchangeFile.decode(try fixture("keepassxc-totp.csv"))
        let totp = try item(reading, "GitHub", .genericPassword)
        #expect(secretText(totp)?.hasPrefix("otpauth://totp/GitHub:ivan?secret=JBSWY3DPEHPK3PXP") == true)
        let login = try item(reading, "GitHub", .internetPassword)
        #expect(login.creationDate == Date(timeIntervalSince1970: 1_672_628_645))
        #expect(login.modificationDate == Date(timeIntervalSince1970: 1_706_933_106))
    }

    @Test func applePasswordsWithABOMAndOTPAuth() throws {
        let reading = try ExchangeFile.decode(try fixture("apple-passwords.csv"))
        #expect(reading.format == "apple-passwords-csv")
        #expect(reading.items.count == 3)
        let shop = try item(reading, "shop.example.com (heidi)", .internetPassword)
        #expect(secretText(shop) == "apple-pass")
        let totp = try item(reading, "shop.example.com (heidi)", .genericPassword)
        #expect(secretText(totp)?.hasPrefix("otpauth://totp/shop.example.com:heidi?secret=GEZDGNBVGY3TQOJQ") == true)
        let router = try item(reading, "router")
        #expect(router.attributes[.server] == .string("192.168.1.1"))
        #expect(router.attributes[.protocol] == .string("http"))
        #expect(router.attributes[.comment] == .string("the router, downstairs"))
    }

    @Test(arguments: [
        (
            "user,secret\nx,y\n", ExchangeError.Kind.unknownFormat,
            "CSV file: the header on line 1 is not a Chrome, Firefox, Bitwarden, KeePassXC or Apple Passwords export"
        ),
        (
            "name,url,username,password\na,b,c,\"d\n", .malformed,
            "CSV file: the quoted field opened on line 2 is not closed"
        ),
        ("name,url,username,password\na,b,\"c\"x,d\n", .malformed, "CSV file: text after a closing quote on line 2"),
        ("", .unknownFormat, "CSV file: empty"),
        (
            "name,url,username,password\ra,b,c,d\r", .malformed,
            "CSV file: a carriage return without a line feed on line 1"
        ),
        (
            "name,url,username,password\na,b,c,\u{FF}\n", .malformed,
            "CSV file: the password column on line 2 is not UTF-8"
        ),
        (
            "\"url\",\"username\",\"password\",\"httpRealm\",\"formActionOrigin\",\"guid\",\"timeCreated\","
                + "\"timeLastUsed\",\"timePasswordChanged\"\nhttps://a,b,c,,,g,soon,1,1\n", .invalid,
            "CSV file: the timecreated column on line 2 is not a time"
        ),
    ])
    func badFilesGetOneLineNamingTheLine(file: String, kind: ExchangeError.Kind, message: String) throws {
        // U+00FF stands for the byte 0xFF, which no UTF-8 text holds.
        var bytes = Array(file.utf8)
        if let index = bytes.firstIndex(of: 0xC3), file.contains("\u{FF}") {
            bytes[index] = 0xFF
            bytes.remove(at: index + 1)
        }
        let error = exchangeError { _ = try ExchangeFile.decode(try! SecretBytes(copying: bytes)) }
        #expect(error?.kind == kind)
        #expect(error?.message == message)
    }

    @Test func tooManyFieldsInARowAreRefused() throws {
        let file = try secret("name,url,username,password\n" + String(repeating: "a,", count: 300) + "a\n")
        let error = exchangeError { _ = try PasswordCSV.decode(file) }
        #expect(error?.kind == .tooLarge)
        #expect(error?.message == "CSV file: more than 256 fields on line 2")
    }
}
