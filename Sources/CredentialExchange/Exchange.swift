import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// One keychain's items, as an export reads them: each item with its attributes and its secret in secret
/// memory (nil for an item stored without one).
package struct ExportedKeychain {
    /// The keychain's name (`login`, …): the CXF collection its items are listed in.
    package var name: String
    /// The items, found with their attributes.
    package var items: [(item: KeychainItem, secret: SharedSecret?)]

    /// A keychain named `name` with `items`.
    package init(name: String, items: [(item: KeychainItem, secret: SharedSecret?)]) {
        self.name = name
        self.items = items
    }
}

/// What an exchange file holds that a keychain can take: the items to add, the credentials that have no
/// Latchkey form (listed, never dropped silently) and the format that was read.
package struct ExchangeReading {
    /// The items, in the file's order.
    package var items: [NewItem]
    /// The credentials left out, with why.
    package var skipped: [SkippedCredential]
    /// What was read: `cxf-1.0` (with the minor version the file gave), `chrome-csv`, `firefox-csv`,
    /// `bitwarden-csv`, `keepassxc-csv`, `apple-passwords-csv`.
    package var format: String
    /// For each of ``items`` (same count, same order), the keychain a Latchkey export listed it under (its CXF
    /// collection), or nil when the file does not say (another exporter, a CSV file).
    package var keychainNames: [String?]

    /// A reading of `format` with `items` (no keychain names) and `skipped`.
    package init(items: [NewItem], skipped: [SkippedCredential], format: String, keychainNames: [String?]? = nil) {
        self.items = items
        self.skipped = skipped
        self.format = format
        self.keychainNames = keychainNames ?? Array(repeating: nil, count: items.count)
    }
}

/// Why an exchange file could not be written or read. The message is one line that names the fault and where
/// it is (a byte offset, a line), never a value from the file.
package struct ExchangeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kind of fault.
    package enum Kind: Equatable, Sendable {
        /// The bytes are not well-formed JSON or CSV (a truncated file among them).
        case malformed
        /// Well-formed, but a member has the wrong type or value for the format.
        case invalid
        /// A CXF document of a major version this reader does not know.
        case unsupportedVersion
        /// A size, depth or count over the reader's limits.
        case tooLarge
        /// Neither CXF nor a known CSV header.
        case unknownFormat
        /// Secret memory could not be had.
        case outOfMemory
    }

    /// The kind of fault.
    package var kind: Kind
    /// One line naming it.
    package var message: String

    /// A fault of `kind` told by `message`.
    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    package var description: String { message }
}

/// Reads an exchange file of any format this target knows, by its content.
package enum ExchangeFile {
    /// The items of `bytes`: a CXF JSON document when its first byte (after a BOM and blanks) is `{`, else a
    /// CSV file with a known header.
    package static func decode(_ bytes: borrowing SecretBytes) throws(ExchangeError) -> ExchangeReading {
        let isJSON = bytes.withUnsafeBytes { buffer in
            var index = buffer.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
            while index < buffer.count, [0x20, 0x09, 0x0A, 0x0D].contains(buffer[index]) { index += 1 }
            return index < buffer.count && buffer[index] == UInt8(ascii: "{")
        }
        return isJSON ? try CXFDocument.decode(bytes) : try PasswordCSV.decode(bytes)
    }
}

/// A secret buffer with room for `capacity` bytes, or ``ExchangeError/Kind/outOfMemory``.
func secretBuffer(capacity: Int) throws(ExchangeError) -> SecretBytes {
    do { return try SecretBytes(capacity: max(capacity, 1)) } catch {
        throw ExchangeError(.outOfMemory, "no secret memory for \(capacity) bytes")
    }
}
