import Foundation
import GnomeKeyringImport
import KeychainCore
import KeychainStore
import Testing

/// The keyring files Debian's gnome-keyring-daemon wrote (`Tests/Integration/gnome_keyring.py Fixtures`):
/// login.keyring (password below), second.keyring (its own password) and open.keyring (empty
/// password, so plain text).
private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
private let loginPassword = Array("gnome login pw".utf8)
private let secondPassword = Array("second keyring pw ü".utf8)

private func fixture(_ name: String) throws -> KeyringFile {
    try KeyringFile(path: fixtures.appendingPathComponent(name).path)
}

private func item(_ keyring: GnomeKeyring, _ label: String) throws -> GnomeKeyringItem {
    try #require(keyring.items.first { $0.label == label }, "no item \(label)")
}

/// A temporary keychain, removed with its directory when released.
private final class ScratchKeychain {
    let directory: String
    let keychain: Keychain

    init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-gk-\(UUID().uuidString)")
            .path
        keychain = try Keychain.create(
            at: directory + "/login.keychain-db", password: Array("pw".utf8))
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// Every Secret Service item: label, attributes, secret, content type and dates.
    func items() throws -> [(label: String, attributes: [String: String], secret: Data, type: String, dates: [Date])] {
        let references = try keychain.items(
            matching: ItemQuery(.genericPassword, synchronizable: .any, limit: .all, returning: .attributes))
        return try references.map { found in
            let full = try #require(
                try keychain.items(
                    matching: ItemQuery(
                        .genericPassword, synchronizable: .any, references: [found.reference],
                        returning: [.attributes, .data])
                ).first)
            let attributes = try #require(full.attributes)
            guard case .string(let label)? = attributes[.label], case .string(let type)? = attributes[.contentType],
                case .date(let created)? = attributes[.creationDate],
                case .date(let modified)? = attributes[.modificationDate]
            else { throw KeychainError(.decode, "an item lacks its label, content type or dates") }
            #expect(attributes[.secretServiceItem] == .string("1"))
            return (
                label, AttributeMapping.secretServiceAttributes(attributes, of: .genericPassword),
                full.secret ?? Data(), type, [created, modified]
            )
        }
    }
}

@Suite struct ReaderTests {
    @Test func binaryLoginKeyringOpensWithItsPassword() throws {
        let file = try fixture("login.keyring")
        #expect(file.format == .binary)
        #expect(file.needsPassword)
        let keyring = try file.keyring(password: loginPassword)
        #expect(keyring.format == .binary)
        #expect(keyring.name == "Login")
        #expect(keyring.items.count == 8)
        #expect(keyring.created > 1_600_000_000)

        let chrome = try item(keyring, "Chrome Safe Storage")
        #expect(chrome.secret == Array(0...255))
        #expect(chrome.attributes == ["xdg:schema": "chrome_libsecret_os_crypt_password_v2", "application": "chrome"])
        #expect(chrome.contentType == nil)
        #expect(chrome.created >= keyring.created && chrome.modified >= chrome.created)

        #expect(try item(keyring, "Mail password for alice").secret == Array("pässwörd ✓".utf8))
        #expect(try item(keyring, "Multi-line note").secret == Array("line one\nline two\r\nline three\n".utf8))
        let many = try item(keyring, "Many attributes")
        #expect(many.attributes.count == 41)
        #expect(many.attributes["xdg:schema"] == "org.freedesktop.Secret.Generic")
        #expect(many.attributes["attr07"] == "value 7 ✓")
        let twins = keyring.items.filter { $0.label == "Twin" }.map { String(decoding: $0.secret, as: UTF8.self) }
        #expect(Set(twins) == ["first twin", "second twin"])
        // An item created without xdg:schema: gnome-keyring shows the schema of its item type.
        #expect(
            try item(keyring, "No schema item").attributes == [
                "service": "backup.example", "account": "bob", "xdg:schema": "org.freedesktop.Secret.Generic",
            ])
    }

    @Test func secondKeyringOpensWithItsOwnPasswordOnly() throws {
        let file = try fixture("second.keyring")
        let keyring = try file.keyring(password: secondPassword)
        #expect(keyring.name == "second")
        #expect(keyring.items.count == 2)
        let first = try item(keyring, "Second keyring item")
        #expect(first.secret == Array("ünïcødé\tsecret".utf8))
        #expect(first.attributes == ["xdg:schema": "org.example.Second", "user": "carol", "port": "8443"])
        #expect(try item(keyring, "Empty secret").secret.isEmpty)
        #expect(throws: GnomeKeyringError(file.path, .wrongPassword)) { try file.keyring(password: loginPassword) }
    }

    @Test func plainTextKeyringNeedsNoPassword() throws {
        let file = try fixture("open.keyring")
        #expect(file.format == .plainText)
        #expect(!file.needsPassword)
        let keyring = try file.keyring(password: [])
        #expect(keyring.format == .plainText)
        #expect(keyring.name == "open")
        #expect(keyring.items.count == 3)
        let plain = try item(keyring, "Plain text item")
        #expect(plain.secret == Array("plain secret".utf8))
        #expect(plain.attributes == ["xdg:schema": "org.example.Open", "k": "v = w", "spaced": "  leading"])
        #expect(try item(keyring, "Binary in plain text").secret == [0x00, 0xff, 0x10, 0x20, 0x62, 0x69, 0x6e])
        // gnome-keyring writes secrets raw: this one spills over two lines and keeps its spaces.
        let multi = try item(keyring, " Label with spaces \\ and [brackets] ")
        #expect(multi.secret == Array("  two\nlines  ".utf8))
        #expect(multi.created > 1_600_000_000)
    }

    @Test func wrongPasswordIsAClearErrorNamingTheFile() throws {
        let file = try fixture("login.keyring")
        let error = try #require(throws: GnomeKeyringError.self) { try file.keyring(password: Array("nope".utf8)) }
        #expect(error.kind == .wrongPassword)
        #expect(error.description.hasPrefix(file.path + ": wrong password"))
    }

    @Test func everyTruncatedCopyFailsCleanly() throws {
        for name in ["login.keyring", "second.keyring"] {
            let whole = try fixture(name)
            for length in 0..<whole.bytes.count {
                let cut = KeyringFile(path: "/cut/\(name)", bytes: Array(whole.bytes[0..<length]), modified: 0)
                let password = name == "login.keyring" ? loginPassword : secondPassword
                let error = try #require(throws: GnomeKeyringError.self, "\(name) cut at \(length)") {
                    try cut.keyring(password: password)
                }
                #expect(error.path == "/cut/\(name)")
                switch error.kind {
                case .truncated: break
                case .notAKeyring: #expect(length == 0)
                case let other: Issue.record("\(name) cut at \(length): \(other)")
                }
            }
        }
        // Plain text cut anywhere: never a crash, only fewer or shorter items, or an error.
        let open = try fixture("open.keyring")
        for length in 0..<open.bytes.count {
            let cut = KeyringFile(path: "/cut/open.keyring", bytes: Array(open.bytes[0..<length]), modified: 0)
            if let keyring = try? cut.keyring(password: []) { #expect(keyring.items.count <= 3) }
        }
    }

    @Test func bitFlippedCopiesFailCleanlyOrReadTheSameItems() throws {
        let whole = try fixture("second.keyring")
        let original = try whole.keyring(password: secondPassword)
        // The encrypted block is the file's last bytes: its size is the 4 bytes before it.
        var encryptedStart = whole.bytes.count
        for offset in stride(from: 0, to: whole.bytes.count - 4, by: 1) {
            let size = whole.bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            if size > 0, size % 16 == 0, offset + 4 + size == whole.bytes.count {
                encryptedStart = offset + 4
                break
            }
        }
        #expect(encryptedStart < whole.bytes.count)
        for position in 0..<whole.bytes.count {
            for bit in [0, 3, 7] {
                var bytes = whole.bytes
                bytes[position] ^= UInt8(1 << bit)
                let flipped = KeyringFile(path: "/flipped", bytes: bytes, modified: 0)
                do {
                    let keyring = try flipped.keyring(password: secondPassword)
                    // Only fields the reader does not use (flags, reserved bytes, hashed attributes) may change.
                    #expect(position < encryptedStart, "a flip at \(position) in the encrypted block was not noticed")
                    #expect(keyring.items.map(\.secret) == original.items.map(\.secret), "flip at \(position)")
                } catch {
                    #expect(error.path == "/flipped")
                }
            }
        }
    }

    @Test func hostileLengthsAndIterationsAreRefusedWithoutWork() throws {
        var header = Array("GnomeKeyring\n\r".utf8) + [0, 0x0a, 0, 0, 0, 0]
        // A name claiming nearly 2 GiB in a 30-byte file.
        let huge = KeyringFile(path: "/hostile", bytes: header + [0x7f, 0xff, 0xff, 0xfe, 0x41, 0x41], modified: 0)
        #expect(throws: GnomeKeyringError("/hostile", .truncated("the keyring name"))) {
            try huge.keyring(password: [])
        }
        // Four billion hash iterations.
        header += [0, 0, 0, 1, 0x41] + [UInt8](repeating: 0, count: 16) + [0, 0, 0, 0, 0, 0, 0, 0]
        header += [0xff, 0xff, 0xff, 0xff] + [UInt8](repeating: 1, count: 8) + [UInt8](repeating: 0, count: 16)
        let slow = KeyringFile(path: "/hostile", bytes: header + [0, 0, 0, 0, 0, 0, 0, 16], modified: 0)
        #expect(throws: GnomeKeyringError("/hostile", .corrupt("4294967295 hash iterations"))) {
            try slow.keyring(password: [])
        }
        // Four billion items announced, none there.
        header[header.count - 28..<header.count - 24] = [0, 0, 3, 0xe8]
        let many = KeyringFile(path: "/hostile", bytes: header + [0xff, 0xff, 0xff, 0xff], modified: 0)
        #expect(throws: GnomeKeyringError("/hostile", .truncated("an item id"))) { try many.keyring(password: []) }
        // Other versions and other files.
        let version = KeyringFile(path: "/v", bytes: Array(header[0..<16]) + [2, 0, 0, 0], modified: 0)
        #expect(throws: GnomeKeyringError("/v", .unsupportedVersion(major: 2, minor: 0, crypto: 0, hash: 0))) {
            try version.keyring(password: [])
        }
        // Version 1.0 is libsecret's file backend: four bytes are no such file.
        let libsecret = KeyringFile(path: "/v", bytes: Array(header[0..<16]) + [1, 0, 0, 0], modified: 0)
        #expect(throws: GnomeKeyringError.self) { try libsecret.keyring(password: []) }
        let text = KeyringFile(path: "/t", bytes: Array("[other]\nkey=value\n".utf8), modified: 0)
        #expect(throws: GnomeKeyringError("/t", .notAKeyring)) { try text.keyring(password: []) }
    }

    @Test func unreadableFilesAreNamed() throws {
        let error = try #require(throws: GnomeKeyringError.self) { try KeyringFile(path: "/nonexistent/x.keyring") }
        #expect(error.path == "/nonexistent/x.keyring")
        #expect(error.description.contains("No such file"))
    }

    /// What another program (or a Flatpak app, in its own directory) can put where the import reads a keyring:
    /// a FIFO (whose open would wait for a writer forever), a link to a device that never ends, a directory, a
    /// symbolic link to a real keyring, a file past the size bound. Each is refused at once, naming the path;
    /// nothing is read from the FIFO or the device.
    @Test func onlyRegularFilesAreReadAndNeverPastTheBound() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "latchkey-gk-files-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/fifo.keyring"
        try #require(mkfifo(fifo, 0o600) == 0)
        let started = Date()
        #expect(throws: GnomeKeyringError(fifo, .notAKeyring)) { try KeyringFile(path: fifo) }
        #expect(Date().timeIntervalSince(started) < 5)

        let device = directory + "/zero.keyring"
        try FileManager.default.createSymbolicLink(atPath: device, withDestinationPath: "/dev/zero")
        let linkError = try #require(throws: GnomeKeyringError.self) { try KeyringFile(path: device) }
        #expect(linkError == GnomeKeyringError(device, .unreadable("a symbolic link, which is not followed")))
        // Reached without a link (/dev/zero itself): not a regular file, and nothing is read.
        #expect(throws: GnomeKeyringError("/dev/zero", .notAKeyring)) { try KeyringFile(path: "/dev/zero") }

        let real = directory + "/real.keyring"
        try FileManager.default.copyItem(atPath: fixtures.appendingPathComponent("login.keyring").path, toPath: real)
        let link = directory + "/link.keyring"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        #expect(throws: GnomeKeyringError(link, .unreadable("a symbolic link, which is not followed"))) {
            try KeyringFile(path: link)
        }
        #expect(try KeyringFile(path: real).format == .binary)

        let folder = directory + "/folder.keyring"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        #expect(throws: GnomeKeyringError(folder, .notAKeyring)) { try KeyringFile(path: folder) }

        // Sparse: its size is past the bound, its blocks are not.
        let large = directory + "/large.keyring"
        try #require(FileManager.default.createFile(atPath: large, contents: nil))
        try #require(truncate(large, off_t(KeyringFile.maximumSize + 1)) == 0)
        #expect(throws: GnomeKeyringError(large, .tooLarge(KeyringFile.maximumSize + 1))) {
            try KeyringFile(path: large)
        }
        // gnome-keyring's `default` is read the same way: a FIFO there names no keyring, at once.
        try #require(mkfifo(directory + "/default", 0o600) == 0)
        #expect(GnomeKeyringImporter.defaultKeyringPath(inDirectory: directory) == nil)
    }
}

@Suite struct ImporterTests {
    /// The keys gnome-keyring's Secret portal backend kept (exactly `app_id` and
    /// `xdg:schema=org.freedesktop.Secret.Generic`) get the mark Latchkey's backend hands keys out by; an
    /// item with more attributes, another schema or an id that is no Flatpak app id does not.
    @Test func portalKeysAreMarkedAndNothingElseIs() throws {
        func item(_ number: Int, _ attributes: [(String, String)]) -> String {
            "[\(number)]\nitem-type=0\ndisplay-name=\nsecret=key \(number)\nmtime=1\nctime=1\n\n"
                + attributes.enumerated().map { index, pair in
                    "[\(number):attribute\(index)]\nname=\(pair.0)\ntype=string\nvalue=\(pair.1)\n\n"
                }.joined()
        }
        let generic = ("xdg:schema", "org.freedesktop.Secret.Generic")
        let text =
            "[keyring]\ndisplay-name=Login\nctime=1\nmtime=0\nlock-on-idle=false\nlock-after=false\n\n"
            + item(1, [("app_id", "org.example.App"), generic])
            + item(2, [("app_id", "org.example.Other"), generic, ("user", "x")])
            + item(3, [("app_id", "org.example.Third"), ("xdg:schema", "org.example.Schema")])
            + item(4, [("app_id", "../escape"), generic])
        let keyring = try KeyringFile(path: "/t/login.keyring", bytes: Array(text.utf8), modified: 0)
            .keyring(password: [])
        let marks = keyring.items.sorted { $0.id < $1.id }.map {
            GnomeKeyringImporter.newItem($0).attributes[.portalKey]
        }
        #expect(marks == [.string("org.example.App"), nil, nil, nil])
    }

    @Test func importKeepsEveryFieldAndASecondImportAddsNothing() throws {
        let scratch = try ScratchKeychain()
        let file = try fixture("login.keyring")
        let keyring = try file.keyring(password: loginPassword)
        guard
            case .imported(let record) = try GnomeKeyringImporter.importKeyring(
                keyring, from: file, into: scratch.keychain)
        else { throw KeychainError(.internalComponent, "the first import did not import") }
        #expect(record.added == 8 && record.alreadyPresent == 0 && record.keyring == "Login")
        #expect(record.digest == file.digest && record.path == file.path)

        let stored = try scratch.items()
        #expect(stored.count == 8)
        for original in keyring.items {
            let matches = stored.filter { $0.label == original.label && $0.secret == Data(original.secret) }
            #expect(matches.count == 1, "\(original.label)")
            let copy = try #require(matches.first)
            #expect(copy.attributes == original.attributes)
            #expect(copy.type == "text/plain")
            #expect(
                copy.dates == [
                    Date(timeIntervalSince1970: TimeInterval(original.created)),
                    Date(timeIntervalSince1970: TimeInterval(original.modified)),
                ])
        }

        // The same file again: nothing added, the earlier record returned.
        #expect(
            try GnomeKeyringImporter.importKeyring(keyring, from: file, into: scratch.keychain)
                == .alreadyImported(record))
        // A changed file (another digest) with the same items: its items are recognised, none added twice.
        let changed = KeyringFile(path: file.path, bytes: file.bytes + [0], modified: file.modified + 1)
        guard
            case .imported(let again) = try GnomeKeyringImporter.importKeyring(
                keyring, from: changed, into: scratch.keychain)
        else { throw KeychainError(.internalComponent, "the changed file was not imported") }
        #expect(again.added == 0 && again.alreadyPresent == 8)
        #expect(try scratch.keychain.count() == 8)
        #expect(try GnomeKeyringImporter.records(in: scratch.keychain) == [record, again])
    }

    @Test func recordsAreReadableWhileLocked() throws {
        let scratch = try ScratchKeychain()
        let file = try fixture("open.keyring")
        _ = try GnomeKeyringImporter.importKeyring(try file.keyring(password: []), from: file, into: scratch.keychain)
        scratch.keychain.lock()
        let reopened = try Keychain(opening: scratch.keychain.path)
        let records = try GnomeKeyringImporter.records(in: reopened)
        #expect(records.map(\.keyring) == ["open"])
        #expect(GnomeKeyringImporter.earlierImport(of: file, in: records) != nil)
    }

    @Test func aFailedImportLeavesTheKeychainAsItWas() throws {
        let scratch = try ScratchKeychain()
        let file = try fixture("second.keyring")
        // A wrong password fails before the keychain is touched.
        #expect(throws: GnomeKeyringError.self) { try file.keyring(password: loginPassword) }
        #expect(try scratch.keychain.count() == 0)
        // A locked keychain refuses the whole keyring: no item, no record.
        let keyring = try file.keyring(password: secondPassword)
        scratch.keychain.lock()
        #expect(throws: KeychainError.self) {
            try GnomeKeyringImporter.importKeyring(keyring, from: file, into: scratch.keychain)
        }
        try scratch.keychain.unlock(password: "pw")
        #expect(try scratch.keychain.count() == 0)
        #expect(try GnomeKeyringImporter.records(in: scratch.keychain).isEmpty)
    }

    @Test func defaultPathsAreTheKeyringsDirectoryLoginFirst() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent(
            "latchkey-gk-home-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let directory = home.appendingPathComponent("data/keyrings")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["a.keyring", "login.keyring", "user.keystore", "default"] {
            try Data().write(to: directory.appendingPathComponent(name))
        }
        let paths = KeyringFile.defaultPaths(environment: ["XDG_DATA_HOME": home.path + "/data", "HOME": "/nowhere"])
        #expect(paths == [directory.path + "/login.keyring", directory.path + "/a.keyring"])
        #expect(KeyringFile.keyringDirectory(environment: ["HOME": "/home/u"]) == "/home/u/.local/share/keyrings")
    }
}

@Suite struct DestinationTests {
    @Test func loginKeyringGoesToLoginOthersToTheirEarlierCollectionOrANewOne() throws {
        let scratch = try ScratchKeychain()
        let login = try fixture("login.keyring")
        let second = try fixture("second.keyring")
        let open = try fixture("open.keyring")
        let collection = try GnomeKeyringImporter.createCollection(
            label: "second", source: second.path, inDirectory: scratch.directory, protectedBy: scratch.keychain)
        #expect(collection.path == scratch.directory + "/second.keychain-db")
        #expect(collection.parentIdentifier == scratch.keychain.identifier)
        #expect(try collection.metadata("label") == Data("second".utf8))
        // A second collection with the same label is numbered, not written over.
        let twin = try GnomeKeyringImporter.createCollection(
            label: "Second", source: "/elsewhere/second.keyring", inDirectory: scratch.directory,
            protectedBy: scratch.keychain)
        #expect(twin.path == scratch.directory + "/second_2.keychain-db")

        let recorded = GnomeKeyringImporter.recordedKeychains(login: scratch.keychain, inDirectory: scratch.directory)
        #expect(recorded.map(\.path) == [scratch.keychain.path, collection.path, twin.path])
        func destination(_ file: KeyringFile, _ name: String) -> KeyringDestination {
            GnomeKeyringImporter.destination(of: file, named: name, login: scratch.keychain.path, among: recorded)
        }
        #expect(destination(login, "Login") == .login)
        #expect(destination(second, "second") == .keychain(collection.path))
        #expect(destination(open, "open") == .newCollection(label: "open"))

        // Once imported, a keyring's records say where it went, in any keychain beside the login one.
        _ = try GnomeKeyringImporter.importKeyring(try open.keyring(password: []), from: open, into: twin)
        let after = GnomeKeyringImporter.recordedKeychains(login: scratch.keychain, inDirectory: scratch.directory)
        #expect(
            GnomeKeyringImporter.destination(of: open, named: "open", login: scratch.keychain.path, among: after)
                == .keychain(twin.path))
        #expect(GnomeKeyringImporter.earlierImport(of: open, in: after)?.keyring == "open")
        #expect(GnomeKeyringImporter.earlierImport(of: second, in: after) == nil)
    }

    @Test func theDefaultFileNamesAKeyringAndNothingElse() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "latchkey-gk-default-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        #expect(GnomeKeyringImporter.defaultKeyringPath(inDirectory: directory.path) == nil)
        let file = directory.appendingPathComponent("default")
        for (contents, expected) in [
            ("second", directory.path + "/second.keyring"), ("My_Second\n", directory.path + "/My_Second.keyring"),
            ("../../etc/passwd", nil), ("..", nil), ("", nil),
        ] {
            try Data(contents.utf8).write(to: file)
            #expect(GnomeKeyringImporter.defaultKeyringPath(inDirectory: directory.path) == expected, "\(contents)")
        }
    }

    @Test func collectionIDsAreMadeOfLettersDigitsAndUnderscores() {
        #expect(GnomeKeyringImporter.collectionID(forLabel: "Work Stuff") == "workstuff")
        #expect(GnomeKeyringImporter.collectionID(forLabel: "My_Second") == "my_second")
        #expect(GnomeKeyringImporter.collectionID(forLabel: "ünï/..") == "n")
        #expect(GnomeKeyringImporter.collectionID(forLabel: "✓") == "keyring")
    }
}

/// libsecret-v1.keyring was written by the real libsecret's file backend (Tests/Integration/gnome_keyring.py
/// `libsecret_file`, password "fixture pw"), as a Flatpak app's libsecret writes one.
@Suite struct LibsecretFileTests {
    private let password = Array("fixture pw".utf8)

    @Test func opensWithItsPasswordAndKeepsEveryField() throws {
        let file = try fixture("libsecret-v1.keyring")
        #expect(file.format == .libsecretFile && file.needsPassword)
        let keyring = try file.keyring(password: password)
        #expect(keyring.format == .libsecretFile && keyring.name == "libsecret-v1")
        #expect(keyring.items.map(\.label) == ["Flatpak token", "Second ✓"])
        let token = try item(keyring, "Flatpak token")
        #expect(token.attributes == ["account": "alice"])
        #expect(token.secret == Array("tökén\nline two".utf8))
        #expect(token.created == 1_795_391_167 && token.modified == 1_795_391_167 && token.contentType == nil)
        #expect(try item(keyring, "Second ✓").secret == Array("  spaced  ".utf8))
    }

    @Test func aWrongPasswordIsNamed() throws {
        let file = try fixture("libsecret-v1.keyring")
        #expect(throws: GnomeKeyringError(file.path, .wrongPassword)) { try file.keyring(password: loginPassword) }
    }

    @Test func aFlatpakAppsFileIsNamedAfterTheApp() {
        #expect(
            LibsecretFile.flatpakApp(of: "/home/u/.var/app/org.example.App/data/keyrings/default.keyring")
                == "org.example.App")
        #expect(LibsecretFile.flatpakApp(of: "/home/u/.local/share/keyrings/default.keyring") == nil)
        #expect(LibsecretFile.flatpakApp(of: "default.keyring") == nil)
    }

    @Test func everyTruncatedCopyFailsCleanly() throws {
        let file = try fixture("libsecret-v1.keyring")
        for length in 0..<file.bytes.count {
            let cut = KeyringFile(path: file.path, bytes: Array(file.bytes[0..<length]), modified: 0)
            #expect(throws: GnomeKeyringError.self, "cut at \(length)") { try cut.keyring(password: password) }
        }
    }

    @Test func damagedCopiesFailCleanlyOrReadTheSameItems() throws {
        let file = try fixture("libsecret-v1.keyring")
        let intact = try file.keyring(password: password).items
        // Every third byte flipped (each try derives the key: 100,000 PBKDF2 rounds).
        for position in stride(from: 18, to: file.bytes.count, by: 3) {
            var bytes = file.bytes
            bytes[position] ^= 0xff
            let damaged = KeyringFile(path: file.path, bytes: bytes, modified: 0)
            do {
                let read = try damaged.keyring(password: password)
                // Only the hashed attributes (unused) or header counts may change without notice.
                #expect(read.items == intact, "flipped at \(position)")
            } catch {
                #expect(error.path == file.path)
            }
        }
    }
}
