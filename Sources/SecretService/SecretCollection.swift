import FoundationEssentials
import KeychainCore
import KeychainStore

/// One collection: a keychain shown on the bus, with its label and dates.
final class SecretCollection {
    /// How a locked collection is opened.
    enum Unlocking {
        /// With the login password (the login keychain).
        case loginPassword
        /// With the key of the login keychain, while it is unlocked (collections made by clients).
        case loginKey
        /// With a random password the daemon holds (the in-memory session collection).
        case heldPassword([UInt8])
    }

    let id: String
    let keychain: Keychain
    let unlocking: Unlocking
    var label: String
    let created: UInt64

    var path: String { ObjectPaths.collection(id) }
    var isLocked: Bool { keychain.isLocked }

    /// Modified: the last change made through this daemon, else the file's modification time.
    private(set) var modified: UInt64
    /// When it locks by itself (read from the file, changed through `SetSettings`).
    var settings: KeychainSettings
    /// When a client last used it (monotonic seconds), for the lock timeout.
    private(set) var lastUse: Int64

    init(id: String, keychain: Keychain, unlocking: Unlocking, label: String) {
        self.id = id
        self.keychain = keychain
        self.unlocking = unlocking
        self.label = label
        let attributes = try? FileManager.default.attributesOfItem(atPath: keychain.path)
        let now = UInt64(Date().timeIntervalSince1970)
        let createdMetadata = (try? keychain.metadata("created")).flatMap { String(decoding: $0, as: UTF8.self) }
        self.created = createdMetadata.flatMap(UInt64.init) ?? now
        self.modified = (attributes?[.modificationDate] as? Date).map { UInt64($0.timeIntervalSince1970) } ?? now
        self.settings = (try? keychain.settings()) ?? KeychainSettings()
        self.lastUse = monotonicSeconds()
    }

    /// Notes a use: the lock timeout counts from the last one.
    func markUsed() {
        lastUse = monotonicSeconds()
    }

    /// When the lock timeout locks this collection (monotonic seconds), nil if it never does.
    var lockDeadline: Int64? {
        if case .heldPassword = unlocking { return nil }
        guard !isLocked, let timeout = settings.lockTimeout else { return nil }
        return lastUse + Int64(timeout)
    }

    func touch() {
        modified = UInt64(Date().timeIntervalSince1970)
    }

    /// The password classes, the ones the Secret Service shows.
    static let shownClasses: [ItemClass] = [.genericPassword, .internetPassword]

    /// Every item, oldest first.
    func itemReferences() throws(KeychainError) -> [ItemReference] {
        var references: [ItemReference] = []
        for itemClass in Self.shownClasses {
            let query = ItemQuery(itemClass, synchronizable: .any, limit: .all)
            references += try keychain.items(matching: query).map(\.reference)
        }
        return references
    }

    /// The items whose Secret Service attributes include all of `attributes`.
    func search(_ attributes: [String: String]) throws(KeychainError) -> [ItemReference] {
        var references: [ItemReference] = []
        for itemClass in Self.shownClasses {
            guard let mapped = AttributeMapping.storeAttributes(attributes, for: itemClass) else { continue }
            let query = ItemQuery(itemClass, attributes: mapped, synchronizable: .any, limit: .all)
            references += try keychain.items(matching: query).map(\.reference)
        }
        return references
    }

    /// One item, with what `returning` asks; nil if it is not in this collection.
    func item(_ reference: ItemReference, returning: ReturnOptions) throws(KeychainError) -> KeychainItem? {
        guard Self.shownClasses.contains(reference.itemClass) else { return nil }
        let query = ItemQuery(
            reference.itemClass, synchronizable: .any, references: [reference], returning: returning)
        return try keychain.items(matching: query).first
    }

    /// Adds an item made through the Secret Service, or with `replace` changes
    /// the first item whose attributes include all of `attributes`.
    func createItem(
        label: String, attributes: [String: String], secret: Data, contentType: String, replace: Bool
    ) throws(KeychainError) -> (reference: ItemReference, replaced: Bool) {
        if replace, let existing = try search(attributes).first {
            try update(existing, label: label, attributes: attributes, secret: secret, contentType: contentType)
            return (existing, true)
        }
        var stored = AttributeMapping.storeAttributes(attributes, for: .genericPassword) ?? [:]
        stored[.label] = .string(label)
        stored[.contentType] = .string(contentType)
        stored[.secretServiceItem] = .string("1")
        let item = try keychain.add(.genericPassword, attributes: stored, secret: secret)
        touch()
        return (item.reference, false)
    }

    /// Changes an item's label, Secret Service attributes, secret or content type (nil: unchanged).
    func update(
        _ reference: ItemReference, label: String? = nil, attributes: [String: String]? = nil,
        secret: Data? = nil, contentType: String? = nil
    ) throws(KeychainError) {
        var changes = ItemChanges(secret: secret)
        if let label { changes.attributes[.label] = .string(label) }
        if let contentType { changes.attributes[.contentType] = .string(contentType) }
        if let attributes {
            guard let mapped = AttributeMapping.storeAttributes(attributes, for: reference.itemClass) else {
                throw KeychainError.param("an attribute value does not fit this item (a port must be a number)")
            }
            let current = try item(reference, returning: .attributes)?.attributes ?? [:]
            changes.removedAttributes = Set(
                current.keys.filter { AttributeMapping.isSecretServiceAttribute($0, of: reference.itemClass) })
            changes.attributes.merge(mapped) { $1 }
        }
        let query = ItemQuery(reference.itemClass, synchronizable: .any, references: [reference])
        try keychain.update(matching: query, with: changes)
        touch()
    }

    /// Deletes one item.
    func delete(_ reference: ItemReference) throws(KeychainError) {
        try keychain.delete(matching: ItemQuery(reference.itemClass, synchronizable: .any, references: [reference]))
        touch()
    }
}
