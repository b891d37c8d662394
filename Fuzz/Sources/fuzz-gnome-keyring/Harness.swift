// Fuzzes the gnome-keyring file reader (`KeyringFile.keyring(password:)`), binary and plain-text formats.
//
// Input: one byte choosing the form, then:
//   even: the file's bytes as they are, opened with the password of the login.keyring fixture;
//   odd: a binary keyring's clear part after the magic (a field: 2-byte length and bytes), then the plaintext
//        of its encrypted block after the MD5 (the rest): the harness pads it, puts the MD5 in front and
//        encrypts it with the key the clear part's salt and iterations (at most 4096) give, so the reader's
//        parsing behind the password check is reached.
import COpenSSL
import FoundationEssentials
import FuzzSupport

@testable import GnomeKeyringImport

let password = Array("gnome login pw".utf8)

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        let fixtures =
            String(#filePath.split(separator: "/Fuzz/Sources/").first ?? "")
            + "/Tests/GnomeKeyringImportTests/Fixtures/"
        var seeds: [(name: String, bytes: [UInt8])] = []
        for name in ["login.keyring", "open.keyring", "second.keyring"] {
            seeds.append((name, [0] + (try KeyringFile(path: fixtures + name).bytes)))
        }
        var clear: [UInt8] =
            [0, 0, 0, 0] + text("Login") + [UInt8](repeating: 0, count: 8) + be(1_795_353_043, 1_795_353_043)
        clear += be(0, 0) + be(1000) + [1, 2, 3, 4, 5, 6, 7, 8] + [UInt8](repeating: 0, count: 16)
        clear += be(1) + be(7, 0) + be(1) + text("xdg:schema") + be(0) + text("0123456789abcdef")
        var inner = text("An item") + text("s3cret") + be(0, 1_795_353_043, 0, 1_795_353_043) + be(0xffff_ffff)
        inner += [UInt8](repeating: 0, count: 16) + be(2) + text("xdg:schema") + be(0) + text("org.example.Password")
        inner += text("port") + be(1) + be(443) + be(1) + be(0) + text("app") + text("/usr/bin/app")
        var sealed = SeedBuilder()
        sealed.byte(1)
        sealed.field(clear)
        sealed.raw(inner)
        seeds.append(("sealed", sealed.bytes))
        return seeds
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    var input = FuzzInput(start, count)
    let bytes: [UInt8]
    if input.byte() % 2 == 0 {
        bytes = input.rest()
    } else {
        let clear = input.field()
        guard let sealed = seal(clear: clear, plaintext: input.rest()) else { return 0 }
        bytes = sealed
    }
    let file = KeyringFile(path: "/fuzz/input.keyring", bytes: bytes, modified: 0)
    _ = file.format
    _ = file.needsPassword
    if let keyring = try? file.keyring(password: password) {
        for item in keyring.items { _ = (item.label, item.attributes.count, item.secret.count) }
    }
    return 0
}

/// A binary keyring file: the magic, `clear`, then the encrypted block holding `plaintext`.
func seal(clear: [UInt8], plaintext: [UInt8]) -> [UInt8]? {
    var reader = ByteReader(BinaryKeyring.magic + clear, path: "", offset: BinaryKeyring.magic.count)
    guard (try? reader.bytes(4, "")) != nil, (try? reader.byteArray("")) != nil, (try? reader.bytes(24, "")) != nil,
        let iterations = try? reader.uint32(""), iterations >= 1, iterations <= 4096,
        let salt = try? reader.bytes(8, ""),
        let (key, iv) = KeyringCrypto.deriveKey(password: password, salt: Array(salt), iterations: iterations)
    else { return nil }
    let padded = plaintext + [UInt8](repeating: 0, count: (16 - plaintext.count % 16) % 16)
    guard let check = KeyringCrypto.md5(padded[...]), let encrypted = encrypt(check + padded, key: key, iv: iv) else {
        return nil
    }
    return BinaryKeyring.magic + clear + be(UInt32(encrypted.count)) + encrypted
}

/// AES-128-CBC without padding, as gnome-keyring encrypts.
func encrypt(_ data: [UInt8], key: [UInt8], iv: [UInt8]) -> [UInt8]? {
    guard let context = EVP_CIPHER_CTX_new() else { return nil }
    defer { EVP_CIPHER_CTX_free(context) }
    var output = [UInt8](repeating: 0, count: data.count + 16)
    var written: Int32 = 0
    var final: Int32 = 0
    let ok = output.withUnsafeMutableBufferPointer { out in
        guard let base = out.baseAddress, EVP_EncryptInit_ex(context, EVP_aes_128_cbc(), nil, key, iv) == 1,
            EVP_CIPHER_CTX_set_padding(context, 0) == 1,
            EVP_EncryptUpdate(context, base, &written, data, Int32(data.count)) == 1,
            EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1
        else { return false }
        return true
    }
    return ok ? Array(output[0..<Int(written + final)]) : nil
}

/// Big-endian 32-bit numbers.
func be(_ values: UInt32...) -> [UInt8] {
    values.flatMap { [UInt8($0 >> 24), UInt8($0 >> 16 & 0xff), UInt8($0 >> 8 & 0xff), UInt8($0 & 0xff)] }
}

/// A length-prefixed string.
func text(_ value: String) -> [UInt8] { be(UInt32(value.utf8.count)) + Array(value.utf8) }
