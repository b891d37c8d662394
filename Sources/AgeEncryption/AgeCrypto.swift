import COpenSSL
import Posix

/// The primitives of age v1, all OpenSSL's: randomness, HKDF-SHA-256, HMAC-SHA-256, ChaCha20-Poly1305, X25519
/// and scrypt. Keys come in and go out in ``SecretBytes``; OpenSSL's own copies (in its contexts) are cleansed
/// when the contexts are freed.
enum AgeCrypto {
    /// Length of every derived key (HKDF output, scrypt output, X25519 keys and shares).
    static let keyLength = 32
    /// Length of a Poly1305 tag.
    static let tagLength = 16
    /// Length of a ChaCha20-Poly1305 nonce.
    static let nonceLength = 12

    /// `count` bytes of public randomness (a salt, a nonce).
    static func randomBytes(_ count: Int) throws(AgeError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { throw failure("RAND_bytes failed") }
        return bytes
    }

    /// `count` bytes of private randomness (a file key, an ephemeral secret), in secret memory.
    static func randomSecret(_ count: Int) throws(AgeError) -> SecretBytes {
        var secret = try secretZeros(count)
        let ok = secret.withUnsafeMutableBytes { out in
            RAND_priv_bytes(out.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(out.count)) == 1
        }
        guard ok else { throw failure("RAND_priv_bytes failed") }
        return secret
    }

    /// HKDF-SHA-256(ikm, salt, info) into 32 bytes of secret memory. An empty salt is passed as none, which
    /// RFC 5869 makes the same as a salt of 32 zero bytes (HMAC pads its key with zeros).
    static func hkdf(_ ikm: UnsafeRawBufferPointer, salt: [UInt8], info: StaticString) throws(AgeError) -> SecretBytes {
        guard let kdf = EVP_KDF_fetch(nil, "HKDF", nil) else { throw failure("OpenSSL has no HKDF") }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw failure("cannot allocate a KDF context") }
        defer { EVP_KDF_CTX_free(context) }
        var key = try secretZeros(keyLength)
        var salt = salt
        let status = key.withUnsafeMutableBytes { out in
            salt.withUnsafeMutableBytes { saltBytes in
                var parameters = [
                    OSSL_PARAM_construct_utf8_string(
                        parameterName("digest"), UnsafeMutablePointer(mutating: parameterName("SHA256")), 0),
                    OSSL_PARAM_construct_octet_string(
                        parameterName("key"), UnsafeMutableRawPointer(mutating: ikm.baseAddress), ikm.count),
                    OSSL_PARAM_construct_octet_string(
                        parameterName("info"), UnsafeMutableRawPointer(mutating: info.utf8Start), info.utf8CodeUnitCount
                    ),
                ]
                if !saltBytes.isEmpty {
                    parameters.append(
                        OSSL_PARAM_construct_octet_string(parameterName("salt"), saltBytes.baseAddress, saltBytes.count)
                    )
                }
                parameters.append(OSSL_PARAM_construct_end())
                return EVP_KDF_derive(
                    context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count, &parameters)
            }
        }
        guard status == 1 else { throw failure("HKDF-SHA-256 failed") }
        return key
    }

    /// HMAC-SHA-256 of `message` under `key` (the header MAC: public once computed).
    static func hmac(key: borrowing SecretBytes, message: ArraySlice<UInt8>) throws(AgeError) -> [UInt8] {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { throw failure("OpenSSL has no HMAC") }
        defer { EVP_MAC_free(mac) }
        guard let context = EVP_MAC_CTX_new(mac) else { throw failure("cannot allocate a MAC context") }
        defer { EVP_MAC_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: keyLength)
        var outputLength = 0
        let ok = key.withUnsafeBytes { keyBytes in
            message.withUnsafeBytes { messageBytes in
                var parameters = [
                    OSSL_PARAM_construct_utf8_string(
                        parameterName("digest"), UnsafeMutablePointer(mutating: parameterName("SHA256")), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_MAC_init(
                    context, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), keyBytes.count, &parameters)
                    == 1
                    && EVP_MAC_update(
                        context, messageBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), messageBytes.count)
                        == 1
                    && EVP_MAC_final(context, &output, &outputLength, output.count) == 1
            }
        }
        guard ok, outputLength == keyLength else { throw failure("HMAC-SHA-256 failed") }
        return output
    }

    /// ChaCha20-Poly1305 of `plaintext` under `key` and the 12-byte `nonce`, written to `output`
    /// (`plaintext.count + 16` bytes: the ciphertext, then the tag). No associated data.
    static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: borrowing SecretBytes, nonce: [UInt8],
        into output: UnsafeMutableRawBufferPointer
    ) throws(AgeError) {
        precondition(output.count == plaintext.count + tagLength && nonce.count == nonceLength)
        guard let context = EVP_CIPHER_CTX_new() else { throw failure("cannot allocate a cipher context") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw failure("no output buffer")
        }
        var length: Int32 = 0
        let ok = key.withUnsafeBytes { keyBytes in
            EVP_EncryptInit_ex2(
                context, cipher, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce, nil) == 1
                && (plaintext.isEmpty
                    || EVP_EncryptUpdate(
                        context, out, &length, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        Int32(plaintext.count)) == 1)
                && EVP_EncryptFinal_ex(context, out + plaintext.count, &length) == 1
                && EVP_CIPHER_CTX_ctrl(
                    context, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), out + plaintext.count) == 1
        }
        guard ok else { throw failure("ChaCha20-Poly1305 encryption failed") }
    }

    /// Checks and decrypts `sealed` (ciphertext then tag) under `key` and `nonce` into `output`
    /// (`sealed.count - 16` bytes). Returns false when it does not authenticate, with `output` wiped.
    static func open(
        _ sealed: UnsafeRawBufferPointer, key: borrowing SecretBytes, nonce: [UInt8],
        into output: UnsafeMutableRawBufferPointer
    ) throws(AgeError) -> Bool {
        precondition(sealed.count >= tagLength && output.count == sealed.count - tagLength)
        precondition(nonce.count == nonceLength)
        guard let context = EVP_CIPHER_CTX_new() else { throw failure("cannot allocate a cipher context") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard let input = sealed.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw failure("no input buffer")
        }
        let bodyLength = sealed.count - tagLength
        let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var length: Int32 = 0
        let initialised = key.withUnsafeBytes { keyBytes in
            EVP_DecryptInit_ex2(
                context, cipher, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce, nil) == 1
        }
        guard initialised else { throw failure("cannot initialise ChaCha20-Poly1305") }
        guard bodyLength == 0 || EVP_DecryptUpdate(context, out, &length, input, Int32(bodyLength)) == 1 else {
            wipeBytes(output)
            throw failure("ChaCha20-Poly1305 decryption failed")
        }
        let tag = UnsafeMutableRawPointer(mutating: input + bodyLength)
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), tag) == 1 else {
            wipeBytes(output)
            throw failure("cannot set the Poly1305 tag")
        }
        let authentic = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { final in
            EVP_DecryptFinal_ex(context, final.baseAddress, &length) == 1
        }
        if !authentic {
            wipeBytes(output)
            ERR_clear_error()
        }
        return authentic
    }

    /// The X25519 public key (or ephemeral share) of the 32-byte private key `secret`.
    static func x25519PublicKey(of secret: UnsafeRawBufferPointer) throws(AgeError) -> [UInt8] {
        let key = try privateKey(secret)
        defer { EVP_PKEY_free(key) }
        var publicKey = [UInt8](repeating: 0, count: keyLength)
        var length = keyLength
        guard EVP_PKEY_get_raw_public_key(key, &publicKey, &length) == 1, length == keyLength else {
            throw failure("cannot compute an X25519 public key")
        }
        return publicKey
    }

    /// X25519(secret, peer) into secret memory, or nil when the result is all zeros (`peer` is a point of
    /// low order: age's rule is to abort).
    static func x25519(_ secret: UnsafeRawBufferPointer, peer: [UInt8]) throws(AgeError) -> SecretBytes? {
        precondition(peer.count == keyLength)
        let key = try privateKey(secret)
        defer { EVP_PKEY_free(key) }
        guard let peerKey = EVP_PKEY_new_raw_public_key_ex(nil, "X25519", nil, peer, peer.count) else {
            throw failure("cannot read an X25519 share")
        }
        defer { EVP_PKEY_free(peerKey) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            throw failure("cannot allocate a key context")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peerKey) == 1 else {
            throw failure("cannot set up X25519")
        }
        var shared = try secretZeros(keyLength)
        var length = keyLength
        let derived = shared.withUnsafeMutableBytes { out in
            EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) == 1
        }
        // OpenSSL refuses an all-zero shared secret itself; the check below holds whatever it does.
        guard derived, length == keyLength else {
            ERR_clear_error()
            return nil
        }
        let allZero = shared.withUnsafeBytes { bytes in bytes.reduce(UInt8(0)) { $0 | $1 } == 0 }
        if allZero { return nil }
        return shared
    }

    /// scrypt(N = 2^logN, r = 8, p = 1, dkLen = 32, salt, passphrase) into secret memory.
    static func scrypt(passphrase: borrowing SecretBytes, salt: [UInt8], logN: Int) throws(AgeError) -> SecretBytes {
        precondition((1...30).contains(logN))
        guard let kdf = EVP_KDF_fetch(nil, "SCRYPT", nil) else { throw failure("OpenSSL has no scrypt") }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw failure("cannot allocate a KDF context") }
        defer { EVP_KDF_CTX_free(context) }
        var n = UInt64(1) << UInt64(logN)
        var r: UInt32 = 8
        var p: UInt32 = 1
        // OpenSSL's bound on scrypt's memory: 128 · r · (N + 2) for V and 128 · r · p for B, and a margin.
        var maximumMemory = 128 * UInt64(r) * (n + 2) + 128 * UInt64(r) * UInt64(p) + (1 << 20)
        var salt = salt
        var key = try secretZeros(keyLength)
        let status = key.withUnsafeMutableBytes { out in
            passphrase.withUnsafeBytes { pass in
                salt.withUnsafeMutableBytes { saltBytes in
                    var parameters = [
                        OSSL_PARAM_construct_octet_string(
                            parameterName("pass"), UnsafeMutableRawPointer(mutating: pass.baseAddress), pass.count),
                        OSSL_PARAM_construct_octet_string(
                            parameterName("salt"), saltBytes.baseAddress, saltBytes.count),
                        OSSL_PARAM_construct_uint64(parameterName("n"), &n),
                        OSSL_PARAM_construct_uint32(parameterName("r"), &r),
                        OSSL_PARAM_construct_uint32(parameterName("p"), &p),
                        OSSL_PARAM_construct_uint64(parameterName("maxmem_bytes"), &maximumMemory),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_KDF_derive(
                        context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count, &parameters)
                }
            }
        }
        guard status == 1 else { throw failure("scrypt (logN \(logN)) failed: out of memory?") }
        return key
    }

    /// `count` zero bytes of secret memory.
    static func secretZeros(_ count: Int) throws(AgeError) -> SecretBytes {
        do throws(SecretMemoryError) {
            return try SecretBytes(zeros: count)
        } catch {
            throw .noMemory(error)
        }
    }

    /// The fetched ChaCha20-Poly1305 implementation (nil only if OpenSSL has none: every use then fails).
    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "ChaCha20-Poly1305", nil)

    /// An X25519 private key object holding a copy of `secret` (freed, and cleansed, with `EVP_PKEY_free`).
    private static func privateKey(_ secret: UnsafeRawBufferPointer) throws(AgeError) -> OpaquePointer {
        precondition(secret.count == keyLength)
        guard
            let key = EVP_PKEY_new_raw_private_key_ex(
                nil, "X25519", nil, secret.baseAddress?.assumingMemoryBound(to: UInt8.self), secret.count)
        else { throw failure("cannot make an X25519 key") }
        return key
    }

    /// An ``AgeError/Kind/cryptoFailure`` naming the operation and OpenSSL's reason; empties the error queue.
    static func failure(_ operation: String) -> AgeError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0, let reason = ERR_reason_error_string(code) else { return AgeError(.cryptoFailure, operation) }
        return AgeError(.cryptoFailure, "\(operation): \(String(cString: reason))")
    }
}

/// A NUL-terminated C string that lives as long as the program, for OpenSSL parameter names and values:
/// `OSSL_PARAM_construct_*` keeps the pointer, not a copy.
private func parameterName(_ name: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` with a typed error (the standard one rethrows untyped errors).
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(AgeError) -> R) throws(AgeError) -> R {
        try withUnsafeBytes { bytes in Result { () throws(AgeError) in try body(bytes) } }.get()
    }

    /// `withUnsafeMutableBytes` with a typed error.
    mutating func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws(AgeError) -> R)
        throws(AgeError) -> R
    {
        try withUnsafeMutableBytes { bytes in Result { () throws(AgeError) in try body(bytes) } }.get()
    }
}
