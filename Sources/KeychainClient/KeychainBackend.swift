import FoundationEssentials
import KeychainCore
import KeychainStore

/// A keychain a client works on: a keychain file opened in this process, or
/// one the user's daemon holds (``DaemonKeychain``). `SecItem*` and the
/// `latchkey` command both go through it.
package protocol KeychainBackend: Sendable {
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
    /// Re-wraps the keychain key under a new password.
    func changePassword(from old: [UInt8], to new: [UInt8]) throws(KeychainError)
    /// When the keychain locks by itself.
    func settings() throws(KeychainError) -> KeychainSettings
    /// Changes when the keychain locks by itself.
    func setSettings(_ settings: KeychainSettings) throws(KeychainError)
    /// The access policy, for showing: whether it was checked under the keychain key (not while locked);
    /// `errSecDecode` when it was altered in the file.
    func storedAccessPolicy() throws(KeychainError) -> (policy: KeychainAccessPolicy, checked: Bool)
    /// Changes the access policy (needs the keychain unlocked; through the daemon, a switch to
    /// ``KeychainAccessPolicy/allowAll`` waits for the user's confirmation).
    func setAccessPolicy(_ policy: KeychainAccessPolicy) throws(KeychainError)
}

extension Keychain: KeychainBackend {
    /// Unlocks with the keychain password.
    package func unlock(withPassword password: [UInt8]) throws(KeychainError) {
        try unlock(password: password)
    }

    /// Re-wraps the keychain key under a new password.
    package func changePassword(from old: [UInt8], to new: [UInt8]) throws(KeychainError) {
        try changePassword(from: old, to: new, kdf: nil)
    }
}
