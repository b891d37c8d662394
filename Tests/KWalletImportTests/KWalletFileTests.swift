import COpenSSL
import Foundation
import KWalletFormat
import KWalletImport
import Posix
import Testing

/// The wallets Debian's real kwalletd5 wrote (`Fixtures/make-fixtures.py`, see `Fixtures/README.md`).
let kwalletFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
let kdewalletPassword = "Pässwörd ✓ for kdewallet"
let workPassword = "work-pass"

func walletFixture(_ name: String) throws -> KWalletFile {
    try KWalletFile(path: kwalletFixtures.appendingPathComponent(name).path)
}

func open(_ file: KWalletFile, _ password: String) throws -> KWalletContents {
    let secret = try SecretBytes(copying: Array(password.utf8))
    return try file.open(password: secret)
}

/// The text of `bytes` (a test's view of a secret).
func text(_ bytes: borrowing SecretBytes) -> String {
    bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
}

@Suite struct KWalletCryptoTests {
    @Test func standardModeIsSHA1() throws {
        for length in [0, 1, 55, 56, 63, 64, 65, 119, 120, 200] {
            let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            var expected = [UInt8](repeating: 0, count: 20)
            var written: UInt32 = 0
            _ = data.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &expected, &written, EVP_sha1(), nil) }
            #expect(data.withUnsafeBytes { KWalletCrypto.kwalletSHA1($0, standard: true) } == expected, "\(length)")
        }
    }

    /// KWallet's SHA-1 is not SHA-1: the empty input's digest, from the word order of sha1.cc (the same value the
    /// fixture script's independent Python version gives, and that checks the real kwalletd5 files).
    @Test func kwalletVariantDiffers() {
        let empty = [UInt8]().withUnsafeBytes { KWalletCrypto.kwalletSHA1($0) }
        #expect(empty.map { String(format: "%02x", $0) }.joined() == "1ef84498ecf608147d1332b9cfd7be33a318f5dc")
        let abc = Array("abc".utf8).withUnsafeBytes { KWalletCrypto.kwalletSHA1($0) }
        #expect(abc.map { String(format: "%02x", $0) }.joined() == "9006c21416fb53f6804f6e39b4af9d4c4f3d516e")
    }
}

@Suite struct KWalletFileTests {
    @Test func readsTheRealKdewallet() throws {
        let file = try walletFixture("kdewallet.kwl")
        #expect([file.header.major, file.header.minor, file.header.cipher, file.header.hash] == [0, 1, 3, 2])
        #expect(file.walletName == "kdewallet")
        let contents = try open(file, kdewalletPassword)
        let indexed = contents.matchesIndex(of: file)
        #expect(indexed)
        let names = contents.entries.map { "\($0.folder)/\($0.key):\($0.type)" }
        #expect(
            names == [
                "Binary/blob:stream", "Form Data/https://example.org/login:map", "Passwords/empty:password",
                "Passwords/mail@example.org:password",
            ])
        #expect(contents.emptyFolders == ["Empty Folder"])
        #expect(contents.skippedEntries == 1)
        let stored = try contents.entries.map { entry in text(try contents.storedSecret(of: entry)) }
        #expect(
            stored == ["AAEAYmluYXJ5/wA=", #"{"nothing":"","pass":"p@ss wörd","user":"alice"}"#, "", "sëcret ☃ mail"])
    }
}

/// Expects `body` to throw a ``KWalletError`` of `kind` (compared by its case and text).
func expectKWalletError(
    _ kind: KWalletError.Kind, _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) {
    do {
        try body()
        Issue.record("no error; expected \(kind)", sourceLocation: sourceLocation)
    } catch let error as KWalletError {
        #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(error); expected \(kind)", sourceLocation: sourceLocation)
    }
}

/// A scratch directory, removed when released.
final class ScratchDirectory {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-kw-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Copies the fixture `name` (and its salt, if any) here, as `as` (default the same name).
    @discardableResult
    func copy(_ name: String, as target: String? = nil) throws -> String {
        let target = target ?? name
        let destination = path + "/" + target
        try FileManager.default.copyItem(atPath: kwalletFixtures.appendingPathComponent(name).path, toPath: destination)
        let salt = kwalletFixtures.appendingPathComponent(String(name.dropLast(4)) + ".salt").path
        if FileManager.default.fileExists(atPath: salt) {
            try FileManager.default.copyItem(atPath: salt, toPath: path + "/" + String(target.dropLast(4)) + ".salt")
        }
        return destination
    }
}

@Suite struct KWalletReaderTests {
    @Test func aWalletNameIsDecodedFromItsFileName() throws {
        let file = try walletFixture("Work ;C3;BC;2F2.kwl")
        #expect(file.walletName == "Work ü/2")
        let contents = try open(file, workPassword)
        #expect(contents.entries.map { "\($0.folder)/\($0.key)" } == ["Network/vpn"])
        #expect(KWalletFile.decodeWalletName("a;3Bb;zz;4") == "a;b;zz;4")
        #expect(KWalletFile.walletName(ofPath: "/x/kdewallet.kwl") == "kdewallet")
    }

    @Test func theLegacyECBWalletOpensWithTheSHA1Key() throws {
        let file = try walletFixture("legacy.kwl")
        #expect([file.header.major, file.header.minor, file.header.cipher, file.header.hash] == [0, 0, 0, 0])
        #expect(!file.needsSalt)
        let contents = try open(file, kdewalletPassword)
        let stored = try contents.entries.map { entry in text(try contents.storedSecret(of: entry)) }
        #expect(stored.last == "sëcret ☃ mail")
        #expect(contents.entries.count == 4)
        expectKWalletError(.wrongPassword) { _ = try open(file, workPassword) }
    }

    @Test func theLegacyKeyTakesSixteenBytesPerChunk() throws {
        // password2hash: up to 16 bytes give 20, up to 32 give 40, up to 48 give 56 (20+20+16), more give 56.
        for (length, size) in [(1, 20), (16, 20), (17, 40), (32, 40), (33, 56), (48, 56), (49, 56), (80, 56)] {
            let password = try SecretBytes(copying: [UInt8](repeating: 0x61, count: length))
            let key = try password.withUnsafeBytes { (bytes) throws(KWalletError) in
                try KWalletCrypto.legacyKey(password: bytes)
            }
            #expect(key.count == size, "\(length)")
        }
    }

    @Test func aWrongPasswordIsNamedAndNothingIsRead() throws {
        let file = try walletFixture("kdewallet.kwl")
        expectKWalletError(.wrongPassword) { _ = try open(file, "not it") }
        expectKWalletError(.wrongPassword) { _ = try open(file, workPassword) }
    }

    @Test func everyTruncationIsAClearError() throws {
        let whole = try walletFixture("kdewallet.kwl")
        let salt = try whole.salt()
        let password = try SecretBytes(copying: Array(kdewalletPassword.utf8))
        let key = try password.withUnsafeBytes { try whole.key(password: $0, salt: salt) }
        for length in 0..<whole.bytes.count {
            do {
                let cut = try KWalletFile(path: "cut.kwl", bytes: Array(whole.bytes[0..<length]), modified: 0)
                _ = try cut.open(key: key)
                Issue.record("a wallet cut at \(length) bytes opened")
            } catch {
                switch error.kind {
                case .truncated, .notAWallet, .corrupt, .wrongPassword: break
                default: Issue.record("cut at \(length): \(error)")
                }
                #expect(error.description.hasPrefix("cut.kwl: "))
            }
        }
    }

    @Test func aFileCutInsideItsHeaderIsTruncated() {
        for length in 1..<16 {
            let bytes = Array((KWalletFile.magic + [0, 1, 3, 2])[0..<length])
            expectKWalletError(.truncated("the header")) {
                _ = try KWalletFile(path: "h.kwl", bytes: bytes, modified: 0)
            }
        }
        expectKWalletError(.notAWallet) { _ = try KWalletFile(path: "h.kwl", bytes: [], modified: 0) }
        expectKWalletError(.notAWallet) {
            _ = try KWalletFile(path: "h.kwl", bytes: Array("GNOME_KEYRING".utf8), modified: 0)
        }
    }

    @Test func everyFlippedBitIsCaught() throws {
        let whole = try walletFixture("kdewallet.kwl")
        let salt = try whole.salt()
        let password = try SecretBytes(copying: Array(kdewalletPassword.utf8))
        let key = try password.withUnsafeBytes { try whole.key(password: $0, salt: salt) }
        // Every byte after the magic: the version, the clear index and the ciphertext.
        for offset in 12..<whole.bytes.count {
            var bytes = whole.bytes
            bytes[offset] ^= 0x10
            do {
                let flipped = try KWalletFile(path: "flipped.kwl", bytes: bytes, modified: 0)
                _ = try flipped.open(key: key)
                Issue.record("a wallet with byte \(offset) flipped opened")
            } catch {
                if case .crypto = error.kind { Issue.record("\(offset): \(error)") }
            }
        }
    }

    @Test func aGPGWalletIsSkippedWithItsName() throws {
        var bytes = KWalletFile.magic + [0, 1, 2, 0]
        bytes += [UInt8](repeating: 0x42, count: 64)
        expectKWalletError(.gpgWallet) { _ = try KWalletFile(path: "/w/gpg.kwl", bytes: bytes, modified: 0) }
        do {
            _ = try KWalletFile(path: "/w/gpg.kwl", bytes: bytes, modified: 0)
        } catch {
            #expect("\(error)" == "/w/gpg.kwl: a GnuPG-encrypted wallet, which cannot be imported; skipped")
        }
    }

    @Test func hostileCountsAndLengthsAreRefusedBeforeUse() throws {
        let header = KWalletFile.magic + [0, 1, 3, 2]
        func be(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        expectKWalletError(.corrupt("4294967295 folders")) {
            _ = try KWalletFile(path: "h.kwl", bytes: header + be(0xFFFF_FFFF), modified: 0)
        }
        expectKWalletError(.truncated("the name index")) {
            _ = try KWalletFile(
                path: "h.kwl", bytes: header + be(60_000) + [UInt8](repeating: 0, count: 64), modified: 0)
        }
        expectKWalletError(.truncated("the name index")) {
            let index = be(1) + [UInt8](repeating: 7, count: 16) + be(0xFFFF_FFFF)
            _ = try KWalletFile(path: "h.kwl", bytes: header + index + [UInt8](repeating: 0, count: 64), modified: 0)
        }
        expectKWalletError(.corrupt("the encrypted part is not a whole number of 8-byte blocks")) {
            _ = try KWalletFile(path: "h.kwl", bytes: header + be(0) + [UInt8](repeating: 0, count: 33), modified: 0)
        }
        expectKWalletError(.unsupported("version 0.1, cipher 1, hash 2")) {
            _ = try KWalletFile(path: "h.kwl", bytes: KWalletFile.magic + [0, 1, 1, 2] + be(0), modified: 0)
        }
    }

    /// A hostile decrypted stream (a wallet encrypted with a known key by whoever wrote it): counts far past the
    /// end and lengths past the end are refused by the reader, never allocated.
    @Test func hostilePlaintextCountsAreRefused() throws {
        for data in [
            [0, 0, 0, 2, 0, 0x61] + [0xFF, 0xFF, 0xFF, 0xFF],  // a folder "a" with 4 billion entries
            [0x7F, 0xFF, 0xFF, 0xF0],  // a folder name longer than everything
            [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 0xFF, 0xFF, 0xFF],  // a value past the end
        ] as [[UInt8]] {
            let wallet = try hostileWallet(data: data)
            expectKWalletError(.corrupt("the decrypted wallet does not parse: \(try parseError(data))")) {
                _ = try open(wallet, "hostile")
            }
        }
    }

    @Test func aSaltThatIsAFIFOOrALinkToADeviceIsRefusedAtOnce() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.copy("kdewallet.kwl")
        let salt = scratch.path + "/kdewallet.salt"
        try FileManager.default.removeItem(atPath: salt)
        #expect(mkfifo(salt, 0o600) == 0)
        let started = Date()
        expectKWalletError(.noSalt("\(salt) is not a regular file")) {
            _ = try open(try KWalletFile(path: path), kdewalletPassword)
        }
        try FileManager.default.removeItem(atPath: salt)
        try FileManager.default.createSymbolicLink(atPath: salt, withDestinationPath: "/dev/zero")
        expectKWalletError(.noSalt("\(salt) cannot be read: a symbolic link, which is not followed")) {
            _ = try open(try KWalletFile(path: path), kdewalletPassword)
        }
        #expect(Date().timeIntervalSince(started) < 5)
        // A FIFO named like a wallet is no wallet, and is not waited on.
        #expect(mkfifo(scratch.path + "/x.kwl", 0o600) == 0)
        expectKWalletError(.notAWallet) { _ = try KWalletFile(path: scratch.path + "/x.kwl") }
    }

    @Test func kwalletrcNamesTheDefaultWallet() {
        #expect(KWalletrc(kwalletrc: "").networkWallet == "kdewallet")
        #expect(
            KWalletrc(kwalletrc: "[Other]\nDefault Wallet=no\n[Wallet]\nFirst Use=false\n Default Wallet = mine \n")
                .networkWallet == "mine")
        let locations = KWalletLocations(environment: ["HOME": "/h", "XDG_DATA_HOME": "relative"])
        #expect(
            locations == KWalletLocations(directory: "/h/.local/share/kwalletd", configuration: "/h/.config/kwalletrc"))
    }

    @Test func secretServiceLabelsDropTheCopyNumber() {
        #expect(KWalletAttributes.label(folder: "Secret Service", key: "Mail__2_") == "Mail")
        #expect(KWalletAttributes.label(folder: "Secret Service", key: "Mail") == "Mail")
        #expect(KWalletAttributes.label(folder: "web", key: "site__x_") == "web/site__x_")
    }
}

/// The error the QDataStream reader gives for `data`, as the wallet reader reports it.
func parseError(_ data: [UInt8]) throws -> String {
    let cases: [[UInt8]: String] = [
        [0, 0, 0, 2, 0, 0x61, 0xFF, 0xFF, 0xFF, 0xFF]: "\(KWalletFormatError.tooLarge("entry count"))",
        [0x7F, 0xFF, 0xFF, 0xF0]: "\(KWalletFormatError.tooLarge("folder name"))",
        [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 0xFF, 0xFF, 0xFF]:
            "\(KWalletFormatError.tooLarge("entry value"))",
    ]
    return try #require(cases[data])
}

/// A wallet file whose plaintext holds `data`, encrypted (ECB, the legacy key of the password "hostile") as
/// kwalletd would: 8 lead bytes, the length, the data, padding, and KWallet's SHA-1 of the data.
func hostileWallet(data: [UInt8]) throws -> KWalletFile {
    var plain = [UInt8](repeating: 0x11, count: 8)
    plain += (0..<4).map { UInt8(truncatingIfNeeded: data.count >> (24 - 8 * $0)) }
    plain += data
    let size = plain.count + 20
    plain += [UInt8](repeating: 0x22, count: 8 - size % 8)
    plain += data.withUnsafeBytes { KWalletCrypto.kwalletSHA1($0) }
    let password = try SecretBytes(copying: Array("hostile".utf8))
    let key = try password.withUnsafeBytes { (bytes) throws(KWalletError) in
        try KWalletCrypto.legacyKey(password: bytes)
    }
    let cipher = try key.withUnsafeBytes { keyBytes in try blowfishECB(plain, key: Array(keyBytes)) }
    return try KWalletFile(
        path: "hostile.kwl", bytes: KWalletFile.magic + [0, 0, 0, 0, 0, 0, 0, 0] + cipher, modified: 0)
}

/// Blowfish-ECB encryption through OpenSSL's legacy provider (the tests' own, to make hostile files).
func blowfishECB(_ plain: [UInt8], key: [UInt8]) throws -> [UInt8] {
    let library = try #require(OSSL_LIB_CTX_new())
    defer { OSSL_LIB_CTX_free(library) }
    let provider = try #require(OSSL_PROVIDER_load(library, "legacy"))
    defer { OSSL_PROVIDER_unload(provider) }
    let cipher = try #require(EVP_CIPHER_fetch(library, "BF-ECB", nil))
    defer { EVP_CIPHER_free(cipher) }
    let context = try #require(EVP_CIPHER_CTX_new())
    defer { EVP_CIPHER_CTX_free(context) }
    var output = [UInt8](repeating: 0, count: plain.count + 8)
    var written: Int32 = 0
    #expect(EVP_EncryptInit_ex2(context, cipher, nil, nil, nil) == 1)
    #expect(EVP_CIPHER_CTX_set_key_length(context, Int32(key.count)) == 1)
    #expect(EVP_CIPHER_CTX_set_padding(context, 0) == 1)
    #expect(EVP_EncryptInit_ex2(context, nil, key, nil, nil) == 1)
    #expect(EVP_EncryptUpdate(context, &output, &written, plain, Int32(plain.count)) == 1)
    return Array(output[0..<Int(written)])
}
