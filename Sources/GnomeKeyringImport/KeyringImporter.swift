import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// What one import of a keyring file left in the keychain, so that the same file is never
/// imported twice and `latchkey migration-status` can list it.
package struct ImportRecord: Codable, Sendable, Equatable {
    /// The keyring file, as given to the import.
    package var path: String
    /// The SHA-256 of the file's contents then (lower-case hex).
    package var digest: String
    /// The file's modification time then, as Unix seconds.
    package var fileModified: UInt64
    /// The keyring's name.
    package var keyring: String
    /// How many items the import added.
    package var added: Int
    /// How many of its items were in the keychain already.
    package var alreadyPresent: Int
    /// When it was imported, as Unix seconds.
    package var imported: UInt64
}

/// What ``GnomeKeyringImporter/importKeyring(_:from:into:)`` did.
package enum ImportOutcome: Sendable, Equatable {
    /// The items were added (those not already in the keychain) and the import recorded.
    case imported(ImportRecord)
    /// This file, with these contents, was imported before: nothing was added.
    case alreadyImported(ImportRecord)
}

/// Writes gnome-keyring keyrings into a Latchkey keychain.
///
/// Every item becomes a generic password stored exactly as the Secret Service face's `CreateItem`
/// stores one (``AttributeMapping/secretServiceItem(label:attributes:contentType:)``), with the
/// item's own creation and modification dates. One keyring is one transaction, together with its
/// import record: a failure half way leaves the keychain as it was.
package enum GnomeKeyringImporter {
    /// The keychain metadata row (see `Keychain.metadata`) that holds the import records, as JSON.
    package static let recordsName = "gnome-keyring-imports"

    /// The content type gnome-keyring serves every secret with (its files keep none).
    package static let defaultContentType = "text/plain"

    /// The import records kept in `keychain` (readable while it is locked).
    package static func records(in keychain: Keychain) throws(KeychainError) -> [ImportRecord] {
        try ImportRecords.load(ImportRecord.self, named: recordsName, in: keychain, source: "gnome-keyring")
    }

    /// The record of an earlier import of this very file (same path, same contents), if any.
    package static func earlierImport(of file: KeyringFile, in records: [ImportRecord]) -> ImportRecord? {
        records.last { $0.path == file.path && $0.digest == file.digest }
    }

    /// The schema gnome-keyring's Secret portal backend's keys carry once saved in its keyring file.
    package static let portalKeySchema = "org.freedesktop.Secret.Generic"

    /// The Flatpak app id whose key gnome-keyring's Secret portal backend kept in `item`, nil for any other
    /// item: one whose Secret Service attributes are exactly `app_id` (a Flatpak app id) and
    /// `xdg:schema=org.freedesktop.Secret.Generic`, as that backend's items read back from its file.
    package static func portalKeyAppID(of item: GnomeKeyringItem) -> String? {
        guard item.attributes.count == 2, item.attributes["xdg:schema"] == portalKeySchema,
            let app = item.attributes["app_id"], GnomeKeyringLoginImport.isFlatpakAppID(app)
        else { return nil }
        return app
    }

    /// The item `item` becomes in a keychain. A key gnome-keyring's Secret portal backend made
    /// (``portalKeyAppID(of:)``) is marked as Latchkey's backend marks its own (``AttributeKey/portalKey``),
    /// so that the application keeps its key.
    package static func newItem(_ item: GnomeKeyringItem) -> NewItem {
        var attributes = AttributeMapping.secretServiceItem(
            label: item.label, attributes: item.attributes, contentType: item.contentType ?? defaultContentType)
        if let app = portalKeyAppID(of: item) { attributes[.portalKey] = .string(app) }
        return NewItem(
            .genericPassword,
            attributes: attributes,
            secret: Data(item.secret),
            creationDate: Date(timeIntervalSince1970: TimeInterval(item.created)),
            modificationDate: Date(timeIntervalSince1970: TimeInterval(item.modified)))
    }

    /// Imports `keyring`, read from `file`, into `keychain` (unlocked), in one transaction with its
    /// record. An item already in the keychain (the same label, attributes and creation date, as an
    /// earlier import of a previous version of the file left it) is not added again; a file
    /// imported before with the same contents adds nothing.
    package static func importKeyring(
        _ keyring: GnomeKeyring, from file: KeyringFile, into keychain: Keychain, now: Date = Date()
    ) throws(KeychainError) -> ImportOutcome {
        let planned = try plan(keyring, from: file, in: keychain)
        if let earlier = planned.earlier { return .alreadyImported(earlier) }
        return .imported(try apply(planned, into: keychain, now: now))
    }

    /// What importing `keyring`, read from `file`, into `keychain` would do, written nothing: the items it
    /// would add, those already there, or the earlier import of this very file.
    package static func plan(
        _ keyring: GnomeKeyring, from file: KeyringFile, in keychain: Keychain
    ) throws(KeychainError) -> KeyringImportPlan {
        let records = try records(in: keychain)
        var plan = KeyringImportPlan(file: file, keyring: keyring, earlier: earlierImport(of: file, in: records))
        guard plan.earlier == nil else { return plan }
        for item in keyring.items {
            if try isPresent(item, in: keychain) {
                plan.present.append(item.label)
            } else {
                plan.added.append(newItem(item))
            }
        }
        return plan
    }

    /// Writes exactly what `planned` (made by ``plan(_:from:in:)``) says into `keychain` (unlocked), in one
    /// transaction with its record (and, with `source`, the metadata row ``sourceName`` naming the keyring file).
    /// Refused, nothing written, when the file was imported since.
    package static func apply(
        _ planned: KeyringImportPlan, into keychain: Keychain, source: Bool = false, now: Date = Date()
    ) throws(KeychainError) -> ImportRecord {
        var records = try records(in: keychain)
        if planned.earlier != nil || earlierImport(of: planned.file, in: records) != nil {
            throw KeychainError(.duplicateItem, "\(planned.file.path) was imported already")
        }
        let record = ImportRecord(
            path: planned.file.path, digest: planned.file.digest, fileModified: planned.file.modified,
            keyring: planned.keyring.name, added: planned.added.count, alreadyPresent: planned.present.count,
            imported: UInt64(max(0, now.timeIntervalSince1970)))
        records.append(record)
        try ImportRecords.add(
            planned.added, recording: records, named: recordsName, in: keychain,
            also: source ? [sourceName: Data(planned.file.path.utf8)] : [:])
        return record
    }

    /// Whether the keychain holds an item with `item`'s label, Secret Service attributes and creation date.
    static func isPresent(_ item: GnomeKeyringItem, in keychain: Keychain) throws(KeychainError) -> Bool {
        var stored = newItem(item)
        // Made for its attributes: its copy of the secret is wiped, not left in freed memory.
        defer { stored.secret?.withUnsafeMutableBytes { wipeBytes($0) } }
        var query = stored.attributes.filter { $0.key != .contentType }
        query[.secretServiceItem] = .string("1")
        let candidates = try keychain.items(
            matching: ItemQuery(
                .genericPassword, attributes: query, synchronizable: .any, limit: .all, returning: .attributes))
        let created = stored.creationDate.map { AttributeValue.date($0) }
        return candidates.contains { candidate in
            guard let attributes = candidate.attributes else { return false }
            return attributes[.label] == .string(item.label) && attributes[.creationDate] == created
                && AttributeMapping.secretServiceAttributes(attributes, of: .genericPassword) == item.attributes
        }
    }
}

/// What importing one keyring file into a keychain would do (``GnomeKeyringImporter/plan(_:from:in:)``), and, once
/// allowed, does (``GnomeKeyringImporter/apply(_:into:source:now:)``): nothing more.
package struct KeyringImportPlan: Sendable {
    /// The file.
    package var file: KeyringFile
    /// Its keyring, opened.
    package var keyring: GnomeKeyring
    /// The earlier import of this very file, when there was one: then nothing is to be done.
    package var earlier: ImportRecord?
    /// The items to add.
    package var added: [NewItem] = []
    /// The labels of the items already in the keychain.
    package var present: [String] = []
}
