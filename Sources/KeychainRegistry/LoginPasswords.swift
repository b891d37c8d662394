import FoundationEssentials
import GnomeKeyringImport
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

extension KeychainRegistry {
    /// Unlocks the login keychain with the login password, or creates it when there is none, deriving the
    /// key on the worker; `completion` runs on the serving thread. A wrong password means the login password
    /// changed without the keychain: for a login's password, the user is asked for the old one to re-key.
    ///
    /// Only a login's password may create the login keychain or offer to re-key it (see
    /// ``LoginPasswordSource``): a password from any other process of the user only unlocks. A lock made
    /// while the key is derived wins: the derived key is dropped. `holdingClients` marks an unlock at login, during
    /// which the faces hold their clients' requests (``isUnlockingAtLogin``).
    package func unlockLogin(
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
        offLoop(
            { () -> Result<LoginKeyDerivation, KeychainError> in
                do throws(KeychainError) {
                    if let existing {
                        return .success(
                            .unwrapped(
                                try secret.withUnsafeBytes { (password) throws(KeychainError) in
                                    try Self.unwrapKey(existing, typed: password, limited: limited)
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
                        try addLogin(keychain)
                    } catch {
                        return completion(.notUnlocked(.failed(error)))
                    }
                    if let created = login {
                        announce(.created(created))
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
                        announceLoginUnlocked()
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

    /// Changes the password of `held` (which must open with a password) from `old` to `new`, under the
    /// wrong-password limit; the key is re-wrapped on the worker, saved on the serving thread, and the
    /// write-ahead log emptied of the old wrapped key on the worker, retried until it can be; `completion`
    /// runs once it is.
    ///
    /// A change a login asked for (`passwd` through pam_latchkey: PAM verified the old password) is never
    /// refused for earlier wrong passwords (`limited` false).
    package func changePassword(
        of held: HeldKeychain, from oldSecret: SharedSecret, to newSecret: SharedSecret, limited: Bool = true,
        completion: @escaping (LoginPasswordOutcome) -> Void
    ) {
        let wait = limited ? held.keychain.passwordRetryWait() : 0
        guard wait == 0 else { return completion(.notTried(waitSeconds: wait)) }
        let keychain = held.keychain
        offLoop(
            { () -> Result<PasswordChange, KeychainError> in
                do throws(KeychainError) {
                    return .success(
                        try oldSecret.withUnsafeBytes { (old) throws(KeychainError) in
                            try newSecret.withUnsafeBytes { (new) throws(KeychainError) in
                                try keychain.rewrap(from: old, to: new, limited: limited)
                            }
                        })
                } catch {
                    return .failure(error)
                }
            },
            then: { [self] result in
                do throws(KeychainError) {
                    try keychain.commit(try result.get())
                } catch {
                    if let wait = error.retryAfterSeconds { return completion(.notTried(waitSeconds: wait)) }
                    return completion(.failed(error))
                }
                // The change is complete once no copy of the key wrapped under the old password is left in
                // the write-ahead log (or the file): a reader holding an older snapshot delays the reply.
                scheduleCheckpoint(keychain.path) { emptied in
                    guard emptied else {
                        return completion(
                            .failed(
                                KeychainError(
                                    .io,
                                    "the password was changed, but another process holds an older snapshot of the"
                                        + " keychain file, so the key wrapped under the old password is still on disk")
                            ))
                    }
                    completion(.accepted)
                }
            })
    }

    /// Imports gnome-keyring's keyrings not imported before, with the login password a login handed over
    /// (see `GnomeKeyringLoginImport`): the files are read and opened on a thread of their own (not the
    /// worker: files another program, or a Flatpak app, may have placed there, and the opening of each keyring,
    /// must never hold up the key derivations of later unlocks); back here each keyring other than
    /// `login.keyring` gets a collection of its own under the login key (made as `CreateCollection` makes one,
    /// labelled with the keyring's name); the items are written on the worker, one transaction per keyring;
    /// the faces hear of the new collections and items, and the keyring gnome-keyring's `default` file names
    /// becomes the `default` alias. One import at a time: a login while one runs starts none.
    func importGnomeKeyrings(password: SharedSecret) {
        guard let directory = configuration.gnomeKeyringDirectory, let login, !isImportingGnomeKeyrings else { return }
        let loginPath = login.keychain.path
        let flatpakApps = configuration.flatpakAppDirectory
        let held = keychains.filter { $0.id != Self.sessionID }.map(\.keychain)
        isImportingGnomeKeyrings = true
        offLoop(
            onOwnThread: true,
            {
                // The importer takes an array (the keyring readers work on arrays): a copy, wiped after.
                var copy = password.withUnsafeBytes { [UInt8]($0) }
                defer { wipeBytes(&copy) }
                return GnomeKeyringLoginImport.plan(
                    directory: directory, password: copy, login: loginPath,
                    keychains: held.map { RecordedKeychain(path: $0.path, keychain: $0) }, flatpakApps: flatpakApps)
            },
            then: { [self] plan in placeImports(plan) })
    }

    /// Finds or makes the keychain of each planned keyring, then imports them on the worker (the import is
    /// over when they are written).
    private func placeImports(_ plan: LoginImportPlan) {
        var placed: [(entry: LoginImportPlan.Entry, held: HeldKeychain)] = []
        for entry in plan.entries {
            let target: HeldKeychain?
            switch entry.destination {
            case .login:
                target = login
            case .keychain(let path):
                target = keychains.first { $0.keychain.path == path }
            case .newCollection(let label):
                target = try? createKeychain(label: label, pathElement: GnomeKeyringImporter.collectionID(forLabel:))
                try? target?.keychain.setMetadata(GnomeKeyringImporter.sourceName, Data(entry.file.path.utf8))
            }
            // Locked meanwhile (the session closed): left for the next login.
            guard let target, !target.isLocked else { continue }
            placed.append((entry, target))
        }
        guard !placed.isEmpty else {
            isImportingGnomeKeyrings = false
            return
        }
        let jobs = placed.map { ($0.entry, $0.held.keychain) }
        offLoop(
            { jobs.map { GnomeKeyringLoginImport.run($0.0, into: $0.1) } },
            then: { [self] outcomes in
                isImportingGnomeKeyrings = false
                for ((entry, held), outcome) in zip(placed, outcomes) {
                    guard case .imported(let record)? = outcome, keychains.contains(where: { $0 === held }) else {
                        continue
                    }
                    if record.added > 0 {
                        held.touch()
                        announce(.itemsAdded(held))
                    }
                    // The first import of the keyring gnome-keyring's `default` names: it is the default here too.
                    if case .newCollection = entry.destination, entry.file.path == plan.defaultKeyring {
                        setAlias("default", to: held)
                    }
                }
            })
    }

    /// Tells the faces the login keychain unlocked, and unlocks the collections its key wraps.
    func announceLoginUnlocked(byTPMSlot: Bool = false) {
        guard let login else { return }
        announce(.lockChanged(login))
        unlockUnderLogin(among: keychains)
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
    package func promptForLoginPassword(
        unlocking waiting: [HeldKeychain], ticket: PromptTicket? = nil, completion: @escaping (Bool) -> Void
    ) -> PromptTicket? {
        guard let keychain = login?.keychain else {
            completion(false)
            return nil
        }
        // A tpm2 slot with a PIN: the PIN is asked instead of the password; when the TPM cannot be used, the
        // password is asked after all, at once and under the same ticket (withdrawing it ends either prompt).
        let ticket = ticket ?? newPromptTicket()
        if let (dialog, fellBack) = loginPINDialog(
            keychain,
            fallback: { [self] reason in
                passwordPromptForLogin(
                    keychain, unlocking: waiting, notice: reason, ticket: ticket, showingNext: true,
                    completion: completion)
            })
        {
            return enqueuePrompt(dialog, ticket: ticket) { [self] accepted in
                if fellBack(accepted) { return }
                guard let held = login, !held.isLocked else { return completion(false) }
                unlockUnderLogin(among: waiting)
                completion(true)
            }
        }
        return passwordPromptForLogin(keychain, unlocking: waiting, notice: nil, ticket: ticket, completion: completion)
    }

    /// The password prompt of ``promptForLoginPassword(unlocking:completion:)`` (`notice`: why the PIN was not
    /// asked). The login keychain's recovery key is accepted in place of the password.
    @discardableResult
    private func passwordPromptForLogin(
        _ keychain: Keychain, unlocking waiting: [HeldKeychain], notice: String?, ticket: PromptTicket,
        showingNext: Bool = false, completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use your login keychain.\nEnter your login password to unlock it.",
            prompt: "Password:", error: notice.map { "The PIN cannot be used: \($0)." }, okLabel: "Unlock")
        let dialog = PromptDialog(
            sharingKey: "unlock-login", tries: 5, retryMessage: "The password was not correct. Try again.",
            ask: { pinentry, error, cancellation in Self.askOne(pinentry, request, error ?? request.error, cancellation)
            },
            attempt: Self.attempt { (password) throws(KeychainError) in
                try Self.unwrapKey(keychain, typed: password, inPrompt: true)
            },
            apply: applyingLoginKey(to: keychain),
            isSatisfied: { [self] in login?.isLocked == false })
        return enqueuePrompt(dialog, ticket: ticket, showingNext: showingNext) { [self] _ in
            guard let held = login, !held.isLocked else { return completion(false) }
            unlockUnderLogin(among: waiting)
            completion(true)
        }
    }

    /// A login prompt's apply step (the password's or the PIN's): unlocks the login keychain with the key
    /// derived on the worker, if it is still `keychain` and still locked, and announces it.
    func applyingLoginKey(to keychain: Keychain) -> (UnwrappedKeychainKey) -> Void {
        { [self] key in
            guard let held = login, held.keychain === keychain, held.isLocked else { return }
            held.keychain.unlock(with: key)
            announce(.lockChanged(held))
            resealLoginTPMSlots(held.keychain)
        }
    }

    /// One password through pinentry (with `error` shown, if any), nil when not given. A pinentry that could
    /// not be started or failed says why in the log (the prompt then ends as dismissed, which is all the
    /// Secret Service's `Completed` can say).
    static func askOne(
        _ pinentry: Pinentry, _ request: PinentryRequest, _ error: String?, _ cancellation: PinentryCancellation
    ) -> [SharedSecret]? {
        var request = request
        request.error = error
        do throws(PinentryError) {
            guard case .password(let password) = try pinentry.askPassword(request, cancellation: cancellation) else {
                return nil
            }
            return [password]
        } catch {
            if !cancellation.isCancelled { log("no password prompt could be shown (“\(request.title)”): \(error)") }
            return nil
        }
    }

    /// A prompt's attempt (on the worker) that hands the answer's first password to `use`: what it returns, or
    /// its error.
    static func attempt<Accepted: Sendable>(
        _ use: @escaping @Sendable (UnsafeRawBufferPointer) throws(KeychainError) -> Accepted
    ) -> @Sendable ([SharedSecret]) -> Result<Accepted, KeychainError> {
        { answers in
            do throws(KeychainError) {
                return .success(try answers[0].withUnsafeBytes(use))
            } catch {
                return .failure(error)
            }
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
            ask: { pinentry, error, cancellation in Self.askOne(pinentry, request, error, cancellation) },
            attempt: Self.attempt { (old) throws(KeychainError) in
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
                scheduleCheckpoint(login.path)
                if held.isLocked {
                    login.unlock(with: answer.key)
                    announceLoginUnlocked()
                }
            },
            isSatisfied: { false })
        _ = enqueuePrompt(dialog) { _ in }
    }
}
