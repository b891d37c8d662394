import Foundation
import KeychainCore
import KeychainStore

/// What `SecItem*` needs of a keychain: the typed item operations and the
/// lock state. Two keychains provide it: a keychain file opened in this
/// process, and the user's daemon (``DaemonKeychain``).
protocol KeychainBackend: Sendable {
    /// Whether attributes and secrets are out of reach until an unlock.
    var isLocked: Bool { get }
    /// Adds an item.
    func add(_ itemClass: ItemClass, attributes: ItemAttributes, secret: Data?) throws(KeychainError) -> KeychainItem
    /// The items matching a query.
    func items(matching query: ItemQuery) throws(KeychainError) -> [KeychainItem]
    /// Changes every match; the number changed.
    func update(matching query: ItemQuery, with changes: ItemChanges) throws(KeychainError) -> Int
    /// Deletes every match; the number deleted.
    func delete(matching query: ItemQuery) throws(KeychainError) -> Int
    /// Unlocks with the keychain password.
    func unlock(withPassword password: [UInt8]) throws(KeychainError)
    /// Locks.
    func lock()
}

extension Keychain: KeychainBackend {
    func unlock(withPassword password: [UInt8]) throws(KeychainError) {
        try unlock(password: password)
    }
}
