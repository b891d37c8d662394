import FoundationEssentials
import GnomeKeyringImport
import KWalletFormat
import KeychainCore
import KeychainStore
import Posix

/// A wallet file's import, recorded in the keychain it went into (metadata ``KWalletImporter/recordsName``): what
/// identifies the file then, so that it is not imported twice, and what the import did.
package struct KWalletImportRecord: Codable, Sendable, Equatable {
    /// The wallet file.
    package var path: String
    /// Its size then, in bytes.
    package var size: Int
    /// Its modification time then, as Unix seconds.
    package var fileModified: UInt64
    /// The SHA-256 of the whole file then (header, name index and ciphertext), lower-case hex.
    package var digest: String
    /// The wallet's name.
    package var wallet: String
    /// How many entries became items.
    package var added: Int
    /// How many were in the keychain already.
    package var alreadyPresent: Int
    /// How many were left out (a type KWallet does not know, or a value that does not parse).
    package var skipped: Int
    /// When it was imported, as Unix seconds.
    package var imported: UInt64
}

/// What ``KWalletImporter/importWallet(_:from:attributes:into:now:)`` did.
package enum KWalletImportOutcome: Sendable, Equatable {
    /// The entries were added (those not already there) and the import recorded.
    case imported(KWalletImportRecord)
    /// This file, with these contents, was imported before: nothing was added.
    case alreadyImported(KWalletImportRecord)
}

/// Where a wallet's entries go.
package enum KWalletDestination: Sendable, Equatable {
    /// The login keychain: the wallet kwalletrc's `Default Wallet` names (`kdewallet` by default).
    case login
    /// The collection labelled with the wallet's name (made when there is none).
    case collection(label: String)

    /// Where the wallet `name` goes when `defaultWallet` is kwalletrc's default.
    package init(wallet name: String, defaultWallet: String) {
        self = name == defaultWallet ? .login : .collection(label: name)
    }
}

/// Writes KWallet wallets into a Latchkey keychain (docs/kwallet.md §5).
///
/// Each entry becomes a generic password in KDE's own scheme (§2, ``KWalletScheme``): attribute `server` = the
/// folder, `user` = the key, `type` = `plaintext`, `base64` or `map`, label `folder/key`, no `xdg:schema`; an entry
/// kwalletd5's own Secret Service made (named in `NAME_attributes.json`) gets back its real attributes, label,
/// content type and dates instead. One wallet is one transaction with its record.
package enum KWalletImporter {
    /// The keychain metadata row that holds the import records, as JSON.
    package static let recordsName = "kwallet-imports"
    /// The content type of an entry in KDE's scheme (its secret is text: UTF-8, base64 or JSON).
    package static let contentType = "text/plain"
    /// The content type kwalletd5 served a Secret Service item with when it kept none.
    package static let defaultSecretServiceContentType = "application/octet-stream"

    /// The import records kept in `keychain` (readable while it is locked).
    package static func records(in keychain: Keychain) throws(KeychainError) -> [KWalletImportRecord] {
        try ImportRecords.load(KWalletImportRecord.self, named: recordsName, in: keychain, source: "KWallet")
    }

    /// The record of an earlier import of this very file (same path, size, time and contents), if any.
    package static func earlierImport(of file: KWalletFile, in records: [KWalletImportRecord]) -> KWalletImportRecord? {
        records.last {
            $0.path == file.path && $0.digest == file.digest && $0.size == file.bytes.count
                && $0.fileModified == file.modified
        }
    }

    /// The record of an earlier import of `file` in any of `keychains`.
    package static func earlierImport(of file: KWalletFile, in keychains: [Keychain]) -> KWalletImportRecord? {
        keychains.lazy.compactMap { earlierImport(of: file, in: (try? records(in: $0)) ?? []) }.first
    }

    /// The item `entry` of `contents` becomes; nil when its value does not parse (it is skipped).
    static func newItem(
        _ entry: KWalletEntry, of contents: borrowing KWalletContents, attributes: KWalletAttributes,
        fileModified: UInt64
    ) -> NewItem? {
        if let kept = attributes.item(folder: entry.folder, key: entry.key) {
            // A Secret Service item: its secret as kwalletd5 served it (a password's UTF-8, else the raw bytes).
            let secret: Data? =
                if entry.type == .password {
                    try? contents.storedSecret(of: entry).withUnsafeBytes { Data($0) }
                } else {
                    contents.withValue(of: entry) { Data($0) }
                }
            guard let secret else { return nil }
            let created = kept.created ?? fileModified
            return NewItem(
                .genericPassword,
                attributes: AttributeMapping.secretServiceItem(
                    label: KWalletAttributes.label(folder: entry.folder, key: entry.key), attributes: kept.attributes,
                    contentType: kept.contentType ?? defaultSecretServiceContentType),
                secret: secret, creationDate: Date(timeIntervalSince1970: TimeInterval(created)),
                modificationDate: Date(timeIntervalSince1970: TimeInterval(kept.modified ?? created)))
        }
        guard let secret = try? contents.storedSecret(of: entry).withUnsafeBytes({ Data($0) }) else { return nil }
        return NewItem(
            .genericPassword,
            attributes: AttributeMapping.secretServiceItem(
                label: KWalletScheme.label(folder: entry.folder, key: entry.key),
                attributes: schemeAttributes(entry), contentType: contentType),
            secret: secret)
    }

    /// An entry's Secret Service attributes in KDE's scheme.
    static func schemeAttributes(_ entry: KWalletEntry) -> [String: String] {
        [
            KWalletScheme.folderAttribute: entry.folder, KWalletScheme.keyAttribute: entry.key,
            KWalletScheme.typeAttribute: KWalletStoredForm(writing: entry.type).rawValue,
        ]
    }

    /// Whether `keychain` already holds `item`: for an entry in KDE's scheme, any KWallet entry with its folder and
    /// key (kwalletd keeps one entry per key, and one changed since is the person's); for a Secret Service item,
    /// one with its label, attributes and creation date.
    static func isPresent(_ item: NewItem, scheme: Bool, in keychain: Keychain) throws(KeychainError) -> Bool {
        var query = item.attributes.filter { $0.key != .contentType && $0.key != .label }
        let wanted = AttributeMapping.secretServiceAttributes(item.attributes, of: .genericPassword)
        if scheme {
            let names = [KWalletScheme.folderAttribute, KWalletScheme.keyAttribute]
            query =
                AttributeMapping.storeAttributes(wanted.filter { names.contains($0.key) }, for: .genericPassword) ?? [:]
        }
        query[.secretServiceItem] = .string("1")
        let candidates = try keychain.items(
            matching: ItemQuery(
                .genericPassword, attributes: query, synchronizable: .any, limit: .all, returning: .attributes))
        return candidates.contains { candidate in
            guard let attributes = candidate.attributes else { return false }
            let found = AttributeMapping.secretServiceAttributes(attributes, of: .genericPassword)
            if scheme {
                return found[KWalletScheme.folderAttribute] == wanted[KWalletScheme.folderAttribute]
                    && found[KWalletScheme.keyAttribute] == wanted[KWalletScheme.keyAttribute]
                    && KWalletStoredForm(typeAttribute: found[KWalletScheme.typeAttribute]) != nil
            }
            return attributes[.label] == item.attributes[.label]
                && attributes[.creationDate] == item.creationDate.map { .date($0) } && found == wanted
        }
    }

    /// Imports the opened wallet `contents`, read from `file`, into `keychain` (unlocked), in one transaction with
    /// its record; a file imported before with the same contents adds nothing.
    package static func importWallet(
        _ contents: borrowing KWalletContents, from file: KWalletFile, attributes: KWalletAttributes,
        into keychain: Keychain, now: Date = Date()
    ) throws(KeychainError) -> KWalletImportOutcome {
        var records = try records(in: keychain)
        if let earlier = earlierImport(of: file, in: records) { return .alreadyImported(earlier) }
        var added: [NewItem] = []
        var present = 0
        var skipped = contents.skippedEntries
        for entry in contents.entries {
            guard let item = newItem(entry, of: contents, attributes: attributes, fileModified: file.modified) else {
                skipped += 1
                continue
            }
            let scheme = attributes.item(folder: entry.folder, key: entry.key) == nil
            if try isPresent(item, scheme: scheme, in: keychain) {
                present += 1
            } else {
                added.append(item)
            }
        }
        let record = KWalletImportRecord(
            path: file.path, size: file.bytes.count, fileModified: file.modified, digest: file.digest,
            wallet: file.walletName, added: added.count, alreadyPresent: present, skipped: skipped,
            imported: UInt64(max(0, now.timeIntervalSince1970)))
        records.append(record)
        try ImportRecords.add(added, recording: records, named: recordsName, in: keychain)
        return .imported(record)
    }
}
