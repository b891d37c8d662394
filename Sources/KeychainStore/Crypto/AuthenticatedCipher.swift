import COpenSSL
import FoundationEssentials
import KeychainCore

/// AES-256-GCM through OpenSSL. A sealed box is `nonce (12) ‖ ciphertext ‖ tag (16)`,
/// with a fresh random nonce each time.
enum AuthenticatedCipher {
    static let nonceLength = 12
    static let tagLength = 16

    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(
        nil, "AES-256-GCM", nil)

    /// Encrypts and authenticates `plaintext`, binding it to `context` (associated data).
    static func seal(_ plaintext: Data, key: SecretKey, context: Data) throws(KeychainError) -> Data {
        let nonce = try SecureRandom.data(count: nonceLength)
        var output = Data(count: nonceLength + plaintext.count + tagLength)
        let ok = output.withUnsafeMutableBytes { out -> Bool in
            guard let ctx = EVP_CIPHER_CTX_new() else { return false }
            defer { EVP_CIPHER_CTX_free(ctx) }
            guard let base = out.bindMemory(to: UInt8.self).baseAddress else { return false }
            nonce.copyBytes(to: base, count: nonceLength)
            var length: Int32 = 0
            return nonce.withUnsafeBytes { iv in
                guard
                    EVP_EncryptInit_ex2(
                        ctx, cipher, key.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        iv.bindMemory(to: UInt8.self).baseAddress, nil) == 1
                else { return false }
                let aadOK = context.withUnsafeBytes { aad in
                    EVP_EncryptUpdate(
                        ctx, nil, &length, aad.bindMemory(to: UInt8.self).baseAddress,
                        Int32(aad.count)) == 1
                }
                guard aadOK else { return false }
                let bodyOK = plaintext.withUnsafeBytes { input in
                    plaintext.isEmpty
                        || EVP_EncryptUpdate(
                            ctx, base + nonceLength, &length,
                            input.bindMemory(to: UInt8.self).baseAddress, Int32(input.count)) == 1
                }
                guard bodyOK,
                    EVP_EncryptFinal_ex(ctx, base + nonceLength + plaintext.count, &length) == 1
                else { return false }
                return EVP_CIPHER_CTX_ctrl(
                    ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength),
                    base + nonceLength + plaintext.count) == 1
            }
        }
        guard ok else { throw KeychainError(.internalComponent, "AES-256-GCM encryption failed") }
        return output
    }

    /// Checks and decrypts a sealed box; `errSecDecode` if it was altered,
    /// sealed under another key, or bound to another context.
    static func open(_ box: Data, key: SecretKey, context: Data) throws(KeychainError) -> Data {
        guard box.count >= nonceLength + tagLength else {
            throw KeychainError(.decode, "a sealed value is too short")
        }
        let bodyLength = box.count - nonceLength - tagLength
        var plaintext = Data(count: bodyLength)
        let ok = plaintext.withUnsafeMutableBytes { out -> Bool in
            box.withUnsafeBytes { sealed -> Bool in
                guard let ctx = EVP_CIPHER_CTX_new() else { return false }
                defer { EVP_CIPHER_CTX_free(ctx) }
                guard let input = sealed.bindMemory(to: UInt8.self).baseAddress else { return false }
                var length: Int32 = 0
                guard
                    EVP_DecryptInit_ex2(
                        ctx, cipher, key.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        input, nil) == 1
                else { return false }
                let aadOK = context.withUnsafeBytes { aad in
                    EVP_DecryptUpdate(
                        ctx, nil, &length, aad.bindMemory(to: UInt8.self).baseAddress,
                        Int32(aad.count)) == 1
                }
                guard aadOK else { return false }
                let outBase = out.bindMemory(to: UInt8.self).baseAddress
                if bodyLength > 0 {
                    guard
                        EVP_DecryptUpdate(
                            ctx, outBase, &length, input + nonceLength, Int32(bodyLength)) == 1
                    else { return false }
                }
                let tag = UnsafeMutableRawPointer(mutating: input + nonceLength + bodyLength)
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), tag) == 1
                else { return false }
                var finalBuffer = [UInt8](repeating: 0, count: 16)
                return EVP_DecryptFinal_ex(ctx, &finalBuffer, &length) == 1
            }
        }
        guard ok else {
            throw KeychainError(.decode, "a sealed value failed authentication: damaged or tampered with")
        }
        return plaintext
    }
}
