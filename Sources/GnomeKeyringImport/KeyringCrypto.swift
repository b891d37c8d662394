import COpenSSL

/// The cryptography of gnome-keyring's binary format: the key derivation, AES-128-CBC without
/// padding, and the MD5 check of the decrypted block. Through OpenSSL's libcrypto.
enum KeyringCrypto {
    /// The key and IV gnome-keyring derives from a password: SHA-256 of password ‖ salt, hashed
    /// again `iterations − 1` times; the first 16 bytes of the result are the AES-128 key, the
    /// last 16 the IV (one SHA-256 output covers both).
    static func deriveKey(password: [UInt8], salt: [UInt8], iterations: UInt32) -> (key: [UInt8], iv: [UInt8])? {
        guard iterations >= 1, var digest = sha256(password + salt) else { return nil }
        for _ in 1..<iterations {
            guard let next = sha256(digest) else { return nil }
            digest = next
        }
        defer { wipe(&digest) }
        return (Array(digest[0..<16]), Array(digest[16..<32]))
    }

    /// SHA-256 of `data`.
    static func sha256(_ data: [UInt8]) -> [UInt8]? {
        digest(data, EVP_sha256(), length: 32)
    }

    /// MD5 of `data` (gnome-keyring's check that the password was right).
    static func md5(_ data: ArraySlice<UInt8>) -> [UInt8]? {
        digest(Array(data), EVP_md5(), length: 16)
    }

    private static func digest(_ data: [UInt8], _ type: OpaquePointer?, length: Int) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: length)
        var written: UInt32 = 0
        let ok = data.withUnsafeBytes { input in
            output.withUnsafeMutableBufferPointer { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &written, type, nil) == 1
            }
        }
        return ok && Int(written) == length ? output : nil
    }

    /// Decrypts `data` (a whole number of 16-byte blocks) with AES-128-CBC and no padding.
    static func decrypt(_ data: ArraySlice<UInt8>, key: [UInt8], iv: [UInt8]) -> [UInt8]? {
        guard data.count % 16 == 0, key.count == 16, iv.count == 16, let context = EVP_CIPHER_CTX_new() else {
            return nil
        }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: data.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        let input = Array(data)
        let ok = output.withUnsafeMutableBufferPointer { out in
            guard EVP_DecryptInit_ex(context, EVP_aes_128_cbc(), nil, key, iv) == 1,
                EVP_CIPHER_CTX_set_padding(context, 0) == 1,
                EVP_DecryptUpdate(context, out.baseAddress, &written, input, Int32(input.count)) == 1,
                let base = out.baseAddress,
                EVP_DecryptFinal_ex(context, base + Int(written), &final) == 1
            else { return false }
            return true
        }
        guard ok else {
            wipe(&output)
            return nil
        }
        output.removeLast(output.count - Int(written + final))
        return output
    }

    /// Overwrites `bytes` with zeros (OpenSSL's cleanse, which the compiler cannot drop).
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
    }
}
