import DBus
import KeychainCore

/// Bounds on what a client may send, so that no request can make the daemon
/// hold or index unbounded data. Going past one gives `InvalidArgs`; going past one of the quotas
/// (``collectionCount``, ``itemsPerCollection``, ``bytesPerCollection``: what all calls together may make;
/// ``itemsPerApplication``, ``bytesPerApplication``: what one application's calls may)
/// gives `org.freedesktop.DBus.Error.LimitsExceeded` (docs/robustness.md, "Bounds and quotas").
package struct InputLimits: Sendable {
    /// Attributes in one item or search.
    package var attributeCount = 512
    /// Bytes in an attribute name.
    package var attributeNameBytes = 256
    /// Bytes in an attribute value.
    package var attributeValueBytes = 16 * 1024
    /// Bytes in a label.
    package var labelBytes = 4 * 1024
    /// Bytes in a secret.
    package var secretBytes = 1024 * 1024
    /// Objects named in one Lock, Unlock or GetSecrets call.
    package var objectCount = 100_000
    /// Collections clients may make (`CreateCollection`, `CreateWithMasterPassword`), besides the login and
    /// session ones: each held collection keeps three files open (the database, its log and shared memory).
    package var collectionCount = 64
    /// Items in one collection (the in-memory session one included).
    package var itemsPerCollection = 10_000
    /// Bytes one collection's items take, sealed attributes and secrets together (the session collection's
    /// are in the daemon's memory).
    package var bytesPerCollection = 64 << 20
    /// Items one application may store across collections (an unsandboxed program by its file, a Flatpak app by
    /// its app id, every unidentified caller together): half a collection's, so that one application cannot
    /// fill a collection for every other (ApplicationUsage.swift).
    package var itemsPerApplication = 5_000
    /// Bytes one application's items may take across collections (secrets, labels and attribute text as sent).
    package var bytesPerApplication = 32 << 20

    /// The defaults above.
    package init() {}

    func check(attributes: [String: String]) throws(DBusError) {
        guard attributes.count <= attributeCount else {
            throw SecretServiceError.invalidArgs("more than \(attributeCount) attributes")
        }
        for (name, value) in attributes {
            guard name.utf8.count <= attributeNameBytes else {
                throw SecretServiceError.invalidArgs("an attribute name is longer than \(attributeNameBytes) bytes")
            }
            guard value.utf8.count <= attributeValueBytes else {
                throw SecretServiceError.invalidArgs("attribute '\(name)' is longer than \(attributeValueBytes) bytes")
            }
        }
    }

    func check(label: String) throws(DBusError) {
        guard label.utf8.count <= labelBytes else {
            throw SecretServiceError.invalidArgs("the label is longer than \(labelBytes) bytes")
        }
    }

    func check(secret: TransportSecret) throws(DBusError) {
        guard secret.value.count <= secretBytes + 32 else {
            throw SecretServiceError.invalidArgs("the secret is larger than \(secretBytes) bytes")
        }
    }

    func check(objects: [String]) throws(DBusError) {
        guard objects.count <= objectCount else {
            throw SecretServiceError.invalidArgs("more than \(objectCount) objects in one call")
        }
    }

    /// Refuses a new collection when `held` client-made collections are already at ``collectionCount``.
    func check(collectionsHeld held: Int) throws(DBusError) {
        guard held < collectionCount else {
            throw DBusError(
                .limitsExceeded,
                "there are already \(held) collections, the most clients may make (\(collectionCount)): delete one first"
            )
        }
    }

    /// Refuses an item of `adding` sealed bytes, new (`isNew`) or changed, in a collection whose items take
    /// `usage` now, when the collection would go past ``itemsPerCollection`` or ``bytesPerCollection``.
    func check(usage: (items: Int, bytes: Int), adding: Int, isNew: Bool, in collection: String) throws(DBusError) {
        if isNew, usage.items >= itemsPerCollection {
            throw DBusError(
                .limitsExceeded, "\(collection) already holds \(usage.items) items, its most (\(itemsPerCollection))")
        }
        guard usage.bytes + adding <= bytesPerCollection else {
            throw DBusError(
                .limitsExceeded,
                "\(collection) would hold more than \(bytesPerCollection) bytes of items (it holds \(usage.bytes))")
        }
    }
}

extension InputLimits {
    /// `Keychain1`'s bounds on an item's attributes, the Secret Service face's: how many, and how long each
    /// name and value (`Add`, `Update`, `Search`, and every item of a file `Import` reads).
    func check(_ attributes: ItemAttributes) throws(KeychainError) {
        guard attributes.count <= attributeCount else {
            throw KeychainError.param("more than \(attributeCount) attributes")
        }
        for (key, value) in attributes {
            guard key.rawValue.utf8.count <= attributeNameBytes else {
                throw KeychainError.param("an attribute name is longer than \(attributeNameBytes) bytes")
            }
            let length: Int
            switch value {
            case .string(let text): length = text.utf8.count
            case .data(let bytes): length = bytes.count
            default: length = 0
            }
            let most = key == .label ? labelBytes : attributeValueBytes
            guard length <= most else {
                throw KeychainError(.dataTooLarge, "attribute '\(key.rawValue)' is longer than \(most) bytes")
            }
        }
    }
}
