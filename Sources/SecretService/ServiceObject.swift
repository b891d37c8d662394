import AccessControl
import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// `/org/freedesktop/secrets`: `org.freedesktop.Secret.Service`.
struct ServiceObject: DBusObject {
    let daemon: SecretServiceDaemon

    static let interfaceName = "org.freedesktop.Secret.Service"

    /// A collection was made.
    static let collectionCreated = DBusSignal(
        interfaceName, "CollectionCreated", DBusInput("collection", ObjectPath.self))
    /// A collection was deleted.
    static let collectionDeleted = DBusSignal(
        interfaceName, "CollectionDeleted", DBusInput("collection", ObjectPath.self))
    /// A collection's properties changed (its label, whether it is locked, its items).
    static let collectionChanged = DBusSignal(
        interfaceName, "CollectionChanged", DBusInput("collection", ObjectPath.self))

    var childNodes: [String] { ["collection", "aliases", "session", "prompt"] }

    static let interfaces: [DBusInterface<ServiceObject>] =
        standardInterfaces() + [
            DBusInterface(
                interfaceName,
                methods: [
                    DBusMethod(
                        "OpenSession", DBusInput("algorithm", String.self), DBusInput("input", DBusVariant.self),
                        returns: [.init("output", DBusVariant.self), .init("result", ObjectPath.self)]
                    ) { (object, call, algorithm, input) throws(DBusError) in
                        let opened = try object.daemon.openSession(
                            algorithm, input.value.unwrapped, caller: call.sender)
                        return .reply([.variant(opened.output), .objectPath(opened.session.path)])
                    },
                    DBusMethod(
                        "CreateCollection", DBusInput("properties", DBusPropertyList.self),
                        DBusInput("alias", String.self),
                        returns: [.init("collection", ObjectPath.self), .init("prompt", ObjectPath.self)]
                    ) { (object, call, properties, alias) throws(DBusError) in
                        try object.createCollection(properties.values, alias: alias, call: call)
                    },
                    DBusMethod(
                        "SearchItems", DBusInput("attributes", [String: String].self),
                        returns: [.init("unlocked", [ObjectPath].self), .init("locked", [ObjectPath].self)]
                    ) { (object, _, attributes) throws(DBusError) in
                        .reply(try object.searchItems(attributes))
                    },
                    DBusMethod(
                        "Unlock", DBusInput("objects", [ObjectPath].self),
                        returns: [.init("unlocked", [ObjectPath].self), .init("prompt", ObjectPath.self)]
                    ) { (object, call, objects) throws(DBusError) in
                        .reply(try object.daemon.unlock(objects.map(\.text), caller: call.sender))
                    },
                    DBusMethod(
                        "Lock", DBusInput("objects", [ObjectPath].self),
                        returns: [.init("locked", [ObjectPath].self), .init("Prompt", ObjectPath.self)]
                    ) { (object, _, objects) throws(DBusError) in
                        .reply(try object.lock(objects.map(\.text)))
                    },
                    DBusMethod(
                        "GetSecrets", DBusInput("items", [ObjectPath].self), DBusInput("session", ObjectPath.self),
                        returns: [.init("secrets", "a{o(oayays)}")]
                    ) { (object, call, items, session) throws(DBusError) in
                        try object.getSecrets(items.map(\.text), session: session.text, call: call)
                    },
                    DBusMethod(
                        "ReadAlias", DBusInput("name", String.self), returns: [.init("collection", ObjectPath.self)]
                    ) { object, _, name in
                        .reply([.objectPath(object.daemon.registry.keychain(alias: name)?.path ?? ObjectPaths.none)])
                    },
                    DBusMethod("SetAlias", DBusInput("name", String.self), DBusInput("collection", ObjectPath.self)) {
                        (object, call, name, collection) throws(DBusError) in
                        try object.setAlias(name, to: collection.text, call: call)
                    },
                ],
                properties: [
                    DBusProperty("Collections", [ObjectPath].self) { object in
                        object.daemon.registry.keychains.map { ObjectPath($0.path) }
                    }
                ],
                signals: [collectionCreated.declaration, collectionDeleted.declaration, collectionChanged.declaration]),
            gnomeKeyringInterface,
        ]

    /// `CreateCollection`: a collection under the login key, at once; from a Flatpak application or a program
    /// the daemon could not identify, once the person confirmed it (one such confirmation per caller at a time:
    /// another is `LimitsExceeded`; a refusal or no way to ask is `AccessDenied`). Past the bound on collections,
    /// `LimitsExceeded`.
    private func createCollection(_ properties: [String: DBusValue], alias: String, call: DBusMethodCall)
        throws(DBusError) -> DBusMethodResult
    {
        let registry = daemon.registry
        if !alias.isEmpty, let existing = registry.keychain(alias: alias) {
            return .reply([.objectPath(existing.path), .objectPath(ObjectPaths.none)])
        }
        guard alias.isEmpty || DBusNames.pathElement(alias) == alias else {
            throw SecretServiceError.invalidArgs("an alias is made of ASCII letters and digits")
        }
        var label = ""
        if let value = properties["org.freedesktop.Secret.Collection.Label"] {
            guard case .string(let text) = value else {
                throw SecretServiceError.invalidArgs("org.freedesktop.Secret.Collection.Label is a string")
            }
            label = text
        }
        try daemon.limits.check(label: label)
        try daemon.limits.check(collectionsHeld: registry.madeKeychainCount)
        let requester: String
        switch daemon.decide(.createCollection, by: call.sender) {
        case .allowed: return .reply(try create(label: label, alias: alias))
        case .denied(let refusal): throw DBusError(.accessDenied, refusal.explanation(of: .createCollection))
        case .ask(let question): requester = daemon.confirmationName(of: question.asker, sender: call.sender)
        }
        // One waiting confirmation per connection, and per Flatpak app over all its connections.
        guard !daemon.isWaitingForConfirmation(call.sender) else {
            throw DBusError(.limitsExceeded, "a confirmation this client asked for is still waiting for the user")
        }
        let daemon = daemon
        let confirm = { (completion: @escaping (Result<Void, KeychainError>) -> Void) -> PromptTicket? in
            registry.confirmKeychainCreation(
                label: label, requester: requester, client: daemon.promptClient(of: call.sender),
                completion: completion)
        }
        return daemon.answerAfterConfirmation(
            call, failure: { DBusError(.accessDenied, $0.reason) },
            then: { () throws(DBusError) in try ServiceObject(daemon: daemon).create(label: label, alias: alias) },
            confirm)
    }

    /// Makes a collection under the login key (within the bound on collections), with `alias` when given.
    func create(label: String, alias: String) throws(DBusError) -> [DBusValue] {
        let registry = daemon.registry
        try daemon.limits.check(collectionsHeld: registry.madeKeychainCount)
        let created: HeldKeychain
        do {
            created = try registry.createKeychain(label: label, pathElement: DBusNames.pathElement)
        } catch  where error.status == .noSuchKeychain {
            throw DBusError(.notSupported, error.reason)
        } catch {
            throw SecretServiceError.from(error)
        }
        if !alias.isEmpty { registry.setAlias(alias, to: created) }
        return [.objectPath(created.path), .objectPath(ObjectPaths.none)]
    }

    private func searchItems(_ attributes: [String: String]) throws(DBusError) -> [DBusValue] {
        try daemon.limits.check(attributes: attributes)
        var unlocked: [String] = []
        var locked: [String] = []
        for held in daemon.registry.keychains {
            guard held.isLocked else {
                unlocked += try held.searchPaths(attributes)
                continue
            }
            // In a locked collection, the items whose class key outlasted the lock (AfterFirstUnlock) are
            // among the unlocked results: they can be read.
            let references: [ItemReference]
            do {
                references = try held.search(attributes)
            } catch {
                throw SecretServiceError.from(error)
            }
            let readable = held.readable(among: references)
            for reference in references {
                let path = ObjectPaths.item(reference, in: held.id)
                if readable.contains(reference) { unlocked.append(path) } else { locked.append(path) }
            }
        }
        return [.objectPaths(unlocked), .objectPaths(locked)]
    }

    private func lock(_ objects: [String]) throws(DBusError) -> [DBusValue] {
        try daemon.limits.check(objects: objects)
        var locked: [String] = []
        for path in objects {
            guard let held = daemon.owningCollection(path) else { continue }
            daemon.registry.lock(held)
            locked.append(path)
        }
        return [.objectPaths(locked), .objectPath(ObjectPaths.none)]
    }

    /// `GetSecrets`: the secrets of the unlocked items among `items` (others are left out, as gnome-keyring
    /// does), each untrusted one after its own access prompt; a denied item is left out too, and when every
    /// item asked about was denied and none is left, the call fails with `AccessDenied`.
    private func getSecrets(_ items: [String], session path: String, call: DBusMethodCall) throws(DBusError)
        -> DBusMethodResult
    {
        try daemon.limits.check(objects: items)
        let session = try daemon.session(path, of: call.sender)
        var targets: [SecretServiceDaemon.SecretTarget] = []
        var targetPaths: [String] = []
        var entries: [DBusDictEntry] = []
        var allTrusted = true
        for itemPath in items {
            guard case .item(let held, let reference) = daemon.resolve(itemPath), !held.isLocked(reference),
                let found = try? held.itemWithSecret(reference)
            else { continue }
            let target = SecretServiceDaemon.SecretTarget(
                held: held, reference: reference, attributes: found.item.attributes ?? [:])
            targets.append(target)
            targetPaths.append(itemPath)
            if allTrusted, daemon.servesAtOnce(target, caller: call.sender) {
                entries.append(
                    DBusDictEntry(.objectPath(itemPath), try session.encode(found.item, secret: found.secret)))
            } else {
                allTrusted = false
            }
        }
        // Every item trusts the caller (the usual case): served from the one read of each.
        if allTrusted { return .reply([.dictionary(keySignature: "o", valueSignature: "(oayays)", entries)]) }
        let daemon = daemon
        return try daemon.servingSecrets(of: targets, to: call) { allowed, outcome in
            do throws(DBusError) {
                let session = try daemon.session(path, of: call.sender)
                var entries: [DBusDictEntry] = []
                for (index, target) in targets.enumerated() where allowed[index] {
                    guard !target.held.isLocked(target.reference),
                        let found = try? target.held.itemWithSecret(target.reference),
                        let secret = try? daemon.servedSecret(of: found.item, in: target.held, stored: found.secret)
                    else { continue }
                    entries.append(
                        DBusDictEntry(
                            .objectPath(targetPaths[index]), try session.encode(found.item, secret: secret)))
                }
                if entries.isEmpty, case .denied(let denial) = outcome { return .failure(denial.secretServiceError) }
                return .success([.dictionary(keySignature: "o", valueSignature: "(oayays)", entries)])
            } catch {
                return .failure(error)
            }
        }
    }

    /// `SetAlias`: a new alias at once; one that points at a collection now (`default`) moved or removed once
    /// the person confirmed it (KeychainRegistry's `setAlias`; refused: `AccessDenied`). A Flatpak application
    /// or a caller not identified cannot set aliases.
    private func setAlias(_ name: String, to target: String, call: DBusMethodCall) throws(DBusError)
        -> DBusMethodResult
    {
        guard !name.isEmpty, DBusNames.pathElement(name) == name else {
            throw SecretServiceError.invalidArgs("an alias is made of ASCII letters and digits")
        }
        try daemon.refuse(unlessAllowed: .setCollectionAlias, by: call.sender)
        let collection = target == ObjectPaths.none ? nil : try daemon.collection(at: target)
        let refused = { (error: KeychainError) in DBusError(.accessDenied, error.reason) }
        return daemon.answerAfterConfirmation(call, failure: refused) { [daemon] completion in
            daemon.registry.setAlias(
                name, to: collection, requester: daemon.application(of: call.sender)?.description,
                client: daemon.promptClient(of: call.sender), completion: completion)
        }
    }
}
