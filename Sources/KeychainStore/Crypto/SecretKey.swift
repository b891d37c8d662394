import COpenSSL
import FoundationEssentials
import KeychainCore
import Posix

/// A 256-bit key in secret memory of its own (``SecretBytes``: kept out of core dumps, locked in memory where
/// the limit allows, wiped and unmapped when the key is released).
final class SecretKey: @unchecked Sendable {
    /// Key length in bytes.
    static let length = 32
    /// The key's pages; they never move while the key lives.
    private let storage: SecretBytes
    /// The key bytes, for OpenSSL; valid while the key lives.
    let bytes: UnsafeMutableRawBufferPointer

    /// A new random key.
    static func random() throws(KeychainError) -> SecretKey {
        try filled { (bytes) throws(KeychainError) in try SecureRandom.fill(bytes) }
    }

    /// A key whose bytes `fill` writes (a key derivation writes straight into the key's pages).
    static func filled(_ fill: (UnsafeMutableRawBufferPointer) throws(KeychainError) -> Void) throws(KeychainError)
        -> SecretKey
    {
        let key = try SecretKey()
        try fill(key.bytes)
        return key
    }

    /// A key holding a copy of `data`, which must be ``length`` bytes (the caller wipes its own); nil when it
    /// is not.
    convenience init?(copying data: some DataProtocol) throws(KeychainError) {
        guard data.count == Self.length else { return nil }
        try self.init()
        bytes.copyBytes(from: data)
    }

    private init() throws(KeychainError) {
        var storage = try KeychainError.allocating { () throws(SecretMemoryError) in try SecretBytes(zeros: Self.length)
        }
        bytes = storage.withUnsafeMutableBytes { $0 }
        self.storage = storage
    }

    /// The key bytes as `Data` (for storing a key that is not secret, such as the index key).
    var data: Data { Data(bytes) }

    /// The key's own bytes seen as `Data`, without a copy (to seal the key under another); valid while the
    /// key lives.
    var unownedData: Data {
        guard let base = bytes.baseAddress else { return Data() }
        return Data(bytesNoCopy: base, count: bytes.count, deallocator: .none)
    }
}

extension KeychainError {
    /// What `make` makes in secret memory; `errSecAllocate` when no secret memory can be had (``SecretBytes``
    /// cannot map its pages), so the one operation fails and the process goes on.
    package static func allocating<Made: ~Copyable>(_ make: () throws(SecretMemoryError) -> Made)
        throws(KeychainError) -> Made
    {
        do {
            return try make()
        } catch {
            throw KeychainError(.allocate, error.description)
        }
    }
}

/// Random bytes from OpenSSL's CSPRNG.
package enum SecureRandom {
    /// Fills `buffer` from OpenSSL's CSPRNG.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(KeychainError) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        guard RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
            throw KeychainError(.internalComponent, "OpenSSL RAND_bytes failed")
        }
    }

    static func data(count: Int) throws(KeychainError) -> Data {
        var data = Data(count: count)
        var failure: KeychainError?
        data.withUnsafeMutableBytes { buffer in
            do throws(KeychainError) { try fill(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
        return data
    }
}

/// A C string that lives as long as the program (OpenSSL keeps parameter names by pointer).
func cName(_ name: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}
