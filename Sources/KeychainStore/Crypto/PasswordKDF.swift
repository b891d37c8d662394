import COpenSSL
import FoundationEssentials
import KeychainCore
import Posix

/// The cost of scrypt, the memory-hard function that turns a keychain password
/// into the key that wraps the keychain key. Stored in the keychain file.
public struct KDFParameters: Hashable, Sendable, CustomStringConvertible {
    /// log2 of scrypt's N (CPU/memory cost).
    public var logN: UInt8
    /// scrypt's r (block size).
    public var r: UInt32
    /// scrypt's p (parallelism, run one after the other here).
    public var p: UInt32

    /// Explicit scrypt parameters.
    public init(logN: UInt8, r: UInt32, p: UInt32) {
        self.logN = logN
        self.r = r
        self.p = p
    }

    /// The default for new keychains: N = 2^16, r = 8, p = 2, which needs
    /// 64 MiB and about a third of a second on a 2-core machine (see
    /// docs/benchmarks.md).
    public static let production = KDFParameters(logN: 16, r: 8, p: 2)

    /// Cheap parameters (N = 2^10, 1 MiB) for tests that create many
    /// keychains. Never the default: it makes a stolen file cheap to attack.
    public static let insecureForTesting = KDFParameters(logN: 10, r: 8, p: 1)

    /// The memory scrypt needs, in bytes (128 · r · N).
    public var memoryBytes: UInt64 { 128 * UInt64(r) << UInt64(logN) }

    /// `scrypt(N=2^logN, r, p)`.
    public var description: String { "scrypt(N=2^\(logN), r=\(r), p=\(p))" }

    /// The most memory a keychain file may make scrypt use: 1 GiB.
    public static let maximumMemoryBytes: UInt64 = 1 << 30

    /// The most work a keychain file may make scrypt do, N · r · p: 2^24, 16 times ``production`` (about 5 s
    /// on a 2-core machine, where production takes a third of a second). scrypt runs its `p` lanes one after
    /// the other here, so memory alone does not bound the time: N = 2^20, r = 8 (1 GiB) with p = 16 would
    /// hold the key-derivation worker, and every unlock behind it, for minutes.
    public static let maximumWork: UInt64 = 1 << 24

    /// Whether scrypt may run with these at all: within the bounds, at most ``maximumMemoryBytes`` and at
    /// most ``maximumWork``.
    var isAcceptable: Bool {
        (10...22).contains(logN) && (1...32).contains(r) && (1...16).contains(p)
            && memoryBytes <= Self.maximumMemoryBytes && work <= Self.maximumWork
    }

    /// N · r · p: what a guess costs.
    public var work: UInt64 { (UInt64(1) << UInt64(logN)) * UInt64(r) * UInt64(p) }

    /// Whether a keychain file may carry these: no cheaper than ``production`` (a cheaper file was forged or
    /// made by another tool, and its password would be cheap to guess; a forged one could also be a trap
    /// to make the next password change keep the weak cost), within ``maximumMemoryBytes`` (a forged
    /// one could make the reader map gigabytes) and within ``maximumWork`` (a forged one could make every
    /// unlock run for minutes). Checked before anything is allocated.
    public var isAcceptableInFile: Bool { isAcceptable && work >= Self.production.work }

    /// These, or ``production`` where production costs more: what a password change wraps with.
    public var raisedToProduction: KDFParameters { work >= Self.production.work ? self : .production }

    /// Derives a 256-bit key from `password` and `salt`: in a helper process when the daemon installed one
    /// and these need at least ``KeyDerivationProcess/minimumBytesForHelper`` (so that scrypt's memory is not
    /// the daemon's), else in this process.
    func deriveKey(password: some Collection<UInt8>, salt: Data) throws(KeychainError) -> SecretKey {
        guard isAcceptable else {
            throw KeychainError(.invalidKeychain, "KDF parameters \(self) are out of range")
        }
        if let key = try KeyDerivationProcess.derive(self, password: password, salt: salt) { return key }
        return try deriveInThisProcess(password: password, salt: salt)
    }

    /// Derives a 256-bit key from `password` and `salt` in this process. The password is copied into secret
    /// memory for OpenSSL (which keeps its own copy in the context and cleanses it when the context is freed),
    /// and the key is derived straight into the key's own pages.
    func deriveInThisProcess(password: some Collection<UInt8>, salt: Data) throws(KeychainError) -> SecretKey {
        guard isAcceptable else {
            throw KeychainError(.invalidKeychain, "KDF parameters \(self) are out of range")
        }
        guard let kdf = EVP_KDF_fetch(nil, "SCRYPT", nil) else {
            throw KeychainError(.internalComponent, "OpenSSL has no scrypt")
        }
        defer { EVP_KDF_free(kdf) }
        guard let ctx = EVP_KDF_CTX_new(kdf) else {
            throw KeychainError(.allocate, "cannot allocate a KDF context")
        }
        defer { EVP_KDF_CTX_free(ctx) }
        var n = UInt64(1) << UInt64(logN)
        var r = self.r
        var p = self.p
        var maxMemory = memoryBytes * 2 + (1 << 20)
        var passwordBytes = try KeychainError.allocating { () throws(SecretMemoryError) in
            try SecretBytes(copying: password)
        }
        let saltBytes = [UInt8](salt)
        let description = self.description
        return try SecretKey.filled { (out) throws(KeychainError) in
            let status = passwordBytes.withUnsafeMutableBytes { pass in
                saltBytes.withUnsafeBytes { saltBuffer in
                    var params = [
                        OSSL_PARAM_construct_octet_string(cName("pass"), pass.baseAddress, pass.count),
                        OSSL_PARAM_construct_octet_string(
                            cName("salt"), UnsafeMutableRawPointer(mutating: saltBuffer.baseAddress),
                            saltBuffer.count),
                        OSSL_PARAM_construct_uint64(cName("n"), &n),
                        OSSL_PARAM_construct_uint32(cName("r"), &r),
                        OSSL_PARAM_construct_uint32(cName("p"), &p),
                        OSSL_PARAM_construct_uint64(cName("maxmem_bytes"), &maxMemory),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_KDF_derive(
                        ctx, out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count, &params)
                }
            }
            guard status == 1 else { throw KeychainError(.internalComponent, "scrypt failed (\(description))") }
        }
    }
}
