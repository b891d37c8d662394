// Fuzzes the KWallet wallet reader (`KWalletFile`, `KWalletContents`, `KWalletAttributes`).
//
// Input: one byte choosing the form (modulo 3), then:
//   0: a .kwl file's bytes as they are, opened with the key of the fixtures' password (PBKDF2 with the fixture
//      kdewallet.salt for minor version 1, the legacy SHA-1 key for minor 0; both derived once at start), so a
//      mutated real wallet goes through the header, the clear index, Blowfish, the SHA-1 check and the entries;
//   1: the serialized data of a wallet's plaintext: the harness frames it (lead block, length, padding, KWallet
//      SHA-1) as kwalletd does, so the QDataStream parsing behind the check and every entry's conversion to its
//      stored form (password UTF-8, base64, map JSON) are reached without a cipher per input;
//   2: the bytes of a NAME_attributes.json.
import FoundationEssentials
import FuzzSupport

@testable import KWalletFormat
@testable import KWalletImport
@testable import Posix

let fixtures = String(#filePath.split(separator: "/Fuzz/Sources/").first ?? "") + "/Tests/KWalletImportTests/Fixtures/"
let password = Array("Pässwörd ✓ for kdewallet".utf8)

/// The fixture password's legacy key and its PBKDF2 key with the fixture salt, derived once.
nonisolated(unsafe) var legacyKey: SharedSecret?
nonisolated(unsafe) var pbkdf2Key: SharedSecret?

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        var seeds: [(name: String, bytes: [UInt8])] = []
        for name in ["kdewallet.kwl", "legacy.kwl", "Work ;C3;BC;2F2.kwl"] {
            seeds.append(
                (String(name.map { $0 == " " ? "-" : $0 }), [0] + (try KWalletFile(path: fixtures + name).bytes)))
        }
        // The real wallet's serialized data, decrypted.
        let file = try KWalletFile(path: fixtures + "kdewallet.kwl")
        let secret = try SecretBytes(copying: password)
        let key = try secret.withUnsafeBytes { (bytes) throws(KWalletError) in
            try file.key(password: bytes, salt: try file.salt())
        }
        let plain = try KWalletCrypto.blowfishDecrypt(file.bytes[file.ciphertextOffset...], key: key, ecb: false)
        let data = plain.withUnsafeBytes { bytes -> [UInt8] in
            let length = bytes[8..<12].reduce(0) { $0 << 8 | Int($1) }
            return Array(bytes[12..<12 + length])
        }
        seeds.append(("kdewallet-data", [1] + data))
        let json = """
            {"$fdo_created": "1700000000", "Passwords/mail@example.org": {"$fdo_created": "1700000100", \
            "$fdo_mime_type": "text/plain", "attributes": {"service": "imap", "n": 3}}, "x": [1, {"a": null}]}
            """
        seeds.append(("attributes-json", [2] + Array(json.utf8)))
        return seeds
    }
    do {
        let file = try KWalletFile(path: fixtures + "kdewallet.kwl")
        let secret = try SecretBytes(copying: password)
        let salt = try file.salt()
        legacyKey = SharedSecret(
            try secret.withUnsafeBytes { (bytes) throws(KWalletError) in try KWalletCrypto.legacyKey(password: bytes) })
        pbkdf2Key = SharedSecret(
            try secret.withUnsafeBytes { (bytes) throws(KWalletError) in
                try KWalletCrypto.pbkdf2Key(password: bytes, salt: salt)
            })
    } catch {
        fatalError("cannot derive the fixture keys: \(error)")
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    var input = FuzzInput(start, count)
    switch input.byte() % 3 {
    case 0:
        guard let file = try? KWalletFile(path: "/fuzz/input.kwl", bytes: input.rest(), modified: 0),
            let key = file.needsSalt ? pbkdf2Key : legacyKey
        else { return 0 }
        _ = (file.walletName, file.index.count, file.needsSalt)
        if let contents = try? file.open(key: key.bytes) {
            use(contents)
        }
    case 1:
        let data = input.rest()
        var plain = [UInt8](repeating: 0x5A, count: 8)
        plain += (0..<4).map { UInt8(truncatingIfNeeded: data.count >> (24 - 8 * $0)) }
        plain += data
        plain += [UInt8](repeating: 0xA5, count: 8 - (plain.count + 20) % 8)
        plain += data.withUnsafeBytes { KWalletCrypto.kwalletSHA1($0) }
        guard let secret = try? SecretBytes(copying: plain),
            let contents = try? KWalletContents(plaintext: secret, path: "/fuzz/input.kwl")
        else { return 0 }
        use(contents)
    default:
        let attributes = KWalletAttributes(json: input.rest())
        for (location, item) in attributes.items {
            let parts = location.split(separator: "/", maxSplits: 1)
            _ = KWalletAttributes.label(folder: String(parts[0]), key: parts.count > 1 ? String(parts[1]) : "")
            _ = (item.attributes.count, item.contentType, item.created, item.modified)
        }
    }
    return 0
}

/// Every entry's stored form, as the importer makes it.
func use(_ contents: borrowing KWalletContents) {
    _ = (contents.emptyFolders.count, contents.skippedEntries, contents.nameDigests.count)
    for entry in contents.entries {
        if let stored = try? contents.storedSecret(of: entry) { _ = stored.count }
        _ = KWalletImporter.schemeAttributes(entry)
    }
}
