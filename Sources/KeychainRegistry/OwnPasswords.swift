import FoundationEssentials
import KeychainCore
import KeychainStore
import Pinentry
import Posix

/// Keychains with a password of their own, beside those the login keychain's key wraps: made with one
/// (gnome-keyring's `CreateWithMasterPassword`), given one (a password change of a collection under the login
/// key), unlocked with one, and changed by prompt. Every key derivation runs off the serving thread: on the
/// worker for passwords a client sent, on a prompt's own thread for passwords typed into pinentry.
extension KeychainRegistry {
    /// Creates a keychain labelled `label` with `password` as its own password (scrypt on the worker); it is
    /// announced and given to `completion` unlocked, on the serving thread.
    package func createKeychain(
        label: String, password secret: SharedSecret, pathElement: (String) -> String,
        completion: @escaping (Result<HeldKeychain, KeychainError>) -> Void
    ) {
        let id = newKeychainID(label: label, pathElement: pathElement)
        reservedKeychainIDs.insert(id)
        let path = configuration.keychainDirectory + "/\(id).keychain-db"
        let kdf = configuration.kdf
        offLoop(
            { () -> Result<Keychain, KeychainError> in
                do throws(KeychainError) {
                    let keychain = try secret.withUnsafeBytes { (bytes) throws(KeychainError) in
                        try Keychain.create(at: path, password: bytes, kdf: kdf)
                    }
                    try keychain.limitMemory(to: .lean)
                    try keychain.setMetadata("label", Data(label.utf8))
                    try keychain.setMetadata("created", Data(String(UInt64(Date().timeIntervalSince1970)).utf8))
                    return .success(keychain)
                } catch {
                    Keychain.removeFiles(at: path)
                    return .failure(error)
                }
            },
            then: { [self] result in
                reservedKeychainIDs.remove(id)
                completion(
                    result.map { keychain in
                        let created = HeldKeychain(id: id, keychain: keychain, unlocking: .ownPassword, label: label)
                        keychains.append(created)
                        announce(.created(created))
                        return created
                    })
            })
    }

    /// Unlocks `held` with `password`, the password that opens it: its own, or the login password for the
    /// login keychain and the keychains its key wraps (then the login keychain unlocks too, as a password a
    /// process of the user sent: under the wrong-password limit, never creating or re-keying it).
    package func unlock(
        _ held: HeldKeychain, password secret: SharedSecret, completion: @escaping (LoginPasswordOutcome) -> Void
    ) {
        switch held.unlocking {
        case .heldPassword:
            completion(unlockWithoutPassword(held) ? .accepted : .failed(KeychainError(.authFailed, "")))
        case .loginPassword, .loginKey:
            unlockLogin(password: secret, from: .userProcess) { [self] outcome in
                switch outcome {
                case .created, .unlocked, .alreadyUnlocked:
                    guard unlockWithoutPassword(held) else {
                        return completion(.failed(KeychainError(.authFailed, "the keychain did not open")))
                    }
                    completion(.accepted)
                case .notUnlocked(let why): completion(why)
                }
            }
        case .ownPassword:
            guard held.isLocked else { return completion(.accepted) }
            let wait = held.keychain.passwordRetryWait()
            guard wait == 0 else { return completion(.notTried(waitSeconds: wait)) }
            let keychain = held.keychain
            let locksBefore = held.locks
            offLoop(
                { () -> Result<UnwrappedKeychainKey, KeychainError> in
                    do throws(KeychainError) {
                        return .success(
                            try secret.withUnsafeBytes { (bytes) throws(KeychainError) in
                                try keychain.unwrapKey(password: bytes)
                            })
                    } catch {
                        return .failure(error)
                    }
                },
                then: { [self] result in
                    switch result {
                    case .success(let key):
                        // Locked meanwhile: the lock wins, as for the login keychain, and the caller is told.
                        guard held.locks == locksBefore else {
                            return completion(
                                .failed(KeychainError(.interactionNotAllowed, "the keychain was locked meanwhile")))
                        }
                        applyUnlock(held, key)
                        completion(.accepted)
                    case .failure(let error):
                        if let wait = error.retryAfterSeconds { return completion(.notTried(waitSeconds: wait)) }
                        completion(.failed(error))
                    }
                })
        }
    }

    /// Changes the password of `held` from `original` to `new` (on the worker, under the wrong-password limit).
    /// The login keychain and a keychain with its own password change theirs; a keychain under the login key
    /// takes the login password as `original` and gets `new` as a password of its own, no longer opening
    /// with the login keychain. The session collection has no password (`errSecParam`).
    package func changePassword(
        of held: HeldKeychain, original oldSecret: SharedSecret, to newSecret: SharedSecret,
        completion: @escaping (LoginPasswordOutcome) -> Void
    ) {
        switch held.unlocking {
        case .heldPassword:
            completion(.failed(KeychainError.param("the session collection is in memory and has no password")))
        case .loginPassword, .ownPassword:
            changePassword(of: held, from: oldSecret, to: newSecret, completion: completion)
        case .loginKey:
            guard let login = login?.keychain else {
                return completion(.failed(KeychainError(.noSuchKeychain, "there is no login keychain")))
            }
            let wait = login.passwordRetryWait()
            guard wait == 0 else { return completion(.notTried(waitSeconds: wait)) }
            let keychain = held.keychain
            let kdf = configuration.kdf
            offLoop(
                { () -> Result<PasswordChange, KeychainError> in
                    do throws(KeychainError) {
                        let loginKey = try oldSecret.withUnsafeBytes { (old) throws(KeychainError) in
                            try login.unwrapKey(password: old)
                        }
                        let key = try keychain.unwrapKey(using: loginKey)
                        return .success(
                            try newSecret.withUnsafeBytes { (new) throws(KeychainError) in
                                try keychain.rewrap(key, to: new, kdf: kdf)
                            })
                    } catch {
                        return .failure(error)
                    }
                },
                then: { [self] result in
                    do throws(KeychainError) {
                        try commitOwnPassword(held, try result.get())
                    } catch {
                        if let wait = error.retryAfterSeconds { return completion(.notTried(waitSeconds: wait)) }
                        return completion(.failed(error))
                    }
                    completion(.accepted)
                })
        }
    }

    /// Saves a change that gives `held` a (new) password of its own, and empties the log of the old wrapping.
    private func commitOwnPassword(_ held: HeldKeychain, _ change: PasswordChange) throws(KeychainError) {
        try held.keychain.commit(change)
        if case .loginKey = held.unlocking { held.unlocking = .ownPassword }
        scheduleCheckpoint(held.keychain.path)
    }

    /// Installs a key derived off the serving thread, if `held` is still locked, and announces it.
    private func applyUnlock(_ held: HeldKeychain, _ key: UnwrappedKeychainKey) {
        guard held.isLocked, keychains.contains(where: { $0 === held }) else { return }
        held.keychain.unlock(with: key)
        if held.id == Self.loginID { announceLoginUnlocked() } else { announce(.lockChanged(held)) }
    }

    // MARK: Prompts

    /// Asks, through pinentry on a thread of its own, for the current password of `held` (the login password
    /// for a keychain under the login key) and then for a new one, twice; saves the change and unlocks `held`
    /// on the serving thread. `completion` gets whether the password changed.
    package func promptToChangePassword(of held: HeldKeychain, completion: @escaping (Bool) -> Void) {
        let login = login?.keychain
        let keychain = held.keychain
        let underLogin: Bool
        switch held.unlocking {
        case .heldPassword: return completion(false)
        case .loginKey: underLogin = true
        case .loginPassword, .ownPassword: underLogin = false
        }
        if underLogin, login == nil { return completion(false) }
        let pinentry = configuration.pinentry
        let label = held.label.isEmpty ? held.id : held.label
        let kdf: KDFParameters? = underLogin ? configuration.kdf : nil
        let locksBefore = held.locks
        offLoop(
            onOwnThread: true,
            { () -> PreparedPasswordChange? in
                let current: ((UnsafeRawBufferPointer) throws(KeychainError) -> UnwrappedKeychainKey) = {
                    (password) throws(KeychainError) in
                    guard underLogin, let login else { return try keychain.unwrapKey(password: password) }
                    return try keychain.unwrapKey(using: try login.unwrapKey(password: password))
                }
                guard let key = Self.askCurrentPassword(label, underLogin: underLogin, pinentry, current),
                    let new = Self.askNewPassword(label, pinentry),
                    let change = try? new.withUnsafeBytes({ (bytes) throws(KeychainError) in
                        try keychain.rewrap(key, to: bytes, kdf: kdf)
                    })
                else { return nil }
                return PreparedPasswordChange(change: change, key: key)
            },
            then: { [self] prepared in
                guard let prepared, keychains.contains(where: { $0 === held }) else { return completion(false) }
                do throws(KeychainError) {
                    try commitOwnPassword(held, prepared.change)
                } catch {
                    return completion(false)
                }
                if held.locks == locksBefore { applyUnlock(held, prepared.key) }
                completion(true)
            })
    }

    /// What a change-password prompt prepared off the serving thread: the re-wrapped key, and the key.
    struct PreparedPasswordChange: Sendable {
        let change: PasswordChange
        let key: UnwrappedKeychainKey
    }

    /// Asks for the current password until `derive` takes it (three tries); the keychain's key, or nil.
    private static func askCurrentPassword(
        _ label: String, underLogin: Bool, _ pinentry: Pinentry,
        _ derive: (UnsafeRawBufferPointer) throws(KeychainError) -> UnwrappedKeychainKey
    ) -> UnwrappedKeychainKey? {
        let request = PinentryRequest(
            title: "Change Keychain Password",
            description: "An application wants to change the password of the \u{201C}\(label)\u{201D} keychain.\n"
                + (underLogin
                    ? "It opens with your login keychain: enter your login password."
                    : "Enter its current password."),
            prompt: underLogin ? "Login password:" : "Current password:", error: nil, okLabel: "Continue")
        var key: UnwrappedKeychainKey?
        _ = askUntilAccepted(pinentry, request, tries: 3, retryMessage: "The password was not correct. Try again.") {
            (password) throws(KeychainError) in key = try derive(password)
        }
        return key
    }

    /// Asks for a new password and then for it again, until both match (three tries); nil when cancelled.
    private static func askNewPassword(_ label: String, _ pinentry: Pinentry) -> SharedSecret? {
        var request = PinentryRequest(
            title: "Change Keychain Password",
            description: "Choose a new password for the \u{201C}\(label)\u{201D} keychain.",
            prompt: "New password:", error: nil, okLabel: "Continue")
        for _ in 0..<3 {
            guard case .password(let first)? = try? pinentry.askPassword(request) else { return nil }
            var confirmation = request
            confirmation.description = "Enter the new password for the \u{201C}\(label)\u{201D} keychain again."
            confirmation.prompt = "Confirm:"
            confirmation.error = nil
            confirmation.okLabel = "Change Password"
            // Both answers are in secret memory, wiped when the last holder lets go.
            guard case .password(let second)? = try? pinentry.askPassword(confirmation) else { return nil }
            if first == second { return first }
            request.error = "The passwords did not match. Try again."
        }
        return nil
    }

    /// Unlocks `waiting` through prompts: the login password first when any of them opens with the login
    /// keychain (see ``promptForLoginPassword(unlocking:completion:)``), then each keychain with a password of
    /// its own, asked for in turn on a thread of its own (three tries each; a cancel stops the asking).
    /// `completion` gets whether every one of them is unlocked.
    /// The ticket is the login prompt's, when one is needed (withdrawing it ends that prompt); the prompts
    /// for keychains with a password of their own do not go through the prompt queue yet.
    @discardableResult
    package func promptForPasswords(
        unlocking waiting: [HeldKeychain], completion: @escaping (Bool) -> Void
    ) -> PromptTicket? {
        let ownPassword = waiting.filter {
            if case .ownPassword = $0.unlocking { return true }
            return false
        }
        let underLogin = waiting.filter { held in !ownPassword.contains { $0 === held } }
        let askOwn = { [self] in
            let locked = ownPassword.filter(\.isLocked)
            guard !locked.isEmpty else { return completion(waiting.allSatisfy { !$0.isLocked }) }
            let asked = locked.map { (keychain: $0.keychain, label: $0.label.isEmpty ? $0.id : $0.label) }
            let locksBefore = locked.map(\.locks)
            let pinentry = configuration.pinentry
            offLoop(
                onOwnThread: true,
                { () -> [UnwrappedKeychainKey?] in
                    var keys: [UnwrappedKeychainKey?] = []
                    for (keychain, label) in asked {
                        let key = Self.askOwnPassword(keychain, label, pinentry)
                        keys.append(key)
                        if key == nil { break }
                    }
                    return keys
                },
                then: { [self] keys in
                    for ((held, before), key) in zip(zip(locked, locksBefore), keys) where held.locks == before {
                        if let key { applyUnlock(held, key) }
                    }
                    completion(waiting.allSatisfy { !$0.isLocked })
                })
        }
        guard !underLogin.isEmpty, underLogin.contains(where: \.isLocked) else {
            askOwn()
            return nil
        }
        return promptForLoginPassword(unlocking: underLogin) { unlocked in
            guard unlocked else { return completion(false) }
            askOwn()
        }
    }

    private static func askOwnPassword(_ keychain: Keychain, _ label: String, _ pinentry: Pinentry)
        -> UnwrappedKeychainKey?
    {
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use the \u{201C}\(label)\u{201D} keychain.\n"
                + "Enter its password to unlock it.",
            prompt: "Password:", error: nil, okLabel: "Unlock")
        var key: UnwrappedKeychainKey?
        _ = askUntilAccepted(pinentry, request, tries: 3, retryMessage: "The password was not correct. Try again.") {
            (password) throws(KeychainError) in key = try keychain.unwrapKey(password: password)
        }
        return key
    }
}
