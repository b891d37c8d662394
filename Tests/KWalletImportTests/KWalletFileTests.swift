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
