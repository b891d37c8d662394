import DBus
import FoundationEssentials
import KeychainCore
import KeychainStore

/// `org.freedesktop.Secret.Collection` and `org.freedesktop.Secret.Item` methods.
extension SecretService {
    func callCollection(
        _ collection: SecretCollection, _ member: String, _ signature: String, _ arguments: [DBusValue],
        caller: String
    ) throws(DBusError) -> [DBusValue] {
        switch member {
        case "Delete":
            try expect(signature: signature, "", member: member)
            guard collection.id != Self.loginID, collection.id != Self.sessionID else {
                throw DBusError(.notSupported, "the \(collection.id) collection cannot be deleted")
            }
            collections.removeAll { $0 === collection }
            aliases = aliases.filter { $0.value != collection.id }
            saveAliases()
            collection.keychain.lock()
            Keychain.removeFiles(at: collection.keychain.path)
            announceCollections("CollectionDeleted", collection)
            return [.objectPath(ObjectPaths.none)]
        case "SearchItems":
            try expect(signature: signature, "a{ss}", member: member)
            let attributes = arguments[0].stringPairs ?? [:]
            try configuration.limits.check(attributes: attributes)
            return [.objectPaths(try search(collection, attributes))]
        case "CreateItem":
            try expect(signature: signature, "a{sv}(oayays)b", member: member)
            return try createItem(in: collection, arguments, caller: caller)
        default:
            throw DBusError(.unknownMethod, "no method \(member) on org.freedesktop.Secret.Collection")
        }
    }

    private func createItem(in collection: SecretCollection, _ arguments: [DBusValue], caller: String)
        throws(DBusError) -> [DBusValue]
    {
        let properties = arguments[0].variantPairs ?? [:]
        var label = ""
        var attributes: [String: String] = [:]
        if let value = properties["org.freedesktop.Secret.Item.Label"] {
            guard case .string(let text) = value else {
                throw SecretServiceError.invalidArgs("org.freedesktop.Secret.Item.Label is a string")
            }
            label = text
        }
        if let value = properties["org.freedesktop.Secret.Item.Attributes"] {
            guard let pairs = value.stringPairs else {
                throw SecretServiceError.invalidArgs("org.freedesktop.Secret.Item.Attributes is a{ss}")
            }
            attributes = pairs
        }
        try configuration.limits.check(label: label)
        try configuration.limits.check(attributes: attributes)
        let (secret, contentType) = try receiveSecret(arguments[1], from: caller)
        guard case .bool(let replace) = arguments[2] else {
            throw SecretServiceError.invalidArgs("replace is a boolean")
        }
        guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
        let result: (reference: ItemReference, replaced: Bool)
        do {
            result = try collection.createItem(
                label: label, attributes: attributes, secret: secret, contentType: contentType,
                replace: replace)
        } catch {
            throw SecretServiceError.from(error)
        }
        let path = ObjectPaths.item(result.reference, in: collection.id)
        if result.replaced {
            emitPropertiesChanged(
                path, "org.freedesktop.Secret.Item",
                ["Label": .string(label), "Attributes": .stringDictionary(attributes)])
        }
        announceItems(collection, result.replaced ? "ItemChanged" : "ItemCreated", result.reference)
        return [.objectPath(path), .objectPath(ObjectPaths.none)]
    }

    func callItem(
        _ collection: SecretCollection, _ reference: ItemReference, _ member: String, _ signature: String,
        _ arguments: [DBusValue], caller: String
    ) throws(DBusError) -> [DBusValue] {
        switch member {
        case "Delete":
            try expect(signature: signature, "", member: member)
            guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
            do {
                try collection.delete(reference)
            } catch {
                throw SecretServiceError.from(error)
            }
            announceItems(collection, "ItemDeleted", reference)
            return [.objectPath(ObjectPaths.none)]
        case "GetSecret":
            try expect(signature: signature, "o", member: member)
            let session = try session(arguments[0].text ?? "", of: caller)
            guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
            let item: KeychainItem?
            do {
                item = try collection.item(reference, returning: [.data, .attributes])
            } catch {
                throw SecretServiceError.from(error)
            }
            guard let item else {
                throw SecretServiceError.noSuchObject(ObjectPaths.item(reference, in: collection.id))
            }
            return [try encodeSecret(item, for: session)]
        case "SetSecret":
            try expect(signature: signature, "(oayays)", member: member)
            let (secret, contentType) = try receiveSecret(arguments[0], from: caller)
            guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
            do {
                try collection.update(reference, secret: secret, contentType: contentType)
            } catch {
                throw SecretServiceError.from(error)
            }
            announceItems(collection, "ItemChanged", reference)
            return []
        default:
            throw DBusError(.unknownMethod, "no method \(member) on org.freedesktop.Secret.Item")
        }
    }

    /// A `(oayays)` secret a client sent: within bounds, in a session of the
    /// caller's, decrypted; with its content type.
    private func receiveSecret(_ value: DBusValue, from caller: String) throws(DBusError) -> (Data, String) {
        let transport = try TransportSecret(value)
        try configuration.limits.check(secret: transport)
        let session = try session(transport.session, of: caller)
        let secret = try session.decode(parameters: transport.parameters, value: transport.value)
        guard secret.count <= configuration.limits.secretBytes else {
            throw SecretServiceError.invalidArgs("the secret is larger than \(configuration.limits.secretBytes) bytes")
        }
        return (secret, transport.contentType)
    }
}
