import KeySlots
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import Synchronization
import TPMSealing

/// Why a PIN prompt could not be used (the TPM locked out, gone, or the PCRs changed): the prompt then falls
/// back to the password. Set on the worker, read on the serving thread.
private final class PINUnusable: Sendable {
    let reason = Mutex<String?>(nil)
    let wrongPINs = Mutex(0)
}

extension UserLogin {
    /// A login that brought no password (autologin, fingerprint): when the login keychain has a tpm2 slot
    /// without a PIN, the key is unsealed on the worker and the keychain unlocked on the serving thread, as if
    /// the password had come; clients' requests wait for it meanwhile (``isUnlockingAtLogin``). Nothing happens
    /// when there is no such slot or the TPM refuses (then the first request prompts as before); a slot with a
    /// PIN is used by the first prompt instead (``promptForPassword(unlocking:ticket:completion:)``).
    /// Returns what it started, for the hand-over's reply.
    @discardableResult
    package func unlockFromTPM() -> LoginTPMUnlock {
        guard let held = login else { return .noLoginKeychain }
        guard held.isLocked else { return .alreadyUnlocked }
        let keychain = held.keychain
        let slots = TPMSlot.kinds(of: keychain)
        guard slots.withoutPIN else { return slots.withPIN ? .pinAskedAtFirstRequest : .noTPMSlot }
        unlocksAtLogin += 1
        let locksBefore = locksOfLogin
        let sealing = configuration.sealing
        registry.offLoop(
            { () -> UnwrappedKeychainKey? in try? TPMSlot.unwrapKey(keychain, pin: nil, sealing: sealing) },
            then: { [self] key in
                unlocksAtLogin -= 1
                // Not opened (TPM gone or cleared, PCRs changed): the first request prompts as before.
                guard let key, let login, login.keychain === keychain, login.isLocked, locksOfLogin == locksBefore
                else { return }
                login.keychain.unlock(with: key)
                announceUnlocked(byTPMSlot: true)
                removeOutdatedLoginTPMSlots(login.keychain)
            })
        return .unlocking
    }

    /// After the login keychain was opened some other way than its tpm2 slot without a PIN (the password, the
    /// recovery key, a PIN): for such slots bound to PCRs that changed since (a firmware or boot chain update),
    /// a slot sealed to the present values is added on the worker, so that the next login without a password
    /// opens the keychain again (``TPMSlot/resealChanged(_:sealing:)``; the old ones go once a new one opened,
    /// ``removeOutdatedLoginTPMSlots(_:)``). One log line says what was done or why it could not be.
    func resealLoginTPMSlots(_ keychain: Keychain) {
        let sealing = configuration.sealing
        changeLoginSlots(failing: "the login keychain's tpm2 slot could not be sealed again") {
            () throws(KeySlotError) -> String? in
            // Read on the worker too: most keychains have no such slot, and the serving thread reads no file.
            guard TPMSlot.kinds(of: keychain).withoutPIN else { return nil }
            let added = try TPMSlot.resealChanged(keychain, sealing: sealing)
            guard !added.isEmpty else { return nil }
            return "the login keychain's tpm2 slot no longer opens (its PCRs changed): sealed again to the values"
                + " the machine has now as slot \(added.map { String($0.id) }.joined(separator: ", "))"
        }
    }

    /// After a tpm2 slot without a PIN opened the login keychain at a login: the slots that a re-seal replaced
    /// and that no longer open are removed on the worker (``TPMSlot/removeOutdated(_:sealing:)``).
    func removeOutdatedLoginTPMSlots(_ keychain: Keychain) {
        let sealing = configuration.sealing
        changeLoginSlots(failing: "the login keychain's outdated tpm2 slots could not be removed") {
            () throws(KeySlotError) -> String? in
            let removed = try TPMSlot.removeOutdated(keychain, sealing: sealing)
            guard !removed.isEmpty else { return nil }
            return "removed the login keychain's tpm2 slot \(removed.map(String.init).joined(separator: ", "))"
                + ": sealed to PCR values the machine no longer has, and replaced by one that opened it"
        }
    }

    /// Runs `change` on the worker and logs the line it returns, or `failing` and why it failed.
    private func changeLoginSlots(
        failing: String, _ change: @escaping @Sendable () throws(KeySlotError) -> String?
    ) {
        registry.offLoop(
            { () -> String? in
                do throws(KeySlotError) {
                    return try change()
                } catch {
                    return "\(failing): \(error.description)"
                }
            },
            then: { (message: String?) in
                if let message { KeychainRegistry.log(message) }
            })
    }

    /// Wrong PINs one PIN prompt takes before it asks for the password instead.
    static let loginPINTries = 3

    /// The PIN prompt for the login keychain's tpm2 slot, when it has one with a PIN: nil otherwise. A wrong
    /// PIN asks again (the TPM counts it towards its lockout); a TPM that cannot be used (locked out, gone,
    /// changed PCRs) or ``loginPINTries`` wrong PINs end it, and `fallback` then runs with why (to ask for the
    /// password instead). Cancelling ends it with no fallback.
    func loginPINDialog(_ keychain: Keychain, fallback: @escaping (String) -> Void) -> (
        PromptDialog<UnwrappedKeychainKey>, (Bool) -> Bool
    )? {
        guard TPMSlot.kinds(of: keychain).withPIN else { return nil }
        let sealing = configuration.sealing
        let unusable = PINUnusable()
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use your login keychain.\nEnter your keychain PIN to unlock it.",
            prompt: "PIN:", error: nil, okLabel: "Unlock")
        let dialog = PromptDialog(
            sharingKey: "unlock-login", tries: Self.loginPINTries,
            retryMessage: "Wrong PIN. The TPM locks the PIN out after a few wrong ones. Try again.",
            ask: { pinentry, error, cancellation in KeychainRegistry.askOne(pinentry, request, error, cancellation) },
            attempt: { answers in
                do throws(KeySlotError) {
                    return .success(try TPMSlot.unwrapKey(keychain, pin: answers[0], sealing: sealing))
                } catch {
                    if case .tpm(.wrongPIN) = error {
                        // The prompt's last try: the password is asked next (the user may have forgotten the PIN).
                        if unusable.wrongPINs.withLock({ (count) in
                            count += 1
                            return count >= Self.loginPINTries
                        }) {
                            unusable.reason.withLock { $0 = "\(Self.loginPINTries) wrong PINs" }
                        }
                        return .failure(KeychainError(.authFailed, error.description))
                    }
                    unusable.reason.withLock { $0 = error.description }
                    return .failure(KeychainError(.interactionNotAllowed, error.description))
                }
            },
            apply: applyingLoginKey(to: keychain),
            isSatisfied: { [self] in login?.isLocked == false })
        // After the prompt: whether it ended because the PIN cannot be used (then the fallback was called).
        let fellBack: (Bool) -> Bool = { accepted in
            guard !accepted, let reason = unusable.reason.withLock({ $0 }) else { return false }
            fallback(reason)
            return true
        }
        return (dialog, fellBack)
    }
}
