import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// Whether there is a login keychain, and whether it is locked.
package enum LoginState: Sendable, Equatable {
    /// There is no login keychain (no login created it yet).
    case absent
    /// It is locked.
    case locked
    /// It is unlocked.
    case unlocked
}

/// What a login that brought no password started with the login keychain's tpm2 slots
/// (``UserLogin/unlockFromTPM()``).
package enum LoginTPMUnlock: Sendable, Equatable {
    /// There is no login keychain.
    case noLoginKeychain
    /// The login keychain is unlocked already.
    case alreadyUnlocked
    /// Locked, with a tpm2 slot only behind a PIN: the PIN is asked at the first request.
    case pinAskedAtFirstRequest
    /// Locked, with no tpm2 slot: the first request asks for the password.
    case noTPMSlot
    /// The key is being unsealed from the slot without a PIN.
    case unlocking
}

/// What a login's hand-over started (``UserLogin/handOver(password:)``).
package enum HandOverStart: Sendable, Equatable {
    /// The login keychain is being created with the password (first login).
    case creating
    /// The login keychain is being unlocked with the password.
    case unlocking
    /// Nothing was left to do (the login keychain is unlocked already): its state.
    case nothingToDo(LoginState)
    /// No password came (autologin, fingerprint): what the tpm2 slots allow.
    case withoutPassword(LoginTPMUnlock)
}

/// How closing a login session ended (``UserLogin/closeSession(lockIfLast:)``).
package enum SessionClose: Sendable, Equatable {
    /// Counted off; this many sessions are left (the keychains stay as they are).
    case closed(left: Int)
    /// The last session closed: the login keychain and those its key protects were locked.
    case lastClosedAndLocked
}

/// How a re-key of the login keychain to a new password ended, through the daemon or on the file.
package enum LoginRekeyOutcome {
    /// There is no login keychain: nothing to re-key.
    case noLoginKeychain
    /// Re-keyed, and no copy of the key wrapped under the old password is left on disk.
    case rekeyed
    /// Re-keyed on the file, but another process holds an older snapshot: the key wrapped under the old
    /// password stays in the write-ahead log until the next checkpoint.
    case rekeyedOldKeyStillInLog
    /// Not re-keyed: why.
    case refused(LoginPasswordOutcome)
}

/// The user's login, with no bus in it: the login sessions pam_latchkey reports, the hand-over of the login
/// password, the re-key of the login keychain (through the daemon, or on the file with no daemon), its tpm2
/// slots and PIN prompt, the import of gnome-keyring's keyrings at login, and the counters that keep an unlock
/// from crossing a lock. The control socket's answers (`UserLogin+ControlRequests.swift`) are made over it.
///
/// It is part of the ``KeychainRegistry`` (``KeychainRegistry/userLogin``) and lives on its serving thread:
/// the registry counts the login keychain's locks here, and unlocks asked for elsewhere (a client, a prompt)
/// go through ``unlock(password:from:holdingClients:completion:)`` and ``promptForPassword(unlocking:ticket:completion:)``.
package final class UserLogin {
    /// The registry the login keychain is held in.
    unowned let registry: KeychainRegistry
    /// Login sessions pam_latchkey reported open. The count lives in the daemon: a daemon restarted during a
    /// session starts again from zero.
    package private(set) var openSessions = 0
    /// How many times the login keychain was locked: an unlock whose key was derived across a lock is dropped.
    var locksOfLogin = 0
    /// Unlocks handed over by a login that are still deriving their key.
    var unlocksAtLogin = 0
    /// Whether a login's import of gnome-keyring's keyrings is under way (a later login's waits for none).
    var isImportingGnomeKeyrings = false
    /// Whether a login's import of KWallet's wallets is under way (a later login's waits for none).
    var isImportingKWallets = false

    init(registry: KeychainRegistry) {
        self.registry = registry
    }

    /// Whether a login's unlock is under way: clients' requests wait for it rather than find the login
    /// keychain locked only because they came early.
    package var isUnlockingAtLogin: Bool { unlocksAtLogin > 0 }

    /// The login keychain, when there is one.
    var login: HeldKeychain? { registry.login }

    /// The registry's configuration.
    var configuration: RegistryConfiguration { registry.configuration }

    var loginKeychainPath: String { KeychainLocation.loginKeychainPath(inDirectory: configuration.keychainDirectory) }

    /// Whether there is a login keychain, and whether it is locked.
    package var state: LoginState {
        guard let login else { return .absent }
        return login.isLocked ? .locked : .unlocked
    }

    // MARK: Sessions

    /// A login's hand-over (pam_latchkey at session open, as root): counts a session and starts the unlock
    /// with the password PAM verified (or creates the login keychain with it), holding clients' requests until
    /// it is done; with no password, the login keychain's tpm2 slot without a PIN opens it. Returns at once
    /// with what it started.
    package func handOver(password: SharedSecret?) -> HandOverStart {
        openSessions += 1
        guard let password else { return .withoutPassword(unlockFromTPM()) }
        let creating = login == nil
        unlock(password: password, from: .verifiedByPAM, holdingClients: true) { _ in }
        // When it is unlocked already, nothing is left to do; otherwise the key is being derived.
        guard isUnlockingAtLogin else { return .nothingToDo(state) }
        return creating ? .creating : .unlocking
    }

    /// Counts a session a login opened (without handing over: pam_latchkey's open-session request).
    package func countSession() {
        openSessions += 1
    }

    /// A login's session closed: one fewer is counted, and with `lockIfLast` the last one's close locks the
    /// login keychain and every keychain but the session one.
    package func closeSession(lockIfLast: Bool) -> SessionClose {
        openSessions = max(0, openSessions - 1)
        guard lockIfLast, openSessions == 0 else { return .closed(left: openSessions) }
        // The session's end: AfterFirstUnlock's keys go too.
        registry.lockLoginKeychains(allClasses: true)
        return .lastClosedAndLocked
    }

    // MARK: Re-key

    /// Re-keys the login keychain the daemon holds from `old` to `new` (``KeychainRegistry/changePassword(of:from:to:limited:completion:)``:
    /// the same re-wrap and commit as ``rekeyFile(inDirectory:from:to:limited:)``); the lock state stays as it
    /// was. `limited`: under the wrong-password limit (false for a change a login asked for: `passwd`).
    package func rekey(
        from old: SharedSecret, to new: SharedSecret, limited: Bool,
        completion: @escaping (LoginRekeyOutcome) -> Void
    ) {
        guard let login else { return completion(.noLoginKeychain) }
        registry.changePassword(of: login, from: old, to: new, limited: limited) { outcome in
            guard case .accepted = outcome else { return completion(.refused(outcome)) }
            completion(.rekeyed)
        }
    }

    /// Re-keys the login keychain file in `directory` from `old` to `new` with no daemon holding it
    /// (`latchkeyd --change-login-password`, which pam_latchkey runs for `passwd` when no daemon runs): the
    /// same re-wrap and commit as the daemon's, on this thread. The module waits 2 s in all for the answer: the
    /// change is saved, and emptying the log behind a reader of an older snapshot is not worth a failed answer.
    /// Such a reader is another process of the user; the next checkpoint that completes (the last connection
    /// to close makes one) removes the old rows.
    package static func rekeyFile(
        inDirectory directory: String, from old: SharedSecret, to new: SharedSecret, limited: Bool
    ) -> LoginRekeyOutcome {
        let path = KeychainLocation.loginKeychainPath(inDirectory: directory)
        guard FileManager.default.fileExists(atPath: path) else { return .noLoginKeychain }
        let keychain: Keychain
        do {
            keychain = try Keychain(opening: path)
        } catch {
            return .refused(.failed(error))
        }
        let outcome = KeychainRegistry.commit(
            KeychainRegistry.rewrap(keychain, from: old, to: new, limited: limited), to: keychain)
        guard case .accepted = outcome else { return .refused(outcome) }
        guard (try? keychain.waitForEmptyLog(milliseconds: logWaitMilliseconds)) != nil else {
            return .rekeyedOldKeyStillInLog
        }
        return .rekeyed
    }

    /// How long ``rekeyFile(inDirectory:from:to:limited:)`` waits for readers of older snapshots after saving,
    /// within the module's 2 s budget (two key derivations take most of the rest).
    static let logWaitMilliseconds = 500

    // MARK: Opening

    /// Opens the login keychain file when there is one, and with `loginPassword` unlocks it, or creates it when
    /// missing (on this thread: the daemon is not serving yet).
    ///
    /// - Throws: `errSecAuthFailed` if `loginPassword` does not unlock the login keychain.
    func open(password loginPassword: borrowing SecretBytes?) throws(KeychainError) {
        if FileManager.default.fileExists(atPath: loginKeychainPath) {
            let keychain = try Keychain(opening: loginKeychainPath)
            switch loginPassword {
            case .some(let password):
                try password.withUnsafeBytes { (bytes) throws(KeychainError) in try keychain.unlock(password: bytes) }
            case .none: break
            }
            try registry.addLogin(keychain)
        } else {
            switch loginPassword {
            case .some(let password):
                let path = loginKeychainPath
                let kdf = configuration.kdf
                try registry.addLogin(
                    try password.withUnsafeBytes { (bytes) throws(KeychainError) in
                        try Self.createLoginKeychain(at: path, password: bytes, kdf)
                    })
            case .none: break
            }
        }
    }

    /// Creates the login keychain file with `password` (scrypt: slow).
    static func createLoginKeychain(at path: String, password: some Collection<UInt8>, _ kdf: KDFParameters)
        throws(KeychainError) -> Keychain
    {
        let keychain = try Keychain.create(at: path, password: password, kdf: kdf)
        try keychain.recordCreation(label: nil)
        return keychain
    }
}
