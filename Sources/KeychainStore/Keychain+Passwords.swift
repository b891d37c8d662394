import FoundationEssentials
import KeychainCore
import Posix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

extension Keychain {
    /// Derives the keychain key from `password` without unlocking: the slow half of an unlock (scrypt),
    /// which a daemon runs off its serving thread before applying the result with ``unlock(with:)``.
    ///
    /// `limited` false: not refused for earlier wrong passwords (a password a login verified); `counted` false:
    /// neither refused for the count nor counted in it, nor clearing it (what the person types into the daemon's
    /// own prompt: the count is the programs' one, see `PasswordAttempts`).
    ///
    /// - Throws: `errSecAuthFailed` if the password is wrong.
    public func unwrapKey(password: some Collection<UInt8>, limited: Bool = true, counted: Bool = true)
        throws(KeychainError) -> UnwrappedKeychainKey
    {
        let header = try currentHeader()
        let key = try countingAttempt(limited: limited, counted: counted) { () throws(KeychainError) in
            try header.unwrap(password: password)
        }
        return UnwrappedKeychainKey(key: key, keychain: identifier)
    }

    /// The header as the file holds it now, read again: another process (pam_latchkey re-keying the file
    /// while no daemon ran, the command) may have changed the password since this keychain was opened.
    func currentHeader() throws(KeychainError) -> KeychainHeader {
        guard path != ":memory:" else { return state.withLock { $0.header } }
        return try state.withLock { (state) throws(KeychainError) in
            let stored = try KeychainHeader.load(from: state.db)
            guard stored.identifier == state.header.identifier else {
                throw KeychainError(.invalidKeychain, "\(path) was replaced by another keychain")
            }
            state.header = stored
            return stored
        }
    }

    /// Seconds before a password may be tried again after too many wrong ones, 0 when it may be now.
    public func passwordRetryWait() -> Int64 {
        (try? storedAttempts().secondsToWait()) ?? 0
    }

    /// Tries a password with `attempt` under the wrong-password count kept in the file (see
    /// `PasswordAttempts`): refused without trying while too many wrong ones came lately (unless
    /// `limited` is false: a password a login verified), counted when wrong, resetting the count when right;
    /// outside the count altogether when `counted` is false (the person, in the daemon's own prompt).
    /// `resetsCount` false: a right answer leaves the count as it is (an item's own password, which is not the
    /// keychain's).
    private func countingAttempt<Result>(
        limited: Bool, counted: Bool = true, resetsCount: Bool = true, _ attempt: () throws(KeychainError) -> Result
    ) throws(KeychainError) -> Result {
        guard counted else { return try attempt() }
        let attempts = (try? storedAttempts()) ?? PasswordAttempts()
        let wait = attempts.secondsToWait()
        if limited, wait > 0 { throw .tooManyAttempts(waitSeconds: wait) }
        do {
            let result = try attempt()
            if resetsCount, attempts.failures > 0 { try? storeAttempts(PasswordAttempts()) }
            return result
        } catch  where error.status == .authFailed {
            var counted = attempts
            counted.failures = counted.failures == .max ? .max : counted.failures + 1
            counted.lastFailure = Int64(time(nil))
            try? storeAttempts(counted)
            throw error
        }
    }

    /// Opens the secret of `item`, an item with a password of its own (``ItemPasswordEnvelope``), with the
    /// password typed for it, under this keychain's wrong-password count: refused while too many wrong passwords
    /// came lately, a wrong one counted. A right one does not reset the count: a program that knows the password
    /// of an item it made itself must not clear the count of guesses at the keychain's password. Slow (one
    /// scrypt): run it off the serving thread.
    package func openItemSecret(_ envelope: Data, password: UnsafeRawBufferPointer, item: ItemReference)
        throws(KeychainError) -> OpenedItemSecret
    {
        try countingAttempt(limited: true, resetsCount: false) { () throws(KeychainError) in
            var key: ItemPasswordKey?
            let secret = SharedSecret(
                try ItemPasswordEnvelope.open(envelope, password: password, item: item) { key = $0 })
            guard let key else { throw KeychainError(.internalComponent, "an opened envelope left no key") }
            return OpenedItemSecret(secret: secret, key: key)
        }
    }

    private func storedAttempts() throws(KeychainError) -> PasswordAttempts {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement("SELECT value FROM meta WHERE name = \(PasswordAttempts.rowName)") {
                (select) throws(KeychainError) in
                return try select.step() ? PasswordAttempts(stored: select.data(0) ?? Data()) : PasswordAttempts()
            }
        }
    }

    private func storeAttempts(_ attempts: PasswordAttempts) throws(KeychainError) {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.setMetaRow(PasswordAttempts.rowName, attempts.encoded)
        }
    }

    /// Re-wraps the keychain key under `newPassword`. Items are not
    /// re-encrypted, so this takes the same time for any number of items.
    /// Works whether the keychain is locked or not, and leaves the lock state as it was.
    ///
    /// - Throws: `errSecAuthFailed` if `oldPassword` is wrong; nothing changes.
    public func changePassword(
        from oldPassword: some Collection<UInt8>, to newPassword: some Collection<UInt8>,
        kdf: KDFParameters? = nil, limited: Bool = true
    ) throws(KeychainError) {
        let change = try rewrap(from: oldPassword, to: newPassword, kdf: kdf, limited: limited)
        try commit(change)
        try waitForEmptyLog(milliseconds: 30_000)
    }

    /// Wraps the keychain key under `newPassword` without saving it: the slow half of a password change
    /// (two scrypt runs), which a daemon runs off its serving thread before ``commit(_:)``. `limited` and
    /// `counted` as for ``unwrapKey(password:limited:counted:)``.
    ///
    /// - Throws: `errSecAuthFailed` if `oldPassword` is wrong.
    public func rewrap(
        from oldPassword: some Collection<UInt8>, to newPassword: some Collection<UInt8>, kdf: KDFParameters? = nil,
        limited: Bool = true, counted: Bool = true
    ) throws(KeychainError) -> PasswordChange {
        let current = try currentHeader()
        var header = current
        let key = try countingAttempt(limited: limited, counted: counted) { () throws(KeychainError) in
            try header.unwrap(password: oldPassword)
        }
        try header.wrap(key, password: newPassword, kdf: kdf ?? header.kdf?.raisedToProduction ?? .production)
        return PasswordChange(header: header, replacing: current.wrappedKey)
    }

    /// Derives this keychain's key from the key of the keychain whose key wraps it (``parentIdentifier``),
    /// without unlocking: how a keychain wrapped by the login keychain's key is opened by the login password.
    ///
    /// - Throws: `errSecAuthFailed` if `parentKey` is not the key of this keychain's parent.
    public func unwrapKey(using parentKey: UnwrappedKeychainKey) throws(KeychainError) -> UnwrappedKeychainKey {
        guard let parent = parentIdentifier, parent == parentKey.keychain else {
            throw KeychainError(.authFailed, "this keychain is not wrapped by the keychain given")
        }
        let header = try currentHeader()
        return UnwrappedKeychainKey(key: try header.unwrap(with: parentKey.key), keychain: identifier)
    }

    /// Wraps this keychain's key (derived by ``unwrapKey(password:limited:counted:)`` or ``unwrapKey(using:)``) under
    /// `newPassword`, without saving it: a keychain wrapped by a parent's key gets a password of its own, one
    /// with a password gets a new one. Slow (scrypt); save it with ``commit(_:)``.
    ///
    /// - Throws: `errSecAuthFailed` if `key` is not this keychain's key.
    public func rewrap(
        _ key: UnwrappedKeychainKey, to newPassword: some Collection<UInt8>, kdf: KDFParameters? = nil
    ) throws(KeychainError) -> PasswordChange {
        guard key.keychain == identifier else {
            throw KeychainError(.authFailed, "the key given is not this keychain's")
        }
        let current = try currentHeader()
        var header = current
        try header.wrap(key.key, password: newPassword, kdf: kdf ?? header.kdf?.raisedToProduction ?? .production)
        return PasswordChange(header: header, replacing: current.wrappedKey)
    }

    /// Saves a password change made by ``rewrap(from:to:kdf:)`` (one short transaction). The old wrapped
    /// key may remain in the write-ahead log until ``checkpoint(at:waitMilliseconds:)`` completes.
    ///
    /// - Throws: `errSecAuthFailed` if the password changed meanwhile; nothing changes.
    public func commit(_ change: PasswordChange) throws(KeychainError) {
        try state.withLock { (state) throws(KeychainError) in
            // Compared with the file, not with what this process last read: another process may have changed it.
            let stored = path == ":memory:" ? state.header : try KeychainHeader.load(from: state.db)
            guard stored.wrappedKey == change.replacing, stored.identifier == change.header.identifier
            else { throw KeychainError(.authFailed, "the keychain's password changed meanwhile; nothing changed") }
            let db = state.db
            try db.transaction { () throws(KeychainError) in try change.header.save(to: db) }
            state.header = change.header
        }
    }

    /// Changes the password given as UTF-8 text.
    public func changePassword(from oldPassword: String, to newPassword: String) throws(KeychainError) {
        try changePassword(from: Array(oldPassword.utf8), to: Array(newPassword.utf8))
    }
}

/// A keychain key derived from a password, not yet installed: see ``Keychain/unwrapKey(password:)``. Its
/// memory is wiped when the last copy goes.
public struct UnwrappedKeychainKey: Sendable {
    let key: SecretKey
    let keychain: Data
}

/// A password change prepared by ``Keychain/rewrap(from:to:kdf:)``, to be saved by ``Keychain/commit(_:)``.
public struct PasswordChange: Sendable {
    let header: KeychainHeader
    /// The wrapped key it replaces: a commit after another change is refused.
    let replacing: Data
}
