import Foundation
import KeychainClient
import KeychainCore
import KeychainStore
import Synchronization

/// An open keychain (Apple's `SecKeychainRef`): a keychain file opened in
/// this process, or a keychain the user's daemon holds.
public final class SecKeychain: Sendable, Hashable {
    let store: any KeychainBackend
    /// The keychain file, when this process opened it itself.
    public let file: Keychain?

    /// Wraps an opened keychain file.
    public init(_ file: Keychain) {
        self.store = file
        self.file = file
    }

    init(daemon: DaemonKeychain) {
        self.store = daemon
        self.file = nil
    }

    /// Creates a keychain file at `path` with a password, unlocked. `kdf`
    /// chooses the cost of the password hash; keep the default outside tests.
    public static func create(
        atPath path: String, password: String, kdf: KDFParameters = .production
    ) throws(KeychainError) -> SecKeychain {
        SecKeychain(try Keychain.create(at: path, password: password, kdf: kdf))
    }

    /// Opens an existing keychain file, locked.
    public static func open(atPath path: String) throws(KeychainError) -> SecKeychain {
        SecKeychain(try Keychain(opening: path))
    }

    /// Two references are equal when they hold the same open keychain.
    public static func == (lhs: SecKeychain, rhs: SecKeychain) -> Bool { lhs === rhs }

    /// Hashes the object identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A reference to one keychain item (Apple's `SecKeychainItemRef`), returned
/// for `kSecReturnRef` and accepted by `kSecValueRef` and `kSecMatchItemList`.
public final class SecKeychainItem: Sendable, Hashable {
    /// The keychain that holds the item.
    public let keychain: SecKeychain
    /// The item's lasting reference.
    public let reference: ItemReference

    init(keychain: SecKeychain, reference: ItemReference) {
        self.keychain = keychain
        self.reference = reference
    }

    /// Equal when they name the same item in the same keychain.
    public static func == (lhs: SecKeychainItem, rhs: SecKeychainItem) -> Bool {
        lhs.keychain == rhs.keychain && lhs.reference == rhs.reference
    }

    /// Hashes the item reference.
    public func hash(into hasher: inout Hasher) { hasher.combine(reference) }
}

/// Apple's `SecKeychainRef`.
public typealias SecKeychainRef = SecKeychain
/// Apple's `SecKeychainItemRef`.
public typealias SecKeychainItemRef = SecKeychainItem

/// The keychain `SecItem*` calls use when a query names none.
private let defaultKeychain = Mutex<SecKeychain?>(nil)

/// The default keychain: the one set with `SecKeychainSetDefault`; else the
/// login keychain of the user's daemon, when one answers on the session bus;
/// else the login keychain file
/// (`$XDG_DATA_HOME/latchkey/keychains/login.keychain-db`), opened locked.
func currentDefaultKeychain() throws(KeychainError) -> SecKeychain {
    if let keychain = defaultKeychain.withLock({ $0 }) { return keychain }
    let opened: SecKeychain
    if let daemon = DaemonKeychain.connect() {
        opened = SecKeychain(daemon: daemon)
    } else {
        let path = KeychainLocation.loginKeychainPath()
        do {
            opened = try SecKeychain.open(atPath: path)
        } catch  where error.status == .noSuchKeychain {
            throw KeychainError(
                .noDefaultKeychain,
                "no default keychain is set, no daemon answers and there is no login keychain at \(path)")
        }
    }
    return defaultKeychain.withLock { current in
        if let current { return current }
        current = opened
        return opened
    }
}

/// `keychain`, or the default keychain when nil.
func orDefault(_ keychain: SecKeychain?) throws(KeychainError) -> SecKeychain {
    if let keychain { return keychain }
    return try currentDefaultKeychain()
}

private func passwordBytes(_ length: UInt32, _ password: UnsafeRawPointer?) -> [UInt8]? {
    guard let password else { return length == 0 ? [] : nil }
    return Array(UnsafeRawBufferPointer(start: password, count: Int(length)))
}

/// Creates a keychain file and returns it unlocked (Apple's `SecKeychainCreate`).
/// `promptUser` and `initialAccess` (an access object for the keychain itself, which Latchkey does not keep:
/// access lists are per item, ``kSecAttrAccess``) are ignored; a password is required.
public func SecKeychainCreate(
    _ pathName: UnsafePointer<CChar>, _ passwordLength: UInt32, _ password: UnsafeRawPointer?,
    _ promptUser: Bool, _ initialAccess: SecAccess?, _ keychain: UnsafeMutablePointer<SecKeychain?>
) -> OSStatus {
    osStatus { () throws(KeychainError) in
        guard let bytes = passwordBytes(passwordLength, password) else {
            throw .param("SecKeychainCreate needs a password")
        }
        keychain.pointee = SecKeychain(try Keychain.create(at: String(cString: pathName), password: bytes))
    }
}

/// Opens a keychain file, locked (Apple's `SecKeychainOpen`).
public func SecKeychainOpen(_ pathName: UnsafePointer<CChar>, _ keychain: UnsafeMutablePointer<SecKeychain?>)
    -> OSStatus
{
    osStatus { () throws(KeychainError) in
        keychain.pointee = try SecKeychain.open(atPath: String(cString: pathName))
    }
}

/// Unlocks a keychain (the default one when nil) with its password. With
/// `usePassword` false Apple would prompt; here that gives
/// `errSecInteractionNotAllowed`.
public func SecKeychainUnlock(
    _ keychain: SecKeychain?, _ passwordLength: UInt32, _ password: UnsafeRawPointer?, _ usePassword: Bool
) -> OSStatus {
    osStatus { () throws(KeychainError) in
        guard usePassword, let bytes = passwordBytes(passwordLength, password) else {
            throw KeychainError(.interactionNotAllowed, "no password given and no prompt is available")
        }
        try orDefault(keychain).store.unlock(withPassword: bytes)
    }
}

/// Locks a keychain (the default one when nil).
public func SecKeychainLock(_ keychain: SecKeychain?) -> OSStatus {
    osStatus { () throws(KeychainError) in
        try orDefault(keychain).store.lock()
    }
}

/// Makes `keychain` the default for `SecItem*` calls (nil returns to the login keychain).
public func SecKeychainSetDefault(_ keychain: SecKeychain?) -> OSStatus {
    defaultKeychain.withLock { $0 = keychain }
    return errSecSuccess
}

/// The default keychain (Apple's `SecKeychainCopyDefault`).
public func SecKeychainCopyDefault(_ keychain: UnsafeMutablePointer<SecKeychain?>) -> OSStatus {
    osStatus { () throws(KeychainError) in keychain.pointee = try currentDefaultKeychain() }
}

/// Deletes a keychain's file (Apple's `SecKeychainDelete`). Items in it are gone.
public func SecKeychainDelete(_ keychainOrArray: SecKeychain?) -> OSStatus {
    osStatus { () throws(KeychainError) in
        guard let keychain = keychainOrArray else { throw .param("SecKeychainDelete needs a keychain") }
        guard let file = keychain.file else {
            throw KeychainError(.unimplemented, "the daemon's keychains are deleted over D-Bus")
        }
        file.lock()
        Keychain.removeFiles(at: file.path)
        defaultKeychain.withLock { if $0 == keychain { $0 = nil } }
    }
}
