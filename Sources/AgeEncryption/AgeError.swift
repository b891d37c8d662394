import Posix

/// Why an age file could not be written or read, or a key not parsed: a kind to act on and one line a person
/// understands. No message ever holds a secret (a passphrase, a key, a line of a key file).
package struct AgeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong, as a caller acts on it.
    package enum Kind: Equatable, Sendable {
        /// Not a well-formed age file: the header's syntax, its base64, a stanza's arguments, the armor.
        case malformed
        /// The file ends too early: inside its header, before its payload, or after a chunk that is not its last.
        case truncated
        /// The header's MAC or a payload chunk does not authenticate: the file was altered (or cut inside a chunk).
        case tampered
        /// The passphrase does not unwrap the file key (or the scrypt stanza was altered).
        case wrongPassphrase
        /// None of the identities unwraps the file key: the file was encrypted to other recipients.
        case noMatchingIdentity
        /// A valid file this implementation cannot open: another format version, or only stanzas of other types
        /// (ssh-ed25519, ssh-rsa, plugins, post-quantum); or a key of a type it does not hold.
        case unsupported
        /// The file's scrypt work factor is above the caller's maximum: refused before any derivation.
        case workFactorTooHigh
        /// The file, its header, its stanzas or the plaintext exceed the bounds of ``AgeFile``.
        case tooLarge
        /// An `age1…` recipient that does not parse (Bech32, checksum, prefix, length).
        case invalidRecipient
        /// A key file or an `AGE-SECRET-KEY-1…` line that does not parse.
        case invalidIdentity
        /// The caller asked for something impossible: no recipient, an empty passphrase, a work factor out of range.
        case invalidArgument
        /// No secret memory could be mapped for a key or the plaintext.
        case noSecretMemory
        /// OpenSSL failed (an allocation, a missing algorithm): not the file's fault.
        case cryptoFailure
    }

    /// What went wrong.
    package let kind: Kind
    /// One line for a person, naming the problem (never a secret).
    package let message: String

    /// An error of `kind` saying `message`.
    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    package var description: String { message }

    /// The error for secret memory that could not be mapped.
    static func noMemory(_ error: SecretMemoryError) -> AgeError {
        AgeError(.noSecretMemory, "no secret memory for the age file: \(error)")
    }
}
