import COpenSSL
import Posix

/// The cryptography of KWallet's wallet files: KWallet's own SHA-1, the legacy password hash, PBKDF2-HMAC-SHA512
/// and Blowfish (CBC and the legacy ECB) through OpenSSL. Keys and plaintexts stay in ``SecretBytes``.
package enum KWalletCrypto {
    /// PBKDF2's rounds and output size (kwalletbackend.cc: `PBKDF2_SHA512_ITERATIONS`, `PBKDF2_SHA512_KEYSIZE`).
    package static let pbkdf2Rounds: Int32 = 50_000
    /// The key's length from PBKDF2, in bytes.
    package static let pbkdf2KeyLength = 56

    /// KWallet's SHA-1 (`sha1.cc`): GnuPG's SHA-1 built with `Q_BYTE_ORDER` forced to big-endian, which on a
    /// little-endian machine (every machine Linux KDE ran on that wrote these files) loads each 64-byte block's
    /// sixteen words in the machine's (little-endian) order, puts the bit length into the last block as
    /// big-endian bytes (which are then loaded little-endian like the rest), and stores the five result words in
    /// the machine's order. `standard` true gives real SHA-1 (big-endian throughout), which the tests compare with
    /// OpenSSL's to prove the compression itself. Not a cipher: a digest both the key and the integrity check use.
    package static func kwalletSHA1(_ data: UnsafeRawBufferPointer, standard: Bool = false) -> [UInt8] {
        var state: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var block = [UInt8](repeating: 0, count: 64)
        var words = [UInt32](repeating: 0, count: 80)
        func compress(_ block: [UInt8]) {
            // Byte by byte into the word, with no array between (a heap copy of the password's bytes).
            for index in 0..<16 {
                var word: UInt32 = 0
                for byte in 0..<4 {
                    let value = UInt32(block[4 * index + byte])
                    word |= standard ? value << (24 - 8 * UInt32(byte)) : value << (8 * UInt32(byte))
                }
                words[index] = word
            }
            for index in 16..<80 {
                let mixed = words[index - 3] ^ words[index - 8] ^ words[index - 14] ^ words[index - 16]
                words[index] = mixed << 1 | mixed >> 31
            }
            var (a, b, c, d, e) = (state[0], state[1], state[2], state[3], state[4])
            for index in 0..<80 {
                let (f, k): (UInt32, UInt32) =
                    switch index {
                    case 0..<20: (d ^ (b & (c ^ d)), 0x5A82_7999)
                    case 20..<40: (b ^ c ^ d, 0x6ED9_EBA1)
                    case 40..<60: ((b & c) | (d & (b | c)), 0x8F1B_BCDC)
                    default: (b ^ c ^ d, 0xCA62_C1D6)
                    }
                let next = (a << 5 | a >> 27) &+ f &+ e &+ k &+ words[index]
                (a, b, c, d, e) = (next, a, b << 30 | b >> 2, c, d)
            }
            // In place: a new array each block would leave the last one's words in freed memory.
            state[0] &+= a
            state[1] &+= b
            state[2] &+= c
            state[3] &+= d
            state[4] &+= e
        }
        var offset = 0
        while data.count - offset >= 64 {
            for index in 0..<64 { block[index] = data[offset + index] }
            compress(block)
            offset += 64
        }
        let rest = data.count - offset
        for index in 0..<64 { block[index] = index < rest ? data[offset + index] : 0 }
        block[rest] = 0x80
        if rest >= 56 {
            compress(block)
            for index in 0..<64 { block[index] = 0 }
        }
        let bits = UInt64(data.count) &* 8
        for index in 0..<8 { block[56 + index] = UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64(index))) }
        compress(block)
        defer {
            wipeBytes(&block)
            words.withUnsafeMutableBytes { wipeBytes($0) }
            state.withUnsafeMutableBytes { wipeBytes($0) }
        }
        // Into one array (the caller wipes it), not an array per word.
        var digest = [UInt8](repeating: 0, count: 20)
        for (index, word) in state.enumerated() {
            for byte in 0..<4 {
                let shift = standard ? 24 - 8 * UInt32(byte) : 8 * UInt32(byte)
                digest[4 * index + byte] = UInt8(truncatingIfNeeded: word >> shift)
            }
        }
        return digest
    }

    /// The legacy key of a wallet whose minor version is 0 (`password2hash`, kwalletbackend.cc): each 16-byte
    /// chunk of the password (the fourth takes every byte left) hashed with KWallet's SHA-1 2000 times over; one
    /// chunk gives its 20 bytes, two 20 + 20, three 20 + 20 + 16, four 14 of each (56 bytes).
    package static func legacyKey(password: UnsafeRawBufferPointer) throws(KWalletError) -> SecretBytes {
        func chained(_ chunk: UnsafeRawBufferPointer) -> [UInt8] {
            var digest = kwalletSHA1(chunk)
            for _ in 1..<2000 {
                let next = digest.withUnsafeBytes { kwalletSHA1($0) }
                wipeBytes(&digest)
                digest = next
            }
            return digest
        }
        let count = password.count
        let starts = [0, 16, 32, 48].filter { $0 == 0 || count > $0 }
        var blocks = starts.map { start in
            chained(UnsafeRawBufferPointer(rebasing: password[start..<(start == 48 ? count : min(count, start + 16))]))
        }
        defer { for index in blocks.indices { wipeBytes(&blocks[index]) } }
        let taken: [Int] =
            switch blocks.count {
            case 1: [20]
            case 2: [20, 20]
            case 3: [20, 20, 16]
            default: [14, 14, 14, 14]
            }
        var key: SecretBytes
        do { key = try SecretBytes(capacity: 56) } catch { throw KWalletError("", .crypto("no secure memory")) }
        for (block, length) in zip(blocks, taken) {
            block.withUnsafeBytes { key.append(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }
        return key
    }

    /// PBKDF2-HMAC-SHA512 of `password` with `salt`, 50,000 rounds, 56 bytes (`password2PBKDF2_SHA512`).
    package static func pbkdf2Key(password: UnsafeRawBufferPointer, salt: [UInt8]) throws(KWalletError) -> SecretBytes {
        var key: SecretBytes
        do { key = try SecretBytes(zeros: pbkdf2KeyLength) } catch {
            throw KWalletError("", .crypto("no secure memory"))
        }
        let ok = key.withUnsafeMutableBytes { output in
            PKCS5_PBKDF2_HMAC(
                password.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(password.count), salt,
                Int32(salt.count), pbkdf2Rounds, EVP_sha512(), Int32(output.count),
                output.baseAddress?.assumingMemoryBound(to: UInt8.self)) == 1
        }
        guard ok else { throw KWalletError("", .crypto("PBKDF2 failed")) }
        return key
    }

    /// The library context Blowfish is fetched from: OpenSSL's legacy provider loaded into a context of this
    /// module's own, so that the process's default context (every other OpenSSL user in it) stays as it was.
    private nonisolated(unsafe) static let legacyContext: OpaquePointer? = {
        guard let context = OSSL_LIB_CTX_new() else { return nil }
        guard OSSL_PROVIDER_load(context, "legacy") != nil else {
            OSSL_LIB_CTX_free(context)
            return nil
        }
        return context
    }()

    /// Blowfish-decrypts `ciphertext` (a multiple of 8 bytes) with `key` (4 to 56 bytes): CBC with a zero IV
    /// (cipher 3) or ECB (cipher 0, what kwalletd's old chain did over the whole buffer in one block call).
    /// OpenSSL's Blowfish takes each 8-byte block as two big-endian words, which is what KDE's `blowfish.cc`
    /// does too (it forces its big-endian path and byte-swaps each word on a little-endian machine, making its
    /// words big-endian): checked on files the real kwalletd5 wrote, no word swap is needed.
    static func blowfishDecrypt(_ ciphertext: ArraySlice<UInt8>, key: borrowing SecretBytes, ecb: Bool)
        throws(KWalletError) -> SecretBytes
    {
        guard ciphertext.count % 8 == 0, ciphertext.count < Int(Int32.max) - 16 else {
            throw KWalletError("", .corrupt("the encrypted part is not a whole number of 8-byte blocks"))
        }
        guard let library = legacyContext else {
            throw KWalletError("", .crypto("OpenSSL's legacy provider (Blowfish) cannot be loaded"))
        }
        guard let cipher = EVP_CIPHER_fetch(library, ecb ? "BF-ECB" : "BF-CBC", nil) else {
            throw KWalletError("", .crypto("OpenSSL's legacy provider has no Blowfish"))
        }
        defer { EVP_CIPHER_free(cipher) }
        guard let context = EVP_CIPHER_CTX_new() else { throw KWalletError("", .crypto("no cipher context")) }
        defer { EVP_CIPHER_CTX_free(context) }
        var plain: SecretBytes
        do { plain = try SecretBytes(zeros: ciphertext.count + 8) } catch {
            throw KWalletError("", .crypto("no secure memory"))
        }
        let iv = [UInt8](repeating: 0, count: 8)
        var written: Int32 = 0
        var final: Int32 = 0
        let input = Array(ciphertext)
        let ok = key.withUnsafeBytes { keyBytes in
            plain.withUnsafeMutableBytes { output in
                guard EVP_DecryptInit_ex2(context, cipher, nil, nil, nil) == 1,
                    EVP_CIPHER_CTX_set_key_length(context, Int32(keyBytes.count)) == 1,
                    EVP_CIPHER_CTX_set_padding(context, 0) == 1,
                    EVP_DecryptInit_ex2(
                        context, nil, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), ecb ? nil : iv, nil)
                        == 1,
                    let base = output.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    EVP_DecryptUpdate(context, base, &written, input, Int32(input.count)) == 1,
                    EVP_DecryptFinal_ex(context, base + Int(written), &final) == 1
                else { return false }
                return true
            }
        }
        guard ok, Int(written + final) == ciphertext.count else {
            throw KWalletError("", .crypto("Blowfish failed"))
        }
        plain.truncate(to: ciphertext.count)
        return plain
    }
}
