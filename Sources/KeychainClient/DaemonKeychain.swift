import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import Posix
import Synchronization

/// A keychain the user's daemon holds, reached over the session bus through
/// `org.latchkey.Keychain1`. Every call is a blocking D-Bus call; a broken
/// connection is reopened once.
///
/// A process has one connection to the daemon, shared by every `DaemonKeychain` and by ``list()``: the daemon
/// identifies a caller once per connection, on its first call (docs/threat-model.md, "Who is asking"), so a
/// process that later stops being identifiable (the latchkey command turns non-dumpable before it reads a
/// secret) keeps the identity its connection was given. Secrets cross that connection sealed under its
/// `Keychain1` session, negotiated once, on the first call that carries one (``SecretChannel``).
package final class DaemonKeychain: KeychainBackend {
    private let path: String

    /// The process's connection to the session bus (nil until first used, or after it could not be made),
    /// whether the daemon has answered a call on it (from then on it knows who this process is), and the
    /// connection's `Keychain1` session (nil until a secret first crosses).
    private static let connection = Mutex<Link>(Link())

    /// What the process holds of its one connection to the daemon.
    private struct Link {
        var bus: DBusConnection?
        var answered = false
        var session: SecretChannel?

        /// The connection, made anew when there is none or it broke: a new connection is a new caller to the
        /// daemon, not identified yet and without a session.
        mutating func connected() throws(KeychainError) -> DBusConnection {
            if let bus, bus.isConnected { return bus }
            self = Link()
            let address = DBusConnection.sessionBusAddress() ?? "(none)"
            do throws(DBusError) {
                // libdbus does not bound the authentication: a socket that accepts and never answers holds it for good.
                let bus = try DaemonWait.announcing("the session bus at \(address) to answer", bound: 10_000) {
                    () throws(DBusError) in try DBusConnection.session()
                }
                self.bus = bus
                return bus
            } catch  where DaemonWait.timedOut(error) {
                throw KeychainError(.notAvailable, error.message)
            } catch {
                throw KeychainError(.notAvailable, "the session bus cannot be reached: \(error.message)")
            }
        }
    }

    private init(collection: String) {
        self.path = Keychain1Interface.path(collection: collection)
    }

    /// The daemon's keychain `collection` (the login keychain by default), or
    /// nil when there is no session bus or no Latchkey daemon answers on it.
    package static func connect(collection: String = "login") -> DaemonKeychain? {
        let keychain = DaemonKeychain(collection: collection)
        guard (try? keychain.call("Status", [], timeout: 5_000)) != nil else { return nil }
        return keychain
    }

    /// The keychains the daemon holds, or nil when no Latchkey daemon answers on the session bus.
    package static func list() -> [KeychainDescription]? {
        (try? listIfRunning()) ?? nil
    }

    /// The keychains the daemon holds; nil when there is no session bus or no daemon on it (none owns the name
    /// and none could be started). A daemon that owns the name but does not answer within 5 s (stopped, hung,
    /// or slower to start than that) is an error, not "no daemon": a command must not work on a file such a
    /// daemon holds.
    package static func listIfRunning() throws(KeychainError) -> [KeychainDescription]? {
        let reply: [DBusValue]
        do throws(KeychainError) {
            reply = try call(path: Keychain1Interface.rootPath, "List", [], timeout: 5_000)
        } catch  where DaemonWait.isNoAnswer(error) {
            throw error
        } catch {
            return nil
        }
        guard case .array(_, let entries)? = reply.first else { return nil }
        return entries.compactMap { try? Keychain1Interface.decodeDescription($0) }
    }

    /// Why no daemon can be reached when the process has no session bus address at all (an ssh login without a
    /// user bus: docs/ssh.md); nil when it has one.
    package static func missingSessionBus() -> String? {
        guard DBusConnection.sessionBusAddress() == nil else { return nil }
        return "no session bus (DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus is missing)"
    }

    /// Hands the daemon the desktop session's variables its prompts show with (`UpdateEnvironment`): a value
    /// sets one, an empty value removes it. `errSecParam` when the daemon refuses a name or value (nothing is
    /// then changed), `errSecNotAvailable` when no daemon answers.
    package static func updateEnvironment(_ variables: [String: String]) throws(KeychainError) {
        _ = try call(
            path: Keychain1Interface.rootPath, "UpdateEnvironment", [.stringDictionary(variables)], timeout: 5_000)
    }

    /// Makes sure the daemon, if one runs, has identified this process: asks it for its keychains unless it
    /// has already answered a call (without starting a Secret Service that does not run: the bus's activation
    /// file may name another one). Call it before the process turns non-dumpable.
    package static func introduceProcess() {
        guard !connection.withLock({ $0.answered }) else { return }
        _ = try? call(path: Keychain1Interface.rootPath, "List", [], timeout: 5_000, startsService: false)
    }

    /// Calls `member` on `path`, over the process's connection (reopened once when it broke).
    private static func call(
        path: String, interface: String = Keychain1Interface.interface, _ member: String, _ arguments: [DBusValue],
        timeout: Int32, startsService: Bool = true
    ) throws(KeychainError) -> [DBusValue] {
        try connection.withLock { (current) throws(KeychainError) -> [DBusValue] in
            let bus = try current.connected()
            let reply = try call(
                bus, path: path, interface: interface, member, arguments, timeout: timeout,
                startsService: startsService)
            current.answered = true
            return reply
        }
    }

    /// Calls `member` on `path` with arguments that carry secrets, sealed by `arguments` under the
    /// connection's `Keychain1` session (opened on the first such call: docs/dbus-mapping.md), and gives the
    /// reply with the session to unseal the secrets in it.
    ///
    /// The call goes to the daemon that opened the session, by its unique name: a daemon started since then
    /// (which would read the sealed bytes as plain ones, or answer in clear) is not reached, and the session
    /// is opened anew with it, once.
    private static func callCarryingSecrets(
        path: String, _ member: String, timeout: Int32 = 25_000,
        _ arguments: (SecretChannel) throws(KeychainError) -> [DBusValue]
    ) throws(KeychainError) -> (reply: [DBusValue], channel: SecretChannel) {
        try connection.withLock { (current) throws(KeychainError) -> ([DBusValue], SecretChannel) in
            var attempt = 0
            while true {
                attempt += 1
                let bus = try current.connected()
                let channel: SecretChannel
                if let open = current.session {
                    channel = open
                } else {
                    channel = try SecretChannel.open(on: bus)
                    current.session = channel
                }
                let sealed = try arguments(channel)
                do throws(DBusError) {
                    let message = try DBusMessage.methodCall(
                        destination: channel.daemon ?? Keychain1Interface.busName, path: path,
                        interface: Keychain1Interface.interface, member: member, arguments: sealed)
                    message.startsService = channel.daemon == nil
                    let reply = try DaemonWait.announcing(DaemonWait.callNotice(member), bound: timeout) {
                        () throws(DBusError) in try bus.call(message, timeoutMilliseconds: timeout).arguments()
                    }
                    current.answered = true
                    return (reply, channel)
                } catch  where channel.daemon != nil && attempt == 1 && SecretChannel.isGone(error) {
                    current.session = nil
                } catch  where DaemonWait.timedOut(error) {
                    throw DaemonWait.noAnswer(member, timeout)
                } catch {
                    throw Keychain1Interface.keychainError(error)
                }
            }
        }
    }

    private static func call(
        _ bus: DBusConnection, path: String, interface: String = Keychain1Interface.interface, _ member: String,
        _ arguments: [DBusValue], timeout: Int32, startsService: Bool
    ) throws(KeychainError) -> [DBusValue] {
        do throws(DBusError) {
            let message = try DBusMessage.methodCall(
                destination: Keychain1Interface.busName, path: path, interface: interface,
                member: member, arguments: arguments)
            message.startsService = startsService
            return try DaemonWait.announcing(DaemonWait.callNotice(member), bound: timeout) { () throws(DBusError) in
                try bus.call(message, timeoutMilliseconds: timeout).arguments()
            }
        } catch  where DaemonWait.timedOut(error) {
            throw DaemonWait.noAnswer(member, timeout)
        } catch {
            throw Keychain1Interface.keychainError(error)
        }
    }

    /// Calls `member` on this keychain's object (or on `path` with `interface`).
    private func call(
        _ member: String, _ arguments: [DBusValue], path: String? = nil,
        interface: String = Keychain1Interface.interface,
        timeout: Int32 = 25_000
    ) throws(KeychainError) -> [DBusValue] {
        try Self.call(path: path ?? self.path, interface: interface, member, arguments, timeout: timeout)
    }

    /// Deletes the keychain and its file through the Secret Service
    /// (`Collection.Delete`): the daemon refuses for the login and session
    /// keychains and a locked one, and deletes once the person confirmed it.
    package func deleteKeychain() throws(KeychainError) {
        let id = try describe().id
        _ = try call(
            "Delete", [], path: "/org/freedesktop/secrets/collection/" + id,
            interface: "org.freedesktop.Secret.Collection")
    }

    /// Makes a collection through the Secret Service (`CreateCollection`), as any client may: its key is
    /// wrapped by the login keychain's, which must be unlocked. How the daemon holds it.
    package func createCollection(label: String) throws(KeychainError) -> KeychainDescription {
        let reply = try call(
            "CreateCollection",
            [.variantDictionary(["org.freedesktop.Secret.Collection.Label": .string(label)]), .string("")],
            path: Self.secretsPath, interface: "org.freedesktop.Secret.Service")
        guard case .objectPath(let path)? = reply.first, let id = path.split(separator: "/").last,
            let made = Self.list()?.first(where: { $0.id == id })
        else { throw KeychainError(.decode, "the daemon made no collection") }
        return made
    }

    /// Points the Secret Service alias `alias` at the collection `id` (`SetAlias`).
    package func setAlias(_ alias: String, to id: String) throws(KeychainError) {
        _ = try call(
            "SetAlias", [.string(alias), .objectPath(Self.secretsPath + "/collection/" + id)],
            path: Self.secretsPath, interface: "org.freedesktop.Secret.Service")
    }

    private static let secretsPath = "/org/freedesktop/secrets"

    /// How the daemon holds this keychain.
    package func describe() throws(KeychainError) -> KeychainDescription {
        guard let first = try call("Status", []).first else { throw KeychainError(.decode, "no status") }
        return try Keychain1Interface.decodeDescription(first)
    }

    /// Whether attributes and secrets are out of reach until an unlock (true when the daemon is gone).
    package var isLocked: Bool { (try? describe().isLocked) ?? true }

    /// Adds an item (waiting as long as a search with data: an item with a password of its own is added once the
    /// person chose it in latchkeyd's prompt).
    package func add(_ itemClass: ItemClass, attributes: ItemAttributes, secret: Data?) throws(KeychainError)
        -> KeychainItem
    {
        let (reply, _) = try Self.callCarryingSecrets(path: path, "Add", timeout: 50_000) {
            (channel) throws(KeychainError) in
            [
                .string(itemClass.rawValue), Keychain1Interface.encode(attributes), .bytes(try channel.seal(secret)),
                .bool(secret != nil),
            ]
        }
        guard let first = reply.first else { throw KeychainError(.decode, "the daemon returned no item") }
        // The daemon does not send back a secret it was given in a session: the item holds the one sent.
        let item = try Keychain1Interface.decodeItem(first)
        return KeychainItem(reference: item.reference, attributes: item.attributes, secret: secret)
    }

    /// The items matching a query.
    package func items(matching query: ItemQuery) throws(KeychainError) -> [KeychainItem] {
        // Only a search for secrets needs the session.
        guard query.returning.contains(.data) else {
            return try Self.items(in: try call("Search", [Keychain1Interface.encode(query)]), channel: nil)
        }
        // A read of items with an access control waits for the person: up to 20 s for a finger on the reader,
        // then up to 20 s for the password of the `.or` alternative (docs/secitem-semantics.md).
        let (reply, channel) = try Self.callCarryingSecrets(path: path, "Search", timeout: 50_000) { _ in
            [Keychain1Interface.encode(query)]
        }
        return try Self.items(in: reply, channel: channel)
    }

    /// The items of a `Search` reply, their secrets unsealed with `channel`.
    private static func items(in reply: [DBusValue], channel: SecretChannel?) throws(KeychainError) -> [KeychainItem] {
        guard case .array(_, let items)? = reply.first else {
            throw KeychainError(.decode, "the daemon returned no list")
        }
        return try items.map { (item) throws(KeychainError) in
            try Keychain1Interface.decodeItem(item) { (sealed) throws(KeychainError) in
                try channel?.unseal(sealed) ?? Data(sealed)
            }
        }
    }

    /// Changes every match; the number changed (waiting as long as a search with data: the person may be asked
    /// first, for an access control or an item's own password).
    package func update(matching query: ItemQuery, with changes: ItemChanges) throws(KeychainError) -> Int {
        guard changes.removedAttributes.isEmpty else {
            throw KeychainError.param("removing attributes is not offered through the daemon")
        }
        let (reply, _) = try Self.callCarryingSecrets(path: path, "Update", timeout: 50_000) {
            (channel) throws(KeychainError) in
            [
                Keychain1Interface.encode(query), Keychain1Interface.encode(changes.attributes),
                .bytes(try channel.seal(changes.secret)), .bool(changes.secret != nil),
            ]
        }
        guard case .uint32(let count)? = reply.first else { throw KeychainError(.decode, "no count") }
        return Int(count)
    }

    /// Deletes every match; the number deleted.
    package func delete(matching query: ItemQuery) throws(KeychainError) -> Int {
        let reply = try call("Delete", [Keychain1Interface.encode(query)])
        guard case .uint32(let count)? = reply.first else { throw KeychainError(.decode, "no count") }
        return Int(count)
    }

    /// Unlocks with the keychain password.
    package func unlock(withPassword password: [UInt8]) throws(KeychainError) {
        _ = try Self.callCarryingSecrets(path: path, "Unlock") { (channel) throws(KeychainError) in
            [.bytes(try channel.seal(password))]
        }
    }

    /// Locks.
    package func lock() {
        _ = try? call("Lock", [])
    }

    /// Locks the keychain and wipes every class key, `AfterFirstUnlock`'s too (`LockAllClasses`).
    package func lockAllClasses() {
        _ = try? call("LockAllClasses", [])
    }

    /// Re-wraps the keychain key under a new password (the login keychain only:
    /// the others open with its key).
    package func changePassword(from old: [UInt8], to new: [UInt8]) throws(KeychainError) {
        _ = try Self.callCarryingSecrets(path: path, "ChangePassword") { (channel) throws(KeychainError) in
            [.bytes(try channel.seal(old)), .bytes(try channel.seal(new))]
        }
    }

    /// When the keychain locks by itself.
    package func settings() throws(KeychainError) -> KeychainSettings { try describe().settings }

    /// Changes when the keychain locks by itself; the daemon applies it at once.
    package func setSettings(_ settings: KeychainSettings) throws(KeychainError) {
        _ = try call("SetSettings", [Keychain1Interface.encode(settings)])
    }

    /// The access policy as the daemon reads it (checked while the keychain is unlocked).
    package func storedAccessPolicy() throws(KeychainError) -> (policy: KeychainAccessPolicy, checked: Bool) {
        let description = try describe()
        guard let policy = description.accessPolicy else { throw Keychain1Interface.alteredPolicyError }
        return (policy, description.accessPolicyChecked)
    }

    /// Exports the keychains `ids` (every one the daemon holds in a file when empty) as a CXF file
    /// (`Keychain1.Export`, docs/export-import.md): to the age `recipients`, else to `passphrase`, else, with
    /// `unencrypted`, in clear. Waits for the person to allow it in the daemon's prompt (`errSecUserCanceled` when
    /// they decline). The file, how many items it holds, and how many `…ThisDeviceOnly` items were left out.
    package static func export(
        keychains ids: [String], recipients: [String], passphrase: SharedSecret?, unencrypted: Bool
    ) throws(KeychainError) -> (file: SharedSecret, items: Int, leftOut: Int) {
        let (reply, channel) = try callCarryingSecrets(
            path: Keychain1Interface.rootPath, "Export", timeout: exchangeTimeout
        ) { (channel) throws(KeychainError) in
            [
                .array(elementSignature: "s", ids.map { .string($0) }),
                .array(elementSignature: "s", recipients.map { .string($0) }),
                .bytes(try passphrase.map { (secret) throws(KeychainError) in try channel.seal(secret) } ?? []),
                .bool(unencrypted),
            ]
        }
        guard reply.count == 3, case .bytes(let sealed) = reply[0], case .uint32(let items) = reply[1],
            case .uint32(let leftOut) = reply[2]
        else { throw KeychainError(.decode, "the daemon's Export reply is not a file and two counts") }
        return (try channel.unsealSecret(sealed), Int(items), Int(leftOut))
    }

    /// Imports `file` (a CXF or CSV file, or an age file opened with `key`: a passphrase for `keyKind`
    /// `passphrase`, an identity file's text for `identity`) into this keychain (`Keychain1.Import`): in one
    /// transaction, once the person allowed it (a dry run asks nothing and writes nothing).
    package func importFile(
        _ file: SharedSecret, key: SharedSecret?, keyKind: String, dryRun: Bool, replace: Bool
    ) throws(KeychainError) -> ImportSummary {
        let (reply, _) = try Self.callCarryingSecrets(path: path, "Import", timeout: Self.exchangeTimeout) {
            (channel) throws(KeychainError) in
            [
                .bytes(try channel.seal(file)),
                .bytes(try key.map { (secret) throws(KeychainError) in try channel.seal(secret) } ?? []),
                .string(keyKind), .bool(dryRun), .bool(replace),
            ]
        }
        guard let first = reply.first else { throw KeychainError(.decode, "the daemon's Import reply is empty") }
        return try Keychain1Interface.decodeSummary(first)
    }

    /// Imports the gnome-keyring keyring file `file`, read at `path` (modified then, Unix seconds), opened with
    /// `password` (empty for a keyring without one), with its import record (`ImportKeyring`): the daemon asks the
    /// person first. Both cross sealed under a `Keychain1` session.
    package func importKeyring(
        _ file: [UInt8], password: [UInt8], path: String, modified: UInt64, dryRun: Bool
    ) throws(KeychainError) -> ImportSummary {
        let (reply, _) = try Self.callCarryingSecrets(path: self.path, "ImportKeyring", timeout: Self.exchangeTimeout) {
            (channel) throws(KeychainError) in
            [
                .bytes(try channel.seal(file)), .bytes(try channel.seal(password)), .string(path), .uint64(modified),
                .bool(dryRun),
            ]
        }
        guard let first = reply.first else { throw KeychainError(.decode, "the daemon's ImportKeyring reply is empty") }
        return try Keychain1Interface.decodeSummary(first)
    }

    /// How long an export or import may wait: an unlock prompt, the person's confirmation (pinentry's own
    /// timeout is 120 s), and the encryption.
    private static let exchangeTimeout: Int32 = 300_000

    /// Changes the access policy (`SetAccessPolicy`). A switch to `allow-all` waits for the user to answer the
    /// daemon's confirmation prompt (pinentry's own timeout is 120 s): `errSecUserCanceled` when they decline,
    /// `errSecInteractionNotAllowed` when no prompt could be shown.
    package func setAccessPolicy(_ policy: KeychainAccessPolicy) throws(KeychainError) {
        _ = try call("SetAccessPolicy", [.string(policy.rawValue)], timeout: 150_000)
    }
}
