import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore

/// What the Secret Service shows of an item besides its secret: the `Label`, `Attributes`, `Created` and
/// `Modified` properties.
struct ItemProperties: Equatable, Sendable {
    var label = ""
    var attributes: [String: String] = [:]
    var created: UInt64 = 0
    var modified: UInt64 = 0

    /// Nothing: what a locked item the daemon never saw unlocked shows (its values are sealed in the file).
    init() {}

    /// The properties of an item of `itemClass` with the store attributes `attributes`.
    init(_ attributes: ItemAttributes, of itemClass: ItemClass) {
        if case .string(let text) = attributes[.label] { label = text }
        self.attributes = AttributeMapping.secretServiceAttributes(attributes, of: itemClass)
        created = Self.unixSeconds(attributes[.creationDate])
        modified = Self.unixSeconds(attributes[.modificationDate])
    }

    /// The values for `PropertiesChanged` (all four).
    var changedValues: [String: DBusValue] {
        [
            "Label": .string(label), "Attributes": .stringDictionary(attributes), "Created": .uint64(created),
            "Modified": .uint64(modified),
        ]
    }

    private static func unixSeconds(_ value: AttributeValue?) -> UInt64 {
        guard case .date(let date) = value else { return 0 }
        return StorableDates.unsignedSeconds(date)
    }
}

/// What a locked collection's items show: their ``ItemProperties`` as they were when it locked, kept in the
/// daemon's memory until it unlocks again, is deleted or the daemon exits (docs/threat-model.md, "Item labels
/// while locked"). A collection the daemon never held unlocked has none: its items show nothing while locked,
/// as their values are sealed in the file.
///
/// While a collection is unlocked, what its items show is kept up to date without reading the collection again:
/// the unlock's own read of every item (to announce them) is the start, each write through a face
/// (``SecretServiceDaemon/announceItems(_:_:_:)``) reads that one item again, and each entry carries the version
/// of the item it was read from (``Keychain/itemVersions(of:among:)``). A lock then compares the versions in the
/// file with the kept ones (plain columns, nothing decrypted) and reads only the items that differ: those written
/// by another process or not seen yet. With nothing written since the unlock (the file's
/// ``Keychain/ChangeStamp`` unchanged) it compares nothing.
///
/// What all collections' views hold together, locked and unlocked, is bounded (``byteLimit``: labels and
/// attribute text, and a little for each entry): an item that does not fit is left out, and shows nothing while
/// its collection is locked, as if the daemon had never seen it unlocked (docs/robustness.md, "Bounds and
/// quotas"). Items are few hundred bytes each; items with attributes of megabytes, made through the Secret
/// Service (up to 64 MiB a collection) or written into the file by another program, cannot grow the daemon.
struct LockedItemViews {
    /// What an item shows, read from its version `version`.
    struct Shown: Sendable {
        let version: Int64
        let properties: ItemProperties

        /// What it counts against ``LockedItemViews/byteLimit``: its text and 64 bytes for the entry.
        var bytes: Int {
            properties.attributes.reduce(64 + properties.label.utf8.count) {
                $0 + $1.key.utf8.count + $1.value.utf8.count
            }
        }
    }

    /// The default bound on what the views hold: 4 MiB, some 16,000 items of a few hundred bytes.
    static let defaultByteLimit = 4 << 20

    /// Items read per query when a lock reads the ones that changed.
    private static let readBatch = 256

    /// The bound on what the views of all collections hold together.
    let byteLimit: Int
    private var views: [String: [ItemReference: Shown]] = [:]
    /// Unlocked collections: what their items show now, and the file's stamp when it was all read (nil once
    /// something was written since).
    private var current: [String: (stamp: Keychain.ChangeStamp?, items: [ItemReference: Shown])] = [:]
    /// What each collection's entries (in ``views`` and ``current``) count against ``byteLimit``.
    private var bytes: [String: Int] = [:]

    /// Views holding at most `byteLimit` bytes together.
    init(byteLimit: Int = defaultByteLimit) {
        self.byteLimit = byteLimit
    }

    /// What the views of all collections hold, as counted against ``byteLimit``.
    var heldBytes: Int { bytes.values.reduce(0, +) }

    /// `items` as far as they fit, with what the other collections' views hold, in the bound: the rest is left
    /// out (logged), and those items show nothing while `id` is locked.
    private func fitting(_ items: [ItemReference: Shown], of id: String) -> [ItemReference: Shown] {
        var room = byteLimit - (heldBytes - (bytes[id] ?? 0))
        let total = items.values.reduce(0) { $0 + $1.bytes }
        guard total > room else { return items }
        var kept: [ItemReference: Shown] = [:]
        for (reference, shown) in items {
            let size = shown.bytes
            guard size <= room else { continue }
            kept[reference] = shown
            room -= size
        }
        KeychainRegistry.log(
            "\(id): \(items.count - kept.count) items past the bound of \(byteLimit) bytes show nothing while locked")
        return kept
    }

    /// Counts again what collection `id`'s entries hold.
    private mutating func recount(_ id: String) {
        let held = [views[id], current[id]?.items].reduce(0) { sum, items in
            sum + (items?.values.reduce(0) { $0 + $1.bytes } ?? 0)
        }
        bytes[id] = held == 0 ? nil : held
    }

    /// The properties `reference` showed when its collection `id` locked; nil if it has none.
    func properties(of reference: ItemReference, in id: String) -> ItemProperties? {
        views[id]?[reference]?.properties
    }

    /// Keeps what `held`'s items show: it is about to lock. Reads only the items whose version differs from
    /// the one kept (all of them when nothing is kept, as for a collection unlocked since the daemon started
    /// and never written through it); logs how many it read.
    mutating func keep(_ held: HeldKeychain) {
        let known = current.removeValue(forKey: held.id)
        views[held.id] = nil
        recount(held.id)
        defer { recount(held.id) }
        if let known, let stamp = known.stamp, stamp == (try? held.keychain.changeStamp()) {
            views[held.id] = known.items
            return
        }
        guard let versions = try? held.itemVersions() else { return }
        var items = (known?.items ?? [:]).filter { versions[$0.key] == $0.value.version }
        let stale = versions.filter { items[$0.key] == nil }
        items.merge(Self.read(stale, from: held.keychain)) { $1 }
        items = fitting(items, of: held.id)
        views[held.id] = items
        KeychainRegistry.log("\(held.id): kept what \(items.count) items show while locked, \(stale.count) read")
    }

    /// Drops and returns the view of collection `id`: it unlocked.
    mutating func unlocked(_ id: String) -> [ItemReference: Shown]? {
        defer { recount(id) }
        return views.removeValue(forKey: id)
    }

    /// Keeps what `held`'s items show now that it unlocked (read by the unlock's announcement; `stamp` and
    /// the versions taken before that read), for its next lock.
    mutating func read(_ items: [ItemReference: Shown], of held: HeldKeychain, at stamp: Keychain.ChangeStamp?) {
        current[held.id] = nil
        recount(held.id)
        current[held.id] = (stamp, fitting(items, of: held.id))
        recount(held.id)
    }

    /// Reads again what `reference` shows (nil: it was deleted), as a face wrote it in unlocked `held`: one item.
    mutating func wrote(_ reference: ItemReference, in held: HeldKeychain, deleted: Bool) {
        guard !held.isLocked else { return }
        var entry = current.removeValue(forKey: held.id) ?? (nil, [:])
        entry.stamp = nil
        let before = entry.items.removeValue(forKey: reference)?.bytes ?? 0
        var collectionBytes = (bytes[held.id] ?? 0) - before
        if !deleted, let version = try? held.keychain.itemVersions(of: reference.itemClass, among: [reference]),
            let number = version[reference],
            let attributes = try? held.item(reference, returning: .attributes)?.attributes
        {
            let shown = Shown(version: number, properties: ItemProperties(attributes, of: reference.itemClass))
            // Past the bound it is left out: read again at the lock, where the bound leaves it out or not.
            if heldBytes - (bytes[held.id] ?? 0) + collectionBytes + shown.bytes <= byteLimit {
                entry.items[reference] = shown
                collectionBytes += shown.bytes
            }
        }
        current[held.id] = entry
        bytes[held.id] = collectionBytes > 0 ? collectionBytes : nil
    }

    /// Takes in what the items of unlocked `held` show, read in the background (``readAll(_:)``): entries of
    /// items written since (through ``wrote(_:in:deleted:)``) stay; the versions sort out the rest at the lock.
    mutating func learn(_ items: [ItemReference: Shown], of held: HeldKeychain) {
        guard !held.isLocked else { return }
        var entry = current.removeValue(forKey: held.id) ?? (nil, [:])
        entry.items.merge(items) { kept, _ in kept }
        current[held.id] = nil
        recount(held.id)
        entry.items = fitting(entry.items, of: held.id)
        current[held.id] = entry
        recount(held.id)
    }

    /// What every item of `keychain` shows (the Secret Service's classes), read in batches of ``readBatch``
    /// items, the keychain free between them: for the worker thread. What was read before the keychain locked,
    /// or before an error.
    static func readAll(_ keychain: Keychain) -> [ItemReference: Shown] {
        var versions: [ItemReference: Int64] = [:]
        for itemClass in HeldKeychain.shownClasses {
            guard let ofClass = try? keychain.itemVersions(of: itemClass) else { return [:] }
            versions.merge(ofClass) { $1 }
        }
        return read(versions, from: keychain)
    }

    /// What the items `versions` names show, with those versions (taken before this read: an item changed in
    /// between is read again at the lock), in batches of ``readBatch`` items; those the keychain gives.
    private static func read(_ versions: [ItemReference: Int64], from keychain: Keychain) -> [ItemReference: Shown] {
        var items: [ItemReference: Shown] = [:]
        for itemClass in HeldKeychain.shownClasses {
            let references = versions.keys.filter { $0.itemClass == itemClass }
            for start in stride(from: 0, to: references.count, by: readBatch) {
                let batch = Array(references[start..<min(start + readBatch, references.count)])
                let query = ItemQuery(
                    itemClass, synchronizable: .any, limit: .all, references: batch, returning: .attributes)
                guard let found = try? keychain.items(matching: query) else { return items }
                for item in found {
                    guard let attributes = item.attributes, let version = versions[item.reference] else { continue }
                    items[item.reference] = Shown(
                        version: version, properties: ItemProperties(attributes, of: itemClass))
                }
            }
        }
        return items
    }

    /// Forgets collection `id`: it was deleted.
    mutating func forget(_ id: String) {
        views[id] = nil
        current[id] = nil
        bytes[id] = nil
    }
}
