import CallerIdentity
import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// `/org/freedesktop/secrets/collection/…` (and its aliases): `org.freedesktop.Secret.Collection`.
struct CollectionObject: DBusObject {
    let daemon: SecretServiceDaemon
    let collection: HeldKeychain

    static let interfaceName = "org.freedesktop.Secret.Collection"

    /// An item was made in the collection.
    static let itemCreated = DBusSignal(interfaceName, "ItemCreated", DBusInput("item", ObjectPath.self))
    /// An item of the collection was deleted.
    static let itemDeleted = DBusSignal(interfaceName, "ItemDeleted", DBusInput("item", ObjectPath.self))
    /// An item's label, attributes or secret changed, or it became readable again (its collection unlocked).
    static let itemChanged = DBusSignal(interfaceName, "ItemChanged", DBusInput("item", ObjectPath.self))

    var childNodes: [String] {
        ((try? collection.itemReferences()) ?? []).map {
            String(ObjectPaths.item($0, in: collection.id).split(separator: "/").last ?? "")
        }
    }

    static let interfaces: [DBusInterface<CollectionObject>] =
        standardInterfaces() + [
            DBusInterface(
                interfaceName,
                methods: [
                    DBusMethod("Delete", returns: [.init("prompt", ObjectPath.self)]) {
                        (object, call) throws(DBusError) in
                        object.delete(call: call)
                    },
                    DBusMethod(
                        "SearchItems", DBusInput("attributes", [String: String].self),
                        returns: [.init("results", [ObjectPath].self)]
                    ) { (object, _, attributes) throws(DBusError) in
                        try object.daemon.limits.check(attributes: attributes)
                        return .reply([.objectPaths(try object.collection.searchPaths(attributes))])
                    },
                    DBusMethod(
                        "CreateItem", DBusInput("properties", DBusPropertyList.self),
                        DBusInput("secret", TransportSecret.self), DBusInput("replace", Bool.self),
                        returns: [.init("item", ObjectPath.self), .init("prompt", ObjectPath.self)]
                    ) { (object, call, properties, secret, replace) throws(DBusError) in
                        try object.createItem(properties.values, secret, replace: replace, call: call)
                    },
                ],
                properties: [
                    DBusProperty("Items", [ObjectPath].self) { (object) throws(DBusError) in
                        do throws(KeychainError) {
                            return try object.collection.itemReferences().map {
                                ObjectPath(ObjectPaths.item($0, in: object.collection.id))
                            }
                        } catch {
                            throw SecretServiceError.from(error)
                        }
                    },
                    DBusProperty(
                        "Label", String.self, get: { $0.collection.label },
                        set: { (object, _, label) throws(DBusError) in
                            try object.daemon.limits.check(label: label)
                            object.daemon.registry.setLabel(label, of: object.collection)
                            return .reply([])
                        }),
                    DBusProperty("Locked", Bool.self) { $0.collection.isLocked },
                    DBusProperty("Created", UInt64.self) { $0.collection.created },
                    DBusProperty("Modified", UInt64.self) { $0.collection.modified },
                ],
                signals: [itemCreated.declaration, itemDeleted.declaration, itemChanged.declaration])
        ]

    /// `Delete`: once the person confirmed it (KeychainRegistry's `deleteKeychain`), whoever asks; refused at
    /// once for the login and session collections (`NotSupported`) and while locked (`IsLocked`). A refusal
    /// or no way to ask is `AccessDenied`. The reply waits for the answer; no prompt object is involved.
    private func delete(call: DBusMethodCall) -> DBusMethodResult {
        let collection = collection
        let failure = { (error: KeychainError) -> DBusError in
            switch error.status {
            case .param: DBusError(.notSupported, error.reason)
            case .interactionNotAllowed where collection.isLocked:
                SecretServiceError.isLocked("\(collection.path) is locked: unlock it to delete it")
            case .itemNotFound: SecretServiceError.noSuchObject(collection.path)
            default: DBusError(.accessDenied, error.reason)
            }
        }
        return daemon.answerAfterConfirmation(call, reply: [.objectPath(ObjectPaths.none)], failure: failure) {
            [daemon] completion in
            daemon.registry.deleteKeychain(
                collection, requester: daemon.application(of: call.sender)?.description,
                client: daemon.promptClient(of: call.sender)
            ) { outcome in
                if case .success = outcome { daemon.applicationUsage.release(collection: collection) }
                completion(outcome)
            }
        }
    }

    /// `CreateItem`: a new item at once; with `replace` over an existing item, the change is the caller's to
    /// make as any change of that item is (AccessChecks.swift): asked about unless the item trusts it.
    private func createItem(
        _ properties: [String: DBusValue], _ transport: TransportSecret, replace: Bool, call: DBusMethodCall
    ) throws(DBusError) -> DBusMethodResult {
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
        try daemon.limits.check(label: label)
        try daemon.limits.check(attributes: attributes)
        let marks = try HeldKeychain.takeAccessibility(from: &attributes)
        try HeldKeychain.refuseLatchkeyNames(attributes)
        let secret = try daemon.receive(transport, from: call.sender)
        guard !collection.isLocked else { throw daemon.lockedError(collection) }
        let existing: ItemReference?
        do {
            existing = replace ? try collection.search(attributes).first : nil
        } catch {
            throw SecretServiceError.from(error)
        }
        let contentType = transport.contentType
        let caller = call.sender
        guard let existing else {
            return .reply(
                try store(label, attributes, secret, contentType, replacing: nil, caller: caller, marks: marks))
        }
        let target = SecretServiceDaemon.SecretTarget(held: collection, reference: existing)
        return try daemon.servingChange(.change, of: [target], to: call) { [self] outcome in
            if case .denied(let denial) = outcome { return .failure(denial.secretServiceError) }
            do throws(DBusError) {
                return .success(
                    try store(label, attributes, secret, contentType, replacing: existing, caller: caller, marks: marks)
                )
            } catch {
                return .failure(error)
            }
        }
    }

    /// Stores a new item, or changes `existing`, and tells clients.
    private func store(
        _ label: String, _ attributes: [String: String], _ secret: SharedSecret, _ contentType: String,
        replacing existing: ItemReference?, caller: String, marks: ItemAttributes
    ) throws(DBusError) -> [DBusValue] {
        guard !collection.isLocked else { throw daemon.lockedError(collection) }
        try collection.checkQuota(
            daemon.limits, secretBytes: secret.count, label: label, attributes: attributes, isNew: existing == nil)
        let bytes = attributes.reduce(secret.count + label.utf8.count) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        try daemon.checkApplicationQuota(of: caller, storing: bytes, in: collection, replacing: existing)
        let result: (reference: ItemReference, replaced: Bool)
        do {
            result = try secret.withUnownedData { (data) throws(KeychainError) in
                try collection.createItem(
                    label: label, attributes: attributes, secret: data, contentType: contentType,
                    replacing: existing, creator: daemon.application(of: caller), marks: marks)
            }
        } catch {
            throw SecretServiceError.from(error)
        }
        daemon.recordApplicationUsage(of: caller, storing: bytes, in: collection, at: result.reference)
        let path = ObjectPaths.item(result.reference, in: collection.id)
        if result.replaced {
            daemon.emitPropertiesChanged(
                path, ItemObject.interfaceName, ["Label": .string(label), "Attributes": .stringDictionary(attributes)])
        }
        daemon.announceItems(collection, result.replaced ? Self.itemChanged : Self.itemCreated, result.reference)
        return [.objectPath(path), .objectPath(ObjectPaths.none)]
    }
}

extension SharedSecret {
    /// Lends the bytes as `Data` without a copy (the store's API takes `Data`): `body` must not keep it. A
    /// secret of up to 14 bytes is copied into the `Data` value itself (Foundation keeps such short values
    /// inline), which lives in `body`'s stack frames only.
    func withUnownedData<R, E: Error>(_ body: (Data) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes { (raw) throws(E) in
            guard let base = raw.baseAddress, !raw.isEmpty else { return try body(Data()) }
            return try body(
                Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: raw.count, deallocator: .none))
        }
    }
}

extension SecretServiceDaemon {
    /// A secret a client sent: within bounds, in a session of the caller's, decrypted into secret memory.
    func receive(_ transport: TransportSecret, from caller: String) throws(DBusError) -> SharedSecret {
        try limits.check(secret: transport)
        let session = try session(transport.session, of: caller)
        let secret = try session.decode(parameters: transport.parameters, value: transport.value)
        guard secret.count <= limits.secretBytes else {
            throw SecretServiceError.invalidArgs("the secret is larger than \(limits.secretBytes) bytes")
        }
        return secret
    }
}
