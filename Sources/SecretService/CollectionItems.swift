import AccessControl
import CallerIdentity
import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// A keychain's items as the Secret Service shows them: password items, with text attributes.
extension HeldKeychain {
    /// Its object path as a collection.
    var path: String { ObjectPaths.collection(id) }

    /// The password classes, the ones the Secret Service shows.
    static let shownClasses: [ItemClass] = [.genericPassword, .internetPassword]

    /// Every item, oldest first.
    func itemReferences() throws(KeychainError) -> [ItemReference] {
        try allItems(returning: []).map(\.reference)
    }

    /// Every item, oldest first, with what `returning` asks (one query per class).
    func allItems(returning: ReturnOptions) throws(KeychainError) -> [KeychainItem] {
        var items: [KeychainItem] = []
        for itemClass in Self.shownClasses {
            items += try keychain.items(
                matching: ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: returning))
        }
        return items
    }

    /// Every item with its version (``Keychain/itemVersions(of:among:)``): plain columns, nothing decrypted.
    func itemVersions() throws(KeychainError) -> [ItemReference: Int64] {
        var versions: [ItemReference: Int64] = [:]
        for itemClass in Self.shownClasses {
            versions.merge(try keychain.itemVersions(of: itemClass)) { $1 }
        }
        return versions
    }

    /// The paths of the items whose Secret Service attributes include all of `attributes`.
    func searchPaths(_ attributes: [String: String]) throws(DBusError) -> [String] {
        do {
            return try search(attributes).map { ObjectPaths.item($0, in: id) }
        } catch {
            throw SecretServiceError.from(error)
        }
    }

    /// The items whose Secret Service attributes include all of `attributes`.
    func search(_ attributes: [String: String]) throws(KeychainError) -> [ItemReference] {
        try search(attributes, returning: []).map(\.reference)
    }

    /// The items whose Secret Service attributes include `attributes`, with what `returning` asks, read in the
    /// same query (one per class).
    func search(_ attributes: [String: String], returning: ReturnOptions) throws(KeychainError) -> [KeychainItem] {
        var items: [KeychainItem] = []
        for itemClass in Self.shownClasses {
            guard let mapped = AttributeMapping.storeAttributes(attributes, for: itemClass) else { continue }
            let query = ItemQuery(
                itemClass, attributes: mapped, synchronizable: .any, limit: .all, returning: returning)
            items += try keychain.items(matching: query)
        }
        return items
    }

    /// One item, with what `returning` asks; nil if it is not in this collection.
    func item(_ reference: ItemReference, returning: ReturnOptions) throws(KeychainError) -> KeychainItem? {
        guard Self.shownClasses.contains(reference.itemClass) else { return nil }
        let query = ItemQuery(
            reference.itemClass, synchronizable: .any, references: [reference], returning: returning)
        return try keychain.items(matching: query).first
    }

    /// One item with its attributes, and its secret decrypted straight into secret memory (the item's own
    /// `secret` is nil); nil if it is not in this collection.
    func itemWithSecret(_ reference: ItemReference) throws(KeychainError) -> (
        item: KeychainItem, secret: SharedSecret?
    )? {
        guard Self.shownClasses.contains(reference.itemClass) else { return nil }
        let query = ItemQuery(
            reference.itemClass, synchronizable: .any, references: [reference], returning: .attributes)
        return try keychain.itemWithSecret(matching: query)
    }

    /// Refuses Secret Service attribute names beginning with `lk:`: Latchkey's own attributes (an item's
    /// access list among them) are neither shown to Secret Service clients nor set by them, and a name that
    /// looks like one would only mislead.
    static func refuseLatchkeyNames(_ attributes: [String: String]) throws(DBusError) {
        if attributes[accessibleAttribute] != nil {
            throw SecretServiceError.invalidArgs(
                "attribute '\(accessibleAttribute)' is taken by CreateItem only (an item's class changes through"
                    + " org.latchkey.Keychain1 Update or latchkey)")
        }
        if let name = attributes.keys.first(where: { $0.hasPrefix("lk:") }) {
            throw SecretServiceError.invalidArgs("attribute '\(name)': names beginning with lk: are Latchkey's own")
        }
    }

    /// The `CreateItem` attribute that chooses the new item's accessibility class (docs/dbus-mapping.md,
    /// "Accessibility classes"): a `kSecAttrAccessible` value (`ck`) or its name (`AfterFirstUnlock`).
    static let accessibleAttribute = "lk:accessible"

    /// Takes `lk:accessible` out of `attributes`: the class it names as the item's `kSecAttrAccessible` mark, none
    /// when it is absent; `InvalidArgs` for a value that names no class.
    static func takeAccessibility(from attributes: inout [String: String]) throws(DBusError) -> ItemAttributes {
        guard let text = attributes.removeValue(forKey: accessibleAttribute) else { return [:] }
        guard let accessibility = Accessibility(named: text) else {
            throw SecretServiceError.invalidArgs(
                "attribute '\(accessibleAttribute)': '\(text)' is not an accessibility class (WhenUnlocked,"
                    + " AfterFirstUnlock, WhenUnlockedThisDeviceOnly, AfterFirstUnlockThisDeviceOnly,"
                    + " WhenPasscodeSetThisDeviceOnly, or a kSecAttrAccessible value such as ck)")
        }
        return [.accessible: .string(accessibility.rawValue)]
    }

    /// Adds an item made through the Secret Service, or changes `existing` (`CreateItem` with `replace`: the
    /// first item whose attributes include all of the new ones, found by the caller, which asked leave to
    /// change it). A new item trusts `creator`, the application that made it, when it was identified (a
    /// replaced item keeps its access list); `marks` are Latchkey's own attributes a new item gets besides
    /// (the Secret portal's ``AttributeKey/portalKey``).
    func createItem(
        label: String, attributes: [String: String], secret: Data, contentType: String,
        replacing existing: ItemReference? = nil, creator: Application? = nil, marks: ItemAttributes = [:]
    ) throws(KeychainError) -> (reference: ItemReference, replaced: Bool) {
        if let existing {
            try update(
                existing, label: label, attributes: attributes, secret: secret, contentType: contentType,
                accessibility: marks[.accessible])
            return (existing, true)
        }
        var stored = AttributeMapping.storeAttributes(attributes, for: .genericPassword) ?? [:]
        stored[.label] = .string(label)
        stored[.contentType] = .string(contentType)
        stored[.secretServiceItem] = .string("1")
        if let creator { stored.merge(ItemAccess.creatorAccess(creator).attributes) { $1 } }
        stored.merge(marks) { $1 }
        let item = try keychain.add(.genericPassword, attributes: stored, secret: secret)
        touch()
        return (item.reference, false)
    }

    /// Refuses an item (new, or a change of one: `isNew` false) of `secretBytes` with `label` and `attributes`
    /// that would take this collection past its quotas (``InputLimits/itemsPerCollection``,
    /// ``InputLimits/bytesPerCollection``): `LimitsExceeded`. The bytes counted are what the file holds now
    /// and, for the item, its secret and text, an estimate of what it adds (a change is counted as if nothing
    /// it replaces were freed).
    func checkQuota(
        _ limits: InputLimits, secretBytes: Int, label: String = "", attributes: [String: String] = [:], isNew: Bool
    ) throws(DBusError) {
        let usage: (items: Int, bytes: Int)
        do {
            usage = try keychain.usage()
        } catch {
            throw SecretServiceError.from(error)
        }
        let text = attributes.reduce(label.utf8.count) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        try limits.check(usage: usage, adding: secretBytes + text, isNew: isNew, in: path)
    }

    /// Changes an item's label, Secret Service attributes, secret, content type or accessibility class (its
    /// `kSecAttrAccessible` value; nil: unchanged). A new secret for an item with a password of its own is
    /// refused (`errSecParam`, InvalidArgs): stored as it is, it would not be sealed under that password; such
    /// an item's secret changes through `Keychain1.Update` (`SecItemUpdate`), which asks for it.
    func update(
        _ reference: ItemReference, label: String? = nil, attributes: [String: String]? = nil,
        secret: Data? = nil, contentType: String? = nil, accessibility: AttributeValue? = nil
    ) throws(KeychainError) {
        if secret != nil,
            try AccessConstraints.of(item(reference, returning: .attributes)?.attributes ?? [:])?.needsItemPassword
                == true
        {
            throw KeychainError.param(
                "the item has a password of its own: change its secret with SecItemUpdate (latchkeyd asks for it)")
        }
        var changes = ItemChanges(secret: secret)
        if let accessibility { changes.attributes[.accessible] = accessibility }
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
