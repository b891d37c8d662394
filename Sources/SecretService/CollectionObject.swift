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
                signals: [
                    DBusSignalDeclaration("ItemCreated", [.init("item", ObjectPath.self)]),
                    DBusSignalDeclaration("ItemDeleted", [.init("item", ObjectPath.self)]),
                    DBusSignalDeclaration("ItemChanged", [.init("item", ObjectPath.self)]),
                ])
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
                client: daemon.promptClient(of: call.sender), completion: completion)
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
        try HeldKeychain.refuseLatchkeyNames(attributes)
        let secret = try daemon.receive(transport, from: call.sender)
        guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
        let existing: ItemReference?
        do {
            existing = replace ? try collection.search(attributes).first : nil
        } catch {
            throw SecretServiceError.from(error)
        }
        let contentType = transport.contentType
        let caller = call.sender
        guard let existing else {
            return .reply(try store(label, attributes, secret, contentType, replacing: nil, caller: caller))
        }
        let target = SecretServiceDaemon.SecretTarget(held: collection, reference: existing)
        return try daemon.servingChange(.change, of: [target], to: call) { [self] denial in
            if let denial { return .failure(denial.secretServiceError) }
            do throws(DBusError) {
                return .success(try store(label, attributes, secret, contentType, replacing: existing, caller: caller))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Stores a new item, or changes `existing`, and tells clients.
    private func store(
        _ label: String, _ attributes: [String: String], _ secret: SharedSecret, _ contentType: String,
        replacing existing: ItemReference?, caller: String
    ) throws(DBusError) -> [DBusValue] {
        guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
        try collection.checkQuota(
            daemon.limits, secretBytes: secret.count, label: label, attributes: attributes, isNew: existing == nil)
        let result: (reference: ItemReference, replaced: Bool)
        do {
            result = try secret.withUnownedData { (data) throws(KeychainError) in
                try collection.createItem(
                    label: label, attributes: attributes, secret: data, contentType: contentType,
                    replacing: existing, creator: daemon.application(of: caller))
            }
        } catch {
            throw SecretServiceError.from(error)
        }
        let path = ObjectPaths.item(result.reference, in: collection.id)
        if result.replaced {
            daemon.emitPropertiesChanged(
                path, ItemObject.interfaceName, ["Label": .string(label), "Attributes": .stringDictionary(attributes)])
        }
        daemon.announceItems(collection, result.replaced ? "ItemChanged" : "ItemCreated", result.reference)
        return [.objectPath(path), .objectPath(ObjectPaths.none)]
    }
}

/// `/org/freedesktop/secrets/collection/…/…`: `org.freedesktop.Secret.Item`.
struct ItemObject: DBusObject {
    let daemon: SecretServiceDaemon
    let collection: HeldKeychain
    let reference: ItemReference
    /// The item's attributes, read once per call (`GetAll` asks for four properties made from them).
    private let read = ReadAttributes()

    /// What one call has read of the item.
    private final class ReadAttributes {
        var attributes: ItemAttributes?
    }

    static let interfaceName = "org.freedesktop.Secret.Item"

    static let interfaces: [DBusInterface<ItemObject>] =
        standardInterfaces() + [
            DBusInterface(
                interfaceName,
                methods: [
                    DBusMethod("Delete", returns: [.init("Prompt", ObjectPath.self)]) {
                        (object, call) throws(DBusError) in
                        try object.change(.delete, call: call, reply: [.objectPath(ObjectPaths.none)]) {
                            () throws(KeychainError) in
                            try object.collection.delete(object.reference)
                        } then: {
                            object.daemon.announceItems(object.collection, "ItemDeleted", object.reference)
                        }
                    },
                    DBusMethod(
                        "GetSecret", DBusInput("session", ObjectPath.self),
                        returns: [.init("secret", TransportSecret.self)]
                    ) { (object, call, session) throws(DBusError) in
                        try object.secretReply(in: session.text, call: call)
                    },
                    DBusMethod("SetSecret", DBusInput("secret", TransportSecret.self)) {
                        (object, call, transport) throws(DBusError) in
                        let secret = try object.daemon.receive(transport, from: call.sender)
                        let contentType = transport.contentType
                        try object.collection.checkQuota(object.daemon.limits, secretBytes: secret.count, isNew: false)
                        return try object.change(.change, call: call) { () throws(KeychainError) in
                            try secret.withUnownedData { (data) throws(KeychainError) in
                                try object.collection.update(object.reference, secret: data, contentType: contentType)
                            }
                        } then: {
                            object.daemon.announceItems(object.collection, "ItemChanged", object.reference)
                        }
                    },
                ],
                properties: [
                    DBusProperty("Locked", Bool.self) { $0.collection.isLocked },
                    DBusProperty(
                        "Attributes", [String: String].self,
                        get: { (object) throws(DBusError) in
                            AttributeMapping.secretServiceAttributes(
                                try object.attributes(), of: object.reference.itemClass)
                        },
                        set: { (object, call, attributes) throws(DBusError) in
                            try object.daemon.limits.check(attributes: attributes)
                            try HeldKeychain.refuseLatchkeyNames(attributes)
                            return try object.change(.change, call: call) { () throws(KeychainError) in
                                try object.collection.update(object.reference, attributes: attributes)
                            } then: {
                                object.changed("Attributes", .stringDictionary(attributes))
                            }
                        }),
                    DBusProperty(
                        "Label", String.self,
                        get: { (object) throws(DBusError) in
                            if case .string(let label) = try object.attributes()[.label] { return label }
                            return ""
                        },
                        set: { (object, call, label) throws(DBusError) in
                            try object.daemon.limits.check(label: label)
                            return try object.change(.change, call: call) { () throws(KeychainError) in
                                try object.collection.update(object.reference, label: label)
                            } then: {
                                object.changed("Label", .string(label))
                            }
                        }),
                    DBusProperty("Created", UInt64.self) { (object) throws(DBusError) in
                        Self.unixSeconds(try object.attributes()[.creationDate])
                    },
                    DBusProperty("Modified", UInt64.self) { (object) throws(DBusError) in
                        Self.unixSeconds(try object.attributes()[.modificationDate])
                    },
                ])
        ]

    /// The item's attributes; a locked item's label, attributes and dates are sealed: they read as empty.
    private func attributes() throws(DBusError) -> ItemAttributes {
        guard !collection.isLocked else { return [:] }
        if let attributes = read.attributes { return attributes }
        do {
            let attributes = try collection.item(reference, returning: .attributes)?.attributes ?? [:]
            read.attributes = attributes
            return attributes
        } catch {
            throw SecretServiceError.from(error)
        }
    }

    private static func unixSeconds(_ value: AttributeValue?) -> UInt64 {
        guard case .date(let date) = value else { return 0 }
        return UInt64(max(0, date.timeIntervalSince1970))
    }

    /// Changes or deletes the item (`kind`) once the caller may (AccessChecks.swift: the item trusts it, the
    /// keychain's policy is `allow-all`, or the person allowed it; else `AccessDenied` and nothing changes):
    /// `IsLocked` while the collection is locked (checked again when the answer comes), store errors mapped.
    /// `done` tells clients; the reply is `values`.
    private func change(
        _ kind: AccessKind, call: DBusMethodCall, reply values: [DBusValue] = [],
        _ body: @escaping () throws(KeychainError) -> Void, then done: @escaping () -> Void
    ) throws(DBusError) -> DBusMethodResult {
        guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
        let target = SecretServiceDaemon.SecretTarget(held: collection, reference: reference)
        return try daemon.servingChange(kind, of: [target], to: call) { [collection] denial in
            if let denial { return .failure(denial.secretServiceError) }
            guard !collection.isLocked else {
                return .failure(SecretServiceError.isLocked("\(collection.path) is locked"))
            }
            do throws(KeychainError) {
                try body()
            } catch {
                return .failure(SecretServiceError.from(error))
            }
            done()
            return .success(values)
        }
    }

    private func changed(_ name: String, _ value: DBusValue) {
        daemon.emitPropertiesChanged(ObjectPaths.item(reference, in: collection.id), Self.interfaceName, [name: value])
        daemon.announceItems(collection, "ItemChanged", reference)
    }

    /// `GetSecret`: the secret now, or once the person allowed the caller (AccessChecks.swift).
    private func secretReply(in sessionPath: String, call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        let (session, found) = try read(in: sessionPath, caller: call.sender)
        let target = SecretServiceDaemon.SecretTarget(
            held: collection, reference: reference, attributes: found.item.attributes ?? [:])
        // Trusted (the usual case): served from the one read.
        if daemon.accessCheck(target, caller: call.sender) == nil {
            return .reply([try session.encode(found.item, secret: found.secret)])
        }
        return try daemon.servingSecrets(of: [target], to: call) { [self] _, denial in
            if let denial { return .failure(denial.secretServiceError) }
            do throws(DBusError) {
                let (session, found) = try read(in: sessionPath, caller: call.sender)
                return .success([try session.encode(found.item, secret: found.secret)])
            } catch {
                return .failure(error)
            }
        }
    }

    /// The caller's session and the item with its secret in secret memory, read now.
    private func read(in sessionPath: String, caller: String) throws(DBusError) -> (
        SecretSession, (item: KeychainItem, secret: SharedSecret?)
    ) {
        let session = try daemon.session(sessionPath, of: caller)
        guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
        let found: (item: KeychainItem, secret: SharedSecret?)?
        do {
            found = try collection.itemWithSecret(reference)
        } catch {
            throw SecretServiceError.from(error)
        }
        guard let found else { throw SecretServiceError.noSuchObject(ObjectPaths.item(reference, in: collection.id)) }
        return (session, found)
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
