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
        return UInt64(max(0, date.timeIntervalSince1970))
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
struct LockedItemViews {
    /// What an item shows, read from its version `version`.
    struct Shown: Sendable {
        let version: Int64
        let properties: ItemProperties
    }

    /// Items read per query when a lock reads the ones that changed.
    private static let readBatch = 256

    private var views: [String: [ItemReference: Shown]] = [:]
    /// Unlocked collections: what their items show now, and the file's stamp when it was all read (nil once
    /// something was written since).
    private var current: [String: (stamp: Keychain.ChangeStamp?, items: [ItemReference: Shown])] = [:]

    /// The properties `reference` showed when its collection `id` locked; nil if it has none.
    func properties(of reference: ItemReference, in id: String) -> ItemProperties? {
        views[id]?[reference]?.properties
    }

    /// Keeps what `held`'s items show: it is about to lock. Reads only the items whose version differs from
    /// the one kept (all of them when nothing is kept, as for a collection unlocked since the daemon started
    /// and never written through it); logs how many it read.
    mutating func keep(_ held: HeldKeychain) {
        let known = current.removeValue(forKey: held.id)
        if let known, let stamp = known.stamp, stamp == (try? held.keychain.changeStamp()) {
            views[held.id] = known.items
            return
        }
        guard let versions = try? held.itemVersions() else {
            views[held.id] = nil
            return
        }
        var items = (known?.items ?? [:]).filter { versions[$0.key] == $0.value.version }
        let stale = versions.filter { items[$0.key] == nil }
        items.merge(Self.read(stale, from: held.keychain)) { $1 }
        views[held.id] = items
        KeychainRegistry.log("\(held.id): kept what \(items.count) items show while locked, \(stale.count) read")
    }

    /// Drops and returns the view of collection `id`: it unlocked.
    mutating func unlocked(_ id: String) -> [ItemReference: Shown]? {
        views.removeValue(forKey: id)
    }

    /// Keeps what `held`'s items show now that it unlocked (read by the unlock's announcement; `stamp` and
    /// the versions taken before that read), for its next lock.
    mutating func read(_ items: [ItemReference: Shown], of held: HeldKeychain, at stamp: Keychain.ChangeStamp?) {
        current[held.id] = (stamp, items)
    }

    /// Reads again what `reference` shows (nil: it was deleted), as a face wrote it in unlocked `held`: one item.
    mutating func wrote(_ reference: ItemReference, in held: HeldKeychain, deleted: Bool) {
        guard !held.isLocked else { return }
        var entry = current.removeValue(forKey: held.id) ?? (nil, [:])
        entry.stamp = nil
        entry.items[reference] = nil
        if !deleted, let version = try? held.keychain.itemVersions(of: reference.itemClass, among: [reference]),
            let number = version[reference],
            let attributes = try? held.item(reference, returning: .attributes)?.attributes
        {
            entry.items[reference] = Shown(
                version: number, properties: ItemProperties(attributes, of: reference.itemClass))
        }
        current[held.id] = entry
    }

    /// Takes in what the items of unlocked `held` show, read in the background (``readAll(_:)``): entries of
    /// items written since (through ``wrote(_:in:deleted:)``) stay; the versions sort out the rest at the lock.
    mutating func learn(_ items: [ItemReference: Shown], of held: HeldKeychain) {
        guard !held.isLocked else { return }
        var entry = current.removeValue(forKey: held.id) ?? (nil, [:])
        entry.items.merge(items) { kept, _ in kept }
        current[held.id] = entry
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
    }
}
