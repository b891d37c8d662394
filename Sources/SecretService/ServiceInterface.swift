import DBus
import FoundationEssentials
import KeychainCore
import KeychainStore

/// `org.freedesktop.Secret.Service` methods.
extension SecretService {
    func callService(_ member: String, _ signature: String, _ arguments: [DBusValue], caller: String)
        throws(DBusError) -> [DBusValue]
    {
        switch member {
        case "OpenSession":
            try expect(signature: signature, "sv", member: member)
            return try openSession(arguments[0].text ?? "", arguments[1].unwrapped, caller: caller)
        case "CreateCollection":
            try expect(signature: signature, "a{sv}s", member: member)
            return try createCollection(arguments[0].variantPairs ?? [:], alias: arguments[1].text ?? "")
        case "SearchItems":
            try expect(signature: signature, "a{ss}", member: member)
            let attributes = arguments[0].stringPairs ?? [:]
            try configuration.limits.check(attributes: attributes)
            var unlocked: [String] = []
            var locked: [String] = []
            for collection in collections {
                let paths = try search(collection, attributes)
                if collection.isLocked { locked += paths } else { unlocked += paths }
            }
            return [.objectPaths(unlocked), .objectPaths(locked)]
        case "Unlock":
            try expect(signature: signature, "ao", member: member)
            return try unlock(arguments[0].objectPathList ?? [], caller: caller)
        case "Lock":
            try expect(signature: signature, "ao", member: member)
            let objects = arguments[0].objectPathList ?? []
            try configuration.limits.check(objects: objects)
            var locked: [String] = []
            for path in objects {
                guard let collection = owningCollection(path) else { continue }
                lock(collection)
                locked.append(path)
            }
            return [.objectPaths(locked), .objectPath(ObjectPaths.none)]
        case "GetSecrets":
            try expect(signature: signature, "aoo", member: member)
            let items = arguments[0].objectPathList ?? []
            try configuration.limits.check(objects: items)
            let session = try session(arguments[1].text ?? "", of: caller)
            var entries: [DBusDictEntry] = []
            for path in items {
                guard case .item(let collection, let reference) = resolve(path), !collection.isLocked,
                    let item = try? collection.item(reference, returning: [.data, .attributes])
                else { continue }
                entries.append(DBusDictEntry(.objectPath(path), try encodeSecret(item, for: session)))
            }
            return [.dictionary(keySignature: "o", valueSignature: "(oayays)", entries)]
        case "ReadAlias":
            try expect(signature: signature, "s", member: member)
            let target = aliases[arguments[0].text ?? ""].flatMap { collection(id: $0) }
            return [.objectPath(target?.path ?? ObjectPaths.none)]
        case "SetAlias":
            try expect(signature: signature, "so", member: member)
            let name = arguments[0].text ?? ""
            guard !name.isEmpty, DBusNames.pathElement(name) == name else {
                throw SecretServiceError.invalidArgs("an alias is made of ASCII letters and digits")
            }
            let target = arguments[1].text ?? ObjectPaths.none
            if target == ObjectPaths.none {
                aliases[name] = nil
            } else {
                aliases[name] = try collectionOrThrow(target).id
            }
            saveAliases()
            return []
        default:
            throw DBusError(.unknownMethod, "no method \(member) on org.freedesktop.Secret.Service")
        }
    }

    /// The collection a collection or item path belongs to.
    func owningCollection(_ path: String) -> SecretCollection? {
        switch resolve(path) {
        case .collection(let collection), .item(let collection, _): collection
        default: nil
        }
    }

    func search(_ collection: SecretCollection, _ attributes: [String: String]) throws(DBusError) -> [String] {
        do {
            return try collection.search(attributes).map { ObjectPaths.item($0, in: collection.id) }
        } catch {
            throw SecretServiceError.from(error)
        }
    }

    func encodeSecret(_ item: KeychainItem, for session: SecretSession) throws(DBusError) -> DBusValue {
        var contentType = "text/plain"
        if case .string(let type) = item.attributes?[.contentType] { contentType = type }
        return try session.encode(item.secret ?? Data(), contentType: contentType)
    }

    private func openSession(_ algorithm: String, _ input: DBusValue, caller: String) throws(DBusError)
        -> [DBusValue]
    {
        let path = ObjectPaths.sessionPrefix + "s\(nextSerial())"
        switch algorithm {
        case SecretSession.plainName:
            sessions[path] = SecretSession(path: path, owner: caller, algorithm: .plain)
            return [.variant(.string("")), .objectPath(path)]
        case SecretSession.diffieHellmanName:
            guard case .bytes(let clientKey) = input else {
                throw SecretServiceError.invalidArgs("\(algorithm) takes the client's public key as ay")
            }
            let cipher: DHSessionCipher
            do {
                cipher = try DHSessionCipher(clientPublicKey: clientKey)
            } catch {
                throw SecretServiceError.invalidArgs("the client public key is not valid: \(error)")
            }
            sessions[path] = SecretSession(path: path, owner: caller, algorithm: .diffieHellman(cipher))
            return [.variant(.bytes(cipher.serverPublicKey)), .objectPath(path)]
        default:
            throw DBusError(.notSupported, "session algorithm '\(algorithm)' is not supported")
        }
    }

    private func createCollection(_ properties: [String: DBusValue], alias: String) throws(DBusError)
        -> [DBusValue]
    {
        if !alias.isEmpty, let existing = aliases[alias].flatMap({ collection(id: $0) }) {
            return [.objectPath(existing.path), .objectPath(ObjectPaths.none)]
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
        try configuration.limits.check(label: label)
        guard let login = loginCollection else {
            throw DBusError(
                .notSupported, "there is no login keychain to protect a new collection (start latchkeyd --unlock)")
        }
        guard !login.isLocked else {
            throw SecretServiceError.isLocked("unlock the login collection before creating a collection")
        }
        var id = DBusNames.pathElement(label.isEmpty ? "collection" : label.lowercased())
        if collection(id: id) != nil || id == Self.loginID || id == Self.sessionID {
            var number = 2
            while collection(id: "\(id)_\(number)") != nil { number += 1 }
            id = "\(id)_\(number)"
        }
        let created: SecretCollection
        do {
            let keychain = try Keychain.create(
                at: configuration.keychainDirectory + "/\(id).keychain-db", protectedBy: login.keychain)
            try keychain.limitMemory(to: .lean)
            try keychain.setMetadata("label", Data(label.utf8))
            try keychain.setMetadata("created", Data(String(UInt64(Date().timeIntervalSince1970)).utf8))
            created = SecretCollection(id: id, keychain: keychain, unlocking: .loginKey, label: label)
        } catch {
            throw SecretServiceError.from(error)
        }
        collections.append(created)
        if !alias.isEmpty {
            aliases[alias] = id
            saveAliases()
        }
        announceCollections("CollectionCreated", created)
        return [.objectPath(created.path), .objectPath(ObjectPaths.none)]
    }
}
