import FoundationEssentials
import KeychainCore
import KeychainStore
import Pinentry
import Posix

/// How a try of a login password under the wrong-password limit ended.
package enum LoginPasswordOutcome {
    /// The password was right.
    case accepted
    /// Refused without trying: this many seconds are left to wait.
    case notTried(waitSeconds: Int64)
    /// The attempt failed; `errSecAuthFailed` was counted as a wrong password.
    case failed(KeychainError)
}

/// Whose password a login unlock tries, which decides what it may do.
package enum LoginPasswordSource: Sendable {
    /// The password PAM verified, handed over by a login: it may create and re-key the login keychain, and
    /// earlier wrong passwords never make it wait.
    case verifiedByPAM
    /// A password from root (pam_latchkey's older request, or an administrator): it may create and re-key,
    /// under the wrong-password limit.
    case root
    /// A password from another process of the user: it only unlocks, under the limit.
    case userProcess

    var mayCreateOrRekey: Bool {
        switch self {
        case .verifiedByPAM, .root: true
        case .userProcess: false
        }
    }
}

/// How a login unlock ended.
package enum LoginUnlockOutcome {
    /// The login keychain was created with the password (first login).
    case created
    /// It was unlocked.
    case unlocked
    /// It was unlocked already.
    case alreadyUnlocked
    /// Not unlocked: why. With a wrong password the user was offered to re-key.
    case notUnlocked(LoginPasswordOutcome)
}

/// What the worker prepared from the previous password a re-key prompt was given.
private struct RekeyAnswer: Sendable {
    let change: PasswordChange
    let key: UnwrappedKeychainKey
}

extension UserLogin {
    /// Unlocks the login keychain with the login password, or creates it when there is none, deriving the
    /// key on the worker; `completion` runs on the serving thread. A wrong password means the login password
    /// changed without the keychain: for a login's password, the user is asked for the old one to re-key.
    ///
    /// Only a login's password may create the login keychain or offer to re-key it (see
    /// ``LoginPasswordSource``): a password from any other process of the user only unlocks. A lock made
    /// while the key is derived wins: the derived key is dropped. `holdingClients` marks an unlock at login, during
    /// which the faces hold their clients' requests (``isUnlockingAtLogin``).
    package func unlock(
        password secret: SharedSecret, from source: LoginPasswordSource, holdingClients: Bool = false,
        completion: @escaping (LoginUnlockOutcome) -> Void
    ) {
        if let login, !login.isLocked { return completion(.alreadyUnlocked) }
        guard login != nil || source.mayCreateOrRekey else {
            return completion(
                .notUnlocked(.failed(KeychainError(.noSuchKeychain, "there is no login keychain; a login creates it"))))
        }
        // A password PAM verified is never refused for earlier wrong ones.
        let limited = source != .verifiedByPAM
        let wait = limited ? (login?.keychain.passwordRetryWait() ?? 0) : 0
        guard wait == 0 else { return completion(.notUnlocked(.notTried(waitSeconds: wait))) }
        if holdingClients { unlocksAtLogin += 1 }
        let locksBefore = locksOfLogin
        let existing = login?.keychain
        let path = loginKeychainPath
        let kdf = configuration.kdf
        registry.offLoop(
            { () -> Result<LoginKeyDerivation, KeychainError> in
                do throws(KeychainError) {
                    if let existing {
                        return .success(
                            .unwrapped(
                                try secret.withUnsafeBytes { (password) throws(KeychainError) in
                                    try KeychainRegistry.unwrapKey(existing, typed: password, limited: limited)
                                }))
                    }
                    return .success(
                        .created(
                            try secret.withUnsafeBytes { (password) throws(KeychainError) in
                                try Self.createLoginKeychain(at: path, password: password, kdf)
                            }))
                } catch {
                    return .failure(error)
                }
            },
            then: { [self] result in
                if holdingClients { unlocksAtLogin -= 1 }
                // After the unlock is applied: a login's password also opens gnome-keyring's files.
                defer { if source == .verifiedByPAM, case .success = result { importGnomeKeyrings(password: secret) } }
                switch result {
                case .success(.created(let keychain)) where login == nil:
                    do throws(KeychainError) {
                        try registry.addLogin(keychain)
                    } catch {
                        return completion(.notUnlocked(.failed(error)))
                    }
                    if let created = login {
                        registry.announce(.created(created))
                        // Locked meanwhile (the last session closed): it stays locked.
                        if locksOfLogin != locksBefore { created.keychain.lock() }
                    }
                    completion(.created)
                case .success(.created):
                    // Another request created it first; this one's file cannot exist.
                    completion(.unlocked)
                case .success(.unwrapped(let key)):
                    if let login, login.isLocked, locksOfLogin == locksBefore {
                        login.keychain.unlock(with: key)
                        announceUnlocked()
                    }
                    completion(.unlocked)
                case .failure(let error) where error.retryAfterSeconds != nil:
                    completion(.notUnlocked(.notTried(waitSeconds: error.retryAfterSeconds ?? 0)))
                case .failure(let error):
                    if error.status == .authFailed {
                        if source.mayCreateOrRekey, let login = login?.keychain { askToRekey(login, to: secret) }
                    }
                    completion(.notUnlocked(.failed(error)))
                }
            })
    }

    /// What the worker derived for a login unlock.
    enum LoginKeyDerivation: Sendable {
        case unwrapped(UnwrappedKeychainKey)
        case created(Keychain)
    }

    /// Tells the faces the login keychain unlocked, and unlocks the collections its key wraps.
    func announceUnlocked(byTPMSlot: Bool = false) {
        guard let login else { return }
        registry.announce(.lockChanged(login))
        registry.unlockUnderLogin(among: registry.keychains)
        if !byTPMSlot { resealLoginTPMSlots(login.keychain) }
    }

    // MARK: Prompts

    /// Asks the user for the login password through pinentry until it unlocks the login keychain; then
    /// unlocks `waiting` (collections under the login key) and runs `completion` with whether the login
    /// keychain is unlocked, on the serving thread. Requests made while one is queued or showing share its
    /// pinentry; each answer's key is derived on the worker and applied by the serving thread, which then
    /// completes every request in the same turn (so no lock can come between the unlock and the answer).
    /// Withdraw the ticket when the requester leaves (`ticket`: a request's ticket it is a step of).
    @discardableResult
    package func promptForPassword(
        unlocking waiting: [HeldKeychain], ticket: PromptTicket? = nil, completion: @escaping (Bool) -> Void
    ) -> PromptTicket? {
        guard let keychain = login?.keychain else {
            completion(false)
            return nil
        }
        // A tpm2 slot with a PIN: the PIN is asked instead of the password (on the desktop); when the TPM cannot be used, the
        // password is asked after all, at once and under the same ticket (withdrawing it ends either prompt).
        // Never on a terminal: a program can type there (its own pseudo-terminal), and PIN guesses would push
        // the TPM towards its dictionary lockout uncounted; the password asked there counts as its attempt.
        let ticket = ticket ?? registry.newPromptTicket()
        // A fido2 slot a reachable security key holds: a touch (and the key's PIN) instead of the password; when
        // the key cannot be used, or the touch prompt is cancelled, the password is asked, saying why.
        if let (dialog, fellBack) = loginSecurityKeyDialog(
            keychain, place: ticket.place,
            fallback: { [self] reason in
                passwordPromptForLogin(
                    keychain, unlocking: waiting, notice: "The security key cannot be used: \(reason).",
                    ticket: ticket, showingNext: true, completion: completion)
            })
        {
            return registry.enqueuePrompt(dialog, ticket: ticket) { [self] accepted in
                if fellBack(accepted) { return }
                guard let held = login else { return completion(false) }
                // A request that joined another's touch prompt: that one asks for the password now (every touch
                // prompt that ends unaccepted does), and this one joins it rather than fail.
                if !accepted, held.isLocked {
                    passwordPromptForLogin(
                        keychain, unlocking: waiting, notice: nil, ticket: ticket, showingNext: true,
                        completion: completion)
                    return
                }
                guard !held.isLocked else { return completion(false) }
                registry.unlockUnderLogin(among: waiting)
                completion(true)
            }
        }
        if ticket.place?.isTerminal != true,
            let (dialog, fellBack) = loginPINDialog(
                keychain,
                fallback: { [self] reason in
                    passwordPromptForLogin(
                        keychain, unlocking: waiting, notice: "The PIN cannot be used: \(reason).", ticket: ticket,
                        showingNext: true, completion: completion)
                })
        {
            return registry.enqueuePrompt(dialog, ticket: ticket) { [self] accepted in
                if fellBack(accepted) { return }
                guard let held = login, !held.isLocked else { return completion(false) }
                registry.unlockUnderLogin(among: waiting)
                completion(true)
            }
        }
        return passwordPromptForLogin(keychain, unlocking: waiting, notice: nil, ticket: ticket, completion: completion)
    }

    /// The password prompt of ``promptForPassword(unlocking:ticket:completion:)`` (`notice`: why the PIN or the
    /// security key was not used, as a sentence). The login keychain's recovery key is accepted in place of the password.
    @discardableResult
    private func passwordPromptForLogin(
        _ keychain: Keychain, unlocking waiting: [HeldKeychain], notice: String?, ticket: PromptTicket,
        showingNext: Bool = false, completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use your login keychain.\nEnter your login password to unlock it.",
            prompt: "Password:", error: notice, okLabel: "Unlock")
        let onTerminal = ticket.place?.isTerminal == true
        let dialog = PromptDialog(
            sharingKey: "unlock-login", tries: 5, retryMessage: "The password was not correct. Try again.",
            ask: { pinentry, error, cancellation in
                KeychainRegistry.askOne(pinentry, request, error ?? request.error, cancellation)
            },
            attempt: KeychainRegistry.attempt { (password) throws(KeychainError) in
                // On a terminal the program that asked may hold it: counted as a program's attempt.
                try KeychainRegistry.unwrapKey(keychain, typed: password, inPrompt: !onTerminal)
            },
            apply: applyingLoginKey(to: keychain),
            isSatisfied: { [self] in login?.isLocked == false })
        return registry.enqueuePrompt(dialog, ticket: ticket, showingNext: showingNext) { [self] _ in
            guard let held = login, !held.isLocked else { return completion(false) }
            registry.unlockUnderLogin(among: waiting)
            completion(true)
        }
    }

    /// A login prompt's apply step (the password's or the PIN's): unlocks the login keychain with the key
    /// derived on the worker, if it is still `keychain` and still locked, and announces it.
    func applyingLoginKey(to keychain: Keychain) -> (UnwrappedKeychainKey) -> Void {
        { [self] key in
            guard let held = login, held.keychain === keychain, held.isLocked else { return }
            held.keychain.unlock(with: key)
            registry.announce(.lockChanged(held))
            resealLoginTPMSlots(held.keychain)
        }
    }

    /// Asks, through pinentry, for the keychain's previous password, and re-keys the login keychain to
    /// `loginPassword` with it (one such prompt at a time: a second request joins the first).
    private func askToRekey(_ login: Keychain, to loginPassword: SharedSecret) {
        let request = PinentryRequest(
            title: "Login Keychain",
            description:
                "Your login password no longer unlocks your login keychain: it was changed without the keychain."
                + "\nEnter the keychain's previous password to re-key it to your login password.",
            prompt: "Previous password:", error: nil, okLabel: "Re-key")
        let dialog = PromptDialog(
            sharingKey: "rekey-login", tries: 3,
            retryMessage: "That password does not unlock the keychain either. Try again.",
            ask: { pinentry, error, cancellation in KeychainRegistry.askOne(pinentry, request, error, cancellation) },
            attempt: KeychainRegistry.attempt { (old) throws(KeychainError) in
                let key = try login.unwrapKey(password: old, limited: false, counted: false)
                let change = try loginPassword.withUnsafeBytes { (new) throws(KeychainError) in
                    try login.rewrap(from: old, to: new, limited: false, counted: false)
                }
                return RekeyAnswer(change: change, key: key)
            },
            apply: { [self] answer in
                guard let held = self.login, held.keychain === login else { return }
                do throws(KeychainError) {
                    try login.commit(answer.change)
                } catch {
                    return
                }
                registry.scheduleCheckpoint(login.path)
                if held.isLocked {
                    login.unlock(with: answer.key)
                    announceUnlocked()
                }
            },
            isSatisfied: { false })
        _ = registry.enqueuePrompt(dialog) { _ in }
    }
}
