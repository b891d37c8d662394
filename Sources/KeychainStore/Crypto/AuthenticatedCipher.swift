import COpenSSL
import FoundationEssentials
import KeychainCore
import Posix

/// AES-256-GCM through OpenSSL. A sealed box is `nonce (12) ‖ ciphertext ‖ tag (16)`,
/// with a fresh random nonce each time.
enum AuthenticatedCipher {
    static let nonceLength = 12
    static let tagLength = 16

    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(
        nil, "AES-256-GCM", nil)

    /// Encrypts and authenticates `plaintext`, binding it to `context` (associated data).
    static func seal(_ plaintext: Data, key: SecretKey, context: Data) throws(KeychainError) -> Data {
        let sealed = plaintext.withUnsafeBytes { (raw) in
            Result { () throws(KeychainError) in try seal(unowned: raw, key: key, context: context) }
        }
        return try sealed.get()
    }

    /// ``seal(_:key:context:)`` of bytes lent by their owner (a secret in secret memory), with no copy made.
    static func seal(unowned plaintext: UnsafeRawBufferPointer, key: SecretKey, context: Data) throws(KeychainError)
        -> Data
    {
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
                let bodyOK =
                    plaintext.isEmpty
                    || EVP_EncryptUpdate(
                        ctx, base + nonceLength, &length,
                        plaintext.bindMemory(to: UInt8.self).baseAddress, Int32(plaintext.count)) == 1
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
        var plaintext = Data(count: try plaintextLength(of: box))
        let failure = plaintext.withUnsafeMutableBytes { out -> KeychainError? in
            do throws(KeychainError) {
                try open(box, key: key, context: context, into: out)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
        return plaintext
    }

    /// Checks and decrypts a sealed box straight into secret memory (no other copy of the plaintext is
    /// made); `errSecDecode` as ``open(_:key:context:)``, `errSecAllocate` when no secret memory is left.
    static func openSecret(_ box: Data, key: SecretKey, context: Data) throws(KeychainError) -> SecretBytes {
        let length = try plaintextLength(of: box)
        var plaintext = try KeychainError.allocating { () throws(SecretMemoryError) in try SecretBytes(zeros: length) }
        try plaintext.withUnsafeMutableBytes { (out) throws(KeychainError) in
            try open(box, key: key, context: context, into: out)
        }
        return plaintext
    }

    /// How long the plaintext of `box` is.
    static func plaintextLength(of box: Data) throws(KeychainError) -> Int {
        guard box.count >= nonceLength + tagLength else {
            throw KeychainError(.decode, "a sealed value is too short")
        }
        return box.count - nonceLength - tagLength
    }

    /// Checks and decrypts `box` into `out`, which is ``plaintextLength(of:)`` bytes long. When the box fails
    /// authentication, `out` is wiped (GCM writes the plaintext before the tag is checked).
    static func open(_ box: Data, key: SecretKey, context: Data, into out: UnsafeMutableRawBufferPointer)
        throws(KeychainError)
    {
        let bodyLength = try plaintextLength(of: box)
        precondition(out.count == bodyLength, "the plaintext buffer has the wrong length")
        let ok = box.withUnsafeBytes { sealed -> Bool in
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
            let outBase = out.baseAddress?.assumingMemoryBound(to: UInt8.self)
            if bodyLength > 0 {
                guard
                    EVP_DecryptUpdate(
                        ctx, outBase, &length, input + nonceLength, Int32(bodyLength)) == 1
                else { return false }
            }
            let tag = UnsafeMutableRawPointer(mutating: input + nonceLength + bodyLength)
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), tag) == 1
            else { return false }
            // GCM's final step writes nothing: it checks the tag.
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { finalBuffer in
                EVP_DecryptFinal_ex(ctx, finalBuffer.baseAddress, &length) == 1
            }
        }
        guard ok else {
            wipeBytes(out)
            throw KeychainError(.decode, "a sealed value failed authentication: damaged or tampered with")
        }
    }
}
