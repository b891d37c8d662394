import Posix

/// Files in the age format v1 (https://age-encryption.org/v1, c2sp.org/age): written to a passphrase (one
/// scrypt stanza) or to X25519 recipients, read with a passphrase or X25519 identities, binary or ASCII-armored.
/// All cryptography is OpenSSL's; the plaintext, passphrase and keys stay in ``SecretBytes``.
package enum AgeFile {
    /// Encrypts to a passphrase (scrypt stanza, work factor logN; age's default is 18).
    ///
    /// - Throws: ``AgeError/Kind/invalidArgument`` for an empty passphrase or a work factor outside 1...22,
    ///   ``AgeError/Kind/tooLarge`` for a plaintext above ``maximumPlaintextLength``.
    package static func encrypt(
        _ plaintext: borrowing SecretBytes, passphrase: borrowing SecretBytes, workFactor: Int = 18
    ) throws(AgeError) -> [UInt8] {
        throw AgeError(.unsupported, "age encryption is not implemented yet")
    }

    /// Encrypts to one or more X25519 recipients.
    ///
    /// - Throws: ``AgeError/Kind/invalidArgument`` for no recipient, ``AgeError/Kind/tooLarge``.
    package static func encrypt(_ plaintext: borrowing SecretBytes, to recipients: [AgeRecipient]) throws(AgeError)
        -> [UInt8]
    {
        throw AgeError(.unsupported, "age encryption is not implemented yet")
    }

    /// Decrypts a file (binary or armored) encrypted to a passphrase.
    ///
    /// - Throws: ``AgeError/Kind/workFactorTooHigh`` before deriving anything when the file's logN is above
    ///   `maximumWorkFactor`; ``AgeError/Kind/wrongPassphrase``; ``AgeError/Kind/noMatchingIdentity`` when the
    ///   file is encrypted to recipients instead; ``AgeError/Kind/malformed``, ``AgeError/Kind/truncated``,
    ///   ``AgeError/Kind/tampered`` for a damaged file. No plaintext is returned unless all of it authenticates.
    package static func decrypt(_ file: [UInt8], passphrase: borrowing SecretBytes, maximumWorkFactor: Int = 22)
        throws(AgeError) -> SecretBytes
    {
        throw AgeError(.unsupported, "age decryption is not implemented yet")
    }

    /// Decrypts a file (binary or armored) encrypted to X25519 recipients, with any of `identities`.
    ///
    /// - Throws: ``AgeError/Kind/noMatchingIdentity`` when none of them unwraps the file key (or the file is
    ///   encrypted to a passphrase); ``AgeError/Kind/unsupported`` when it holds only stanzas of other types; the
    ///   errors of a damaged file as ``decrypt(_:passphrase:maximumWorkFactor:)``.
    package static func decrypt(_ file: [UInt8], identities: borrowing AgeIdentities) throws(AgeError) -> SecretBytes {
        throw AgeError(.unsupported, "age decryption is not implemented yet")
    }

    /// What a file needs: .passphrase, .identity, .unreadable (an age file that cannot be opened), or nil when
    /// it is no age file at all (neither binary nor armored).
    package static func requirement(of file: [UInt8]) -> AgeRequirement? {
        nil
    }
}
