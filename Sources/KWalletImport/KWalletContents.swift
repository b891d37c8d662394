import KWalletFormat
import Posix

/// One entry of a decrypted wallet: where it is and what kind; its value stays in the wallet's secure buffer.
package struct KWalletEntry: Sendable, Equatable {
    /// The folder's name.
    package var folder: String
    /// The key's name.
    package var key: String
    /// The entry type (only password, stream and map are kept: kwalletd drops the others too).
    package var type: KWalletEntryType
    /// Where its value (the stored `QByteArray`'s bytes) lies in ``KWalletContents``' plaintext; nil for the null
    /// array.
    let value: Range<Int>?
}

/// A wallet's decrypted contents: the plaintext in secure memory and its entries (docs/kwallet.md §5,
/// "Plaintext"). Values are lent out with ``withValue(of:_:)``, never copied into a `String`.
package struct KWalletContents: ~Copyable {
    /// Random bytes that start the plaintext (one Blowfish block).
    static let leadLength = 8
    /// The SHA-1 that ends it.
    static let checkLength = 20

    /// The wallet's entries, folders in the file's order (kwalletd writes them sorted).
    package let entries: [KWalletEntry]
    /// Folders with no entry (kwalletd keeps them; a keychain has nowhere to keep an empty folder).
    package let emptyFolders: [String]
    /// How many entries of a type KWallet does not know were skipped.
    package let skippedEntries: Int
    /// The folder and key names' MD5s as the contents give them, to compare with the file's clear index.
    package let nameDigests: [[UInt8]: Set<[UInt8]>]
    private let plaintext: SecretBytes
    /// Where the serialized data lies in `plaintext`.
    private let data: Range<Int>

    /// Checks and parses the decrypted `plaintext` of the wallet at `path`: the length, the KWallet SHA-1 of the
    /// data against the last 20 bytes (a mismatch is a wrong password or damage), then the `QDataStream` folders
    /// and entries, every count and length checked against what is left.
    init(plaintext: consuming SecretBytes, path: String) throws(KWalletError) {
        let total = plaintext.count
        let length = plaintext.withUnsafeBytes { bytes in
            total >= Self.leadLength + 4 ? bytes[8..<12].reduce(0) { $0 << 8 | Int($1) } : -1
        }
        // A length that does not fit, or a SHA-1 that does not match, is what a wrong key gives.
        guard length >= 0, length <= total - Self.leadLength - 4 - Self.checkLength else {
            throw KWalletError(path, .wrongPassword)
        }
        let data = (Self.leadLength + 4)..<(Self.leadLength + 4 + length)
        let matches = plaintext.withUnsafeBytes { bytes in
            let computed = KWalletCrypto.kwalletSHA1(UnsafeRawBufferPointer(rebasing: bytes[data]))
            return zip(computed, bytes[(total - Self.checkLength)...]).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
        }
        guard matches else { throw KWalletError(path, .wrongPassword) }
        let parsed: Parsed
        do throws(KWalletFormatError) {
            parsed = try plaintext.withUnsafeBytes { (all) throws(KWalletFormatError) in try Self.parse(all, data) }
        } catch {
            throw KWalletError(path, .corrupt("the decrypted wallet does not parse: \(error)"))
        }
        self.plaintext = plaintext
        self.data = data
        entries = parsed.entries
        emptyFolders = parsed.emptyFolders
        skippedEntries = parsed.skipped
        nameDigests = parsed.digests
    }

    private typealias Parsed = (
        entries: [KWalletEntry], emptyFolders: [String], skipped: Int, digests: [[UInt8]: Set<[UInt8]>]
    )

    /// The folders and entries of the serialized data at `data` in `all`.
    private static func parse(_ all: UnsafeRawBufferPointer, _ data: Range<Int>) throws(KWalletFormatError) -> Parsed {
        var entries: [KWalletEntry] = []
        var emptyFolders: [String] = []
        var skipped = 0
        var digests: [[UInt8]: Set<[UInt8]>] = [:]
        do {
            let bytes = UnsafeRawBufferPointer(rebasing: all[data])
            var reader = QDataStreamReader(bytes)
            while !reader.isAtEnd {
                let folder = try reader.string("folder name") ?? ""
                let count = try reader.uint32("entry count")
                // Each entry takes at least 12 bytes (key, type, value lengths).
                guard Int(count) <= reader.remaining / 12 else { throw .tooLarge("entry count") }
                var keys: Set<[UInt8]> = []
                if count == 0 { emptyFolders.append(folder) }
                for _ in 0..<count {
                    let key = try reader.string("key name") ?? ""
                    let rawType = try reader.int32("entry type")
                    let start = reader.offset
                    let value = try reader.byteArray("entry value")
                    keys.insert(KWalletDigest.md5(key))
                    guard let type = KWalletEntryType(rawValue: rawType), type != .unknown else {
                        skipped += 1
                        continue
                    }
                    let range = value.map { _ in (data.lowerBound + start + 4)..<(data.lowerBound + reader.offset) }
                    entries.append(KWalletEntry(folder: folder, key: key, type: type, value: range))
                }
                digests[KWalletDigest.md5(folder), default: []].formUnion(keys)
            }
        }
        return (entries, emptyFolders, skipped, digests)
    }

    /// Lends `entry`'s value (the stored bytes: a `QString` for a password, a `QMap<QString,QString>` for a map,
    /// the bytes of a stream; empty for the null array).
    package func withValue<R: ~Copyable, E: Error>(
        of entry: KWalletEntry, _ body: (UnsafeRawBufferPointer) throws(E) -> R
    )
        throws(E) -> R
    {
        try plaintext.withUnsafeBytes { (bytes) throws(E) in
            try body(
                entry.value.map { UnsafeRawBufferPointer(rebasing: bytes[$0]) }
                    ?? UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    /// The secret an entry's item keeps, in KDE's scheme (docs/kwallet.md §2): a password's UTF-8, a stream's
    /// base64, a map's JSON object.
    package func storedSecret(of entry: KWalletEntry) throws(KWalletFormatError) -> SecretBytes {
        try withValue(of: entry) { (wire) throws(KWalletFormatError) in
            // No bytes (the null array) where a password's QString or a map should be: the empty value.
            if wire.isEmpty && entry.type != .stream {
                do {
                    return try SecretBytes(copying: entry.type == .map ? Array("{}".utf8) : [])
                } catch {
                    throw .outOfMemory
                }
            }
            return try KWalletScheme.storedValue(wire: wire, type: entry.type)
        }
    }

    /// Whether the clear MD5 index of `file` names exactly the folders and keys inside (kwalletd keeps it for
    /// `folderDoesNotExist`/`keyDoesNotExist`): a mismatch means the clear part was changed or damaged.
    package func matchesIndex(of file: KWalletFile) -> Bool {
        var index: [[UInt8]: Set<[UInt8]>] = [:]
        for (folder, keys) in file.index { index[folder, default: []].formUnion(keys) }
        return index == nameDigests
    }
}
