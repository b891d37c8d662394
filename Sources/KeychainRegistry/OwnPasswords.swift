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
        let path = KeychainLocation.keychainPath(id: id, inDirectory: configuration.keychainDirectory)
        let kdf = configuration.kdf
        offLoop(
            { () -> Result<Keychain, KeychainError> in
                do throws(KeychainError) {
                    let keychain = try secret.withUnsafeBytes { (bytes) throws(KeychainError) in
                        try Keychain.create(at: path, password: bytes, kdf: kdf)
                    }
                    try keychain.limitMemory(to: .lean)
                    try keychain.recordCreation(label: label)
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
                        let created = HeldKeychain(
                            id: id, keychain: keychain, unlocking: .ownPassword, label: label,
                            clock: configuration.clock)
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
            userLogin.unlock(password: secret, from: .userProcess) { [self] outcome in
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
                                try Self.unwrapKey(keychain, typed: bytes)
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
        if held.id == Self.loginID { userLogin.announceUnlocked() } else { announce(.lockChanged(held)) }
    }

    // MARK: Prompts

    /// Asks, through the prompt queue, for the current password of `held` (the login password for a keychain
    /// under the login key; three tries) and then for a new one, twice, in a second prompt shown next. The
    /// current password is checked and the key re-wrapped (scrypt) on the worker; the change is saved and
    /// `held` unlocked (unless it was locked meanwhile) on the serving thread. `completion` gets whether the
    /// password changed; withdrawing the ticket ends whichever of the two prompts is queued or showing.
    /// `parentWindow` (a client's window id, above zero) parents both prompts.
    @discardableResult
    package func promptToChangePassword(
        of held: HeldKeychain, parentWindow: Int64? = nil, completion: @escaping (Bool) -> Void
    ) -> PromptTicket? {
        let underLogin: Bool
        switch held.unlocking {
        case .heldPassword:
            completion(false)
            return nil
        case .loginKey: underLogin = true
        case .loginPassword, .ownPassword: underLogin = false
        }
        let login = login?.keychain
        if underLogin, login == nil {
            completion(false)
            return nil
        }
        let keychain = held.keychain
        let label = PromptText.field(held.label.isEmpty ? held.id : held.label)
        let request = PinentryRequest(
            title: "Change Keychain Password",
            description: "An application wants to change the password of the \u{201C}\(label)\u{201D} keychain.\n"
                + (underLogin
                    ? "It opens with your login keychain: enter your login password."
                    : "Enter its current password."),
            prompt: underLogin ? "Login password:" : "Current password:", error: nil, okLabel: "Continue")
        let change = PasswordChangeInProgress(locksBefore: held.locks)
        let ticket = newPromptTicket()
        ticket.parentWindow = parentWindow
        // Typed on a terminal, which the program that asked may hold: counted as a program's attempt.
        let onTerminal = ticket.place?.isTerminal == true
        let current = PromptDialog(
            sharingKey: nil, tries: 3, retryMessage: "The password was not correct. Try again.",
            ask: { pinentry, error, cancellation in Self.askOne(pinentry, request, error, cancellation) },
            attempt: Self.attempt { (password) throws(KeychainError) in
                // Typed into the daemon's own prompt: outside the programs' wrong-password count, unless on a terminal.
                guard underLogin, let login else {
                    return try keychain.unwrapKey(password: password, limited: onTerminal, counted: onTerminal)
                }
                return try keychain.unwrapKey(
                    using: try login.unwrapKey(password: password, limited: onTerminal, counted: onTerminal))
            },
            apply: { key in change.key = key },
            isSatisfied: { false })
        _ = enqueuePrompt(current, ticket: ticket) { [self] accepted in
            guard accepted, let key = change.key else { return completion(false) }
            _ = enqueuePrompt(
                newPasswordDialog(for: held, label: label, key: key, underLogin: underLogin, change), ticket: ticket,
                showingNext: true
            ) { accepted in completion(accepted && change.isCommitted) }
        }
        return ticket
    }

    /// The second prompt of a password change: the new password with its confirmation; re-wrapped with `key` on
    /// the worker, saved on the serving thread.
    private func newPasswordDialog(
        for held: HeldKeychain, label: String, key: UnwrappedKeychainKey, underLogin: Bool,
        _ change: PasswordChangeInProgress
    ) -> PromptDialog<PasswordChange> {
        let keychain = held.keychain
        // A keychain leaving the login key gets the scrypt cost of a new keychain; the others keep theirs.
        let kdf: KDFParameters? = underLogin ? configuration.kdf : nil
        return PromptDialog(
            sharingKey: nil, tries: 1, retryMessage: "",
            ask: { pinentry, _, cancellation in Self.askNewPassword(label, pinentry, cancellation).map { [$0] } },
            attempt: Self.attempt { (new) throws(KeychainError) in try keychain.rewrap(key, to: new, kdf: kdf) },
            apply: { [self] rewrapped in
                guard keychains.contains(where: { $0 === held }) else { return }
                do throws(KeychainError) {
                    try commitOwnPassword(held, rewrapped)
                } catch {
                    return
                }
                change.isCommitted = true
                // Locked since the change was asked for: the lock stands.
                if held.locks == change.locksBefore { applyUnlock(held, key) }
            },
            isSatisfied: { false })
    }

    /// Asks for a new password for the keychain labelled `label`, with its confirmation
    /// (``askNewPassword(_:again:pinentry:cancellation:)``); nil when cancelled or when no pinentry could ask.
    private static func askNewPassword(
        _ label: String, _ pinentry: Pinentry, _ cancellation: PinentryCancellation
    ) -> SharedSecret? {
        let request = PinentryRequest(
            title: "Change Keychain Password",
            description: "Choose a new password for the \u{201C}\(label)\u{201D} keychain.",
            prompt: "New password:", error: nil, okLabel: "Change Password")
        return try? askNewPassword(
            request, again: "Enter the new password for the \u{201C}\(label)\u{201D} keychain again.",
            pinentry: pinentry,
            cancellation: cancellation)
    }

    /// Unlocks `waiting` through the prompt queue: the login password first when any of them opens with the
    /// login keychain (see ``UserLogin/promptForPassword(unlocking:ticket:completion:)``), then each keychain with
    /// a password of its own in turn (three tries each; a cancel stops the asking). Concurrent requests for
    /// the same keychain share its prompt; each answer is tried on the worker and its key installed on the
    /// serving thread. `completion` gets whether every prompt was answered (or found its keychain unlocked
    /// already); withdrawing the ticket ends whichever prompt of the request is queued or showing.
    /// `parentWindow` (a client's window id, above zero) parents the prompts this request starts.
    @discardableResult
    package func promptForPasswords(
        unlocking waiting: [HeldKeychain], parentWindow: Int64? = nil, completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        let ticket = newPromptTicket()
        ticket.parentWindow = parentWindow
        let ownPassword = waiting.filter {
            if case .ownPassword = $0.unlocking { return true }
            return false
        }
        let underLogin = waiting.filter { held in !ownPassword.contains { $0 === held } }
        // After the request's first prompt, each of its next ones shows before prompts asked for later.
        func askOwn(_ remaining: ArraySlice<HeldKeychain>, showingNext: Bool) {
            guard let held = remaining.first else { return completion(true) }
            let next = { (accepted: Bool) in
                guard accepted else { return completion(false) }
                askOwn(remaining.dropFirst(), showingNext: true)
            }
            let askPassword = { [self] (notice: String?, showingNext: Bool) in
                _ = enqueuePrompt(
                    ownPasswordDialog(held, onTerminal: ticket.place?.isTerminal == true, notice: notice),
                    ticket: ticket, showingNext: showingNext, completion: next)
            }
            // A fido2 slot a reachable security key holds: its touch first, the password when it cannot be used.
            let dialog = ownPasswordDialog(held, onTerminal: false, notice: nil)
            if let (touch, fellBack) = securityKeyDialog(
                held.keychain, named: "the \u{201C}\(ownLabel(held))\u{201D} keychain",
                sharingKey: dialog.sharingKey ?? "", place: ticket.place, apply: dialog.apply,
                isSatisfied: dialog.isSatisfied,
                fallback: { reason in askPassword("The security key cannot be used: \(reason).", true) })
            {
                _ = enqueuePrompt(touch, ticket: ticket, showingNext: showingNext) { accepted in
                    if fellBack(accepted) { return }
                    // A request that joined another's touch prompt: that one asks for the password now, and this
                    // one joins it rather than fail.
                    if !accepted, held.isLocked { return askPassword(nil, true) }
                    next(accepted)
                }
                return
            }
            askPassword(nil, showingNext)
        }
        guard !underLogin.isEmpty, underLogin.contains(where: \.isLocked) else {
            askOwn(ownPassword[...], showingNext: false)
            return ticket
        }
        _ = userLogin.promptForPassword(unlocking: underLogin, ticket: ticket) { unlocked in
            guard unlocked else { return completion(false) }
            askOwn(ownPassword[...], showingNext: true)
        }
        return ticket
    }

    /// The prompt for the password of a keychain with a password of its own, shared by the requests for it.
    /// `onTerminal`: shown on a terminal, where the answers count as a program's attempts (``PromptPlace/isTerminal``);
    /// `notice`: why its security key was not used, as a sentence.
    private func ownPasswordDialog(_ held: HeldKeychain, onTerminal: Bool, notice: String?)
        -> PromptDialog<UnwrappedKeychainKey>
    {
        let keychain = held.keychain
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use the \u{201C}\(ownLabel(held))\u{201D} keychain.\n"
                + "Enter its password to unlock it.",
            prompt: "Password:", error: notice, okLabel: "Unlock")
        return PromptDialog(
            // The object, not its id: a keychain deleted and made again under the same id is another one.
            sharingKey: "unlock-own:\(ObjectIdentifier(held).hashValue)", tries: 3,
            retryMessage: "The password was not correct. Try again.",
            ask: { pinentry, error, cancellation in Self.askOne(pinentry, request, error ?? request.error, cancellation)
            },
            attempt: Self.attempt { (password) throws(KeychainError) in
                try Self.unwrapKey(keychain, typed: password, inPrompt: !onTerminal)
            },
            // Installed even when locked while the person typed: the answer was right and is delivered now.
            apply: { [self] key in applyUnlock(held, key) },
            isSatisfied: { [self] in !held.isLocked || !keychains.contains { $0 === held } })
    }

    /// A keychain's name as its prompts show it: its label, else its id.
    private func ownLabel(_ held: HeldKeychain) -> String {
        PromptText.field(held.label.isEmpty ? held.id : held.label)
    }
}

/// A password change between its two prompts, on the serving thread: the key the current password opened,
/// and whether the new one was saved.
private final class PasswordChangeInProgress {
    let locksBefore: Int
    var key: UnwrappedKeychainKey?
    var isCommitted = false

    init(locksBefore: Int) {
        self.locksBefore = locksBefore
    }
}
