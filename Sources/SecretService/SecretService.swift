import DBus
import FoundationEssentials
import KeychainBus
import KeychainCore
import KeychainStore
import Pinentry

/// What the daemon serves and how it prompts.
public struct SecretServiceConfiguration: Sendable {
    /// Where keychain files live (the login keychain and client-made collections).
    public var keychainDirectory: String
    /// The password prompt.
    public var pinentry: Pinentry
    /// Bounds on client input.
    public var limits: InputLimits
    /// The scrypt cost of a login keychain the daemon creates.
    public var kdf: KDFParameters

    /// A configuration; `kdf` stays `.production` outside tests.
    public init(
        keychainDirectory: String, pinentry: Pinentry, limits: InputLimits = InputLimits(),
        kdf: KDFParameters = .production
    ) {
        self.keychainDirectory = keychainDirectory
        self.pinentry = pinentry
        self.limits = limits
        self.kdf = kdf
    }
}

/// The `org.freedesktop.secrets` object tree on one bus connection: the
/// service, its collections (keychains), items, sessions and prompts. It
/// can start before the bus exists (started at login by pam_latchkey) and
/// be given the connection later with ``attach(_:)``.
///
/// It runs on one thread: ``handle(_:)`` takes each incoming message. Prompts
/// run in threads of their own and come back through ``completions``.
public final class SecretService {
    /// The bus, once there is one; signals sent before are dropped (nobody could hear them).
    public private(set) var connection: DBusConnection?
    let configuration: SecretServiceConfiguration
    /// Collections in the order they are listed.
    var collections: [SecretCollection] = []
    /// Alias name → collection id.
    var aliases: [String: String] = [:]
    var sessions: [String: SecretSession] = [:]
    var prompts: [String: UnlockPrompt] = [:]
    var loginSessions = LoginSessionState()
    private var serial: UInt64 = 0
    /// Whether another process took `org.freedesktop.secrets` (with `--replace`).
    public private(set) var hasLostName = false
    /// Where prompt threads leave their results for the serving thread.
    public let completions: PromptCompletions

    static let loginID = "login"
    static let sessionID = "session"

    /// Opens the keychains in the configured directory. With `loginPassword`,
    /// the login keychain is unlocked with it, or created with it when missing.
    ///
    /// - Throws: `errSecAuthFailed` if `loginPassword` does not unlock the login keychain.
    public init(
        connection: DBusConnection?, configuration: SecretServiceConfiguration, loginPassword: [UInt8]?
    ) throws(KeychainError) {
        self.connection = connection
        self.configuration = configuration
        self.completions = try PromptCompletions()
        try openCollections(loginPassword: loginPassword)
    }

    /// Serves `connection` from now on (the daemon started before the bus did).
    public func attach(_ connection: DBusConnection) {
        self.connection = connection
    }

    var loginCollection: SecretCollection? { collections.first { $0.id == Self.loginID } }

    var loginKeychainPath: String { KeychainLocation.loginKeychainPath(inDirectory: configuration.keychainDirectory) }

    private func openCollections(loginPassword: [UInt8]?) throws(KeychainError) {
        let directory = configuration.keychainDirectory
        if FileManager.default.fileExists(atPath: loginKeychainPath) {
            let keychain = try Keychain(opening: loginKeychainPath)
            if let loginPassword { try keychain.unlock(password: loginPassword) }
            try addLoginCollection(keychain)
        } else if let loginPassword {
            try createLoginKeychain(password: loginPassword)
        }
        let login = loginCollection?.keychain
        var held = [UInt8](repeating: 0, count: 32)
        for index in held.indices { held[index] = UInt8.random(in: 0...255) }
        let session = try Keychain.createInMemory(password: held)
        collections.append(
            SecretCollection(id: Self.sessionID, keychain: session, unlocking: .heldPassword(held), label: "Session"))
        aliases["session"] = Self.sessionID

        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in files.sorted() where file.hasSuffix(".keychain-db") && file != "login.keychain-db" {
            let id = String(file.dropLast(".keychain-db".count))
            guard DBusNames.pathElement(id) == id, let keychain = try? Keychain(opening: directory + "/" + file),
                keychain.parentIdentifier != nil
            else { continue }
            if let login, !login.isLocked { try? keychain.unlock(using: login) }
            try? keychain.limitMemory(to: .lean)
            let label = (try? keychain.metadata("label")).map { String(decoding: $0, as: UTF8.self) } ?? id
            collections.append(SecretCollection(id: id, keychain: keychain, unlocking: .loginKey, label: label))
        }
        loadAliases()
    }

    /// Creates the login keychain with `password` and serves it as `login`, alias `default`.
    func createLoginKeychain(password: [UInt8]) throws(KeychainError) {
        let keychain = try Keychain.create(at: loginKeychainPath, password: password, kdf: configuration.kdf)
        try keychain.setMetadata("created", Data(String(UInt64(Date().timeIntervalSince1970)).utf8))
        try addLoginCollection(keychain)
    }

    private func addLoginCollection(_ keychain: Keychain) throws(KeychainError) {
        try keychain.limitMemory(to: .lean)
        collections.insert(
            SecretCollection(id: Self.loginID, keychain: keychain, unlocking: .loginPassword, label: "Login"), at: 0)
        if aliases["default"] == nil { aliases["default"] = Self.loginID }
    }

    // MARK: Aliases

    private var aliasFile: String { configuration.keychainDirectory + "/aliases" }

    private func loadAliases() {
        guard let text = try? String(contentsOfFile: aliasFile, encoding: .utf8) else { return }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, collection(id: parts[1]) != nil else { continue }
            aliases[parts[0]] = parts[1]
        }
    }

    func saveAliases() {
        let text = aliases.filter { $0.value != Self.sessionID }.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)\n" }.joined()
        try? FileManager.default.createDirectory(
            atPath: configuration.keychainDirectory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try? text.write(toFile: aliasFile, atomically: true, encoding: .utf8)
    }

    // MARK: Lookup

    func collection(id: String) -> SecretCollection? { collections.first { $0.id == id } }

    /// An object on the bus.
    enum BusObject {
        case service
        case collection(SecretCollection)
        case item(SecretCollection, ItemReference)
        case session(SecretSession)
        case prompt(UnlockPrompt)
    }

    /// The object at `path`; an alias path stands for its collection.
    func resolve(_ path: String) -> BusObject? {
        if path == ObjectPaths.service { return .service }
        if let session = sessions[path] { return .session(session) }
        if let prompt = prompts[path] { return .prompt(prompt) }
        let collectionID: Substring
        let rest: Substring
        if path.hasPrefix(ObjectPaths.collectionPrefix) {
            rest = path.dropFirst(ObjectPaths.collectionPrefix.count)
            collectionID = rest.prefix { $0 != "/" }
        } else if path.hasPrefix(ObjectPaths.aliasPrefix) {
            rest = path.dropFirst(ObjectPaths.aliasPrefix.count)
            guard let id = aliases[String(rest.prefix { $0 != "/" })] else { return nil }
            collectionID = Substring(id)
        } else {
            return nil
        }
        guard let collection = collection(id: String(collectionID)) else { return nil }
        collection.markUsed()
        let itemElement = rest.drop { $0 != "/" }.dropFirst()
        if itemElement.isEmpty { return .collection(collection) }
        guard !itemElement.contains("/"), let reference = ObjectPaths.reference(fromElement: itemElement),
            (try? collection.item(reference, returning: [])) ?? nil != nil
        else { return nil }
        return .item(collection, reference)
    }

    func collectionOrThrow(_ path: String) throws(DBusError) -> SecretCollection {
        if case .collection(let collection) = resolve(path) { return collection }
        throw SecretServiceError.noSuchObject(path)
    }

    /// The session at `path`, which must belong to `caller`.
    func session(_ path: String, of caller: String) throws(DBusError) -> SecretSession {
        guard let session = sessions[path], session.owner == caller else {
            throw SecretServiceError.noSession("\(path) is not a session of this client")
        }
        return session
    }

    func nextSerial() -> UInt64 {
        serial += 1
        return serial
    }

    // MARK: Messages

    /// Serves one incoming message: a method call gets its reply or error; a
    /// departing client's sessions and prompts are dropped.
    public func handle(_ message: DBusMessage) {
        switch message.kind {
        case .methodCall:
            let reply: DBusMessage?
            do {
                reply = try message.reply(try call(message))
            } catch {
                reply = message.errorReply(error)
            }
            if !message.expectsNoReply, let reply { connection?.send(reply) }
        case .signal:
            // Only the bus itself may say who owns what; a client could send these to us directly.
            guard message.sender == "org.freedesktop.DBus", message.interface == "org.freedesktop.DBus" else { return }
            if message.member == "NameLost",
                case .string("org.freedesktop.secrets")? = try? message.arguments().first
            {
                hasLostName = true
            }
            if message.member == "NameOwnerChanged",
                let arguments = try? message.arguments(), arguments.count == 3,
                case .string(let name) = arguments[0], case .string(let newOwner) = arguments[2],
                newOwner.isEmpty, name.hasPrefix(":")
            {
                clientLeft(name)
            }
        default:
            break
        }
    }

    private func clientLeft(_ name: String) {
        sessions = sessions.filter { $0.value.owner != name }
        prompts = prompts.filter { $0.value.owner != name }
    }

    private func call(_ message: DBusMessage) throws(DBusError) -> [DBusValue] {
        guard let path = message.path, let member = message.member else {
            throw DBusError(.unknownMethod, "a method call needs a path and a member")
        }
        let caller = message.sender ?? ""
        switch message.interface {
        case "org.freedesktop.DBus.Introspectable":
            try expect(message, "", member == "Introspect")
            return [.string(try introspect(path))]
        case "org.freedesktop.DBus.Properties":
            return try callProperties(message, path: path, member: member)
        case "org.freedesktop.DBus.Peer":
            return try callPeer(message, member: member)
        default:
            break
        }
        if path.hasPrefix(KeychainBus.pathPrefix) || path == KeychainBus.rootPath {
            return try callNativeKeychain(message, path: path, member: member)
        }
        guard let object = resolve(path) else { throw SecretServiceError.noSuchObject(path) }
        let arguments = try message.arguments()
        let interface = message.interface
        switch object {
        case .service:
            try requireInterface(interface, "org.freedesktop.Secret.Service", member)
            return try callService(member, message.signature, arguments, caller: caller)
        case .collection(let collection):
            try requireInterface(interface, "org.freedesktop.Secret.Collection", member)
            return try callCollection(collection, member, message.signature, arguments, caller: caller)
        case .item(let collection, let reference):
            try requireInterface(interface, "org.freedesktop.Secret.Item", member)
            return try callItem(collection, reference, member, message.signature, arguments, caller: caller)
        case .session(let session):
            try requireInterface(interface, "org.freedesktop.Secret.Session", member)
            try expect(message, "", member == "Close")
            sessions[session.path] = nil
            return []
        case .prompt(let prompt):
            try requireInterface(interface, "org.freedesktop.Secret.Prompt", member)
            return try callPrompt(prompt, member, message.signature)
        }
    }

    private func requireInterface(_ given: String?, _ expected: String, _ member: String) throws(DBusError) {
        if let given, given != expected {
            throw DBusError(.unknownMethod, "no method \(given).\(member) on this object")
        }
    }

    /// Checks a call's signature, and that the member is known.
    func expect(_ message: DBusMessage, _ signature: String, _ known: Bool = true) throws(DBusError) {
        try expect(signature: message.signature, signature, member: message.member ?? "", known: known)
    }

    func expect(signature given: String, _ expected: String, member: String, known: Bool = true) throws(DBusError) {
        guard known else { throw DBusError(.unknownMethod, "no method \(member) here") }
        guard given == expected else {
            throw SecretServiceError.invalidArgs("\(member) takes (\(expected)), not (\(given))")
        }
    }

    private func callPeer(_ message: DBusMessage, member: String) throws(DBusError) -> [DBusValue] {
        switch member {
        case "Ping":
            try expect(message, "")
            return []
        case "GetMachineId":
            try expect(message, "")
            let id = (try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8)) ?? ""
            return [.string(String(id.split(whereSeparator: \.isWhitespace).first ?? ""))]
        default:
            throw DBusError(.unknownMethod, "no method \(member) on org.freedesktop.DBus.Peer")
        }
    }

    // MARK: Signals

    func emit(_ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue]) {
        if let signal = try? DBusMessage.signal(path: path, interface: interface, member: member, arguments: arguments)
        {
            connection?.send(signal)
        }
    }

    func emitPropertiesChanged(_ path: String, _ interface: String, _ changed: [String: DBusValue]) {
        emit(
            path, "org.freedesktop.DBus.Properties", "PropertiesChanged",
            [.string(interface), .variantDictionary(changed), .array(elementSignature: "s", [])])
    }

    /// Locks a collection (its key is wiped) and announces it, if it was unlocked.
    func lock(_ collection: SecretCollection) {
        guard !collection.isLocked else { return }
        collection.keychain.lock()
        announceLockChange(collection)
    }

    /// Locks every collection whose lock timeout has passed; the milliseconds
    /// until the next one is due, nil when none is.
    public func lockIdleCollections() -> Int32? {
        let now = monotonicSeconds()
        var next: Int64?
        for collection in collections {
            guard let deadline = collection.lockDeadline else { continue }
            if deadline <= now {
                lock(collection)
            } else {
                next = min(next ?? deadline, deadline)
            }
        }
        return next.map { Int32(clamping: ($0 - now) * 1000) }
    }

    /// Locks every collection set to lock when the machine goes to sleep.
    public func lockForSleep() {
        for collection in collections where collection.settings.lockOnSleep { lock(collection) }
    }

    /// Announces a collection's new lock state, on it and on each of its items.
    func announceLockChange(_ collection: SecretCollection) {
        collection.markUsed()
        let locked = DBusValue.bool(collection.isLocked)
        emitPropertiesChanged(collection.path, "org.freedesktop.Secret.Collection", ["Locked": locked])
        emit(ObjectPaths.service, "org.freedesktop.Secret.Service", "CollectionChanged", [.objectPath(collection.path)])
        for reference in (try? collection.itemReferences()) ?? [] {
            emitPropertiesChanged(
                ObjectPaths.item(reference, in: collection.id), "org.freedesktop.Secret.Item", ["Locked": locked])
        }
    }

    /// Announces a changed item list of a collection: the Secret Service
    /// signal, and `Items` as invalidated (sending the whole list would cost
    /// time in proportion to the collection at every change).
    func announceItems(_ collection: SecretCollection, _ signal: String, _ reference: ItemReference) {
        emit(
            collection.path, "org.freedesktop.Secret.Collection", signal,
            [.objectPath(ObjectPaths.item(reference, in: collection.id))])
        if signal != "ItemChanged" { invalidateItems(of: collection) }
    }

    /// Sends `PropertiesChanged` naming `Items` as invalidated.
    func invalidateItems(of collection: SecretCollection) {
        emit(
            collection.path, "org.freedesktop.DBus.Properties", "PropertiesChanged",
            [
                .string("org.freedesktop.Secret.Collection"), .variantDictionary([:]),
                .array(elementSignature: "s", [.string("Items")]),
            ])
    }

    func announceCollections(_ signal: String, _ collection: SecretCollection) {
        emit(ObjectPaths.service, "org.freedesktop.Secret.Service", signal, [.objectPath(collection.path)])
        if signal != "CollectionChanged" {
            emitPropertiesChanged(
                ObjectPaths.service, "org.freedesktop.Secret.Service",
                ["Collections": .objectPaths(collections.map(\.path))])
        }
    }
}
