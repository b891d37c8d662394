import COpenSSL
import FoundationEssentials
import KeychainCore

/// A 256-bit key in memory of its own that is wiped when the key is released.
final class SecretKey: @unchecked Sendable {
    /// Key length in bytes.
    static let length = 32
    let bytes: UnsafeMutableRawBufferPointer

    /// A new random key.
    static func random() throws(KeychainError) -> SecretKey {
        let key = SecretKey()
        try SecureRandom.fill(key.bytes)
        return key
    }

    /// A key holding a copy of `data`, which must be ``length`` bytes.
    convenience init?(copying data: some DataProtocol) {
        guard data.count == Self.length else { return nil }
        self.init()
        bytes.copyBytes(from: data)
    }

    private init() {
        bytes = .allocate(byteCount: Self.length, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        OPENSSL_cleanse(bytes.baseAddress, bytes.count)
        bytes.deallocate()
    }

    /// The key bytes as `Data` (for storing a key that is not secret, such as the index key).
    var data: Data { Data(bytes) }
}

/// Random bytes from OpenSSL's CSPRNG.
enum SecureRandom {
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(KeychainError) {
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
