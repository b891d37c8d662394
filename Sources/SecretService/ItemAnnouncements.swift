import DBus
import KeychainCore
import KeychainRegistry
import KeychainStore

/// The per-item signals of collections' locks and unlocks still to send. A lock or unlock announces itself on
/// the collection at once, and its items a batch of ``batchSize`` at a time, each batch once the bus connection
/// has written what was sent before (``SecretServiceDaemon/nextItemAnnouncements()``), so that a call another
/// client makes meanwhile is answered between two batches: with thousands of items, building and sending them
/// all in one go held every other client behind them (docs/robustness.md, "A lock of thousands of items").
/// What an item's signal carries is read when its batch is sent: never older than a signal sent before it.
struct ItemAnnouncements {
    /// Items announced per batch (one query of their attributes per class on an unlock).
    static let batchSize = 256

    /// One collection's lock or unlock, the items still to announce.
    struct Pending {
        let held: HeldKeychain
        /// The items not yet announced, oldest first.
        var references: ArraySlice<ItemReference>
        /// An unlock's: what the items showed while locked (their signals carry `Locked` alone when it is
        /// the same), the file's stamp and the items' versions before the unlock's read, and what it read (the
        /// next lock's starting point, ``LockedItemViews/read(_:of:at:)``).
        var shownWhileLocked: [ItemReference: LockedItemViews.Shown]?
        var stamp: Keychain.ChangeStamp?
        var versions: [ItemReference: Int64] = [:]
        var view: [ItemReference: LockedItemViews.Shown] = [:]
    }

    private var queue: [Pending] = []

    /// Whether items are still to be announced.
    var isEmpty: Bool { queue.isEmpty }

    /// Queues the announcement of `pending`'s lock or unlock, in place of one of the same collection not yet
    /// finished: what is read when a batch is sent shows the collection's state then, the latest.
    mutating func start(_ pending: Pending) {
        forget(pending.held)
        queue.append(pending)
    }

    /// Drops what is left of `held`'s announcement: it was deleted.
    mutating func forget(_ held: HeldKeychain) {
        queue.removeAll { $0.held === held }
    }

    /// Takes the next batch: the announcement and its items to send now; the rest stays queued.
    mutating func takeBatch() -> (pending: Pending, batch: ArraySlice<ItemReference>, isLast: Bool)? {
        guard !queue.isEmpty else { return nil }
        let batch = queue[0].references.prefix(Self.batchSize)
        queue[0].references = queue[0].references.dropFirst(batch.count)
        let pending = queue[0]
        let isLast = pending.references.isEmpty
        if isLast { queue.removeFirst() }
        return (pending, batch, isLast)
    }

    /// Records what an unlock's batch read, for the rest of its announcement.
    mutating func add(_ view: [ItemReference: LockedItemViews.Shown], to held: HeldKeychain) {
        guard let index = queue.firstIndex(where: { $0.held === held }) else { return }
        queue[index].view.merge(view) { $1 }
    }
}

extension SecretServiceDaemon {
    /// Whether item signals of a lock or unlock are still to be sent (``nextItemAnnouncements()``).
    package var hasItemAnnouncements: Bool { !itemAnnouncements.isEmpty }

    /// The next batch of item signals of a lock or unlock, with what else is queued: for the serving loop, once
    /// the connection has written what was sent before. On a lock, each item's `Locked`; on an unlock, `Locked`,
    /// and for each item whose values differ from what it showed while locked, its `Label`, `Attributes`,
    /// `Created` and `Modified` and the collection's `ItemChanged` (libsecret reads the item again then).
    package func nextItemAnnouncements() -> [DBusMessage] {
        guard let next = itemAnnouncements.takeBatch() else { return takeOutgoing() }
        let (pending, batch, isLast) = next
        let held = pending.held
        if held.isLocked {
            // Items whose class key outlasted the lock read as unlocked (AfterFirstUnlock).
            let readable = held.readable(among: Array(batch))
            for reference in batch {
                emitPropertiesChanged(
                    ObjectPaths.item(reference, in: held.id), ItemObject.interfaceName,
                    ["Locked": .bool(!readable.contains(reference))])
            }
        } else {
            var view: [ItemReference: LockedItemViews.Shown] = [:]
            for itemClass in HeldKeychain.shownClasses {
                let references = batch.filter { $0.itemClass == itemClass }
                guard !references.isEmpty else { continue }
                let query = ItemQuery(
                    itemClass, synchronizable: .any, limit: .all, references: references, returning: .attributes)
                for item in (try? held.keychain.items(matching: query)) ?? [] {
                    guard let attributes = item.attributes else { continue }
                    let path = ObjectPaths.item(item.reference, in: held.id)
                    let now = ItemProperties(attributes, of: itemClass)
                    if let version = pending.versions[item.reference] {
                        view[item.reference] = LockedItemViews.Shown(version: version, properties: now)
                    }
                    var changed: [String: DBusValue] = ["Locked": .bool(false)]
                    let differs = now != pending.shownWhileLocked?[item.reference]?.properties
                    if differs { changed.merge(now.changedValues) { $1 } }
                    emitPropertiesChanged(path, ItemObject.interfaceName, changed)
                    if differs { emit(CollectionObject.itemChanged, at: held.path, ObjectPath(path)) }
                }
            }
            if isLast {
                lockedViews.read(pending.view.merging(view) { $1 }, of: held, at: pending.stamp)
            } else {
                itemAnnouncements.add(view, to: held)
            }
        }
        return takeOutgoing()
    }
}
