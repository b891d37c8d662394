import Posix

/// Why bytes are not a KWallet value of the kind asked for. The cases name the fault, never the bytes.
package enum KWalletFormatError: Error, Equatable, Sendable {
    /// The bytes end before `what` does.
    case truncated(_ what: String)
    /// A length or count larger than the bytes or the bound allows.
    case tooLarge(_ what: String)
    /// Bytes left over after a value that must fill them (`what`).
    case trailingBytes(_ what: String)
    /// A QString whose UTF-16 is not well-formed, or text whose UTF-8 is not.
    case badText(_ what: String)
    /// A map stored in a keychain item that is not a JSON object of strings.
    case badJSON
    /// Secure memory could not be had for a value.
    case outOfMemory
}

/// A secure buffer with room for `capacity` bytes, or `outOfMemory`.
func secureBuffer(capacity: Int) throws(KWalletFormatError) -> SecretBytes {
    do { return try SecretBytes(capacity: max(capacity, 1)) } catch { throw .outOfMemory }
}
