import CallerIdentity
import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// `/org/freedesktop/secrets/collection/…/…`: `org.freedesktop.Secret.Item`.
struct ItemObject: DBusObject {
    let daemon: SecretServiceDaemon
    let collection: HeldKeychain
    let reference: ItemReference
    /// The item's properties, read once per call (`GetAll` asks for four made from its attributes).
    private let read = ReadProperties()

    /// What one call has read of the item.
    private final class ReadProperties {
        var properties: ItemProperties?
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
                            // A KWallet entry's folder is read before it goes, for folderUpdated after.
                            let folder = object.daemon.kwalletFolder(of: object.reference, in: object.collection)
                            try object.collection.delete(object.reference)
                            object.daemon.announceKWalletFolder(folder, in: object.collection)
                        } then: {
                            object.daemon.releaseApplicationUsage(in: object.collection, [object.reference])
                            object.daemon.announceItems(
                                object.collection, CollectionObject.itemDeleted, object.reference)
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
                        try object.daemon.checkApplicationQuota(
                            of: call.sender, storing: secret.count, in: object.collection, replacing: object.reference)
                        let bytes = secret.count
                        return try object.change(.change, call: call) { () throws(KeychainError) in
                            try secret.withUnownedData { (data) throws(KeychainError) in
                                try object.collection.update(object.reference, secret: data, contentType: contentType)
                            }
                        } then: {
                            object.daemon.recordApplicationUsage(
                                of: call.sender, storing: bytes, in: object.collection, at: object.reference)
                            object.daemon.announceItems(
                                object.collection, CollectionObject.itemChanged, object.reference)
                        }
                    },
                ],
                properties: [
                    // An AfterFirstUnlock item of a locked collection reads as unlocked (docs/dbus-mapping.md).
                    DBusProperty("Locked", Bool.self) { $0.collection.isLocked($0.reference) },
                    DBusProperty(
                        "Attributes", [String: String].self,
                        get: { (object) throws(DBusError) in try object.properties().attributes },
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
                        get: { (object) throws(DBusError) in try object.properties().label },
                        set: { (object, call, label) throws(DBusError) in
                            try object.daemon.limits.check(label: label)
                            return try object.change(.change, call: call) { () throws(KeychainError) in
                                try object.collection.update(object.reference, label: label)
                            } then: {
                                object.changed("Label", .string(label))
                            }
                        }),
                    DBusProperty("Created", UInt64.self) { (object) throws(DBusError) in
                        try object.properties().created
                    },
                    DBusProperty("Modified", UInt64.self) { (object) throws(DBusError) in
                        try object.properties().modified
                    },
                ])
        ]

    /// The item's label, attributes and dates. A locked item's are sealed in the file: it shows what it showed
    /// when its collection locked (``LockedItemViews``), else nothing (empty and zero).
    private func properties() throws(DBusError) -> ItemProperties {
        guard !collection.isLocked(reference) else {
            return daemon.lockedViews.properties(of: reference, in: collection.id) ?? ItemProperties()
        }
        if let properties = read.properties { return properties }
        do {
            let attributes = try collection.item(reference, returning: .attributes)?.attributes ?? [:]
            let properties = ItemProperties(attributes, of: reference.itemClass)
            read.properties = properties
            return properties
        } catch {
            throw SecretServiceError.from(error)
        }
    }

    /// Changes or deletes the item (`kind`) once the caller may (AccessChecks.swift: the item trusts it, the
    /// keychain's policy is `allow-all`, or the person allowed it; else `AccessDenied` and nothing changes):
    /// `IsLocked` while the collection is locked (checked again when the answer comes), store errors mapped.
    /// `done` tells clients; the reply is `values`.
    private func change(
        _ kind: AccessKind, call: DBusMethodCall, reply values: [DBusValue] = [],
        _ body: @escaping () throws(KeychainError) -> Void, then done: @escaping () -> Void
    ) throws(DBusError) -> DBusMethodResult {
        guard !collection.isLocked else { throw daemon.lockedError(collection) }
        let target = SecretServiceDaemon.SecretTarget(held: collection, reference: reference)
        return try daemon.servingChange(kind, of: [target], to: call) { [collection] outcome in
            if case .denied(let denial) = outcome { return .failure(denial.secretServiceError) }
            guard !collection.isLocked else {
                return .failure(daemon.lockedError(collection))
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
        daemon.announceItems(collection, CollectionObject.itemChanged, reference)
    }

    /// `GetSecret`: the secret now, or once the person allowed the caller (AccessChecks.swift).
    private func secretReply(in sessionPath: String, call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        let (session, found) = try read(in: sessionPath, caller: call.sender)
        let target = SecretServiceDaemon.SecretTarget(
            held: collection, reference: reference, attributes: found.item.attributes ?? [:])
        // Trusted (the usual case): served from the one read.
        if daemon.servesAtOnce(target, caller: call.sender) {
            return .reply([try session.encode(found.item, secret: found.secret)])
        }
        return try daemon.servingSecrets(of: [target], to: call) { [self] _, outcome in
            if case .denied(let denial) = outcome { return .failure(denial.secretServiceError) }
            do throws(DBusError) {
                let (session, found) = try read(in: sessionPath, caller: call.sender)
                let secret: SharedSecret?
                do throws(KeychainError) {
                    secret = try daemon.servedSecret(of: found.item, in: collection, stored: found.secret)
                } catch {
                    throw DBusError(.accessDenied, error.reason)
                }
                return .success([try session.encode(found.item, secret: secret)])
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
        guard !collection.isLocked(reference) else { throw daemon.lockedError(collection) }
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
