import KeychainCore
import KeychainStore
import Posix

/// Locking and unlocking the keychains held, and the lock timeouts the serving loop's timers run.
extension KeychainRegistry {
    // MARK: Locking

    /// Locks a keychain (its key is wiped) and announces it, if it was unlocked. The class keys that outlast a
    /// lock (`AfterFirstUnlock`) stay, unless `allClasses` (logout, `lock-keychain --all-classes`), which wipes
    /// them too, also in a keychain locked already.
    package func lock(_ held: HeldKeychain, allClasses: Bool = false) {
        if held.id == Self.loginID { userLogin.locksOfLogin += 1 }
        held.locks += 1
        guard !held.isLocked else {
            if allClasses, !held.keychain.readableClasses.isEmpty {
                held.keychain.lock(allClasses: true)
                announce(.lockChanged(held))
            }
            return
        }
        beforeLocking?(held)
        held.keychain.lock(allClasses: allClasses)
        announce(.lockChanged(held))
    }

    /// Locks every keychain but the session one; with `allClasses` (the session's end) every class key goes too.
    package func lockLoginKeychains(allClasses: Bool = false) {
        for held in keychains where held.id != Self.sessionID { lock(held, allClasses: allClasses) }
    }

    /// Locks every keychain whose settings have `setting` on (``KeychainSettings/lockOnSleep`` when the machine
    /// goes to sleep, ``KeychainSettings/lockOnScreenLock`` when the screen locks).
    package func lock(where setting: KeyPath<KeychainSettings, Bool>) {
        for held in keychains where held.appliedSettings[keyPath: setting] { lock(held) }
    }

    /// Wipes the class keys that outlast a lock in every locked keychain (a hibernation): unlocked keychains keep
    /// theirs.
    package func forgetClassKeysOfLockedKeychains() {
        let forgetting = keychains.filter { $0.isLocked && !$0.keychain.readableClasses.isEmpty }
        Self.log(
            "the machine hibernates: \(forgetting.count) locked keychain(s) forget the keys of their AfterFirstUnlock"
                + " items until the next unlock")
        for held in forgetting { lock(held, allClasses: true) }
    }

    /// Unlocks a keychain that needs no password: the session keychain, or one under the unlocked login
    /// keychain. False when it needs the login password.
    package func unlockWithoutPassword(_ held: HeldKeychain) -> Bool {
        guard held.isLocked else { return true }
        let unlocked: Bool
        switch held.unlocking {
        case .heldPassword(let password):
            let keychain = held.keychain
            unlocked =
                (try? password.withUnsafeBytes { (bytes) throws(KeychainError) in try keychain.unlock(password: bytes) })
                != nil
        case .loginKey:
            guard let login, !login.isLocked else { return false }
            unlocked = (try? held.keychain.unlock(using: login.keychain)) != nil
        case .loginPassword, .ownPassword:
            return false
        }
        if unlocked { announce(.lockChanged(held)) }
        return unlocked
    }

    /// Unlocks, among `candidates`, those the (unlocked) login keychain's key wraps.
    func unlockUnderLogin(among candidates: [HeldKeychain]) {
        for held in candidates where held.isLocked {
            guard case .loginKey = held.unlocking else { continue }
            _ = unlockWithoutPassword(held)
        }
    }

    // MARK: The serving loop's timers and results

    /// Locks every keychain whose lock timeout has passed, starts due checkpoints, ends prompts whose time limit has
    /// passed and shows those whose hold lapsed (``runPromptTimers(now:)``), all on the registry's clock
    /// (``RegistryConfiguration/clock``); the milliseconds until the next timer, nil when none is set.
    package func runTimers() -> Int32? {
        let now = configuration.clock.nanoseconds()
        var next: Int64?
        for held in keychains {
            // The in-memory session collection has no log to empty.
            if held.keychain.takeCheckpointRequest(), held.keychain.path != ":memory:" {
                scheduleCheckpoint(held.keychain.path)
            }
            guard let deadline = held.lockDeadline else { continue }
            if deadline <= now {
                lock(held)
            } else {
                let left = RegistryClock.milliseconds(from: now, until: deadline)
                next = min(next ?? left, left)
            }
        }
        if let due = startDueCheckpoint() { next = min(next ?? due, due) }
        if let due = runPromptTimers(now: now) { next = min(next ?? due, due) }
        return next.map { Int32(clamping: max(0, $0)) }
    }
}
