import DBus
import FoundationEssentials
import KeychainBus
import KeychainCore
import KeychainStore
import LoginControl

/// `org.latchkey.Keychain1` at `/org/latchkey/keychain/<collection>`: the typed
/// `SecItem` operations the `Security` module sends. Store errors travel as
/// their `OSStatus` (``KeychainBus/statusError``).
extension SecretService {
    func callNativeKeychain(_ message: DBusMessage, path: String, member: String) throws(DBusError) -> [DBusValue] {
        if let interface = message.interface, interface != KeychainBus.interface {
            throw DBusError(.unknownMethod, "no method \(interface).\(member) on \(path)")
        }
        if path == KeychainBus.rootPath {
            try expect(signature: message.signature, "", member: member, known: member == "List")
            return [.array(elementSignature: "a{sv}", collections.map { KeychainBus.encode(describe($0)) })]
        }
        guard let collection = collection(id: String(path.dropFirst(KeychainBus.pathPrefix.count))) else {
            throw SecretServiceError.noSuchObject(path)
        }
        let arguments = try message.arguments()
        let signature = message.signature
        collection.markUsed()
        do {
            switch member {
            case "Add":
                try expect(signature: signature, "sa{sv}ayb", member: member)
                guard let code = arguments[0].text, let itemClass = ItemClass(rawValue: code) else {
                    throw KeychainError(.noSuchClass, "not a keychain item class")
                }
                let attributes = try KeychainBus.decodeAttributes(arguments[1])
                let secret = try nativeSecret(arguments[2], present: arguments[3])
                try checkCount(attributes)
                let item = try collection.keychain.add(itemClass, attributes: attributes, secret: secret)
                nativeChange(collection)
                return [KeychainBus.encode(item)]
            case "Search":
                try expect(signature: signature, "a{sv}", member: member)
                let query = try KeychainBus.decodeQuery(arguments[0])
                try checkCount(query.attributes)
                let items = try collection.keychain.items(matching: query)
                return [.array(elementSignature: "a{sv}", items.map(KeychainBus.encode))]
            case "Update":
                try expect(signature: signature, "a{sv}a{sv}ayb", member: member)
                let query = try KeychainBus.decodeQuery(arguments[0])
                let changes = ItemChanges(
                    attributes: try KeychainBus.decodeAttributes(arguments[1]),
                    secret: try nativeSecret(arguments[2], present: arguments[3]))
                try checkCount(query.attributes)
                try checkCount(changes.attributes)
                let count = try collection.keychain.update(matching: query, with: changes)
                nativeChange(collection)
                return [.uint32(UInt32(clamping: count))]
            case "Delete":
                try expect(signature: signature, "a{sv}", member: member)
                let query = try KeychainBus.decodeQuery(arguments[0])
                let count = try collection.keychain.delete(matching: query)
                nativeChange(collection)
                return [.uint32(UInt32(clamping: count))]
            case "Status":
                try expect(signature: signature, "", member: member)
                return [KeychainBus.encode(describe(collection))]
            case "Unlock":
                try expect(signature: signature, "ay", member: member)
                guard case .bytes(var password) = arguments[0] else { throw KeychainError.param("a password is ay") }
                defer { password.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
                try unlockNatively(collection, password: password)
                return []
            case "Lock":
                try expect(signature: signature, "", member: member)
                lock(collection)
                return []
            case "ChangePassword":
                try expect(signature: signature, "ayay", member: member)
                guard case .bytes(var old) = arguments[0], case .bytes(var new) = arguments[1] else {
                    throw KeychainError.param("passwords are ay")
                }
                defer {
                    wipeBytes(&old)
                    wipeBytes(&new)
                }
                guard case .loginPassword = collection.unlocking else {
                    throw KeychainError.param(
                        "'\(collection.id)' has no password of its own: it opens with the login keychain")
                }
                try limitingLoginPasswords { () throws(KeychainError) in
                    try collection.keychain.changePassword(from: old, to: new)
                }
                return []
            case "SetSettings":
                try expect(signature: signature, "a{sv}", member: member)
                let settings = try KeychainBus.decodeSettings(arguments[0])
                if case .heldPassword = collection.unlocking {
                    throw KeychainError.param("the session collection is in memory and keeps no settings")
                }
                try collection.keychain.setSettings(settings)
                collection.settings = settings
                return []
            default:
                throw DBusError(.unknownMethod, "no method \(member) on \(KeychainBus.interface)")
            }
        } catch let error as KeychainError {
            throw KeychainBus.dbusError(error)
        } catch let error as DBusError {
            throw error
        } catch {
            throw DBusError(.failed, "\(error)")
        }
    }

    private func nativeSecret(_ bytes: DBusValue, present: DBusValue) throws -> Data? {
        guard case .bool(true) = present else { return nil }
        guard case .bytes(let secret) = bytes else { throw KeychainError.param("a secret is ay") }
        guard secret.count <= configuration.limits.secretBytes else {
            throw KeychainError(.dataTooLarge, "the secret is larger than \(configuration.limits.secretBytes) bytes")
        }
        return Data(secret)
    }

    private func checkCount(_ attributes: ItemAttributes) throws {
        guard attributes.count <= configuration.limits.attributeCount else {
            throw KeychainError.param("more than \(configuration.limits.attributeCount) attributes")
        }
    }

    private func unlockNatively(_ collection: SecretCollection, password: [UInt8]) throws {
        guard collection.isLocked else { return }
        switch collection.unlocking {
        case .loginPassword:
            try limitingLoginPasswords { () throws(KeychainError) in try collection.keychain.unlock(password: password)
            }
            announceLockChange(collection)
            unlockCollections(protectedBy: collection, among: collections)
        case .loginKey, .heldPassword:
            guard tryUnlockWithoutPassword(collection) else {
                throw KeychainError(.interactionNotAllowed, "unlock the login keychain first")
            }
            announceLockChange(collection)
        }
    }

    /// How the daemon holds `collection`.
    func describe(_ collection: SecretCollection) -> KeychainDescription {
        let protection: KeychainDescription.Protection
        switch collection.unlocking {
        case .loginPassword: protection = .password
        case .loginKey: protection = .loginKeychain
        case .heldPassword: protection = .memory
        }
        return KeychainDescription(
            id: collection.id, file: protection == .memory ? "" : collection.keychain.path, label: collection.label,
            isLocked: collection.isLocked, protection: protection, settings: collection.settings)
    }

    /// Runs `attempt`, which tries a password of the login keychain, under the
    /// same wrong-password limit as logins.
    private func limitingLoginPasswords(_ attempt: () throws(KeychainError) -> Void) throws(KeychainError) {
        switch attemptLoginPassword(attempt) {
        case .accepted: return
        case .notTried(let wait):
            throw KeychainError(.authFailed, "too many wrong passwords; not tried (wait \(wait) s)")
        case .failed(let error): throw error
        }
    }

    /// Tells Secret Service clients that a collection's items changed.
    private func nativeChange(_ collection: SecretCollection) {
        collection.touch()
        invalidateItems(of: collection)
        emit(ObjectPaths.service, "org.freedesktop.Secret.Service", "CollectionChanged", [.objectPath(collection.path)])
    }
}
