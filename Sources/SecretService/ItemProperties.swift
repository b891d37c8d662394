import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore

/// What the Secret Service shows of an item besides its secret: the `Label`, `Attributes`, `Created` and
/// `Modified` properties.
struct ItemProperties: Equatable {
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
/// The unlock already reads every item's properties (to announce them): they are kept with the file's
/// ``Keychain/ChangeStamp`` of that moment, and a lock with nothing written since takes them as they are;
/// otherwise the lock reads the items again (one query per class, attributes without secrets) while the key
/// is still there.
struct LockedItemViews {
    private var views: [String: [ItemReference: ItemProperties]] = [:]
    private var readAtUnlock: [String: (stamp: Keychain.ChangeStamp, view: [ItemReference: ItemProperties])] = [:]

    /// The properties `reference` showed when its collection `id` locked; nil if it has none.
    func properties(of reference: ItemReference, in id: String) -> ItemProperties? {
        views[id]?[reference]
    }

    /// Keeps what `held`'s items show: it is about to lock.
    mutating func keep(_ held: HeldKeychain) {
        let stamp = try? held.keychain.changeStamp()
        if let read = readAtUnlock.removeValue(forKey: held.id), let stamp, read.stamp == stamp {
            views[held.id] = read.view
            return
        }
        guard let items = try? held.allItems(returning: .attributes) else {
            views[held.id] = nil
            return
        }
        var view: [ItemReference: ItemProperties] = [:]
        view.reserveCapacity(items.count)
        for item in items {
            guard let attributes = item.attributes else { continue }
            view[item.reference] = ItemProperties(attributes, of: item.reference.itemClass)
        }
        views[held.id] = view
    }

    /// Drops and returns the view of collection `id`: it unlocked.
    mutating func unlocked(_ id: String) -> [ItemReference: ItemProperties]? {
        views.removeValue(forKey: id)
    }

    /// Keeps what `held`'s items show now that it unlocked (read by the unlock's announcement, `stamp` taken
    /// before that read), for its next lock.
    mutating func read(_ view: [ItemReference: ItemProperties], of held: HeldKeychain, at stamp: Keychain.ChangeStamp) {
        readAtUnlock[held.id] = (stamp, view)
    }

    /// Forgets collection `id`: it was deleted.
    mutating func forget(_ id: String) {
        views[id] = nil
        readAtUnlock[id] = nil
    }
}
