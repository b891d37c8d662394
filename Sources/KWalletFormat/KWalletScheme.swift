import Posix

/// KWallet's entry types, numbered as the protocol numbers them (`entryType`, `writeEntry`).
package enum KWalletEntryType: Int32, Sendable {
    /// No such entry, or a kind KWallet does not know.
    case unknown = 0
    /// A password: text.
    case password = 1
    /// A stream: bytes.
    case stream = 2
    /// A map of strings to strings.
    case map = 3
}

/// How a KWallet entry is kept in a keychain item's `type` attribute, in KDE's own scheme (the KF6 bridge's
/// and QtKeychain's libsecret backend's), so that the same item is the same entry to every KDE client.
package enum KWalletStoredForm: String, Sendable, CaseIterable {
    /// A password; the secret is its UTF-8.
    case plaintext
    /// A stream; the secret is its bytes in base64 (QtKeychain's form).
    case base64
    /// A stream whose secret is the bytes themselves: read, never written.
    case binary
    /// A map; the secret is a compact JSON object of strings.
    case map

    /// The form of an item whose `type` attribute is `attribute`: none is a password (libsecret's network
    /// passwords, which have `server` and `user` too); an unknown word is no KWallet entry.
    package init?(typeAttribute attribute: String?) {
        guard let attribute else {
            self = .plaintext
            return
        }
        self.init(rawValue: attribute)
    }

    /// The form an entry of `type` is written in (an entry of unknown type is kept as a stream).
    package init(writing type: KWalletEntryType) {
        switch type {
        case .password: self = .plaintext
        case .stream, .unknown: self = .base64
        case .map: self = .map
        }
    }

    /// The entry type KWallet clients see.
    package var entryType: KWalletEntryType {
        switch self {
        case .plaintext: .password
        case .base64, .binary: .stream
        case .map: .map
        }
    }
}

/// Where a KWallet entry's names live in a keychain item, and how its value moves between the item's secret
/// and the KWallet wire (docs/kwallet.md, §2).
package enum KWalletScheme {
    /// The attribute that holds the folder.
    package static let folderAttribute = "server"
    /// The attribute that holds the key.
    package static let keyAttribute = "user"
    /// The attribute that holds the stored form (``KWalletStoredForm``).
    package static let typeAttribute = "type"

    /// An entry's item label: `folder/key`.
    package static func label(folder: String, key: String) -> String { folder + "/" + key }

    /// The value `readEntry` gives for an item's secret kept in `form`: a password as one `QString`, a stream
    /// as its bytes, a map as a `QMap<QString,QString>`.
    package static func wireValue(stored secret: borrowing SecretBytes, form: KWalletStoredForm)
        throws(KWalletFormatError) -> SecretBytes
    {
        try secret.withUnsafeBytes { (stored) throws(KWalletFormatError) -> SecretBytes in
            switch form {
            case .plaintext:
                var writer = try QDataStreamWriter(capacity: 4 + 2 * stored.count)
                try writer.string(utf8: stored, "password")
                return writer.finish()
            case .binary: return try copy(stored)
            case .base64: return try Base64.decode(stored)
            case .map: return try KWalletMap.wire(ofJSON: stored)
            }
        }
    }

    /// The secret to keep for `wire`, a value written as `type`, in the form `KWalletStoredForm(writing:
    /// type)`; a password must be exactly one `QString` and a map one `QMap<QString,QString>`.
    package static func storedValue(wire: UnsafeRawBufferPointer, type: KWalletEntryType)
        throws(KWalletFormatError) -> SecretBytes
    {
        switch KWalletStoredForm(writing: type) {
        case .plaintext: try passwordUTF8(wire: wire)
        case .base64, .binary: try Base64.encode(wire)
        case .map: try KWalletMap.json(ofWire: wire)
        }
    }

    /// The UTF-8 of a password given as one `QString` (the null string is the empty password).
    package static func passwordUTF8(wire: UnsafeRawBufferPointer) throws(KWalletFormatError) -> SecretBytes {
        var reader = QDataStreamReader(wire)
        var text = try secureBuffer(capacity: wire.count)
        _ = try reader.appendString("password", asUTF8: &text)
        guard reader.isAtEnd else { throw .trailingBytes("password") }
        return text
    }

    /// The password text (UTF-8) of an item kept in `form`, for `readPassword`; nil when it is no password.
    package static func passwordText(stored secret: borrowing SecretBytes, form: KWalletStoredForm)
        throws(KWalletFormatError) -> SecretBytes?
    {
        guard form == .plaintext else { return nil }
        return try secret.withUnsafeBytes { (stored) throws(KWalletFormatError) in try copy(stored) }
    }

    static func copy(_ bytes: UnsafeRawBufferPointer) throws(KWalletFormatError) -> SecretBytes {
        do { return try SecretBytes(copying: bytes) } catch { throw .outOfMemory }
    }
}
