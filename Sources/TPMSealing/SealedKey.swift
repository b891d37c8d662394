/// A key sealed by a TPM: what the caller stores (in a keychain's tpm2 slot) to unseal it later on the same TPM.
///
/// It holds no secret a machine without that TPM can use: the private part is encrypted and integrity-protected
/// under the TPM's storage primary key, which never leaves the TPM.
package struct SealedKey: Sendable, Equatable {
    /// The sealed data object's public area (TPM2B_PUBLIC, marshalled): its attributes and policy digest.
    package var publicArea: [UInt8]
    /// The sealed data object's private area (TPM2B_PRIVATE, marshalled), encrypted by the TPM.
    package var privateArea: [UInt8]
    /// The SHA-256 bank PCR indices the key is bound to (empty: no PCR policy), ascending.
    package var pcrs: [UInt8]
    /// Whether unsealing needs a PIN.
    package var needsPIN: Bool
    /// The salt mixed into the PIN's authorisation value (16 bytes).
    package var pinSalt: [UInt8]

    /// The format version `encoded()` writes.
    static let formatVersion: UInt8 = 1

    /// Makes a sealed key from its parts.
    package init(publicArea: [UInt8], privateArea: [UInt8], pcrs: [UInt8], needsPIN: Bool, pinSalt: [UInt8]) {
        self.publicArea = publicArea
        self.privateArea = privateArea
        self.pcrs = pcrs
        self.needsPIN = needsPIN
        self.pinSalt = pinSalt
    }

    /// One byte string for a slot: version 1, flags (bit 0: PIN), a 32-bit big-endian PCR mask, the 16-byte
    /// salt, then the public and private areas, each with a 16-bit big-endian length.
    package func encoded() -> [UInt8] {
        var bytes: [UInt8] = [Self.formatVersion, needsPIN ? 1 : 0]
        let mask = pcrs.reduce(UInt32(0)) { $0 | (1 << UInt32($1)) }
        bytes += [UInt8(mask >> 24), UInt8((mask >> 16) & 0xff), UInt8((mask >> 8) & 0xff), UInt8(mask & 0xff)]
        bytes += pinSalt
        for part in [publicArea, privateArea] {
            bytes += [UInt8(part.count >> 8), UInt8(part.count & 0xff)]
            bytes += part
        }
        return bytes
    }

    /// Reads what `encoded()` wrote; throws `invalidInput` for anything else.
    package init(encoded bytes: [UInt8]) throws(TPMSealingError) {
        let invalid = TPMSealingError.invalidInput("not a sealed TPM key")
        guard bytes.count >= 22, bytes[0] == Self.formatVersion, bytes[1] & ~1 == 0 else { throw invalid }
        let mask = bytes[2...5].reduce(UInt32(0)) { ($0 << 8) | UInt32($1) }
        guard mask >> 24 == 0 else { throw invalid }
        var offset = 22
        var parts: [[UInt8]] = []
        for _ in 0..<2 {
            guard bytes.count >= offset + 2 else { throw invalid }
            let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            offset += 2
            guard bytes.count >= offset + length else { throw invalid }
            parts.append(Array(bytes[offset..<offset + length]))
            offset += length
        }
        guard offset == bytes.count else { throw invalid }
        self.init(
            publicArea: parts[0], privateArea: parts[1],
            pcrs: (0..<24).filter { mask & (1 << $0) != 0 }.map(UInt8.init),
            needsPIN: bytes[1] & 1 == 1, pinSalt: Array(bytes[6..<22]))
    }
}
