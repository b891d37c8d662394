import DBus
import Foundation
import KeychainBus
import KeychainCore
import Synchronization

/// A keychain the user's daemon holds, reached over the session bus through
/// `org.latchkey.Keychain1`. Every call is a blocking D-Bus call; a broken
/// connection is reopened once.
final class DaemonKeychain: KeychainBackend {
    private let connection: Mutex<DBusConnection?>
    private let path: String

    private init(connection: DBusConnection, collection: String) {
        self.connection = Mutex(connection)
        self.path = KeychainBus.path(collection: collection)
    }

    /// The daemon's keychain `collection` (the login keychain by default), or
    /// nil when there is no session bus or no Latchkey daemon answers on it.
    static func connect(collection: String = "login") -> DaemonKeychain? {
        guard let connection = try? DBusConnection.session() else { return nil }
        let keychain = DaemonKeychain(connection: connection, collection: collection)
        guard (try? keychain.call("Status", [], timeout: 5_000)) != nil else { return nil }
        return keychain
    }

    private func call(_ member: String, _ arguments: [DBusValue], timeout: Int32 = 25_000) throws(KeychainError)
        -> [DBusValue]
    {
        try connection.withLock { (current) throws(KeychainError) -> [DBusValue] in
            if current?.isConnected != true { current = try? DBusConnection.session() }
            guard let bus = current else {
                throw KeychainError(.notAvailable, "the session bus cannot be reached")
            }
            do throws(DBusError) {
                let message = try DBusMessage.methodCall(
                    destination: KeychainBus.busName, path: path, interface: KeychainBus.interface,
                    member: member, arguments: arguments)
                return try bus.call(message, timeoutMilliseconds: timeout).arguments()
            } catch {
                throw KeychainBus.keychainError(error)
            }
        }
    }

    var isLocked: Bool {
        guard let reply = try? call("Status", []), case .bool(let locked)? = reply.first?.variantPairs?["Locked"]
        else { return true }
        return locked
    }

    func add(_ itemClass: ItemClass, attributes: ItemAttributes, secret: Data?) throws(KeychainError) -> KeychainItem {
        let reply = try call(
            "Add",
            [
                .string(itemClass.rawValue), KeychainBus.encode(attributes), .bytes([UInt8](secret ?? Data())),
                .bool(secret != nil),
            ])
        guard let first = reply.first else { throw KeychainError(.decode, "the daemon returned no item") }
        return try KeychainBus.decodeItem(first)
    }

    func items(matching query: ItemQuery) throws(KeychainError) -> [KeychainItem] {
        let reply = try call("Search", [KeychainBus.encode(query)])
        guard case .array(_, let items)? = reply.first else {
            throw KeychainError(.decode, "the daemon returned no list")
        }
        return try items.map { (item) throws(KeychainError) in try KeychainBus.decodeItem(item) }
    }

    func update(matching query: ItemQuery, with changes: ItemChanges) throws(KeychainError) -> Int {
        guard changes.removedAttributes.isEmpty else {
            throw KeychainError.param("removing attributes is not offered through the daemon")
        }
        let reply = try call(
            "Update",
            [
                KeychainBus.encode(query), KeychainBus.encode(changes.attributes),
                .bytes([UInt8](changes.secret ?? Data())), .bool(changes.secret != nil),
            ])
        guard case .uint32(let count)? = reply.first else { throw KeychainError(.decode, "no count") }
        return Int(count)
    }

    func delete(matching query: ItemQuery) throws(KeychainError) -> Int {
        let reply = try call("Delete", [KeychainBus.encode(query)])
        guard case .uint32(let count)? = reply.first else { throw KeychainError(.decode, "no count") }
        return Int(count)
    }

    func unlock(withPassword password: [UInt8]) throws(KeychainError) {
        _ = try call("Unlock", [.bytes(password)])
    }

    func lock() {
        _ = try? call("Lock", [])
    }
}
