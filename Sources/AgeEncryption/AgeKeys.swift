import Posix

/// An X25519 recipient: the public key a file is encrypted to, written `age1…` (Bech32, human-readable part
/// `age`), as `age-keygen` prints it and `age -r` takes it.
package struct AgeRecipient: Sendable, Equatable, CustomStringConvertible {
    /// The 32-byte X25519 public key.
    package let publicKey: [UInt8]

    /// A recipient of the 32-byte X25519 public key `publicKey`.
    init(publicKey: [UInt8]) {
        precondition(publicKey.count == AgeCrypto.keyLength)
        self.publicKey = publicKey
    }

    /// Parses an `age1…` recipient (all lowercase or all uppercase, surrounding whitespace ignored).
    ///
    /// - Throws: ``AgeError/Kind/invalidRecipient`` for a string that is no X25519 recipient (bad Bech32,
    ///   checksum, prefix or length), ``AgeError/Kind/unsupported`` for another kind of age recipient
    ///   (`age1pq1…`, `age1tag1…`, plugins' `age1NAME1…`) or an SSH key.
    package init(parsing text: String) throws(AgeError) {
        let trimmed = Array(text.utf8.drop(while: Self.isSpace).reversed().drop(while: Self.isSpace).reversed())
        guard !trimmed.starts(with: Array("ssh-".utf8)) else {
            throw AgeError(.unsupported, "SSH recipients are not supported: give an age1… X25519 recipient")
        }
        guard trimmed.count <= 1024 else { throw AgeError(.invalidRecipient, "the age recipient is far too long") }
        // A copy in secret memory only to lend it (an array cannot lend to a noncopyable result).
        let text: SecretBytes
        do throws(SecretMemoryError) {
            text = try SecretBytes(copying: trimmed)
        } catch {
            throw .noMemory(error)
        }
        do throws(Bech32.Failure) {
            let key = try text.withUnsafeBytes { (bytes) throws(Bech32.Failure) in
                try Bech32.decode(bytes, expected: "age", length: AgeCrypto.keyLength)
            }
            publicKey = key.withUnsafeBytes { Array($0) }
        } catch .otherPrefix(let prefix) where prefix.starts(with: Array("age1".utf8)) {
            throw AgeError(
                .unsupported,
                "\(String(decoding: prefix, as: UTF8.self))… recipients (post-quantum, hardware or plugin keys) are not"
                    + " supported: give an age1… X25519 recipient")
        } catch .checksum {
            throw AgeError(.invalidRecipient, "the age recipient's checksum does not match: a character is mistyped")
        } catch {
            throw AgeError(.invalidRecipient, "not an age recipient: expected age1 followed by 58 characters")
        }
    }

    /// The key as `age1…`.
    package var description: String {
        guard let key = try? SecretBytes(copying: publicKey),
            let encoded = try? key.withUnsafeBytes({ (bytes) throws(SecretMemoryError) in
                try Bech32.encode(bytes, prefix: "age", uppercase: false)
            })
        else { return "age1?" }
        return encoded.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether a byte is whitespace around a key.
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }
}

/// The X25519 identities (private keys) a file may be decrypted with: the lines `AGE-SECRET-KEY-1…` of a key
/// file as `age-keygen` writes it. The keys stay in secret memory; the value cannot be copied.
package struct AgeIdentities: ~Copyable {
    /// The most identities a key file may hold (each costs an X25519 per stanza of a file): 64.
    package static let maximumCount = 64
    /// The longest key file read: 64 KiB.
    package static let maximumKeyFileLength = 64 << 10

    /// The private keys, 32 bytes each, one after the other.
    let privateKeys: SecretBytes
    /// Their recipients, in the same order.
    package let recipients: [AgeRecipient]

    /// How many identities it holds.
    package var count: Int { recipients.count }

    /// Identities of `privateKeys` (32 bytes each) whose recipients are `recipients`.
    private init(privateKeys: consuming SecretBytes, recipients: [AgeRecipient]) {
        self.privateKeys = privateKeys
        self.recipients = recipients
    }

    /// Parses a key file: `#` comments and blank lines skipped, every other line an `AGE-SECRET-KEY-1…`.
    ///
    /// - Throws: ``AgeError/Kind/invalidIdentity`` for a line that is no identity (named by its number, never
    ///   quoted), or a file with none; ``AgeError/Kind/unsupported`` for plugin, post-quantum or SSH identities;
    ///   ``AgeError/Kind/tooLarge`` past ``maximumKeyFileLength`` or ``maximumCount``.
    package init(parsingKeyFile keyFile: borrowing SecretBytes) throws(AgeError) {
        guard keyFile.count <= Self.maximumKeyFileLength else {
            throw AgeError(.tooLarge, "the age key file is longer than \(Self.maximumKeyFileLength >> 10) KiB")
        }
        var keys: SecretBytes
        do throws(SecretMemoryError) {
            keys = try SecretBytes(capacity: Self.maximumCount * AgeCrypto.keyLength)
        } catch {
            throw .noMemory(error)
        }
        var recipients: [AgeRecipient] = []
        try keyFile.withUnsafeBytes { (file) throws(AgeError) in
            var lineStart = 0
            var lineNumber = 0
            while lineStart < file.count {
                lineNumber += 1
                let lineEnd = file[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? file.count
                var start = lineStart
                var end = lineEnd
                lineStart = lineEnd + 1
                while start < end, AgeRecipient.isSpace(file[start]) { start += 1 }
                while end > start, AgeRecipient.isSpace(file[end - 1]) { end -= 1 }
                guard start < end, file[start] != UInt8(ascii: "#") else { continue }
                guard recipients.count < Self.maximumCount else {
                    throw AgeError(.tooLarge, "the age key file holds more than \(Self.maximumCount) identities")
                }
                let key = try Self.parseIdentity(UnsafeRawBufferPointer(rebasing: file[start..<end]), line: lineNumber)
                try key.withUnsafeBytes { (bytes) throws(AgeError) in
                    recipients.append(AgeRecipient(publicKey: try AgeCrypto.x25519PublicKey(of: bytes)))
                    keys.append(bytes)
                }
            }
        }
        guard !recipients.isEmpty else {
            throw AgeError(.invalidIdentity, "the age key file holds no identity (AGE-SECRET-KEY-1…)")
        }
        privateKeys = keys
        self.recipients = recipients
    }

    /// One fresh identity, as `age-keygen` makes it.
    package static func generate() throws(AgeError) -> AgeIdentities {
        let key = try AgeCrypto.randomSecret(AgeCrypto.keyLength)
        let publicKey = try key.withUnsafeBytes { (bytes) throws(AgeError) in try AgeCrypto.x25519PublicKey(of: bytes) }
        return AgeIdentities(privateKeys: key, recipients: [AgeRecipient(publicKey: publicKey)])
    }

    /// The identities as a key file in `age-keygen`'s form: for each, a `# public key: age1…` comment and its
    /// `AGE-SECRET-KEY-1…` line, in secret memory.
    package func keyFile() throws(AgeError) -> SecretBytes {
        do throws(SecretMemoryError) {
            var file = try SecretBytes(capacity: count * 160)
            for (index, recipient) in recipients.enumerated() {
                let comment = Array("# public key: \(recipient)\n".utf8)
                comment.withUnsafeBytes { file.append($0) }
                let line = try privateKeys.withUnsafeBytes { (keys) throws(SecretMemoryError) in
                    try Bech32.encode(
                        UnsafeRawBufferPointer(
                            rebasing: keys[index * AgeCrypto.keyLength..<(index + 1) * AgeCrypto.keyLength]),
                        prefix: "age-secret-key-", uppercase: true)
                }
                line.withUnsafeBytes { file.append($0) }
                file.append(UInt8(ascii: "\n"))
            }
            return file
        } catch {
            throw .noMemory(error)
        }
    }

    /// The 32-byte private key of one key file line (`line` is its number, for the message).
    private static func parseIdentity(_ text: UnsafeRawBufferPointer, line: Int) throws(AgeError) -> SecretBytes {
        do throws(Bech32.Failure) {
            return try Bech32.decode(text, expected: "age-secret-key-", length: AgeCrypto.keyLength)
        } catch .otherPrefix(let prefix)
            where prefix.starts(with: Array("age-plugin-".utf8)) || prefix.starts(with: Array("age-secret-key-".utf8))
        {
            throw AgeError(
                .unsupported,
                "line \(line) of the age key file holds a plugin or post-quantum identity, which Latchkey cannot use")
        } catch .checksum {
            throw AgeError(
                .invalidIdentity, "line \(line) of the age key file: the identity's checksum does not match")
        } catch {
            if text.starts(with: Array("-----BEGIN".utf8)) {
                throw AgeError(.unsupported, "the age key file is an SSH or PEM key, which Latchkey cannot use")
            }
            throw AgeError(.invalidIdentity, "line \(line) of the age key file is not an identity (AGE-SECRET-KEY-1…)")
        }
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
