import Posix

/// An X25519 recipient: the public key a file is encrypted to, written `age1…` (Bech32, human-readable part
/// `age`), as `age-keygen` prints it and `age -r` takes it.
package struct AgeRecipient: Sendable, Equatable, CustomStringConvertible {
    /// The 32-byte X25519 public key.
    package let publicKey: [UInt8]

    /// Parses an `age1…` recipient (all lowercase or all uppercase, surrounding whitespace ignored).
    ///
    /// - Throws: ``AgeError/Kind/invalidRecipient`` for a string that is no X25519 recipient (bad Bech32,
    ///   checksum, prefix or length), ``AgeError/Kind/unsupported`` for another age recipient type
    ///   (`age1pq1…`, `age1tag1…`, plugins).
    package init(parsing text: String) throws(AgeError) {
        throw AgeError(.unsupported, "age recipients are not implemented yet")
    }

    /// The key as `age1…`.
    package var description: String { "age1" }
}

/// The X25519 identities (private keys) a file may be decrypted with: the lines `AGE-SECRET-KEY-1…` of a key
/// file as `age-keygen` writes it. The keys stay in secret memory; the value cannot be copied.
package struct AgeIdentities: ~Copyable {
    /// The private keys, 32 bytes each, one after the other.
    let privateKeys: SecretBytes

    /// How many identities it holds.
    package var count: Int { privateKeys.count / 32 }

    /// Parses a key file: `#` comments and blank lines skipped, every other line an `AGE-SECRET-KEY-1…`.
    ///
    /// - Throws: ``AgeError/Kind/invalidIdentity`` for a line that is no identity (named by its number, never
    ///   quoted), or a file with none; ``AgeError/Kind/unsupported`` for plugin identities; ``AgeError/Kind/tooLarge``.
    package init(parsingKeyFile keyFile: borrowing SecretBytes) throws(AgeError) {
        throw AgeError(.unsupported, "age identities are not implemented yet")
    }
}

/// What opening a file needs, as ``AgeFile/requirement(of:)`` tells from its header.
package enum AgeRequirement: Equatable, Sendable {
    /// A passphrase: the header holds the one scrypt stanza.
    case passphrase
    /// An identity: the header holds X25519 stanzas (and maybe others).
    case identity
    /// An age file (binary or armored) that cannot be opened: its header is malformed or truncated, or holds
    /// only stanzas of types this implementation does not open. The error says which.
    case unreadable(AgeError)
}
