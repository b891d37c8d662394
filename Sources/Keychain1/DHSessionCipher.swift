import COpenSSL
import FoundationEssentials
import Posix

/// Errors of the transport encryption (the daemon maps them to D-Bus errors, the client to `KeychainError`s).
package enum SessionCryptoError: Error, Equatable {
    /// The client's Diffie-Hellman package key is malformed or not an acceptable group element.
    case invalidPublicKey(String)
    /// A secret sent by the client is malformed or does not decrypt (wrong IV or ciphertext length, bad padding).
    case invalidSecret(String)
    /// OpenSSL failed: an allocation, a missing algorithm, or an internal error.
    case openSSL(String)
    /// No secret memory for the plaintext (``SecretBytes`` could not map its pages).
    case noSecretMemory(SecretMemoryError)
}

/// The dh-ietf1024-sha256-aes128-cbc-pkcs7 key exchange and the AES key it yields: the daemon's side of a
/// session (the Secret Service's and `org.latchkey.Keychain1`'s), and through ``DHClientKey`` the client's
/// (``KeychainClient``'s `Keychain1` session).
///
/// The exchange is Diffie-Hellman over the RFC 2409 Second Oakley Group (1024-bit MODP prime, generator 2).
/// The shared secret, left-padded with zeros to 128 bytes, is the input key material of HKDF-SHA256 with an
/// empty salt and empty info; its first 16 bytes of output are the AES-128 key. Secrets travel as
/// AES-128-CBC with PKCS#7 padding under a fresh random IV each: the IV is the secret's `parameters`, the
/// ciphertext its `value`.
///
/// The key is immutable after initialisation and every operation uses its own OpenSSL context, so one
/// instance may be used from several threads. The key is wiped when the instance is released.
package final class DHSessionCipher: @unchecked Sendable {
    /// Length in bytes of the group's prime, of the server package key and of the padded shared secret.
    static let primeLength = 128
    /// Length in bytes of the AES-128 key.
    static let keyLength = 16
    /// Length in bytes of an AES block, which is also the length of an IV.
    package static let blockLength = 16
    /// Bits of a server private key. A 1024-bit MODP group gives about 80 bits of security, and NIST SP 800-56A
    /// (rev. 3, 5.6.1.1.4) asks a safe-prime group's private key for at least twice that; 256 bits is well
    /// above, and makes the two exponentiations of an OpenSession about three times cheaper than a full-size
    /// exponent (docs/benchmarks.md).
    static let privateKeyBits = 256

    /// The server package key: on the daemon's side its own, to send back (exactly 128 bytes); on the client's,
    /// the one the daemon sent.
    package let serverPublicKey: [UInt8]
    /// The AES key, owned by this object (kept out of Swift arrays so that no copy of it is left behind).
    private let key: UnsafeMutablePointer<UInt8>
    /// The fetched AES-128-CBC implementation.
    private let cipher: OpaquePointer

    /// Does the exchange for a client package key; fresh server key pair each time.
    package convenience init(clientPublicKey: [UInt8]) throws(SessionCryptoError) {
        try self.init(clientPublicKey: clientPublicKey, chosenPrivateKey: nil)
    }

    /// Does the exchange with a given server private key (big-endian, in [2, p-2]) instead of a random one.
    ///
    /// Only for tests: it makes edge cases reproducible, such as a server package key or a shared secret
    /// whose big-endian encoding has a leading zero byte. Never use it for a real session.
    convenience init(clientPublicKey: [UInt8], serverPrivateKey: [UInt8]) throws(SessionCryptoError) {
        try self.init(clientPublicKey: clientPublicKey, chosenPrivateKey: serverPrivateKey)
    }

    /// Does the exchange, with a random server private key unless `chosenPrivateKey` is given.
    private convenience init(clientPublicKey: [UInt8], chosenPrivateKey: [UInt8]?) throws(SessionCryptoError) {
        let privateKey = try OwnedNumber.secure()
        if let chosenPrivateKey {
            guard (1...Self.primeLength).contains(chosenPrivateKey.count),
                BN_bin2bn(chosenPrivateKey, Int32(chosenPrivateKey.count), privateKey.pointer) != nil
            else { throw openSSLFailure("cannot read the chosen private key") }
            let prime = try OwnedNumber(BN_get_rfc2409_prime_1024(nil))
            guard try Self.isGroupElement(privateKey, prime: prime) else {
                throw .openSSL("the chosen private key is not in [2, p-2]")
            }
        } else {
            try Self.drawPrivateKey(into: privateKey)
        }
        let publicKey = try Self.publicKey(of: privateKey)
        try self.init(peerPublicKey: clientPublicKey, privateKey: privateKey, serverPublicKey: publicKey)
    }

    /// The client's side: the exchange of `clientKey` with the daemon's package key `serverPublicKey`.
    package convenience init(serverPublicKey: [UInt8], clientKey: borrowing DHClientKey) throws(SessionCryptoError) {
        try self.init(
            peerPublicKey: serverPublicKey, privateKey: clientKey.privateKey, serverPublicKey: serverPublicKey)
    }

    /// Checks the other side's package key, derives the AES key from it and `privateKey`, and keeps
    /// `serverPublicKey`.
    private init(peerPublicKey: [UInt8], privateKey: borrowing OwnedNumber, serverPublicKey publicKey: [UInt8])
        throws(SessionCryptoError)
    {
        let key = UnsafeMutablePointer<UInt8>.allocate(capacity: Self.keyLength)
        key.initialize(repeating: 0, count: Self.keyLength)
        let cipher: OpaquePointer
        do throws(SessionCryptoError) {
            try Self.agree(peerPublicKey: peerPublicKey, privateKey: privateKey, key: key)
            guard let fetched = EVP_CIPHER_fetch(nil, "AES-128-CBC", nil) else {
                throw openSSLFailure("cannot fetch AES-128-CBC")
            }
            cipher = fetched
        } catch {
            OPENSSL_cleanse(key, Self.keyLength)
            key.deallocate()
            throw error
        }
        self.key = key
        self.cipher = cipher
        self.serverPublicKey = publicKey
    }

    /// Wipes the AES key and releases the OpenSSL objects.
    deinit {
        OPENSSL_cleanse(key, Self.keyLength)
        key.deallocate()
        EVP_CIPHER_free(cipher)
    }

    /// Encrypts a secret for the other side: (parameters: 16-byte IV, value: ciphertext).
    package func encrypt(_ plaintext: [UInt8]) throws(SessionCryptoError) -> (parameters: [UInt8], value: [UInt8]) {
        try plaintext.withUnsafeBytes { bytes in Result { () throws(SessionCryptoError) in try encrypt(bytes) } }.get()
    }

    /// Encrypts a secret lent from secret memory for the other side: (parameters: 16-byte IV, value: ciphertext).
    package func encrypt(_ plaintext: UnsafeRawBufferPointer) throws(SessionCryptoError) -> (
        parameters: [UInt8], value: [UInt8]
    ) {
        guard plaintext.count <= Int(Int32.max) - Self.blockLength else {
            throw .invalidSecret("a secret of \(plaintext.count) bytes is too long to encrypt")
        }
        var iv = [UInt8](repeating: 0, count: Self.blockLength)
        guard RAND_bytes(&iv, Int32(iv.count)) == 1 else {
            throw openSSLFailure("RAND_bytes failed")
        }
        var failure: SessionCryptoError?
        let value = [UInt8](unsafeUninitializedCapacity: plaintext.count + Self.blockLength) { buffer, initialized in
            do throws(SessionCryptoError) {
                initialized = try crypt(
                    plaintext, iv: iv, encrypting: true, into: UnsafeMutableRawBufferPointer(buffer))
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return (parameters: iv, value: value)
    }

    /// Decrypts a secret the other side sent, straight into secret memory.
    package func decrypt(parameters: [UInt8], value: [UInt8]) throws(SessionCryptoError) -> SecretBytes {
        guard parameters.count == Self.blockLength else {
            throw .invalidSecret("the IV is \(parameters.count) bytes long, expected \(Self.blockLength)")
        }
        guard !value.isEmpty, value.count % Self.blockLength == 0 else {
            throw .invalidSecret(
                "the ciphertext is \(value.count) bytes long, expected a non-zero multiple of \(Self.blockLength)")
        }
        guard value.count <= Int(Int32.max) - Self.blockLength else {
            throw .invalidSecret("a ciphertext of \(value.count) bytes is too long to decrypt")
        }
        var plaintext: SecretBytes
        do throws(SecretMemoryError) {
            plaintext = try SecretBytes(zeros: value.count + Self.blockLength)
        } catch {
            throw .noSecretMemory(error)
        }
        let count = try value.withUnsafeBytes { bytes in
            Result { () throws(SessionCryptoError) in
                try plaintext.withUnsafeMutableBytes { (out) throws(SessionCryptoError) in
                    try crypt(bytes, iv: parameters, encrypting: false, into: out)
                }
            }
        }.get()
        plaintext.truncate(to: count)
        return plaintext
    }

    /// A secret as `org.latchkey.Keychain1` carries it in the session: the 16-byte IV followed by the
    /// ciphertext, in one array.
    package func seal(_ plaintext: UnsafeRawBufferPointer) throws(SessionCryptoError) -> [UInt8] {
        let (parameters, value) = try encrypt(plaintext)
        return parameters + value
    }

    /// Reads a secret the other side sealed as ``seal(_:)`` does, straight into secret memory.
    package func unseal(_ sealed: [UInt8]) throws(SessionCryptoError) -> SecretBytes {
        guard sealed.count >= Self.blockLength else {
            throw .invalidSecret("a sealed secret is \(sealed.count) bytes long, shorter than its IV")
        }
        return try decrypt(parameters: Array(sealed[..<Self.blockLength]), value: Array(sealed[Self.blockLength...]))
    }

    /// Runs AES-128-CBC with PKCS#7 padding over `input` in one pass into `out` (at least a block longer than
    /// `input`), and returns how many bytes it wrote; the rest of `out` is wiped.
    ///
    /// Lengths are checked by the callers. On failure the output buffer is wiped, and a failing final step of a
    /// decryption (the padding check) is reported as `invalidSecret`.
    private func crypt(
        _ input: UnsafeRawBufferPointer, iv: [UInt8], encrypting: Bool, into output: UnsafeMutableRawBufferPointer
    ) throws(SessionCryptoError) -> Int {
        guard let context = EVP_CIPHER_CTX_new() else {
            throw openSSLFailure("cannot allocate a cipher context")
        }
        defer { EVP_CIPHER_CTX_free(context) }
        let capacity = output.count
        precondition(capacity >= input.count + Self.blockLength, "the output buffer is too short")
        guard let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw .openSSL("no output buffer")
        }
        var updateLength: Int32 = 0
        var finalLength: Int32 = 0
        guard EVP_CipherInit_ex2(context, cipher, key, iv, encrypting ? 1 : 0, nil) == 1 else {
            throw openSSLFailure("cannot initialise AES-128-CBC")
        }
        guard
            input.isEmpty
                || EVP_CipherUpdate(
                    context, out, &updateLength, input.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    Int32(input.count)) == 1
        else {
            OPENSSL_cleanse(out, capacity)
            throw openSSLFailure("AES-128-CBC failed")
        }
        guard EVP_CipherFinal_ex(context, out + Int(updateLength), &finalLength) == 1 else {
            OPENSSL_cleanse(out, capacity)
            if encrypting { throw openSSLFailure("AES-128-CBC failed") }
            ERR_clear_error()
            throw .invalidSecret("the secret does not decrypt: bad padding")
        }
        let count = Int(updateLength) + Int(finalLength)
        OPENSSL_cleanse(out + count, capacity - count)
        return count
    }

    /// Validates the other side's package key and derives the AES key into `key` from it and `privateKey`.
    private static func agree(
        peerPublicKey: [UInt8], privateKey: borrowing OwnedNumber, key: UnsafeMutablePointer<UInt8>
    ) throws(SessionCryptoError) {
        guard (1...primeLength).contains(peerPublicKey.count) else {
            throw .invalidPublicKey(
                "the package key is \(peerPublicKey.count) bytes long, expected 1 to \(primeLength)")
        }
        guard let context = BN_CTX_secure_new() else {
            throw openSSLFailure("cannot allocate a BIGNUM context")
        }
        defer { BN_CTX_free(context) }
        let prime = try OwnedNumber(BN_get_rfc2409_prime_1024(nil))
        let peer = try OwnedNumber(BN_bin2bn(peerPublicKey, Int32(peerPublicKey.count), nil))
        guard try isGroupElement(peer, prime: prime) else {
            throw .invalidPublicKey("the package key is not in [2, p-2]")
        }
        let shared = try OwnedNumber.secure()
        guard BN_mod_exp(shared.pointer, peer.pointer, privateKey.pointer, prime.pointer, context) == 1 else {
            throw openSSLFailure("modular exponentiation failed")
        }
        guard BN_is_one(shared.pointer) == 0 else {
            throw .invalidPublicKey("the package key yields a degenerate shared secret")
        }
        let secret = UnsafeMutablePointer<UInt8>.allocate(capacity: primeLength)
        secret.initialize(repeating: 0, count: primeLength)
        defer {
            OPENSSL_cleanse(secret, primeLength)
            secret.deallocate()
        }
        guard BN_bn2binpad(shared.pointer, secret, Int32(primeLength)) == Int32(primeLength) else {
            throw openSSLFailure("cannot encode the shared secret")
        }
        try deriveKey(from: secret, count: primeLength, into: key)
    }

    /// The package key of `privateKey` (2 to its power modulo the prime), left-padded to 128 bytes; marks the
    /// private key for constant-time use.
    static func publicKey(of privateKey: borrowing OwnedNumber) throws(SessionCryptoError) -> [UInt8] {
        BN_set_flags(privateKey.pointer, BN_FLG_CONSTTIME)
        guard let context = BN_CTX_secure_new() else {
            throw openSSLFailure("cannot allocate a BIGNUM context")
        }
        defer { BN_CTX_free(context) }
        let prime = try OwnedNumber(BN_get_rfc2409_prime_1024(nil))
        let generator = try OwnedNumber(BN_new())
        let publicKey = try OwnedNumber(BN_new())
        guard BN_set_word(generator.pointer, 2) == 1,
            BN_mod_exp(publicKey.pointer, generator.pointer, privateKey.pointer, prime.pointer, context) == 1
        else { throw openSSLFailure("modular exponentiation failed") }
        var publicBytes = [UInt8](repeating: 0, count: primeLength)
        guard BN_bn2binpad(publicKey.pointer, &publicBytes, Int32(primeLength)) == Int32(primeLength) else {
            throw openSSLFailure("cannot encode the package key")
        }
        return publicBytes
    }

    /// Sets `privateKey` to a number drawn uniformly from [2, 2^privateKeyBits - 1].
    static func drawPrivateKey(into privateKey: borrowing OwnedNumber) throws(SessionCryptoError) {
        let range = try OwnedNumber(BN_new())
        guard BN_set_bit(range.pointer, Int32(privateKeyBits)) == 1, BN_sub_word(range.pointer, 2) == 1,
            BN_priv_rand_range(privateKey.pointer, range.pointer) == 1, BN_add_word(privateKey.pointer, 2) == 1
        else { throw openSSLFailure("cannot generate a private key") }
    }

    /// Whether `number` is in [2, p-2]: neither 0, 1, p-1 nor anything at or above p.
    private static func isGroupElement(_ number: borrowing OwnedNumber, prime: borrowing OwnedNumber)
        throws(SessionCryptoError) -> Bool
    {
        let primeMinusOne = try OwnedNumber(BN_dup(prime.pointer))
        guard BN_sub_word(primeMinusOne.pointer, 1) == 1 else {
            throw openSSLFailure("BN_sub_word failed")
        }
        return BN_is_zero(number.pointer) == 0 && BN_is_one(number.pointer) == 0
            && BN_cmp(number.pointer, primeMinusOne.pointer) < 0
    }

    /// HKDF-SHA256 of `secret` with an empty salt and empty info, 16 bytes of output written to `key`.
    ///
    /// No salt parameter is passed, which OpenSSL treats as an empty salt; per RFC 5869 that is the same as
    /// a salt of 32 zero bytes (HMAC pads its key with zeros).
    private static func deriveKey(
        from secret: UnsafeMutablePointer<UInt8>, count: Int, into key: UnsafeMutablePointer<UInt8>
    ) throws(SessionCryptoError) {
        guard let kdf = EVP_KDF_fetch(nil, "HKDF", nil) else {
            throw openSSLFailure("cannot fetch HKDF")
        }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else {
            throw openSSLFailure("cannot allocate a KDF context")
        }
        defer { EVP_KDF_CTX_free(context) }
        let params = [
            OSSL_PARAM_construct_utf8_string(
                parameterName("digest"), UnsafeMutablePointer(mutating: parameterName("SHA256")), 0),
            OSSL_PARAM_construct_octet_string(parameterName("key"), secret, count),
            OSSL_PARAM_construct_end(),
        ]
        guard EVP_KDF_derive(context, key, keyLength, params) == 1 else {
            throw openSSLFailure("HKDF-SHA256 failed")
        }
    }
}

/// The client's half of a dh-ietf1024-sha256-aes128-cbc-pkcs7 exchange: a fresh private key (drawn as the
/// daemon draws its own) and its package key, to send in `OpenSession`; ``DHSessionCipher/init(serverPublicKey:clientKey:)``
/// finishes the exchange with the daemon's answer. The private key is cleared and freed with this value.
package struct DHClientKey: ~Copyable {
    /// The package key to send: exactly 128 bytes.
    package let publicKey: [UInt8]
    /// The private key, in OpenSSL's secure heap.
    let privateKey: OwnedNumber

    /// A fresh key pair.
    package init() throws(SessionCryptoError) {
        let privateKey = try OwnedNumber.secure()
        try DHSessionCipher.drawPrivateKey(into: privateKey)
        publicKey = try DHSessionCipher.publicKey(of: privateKey)
        self.privateKey = privateKey
    }
}

/// A BIGNUM owned by the current scope: cleared (in case it held key material) and freed at the end of it.
struct OwnedNumber: ~Copyable {
    /// The BIGNUM.
    let pointer: OpaquePointer

    /// A new zero in secure memory (for key material).
    static func secure() throws(SessionCryptoError) -> OwnedNumber {
        try OwnedNumber(BN_secure_new())
    }

    /// The number of significant bits.
    var bitCount: Int { Int(BN_num_bits(pointer)) }

    /// Takes ownership of the result of an allocating OpenSSL call, failing if it returned NULL.
    init(_ pointer: OpaquePointer?) throws(SessionCryptoError) {
        guard let pointer else { throw openSSLFailure("cannot allocate a BIGNUM") }
        self.pointer = pointer
    }

    /// Clears and frees the BIGNUM.
    deinit { BN_clear_free(pointer) }
}

/// A NUL-terminated C string that lives as long as the program, for OpenSSL parameter names and values:
/// `OSSL_PARAM_construct_*` keeps the pointer, not a copy.
private func parameterName(_ name: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// A `SessionCryptoError.openSSL` naming the failed operation and OpenSSL's reason for it, if any.
///
/// Empties the thread's OpenSSL error queue, so that the failure does not leak into later error reports.
private func openSSLFailure(_ operation: String) -> SessionCryptoError {
    let code = ERR_get_error()
    ERR_clear_error()
    guard code != 0, let reason = ERR_reason_error_string(code) else {
        return .openSSL(operation)
    }
    return .openSSL("\(operation): \(String(cString: reason))")
}
