import Glibc
import KeySlots
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import SecurityKeys
import Synchronization

/// What the security-key step of a login prompt found, set on the prompt's thread and read on the serving
/// thread: the slot the touch opened, or why the password must be asked instead.
private final class SecurityKeyStep: Sendable {
    let held = Mutex<HeldFido2Slot?>(nil)
    let fallback = Mutex<String?>(nil)

    func fallBack(_ reason: String) {
        fallback.withLock { $0 = reason }
    }
}

/// The outcome of one wait for a touch.
private enum TouchOutcome {
    /// The key was touched: its `hmac-secret` output.
    case touched(SharedSecret)
    /// The key refused or could not be used.
    case failed(SecurityKeyError)
    /// The person dismissed the touch prompt, or the request went away.
    case dismissed
}

extension UserLogin {
    /// The security-key prompt for the login keychain, when it has fido2 slots: nil otherwise
    /// (``KeychainRegistry/securityKeyDialog(_:named:sharingKey:place:apply:isSatisfied:fallback:)``).
    func loginSecurityKeyDialog(
        _ keychain: Keychain, place: PromptPlace?, fallback: @escaping (String) -> Void
    ) -> (PromptDialog<UnwrappedKeychainKey>, (Bool) -> Bool)? {
        registry.securityKeyDialog(
            keychain, named: "your login keychain", sharingKey: "unlock-login", place: place,
            apply: applyingLoginKey(to: keychain), isSatisfied: { [self] in login?.isLocked == false },
            fallback: fallback)
    }
}

extension KeychainRegistry {
    /// Wrong PINs one security-key prompt takes before it asks for the password instead (the key blocks its PIN
    /// after 3 in a row until re-inserted, and for good after 8).
    static let securityKeyPINTries = 3

    /// How long the key may take to answer before the touch dialog shows: no person touches a key faster, and a key
    /// that answers at once (a wrong PIN, a key that refuses) shows no dialog that flashes by.
    static let touchPromptDelay: Duration = .milliseconds(500)

    /// The security-key prompt for `keychain` (shown as `name`), when it has fido2 slots: nil otherwise. It shares
    /// `sharingKey` with the keychain's password prompt; `apply` and `isSatisfied` are the password prompt's. On
    /// the prompt's thread, the reachable keys are probed (no touch) for one holding a slot without a PIN; else,
    /// for slots with one, the PIN is asked through the request's pinentry (the desktop's, or the caller's
    /// terminal's: a program that could type guesses there can as well send them to the key itself, which is
    /// the user's device) and the keys probed with it (such credentials are hidden from a probe without it);
    /// then one assertion waits for a touch while "Touch your security key"
    /// shows (a pinentry dialog on the desktop, a line on the caller's terminal, a log line). A wrong PIN asks
    /// again with the tries the key has left; everything else that keeps the key from opening the keychain (no
    /// key, another key, over SSH, no touch in time, a blocked PIN, the touch prompt cancelled) ends it, and
    /// `fallback` then runs with why, to ask for the password. The returned function says, after the prompt,
    /// whether it fell back.
    func securityKeyDialog(
        _ keychain: Keychain, named name: String, sharingKey: String, place: PromptPlace?,
        apply: @escaping (UnwrappedKeychainKey) -> Void, isSatisfied: @escaping () -> Bool,
        fallback: @escaping (String) -> Void
    ) -> (PromptDialog<UnwrappedKeychainKey>, (Bool) -> Bool)? {
        guard !Fido2Slot.slots(of: keychain).isEmpty else { return nil }
        let step = SecurityKeyStep()
        let remote = place?.terminalOverSSH == true
        let touchTimeout = Fido2Slot.touchTimeout()
        let pinRequest = PinentryRequest(
            title: "Unlock Keychain",
            description:
                "An application wants to use \(name).\nEnter your security key's PIN to unlock it.",
            prompt: "PIN:", error: nil, okLabel: "Next")
        let dialog = PromptDialog(
            sharingKey: sharingKey, tries: 1, retryMessage: "",
            ask: { pinentry, _, cancellation -> [SharedSecret]? in
                guard !remote else {
                    step.fallBack("no security key is reachable over SSH")
                    return nil
                }
                // One assertion with a touch on the slot found: its output, or nil (the fallback said why).
                let touch = { (held: HeldFido2Slot, pin: SharedSecret?) -> [SharedSecret]? in
                    switch Self.waitForTouch(
                        held, pin: pin, timeout: touchTimeout, pinentry: pinentry, place: place, name: name,
                        cancellation: cancellation)
                    {
                    case .touched(let secret):
                        step.held.withLock { $0 = held }
                        return [secret]
                    case .dismissed:
                        step.fallBack("the touch was cancelled")
                    case .failed(let error):
                        step.fallBack(Self.words(for: error))
                    }
                    return nil
                }
                let search = Fido2Slot.search(keychain, remote: false)
                if let held = search.held.first { return touch(held, nil) }
                guard !search.withPIN.isEmpty else {
                    step.fallBack(search.reason ?? "no security key holds a slot of \(name)")
                    return nil
                }
                // Slots with a PIN: which key holds which is seen only with the PIN (credProtect).
                var complaint: String?
                // Wrong PINs (the key counts them) and answers that are no PIN at all (it never sees them).
                var (wrong, notPINs) = (0, 0)
                while wrong < Self.securityKeyPINTries, notPINs < Self.securityKeyPINTries {
                    guard let answers = KeychainRegistry.askOne(pinentry, pinRequest, complaint, cancellation),
                        let pin = answers.first
                    else {
                        step.fallBack("the PIN prompt was cancelled")
                        return nil
                    }
                    let found: HeldFido2Slot?
                    do throws(KeySlotError) {
                        found = try Fido2Slot.find(search.withPIN, pin: pin)
                    } catch {
                        // A PIN no key takes (too short, too long): asked again, the key counted nothing.
                        if case .securityKey(.invalidInput(let reason)) = error {
                            complaint = "That is not a PIN: \(reason). Try again."
                            notPINs += 1
                            continue
                        }
                        guard case .securityKey(.wrongPIN(let triesLeft)) = error else {
                            if case .securityKey(let keyError) = error {
                                step.fallBack(Self.words(for: keyError))
                            } else {
                                step.fallBack(error.description)
                            }
                            return nil
                        }
                        complaint =
                            "Wrong PIN"
                            + (triesLeft.map { ": \($0) tries left before the key blocks its PIN for good" } ?? "")
                            + ". Try again."
                        wrong += 1
                        continue
                    }
                    guard let found else {
                        step.fallBack(Self.words(for: .otherKey))
                        return nil
                    }
                    return touch(found, pin)
                }
                step.fallBack(wrong > 0 ? "\(wrong) wrong PINs" : "no PIN was given")
                return nil
            },
            attempt: { answers in
                guard let held = step.held.withLock({ $0 }) else {
                    return .failure(KeychainError(.authFailed, "no security key slot was used"))
                }
                do throws(KeySlotError) {
                    return .success(try Fido2Slot.unwrapKey(keychain, slot: held.slot, secret: answers[0].bytes))
                } catch {
                    step.fallBack(error.description)
                    return .failure(KeychainError(.interactionNotAllowed, error.description))
                }
            },
            apply: apply, isSatisfied: isSatisfied)
        let fellBack: (Bool) -> Bool = { accepted in
            guard !accepted, let reason = step.fallback.withLock({ $0 }) else { return false }
            KeychainRegistry.log("the security key slot of \(name) was not used: \(reason)")
            fallback(reason)
            return true
        }
        return (dialog, fellBack)
    }

    /// What a person is told when the key cannot open the keychain.
    static func words(for error: SecurityKeyError) -> String {
        switch error {
        case .pinBlocked:
            "the security key's PIN is blocked for good (only a reset, which erases this slot, opens it)"
        case .pinBlockedUntilReinserted:
            "the security key blocks its PIN after three wrong ones: unplug it and plug it in again"
        case .noTouch: "the security key was not touched in time"
        case .otherKey: "the security key plugged in is not one of this keychain's (or it was reset)"
        default: error.description
        }
    }

    /// One assertion with a touch (and `pin`), on a thread of its own, while the person is told to touch the key:
    /// a pinentry dialog on the desktop (its buttons dismiss the wait), a line on the caller's terminal and in
    /// the log. Ends when the key answers, the dialog is dismissed, or `cancellation` is (the request went away).
    private static func waitForTouch(
        _ held: HeldFido2Slot, pin: SharedSecret?, timeout: Duration, pinentry: Pinentry, place: PromptPlace?,
        name: String, cancellation: PinentryCancellation
    ) -> TouchOutcome {
        guard let answered = try? PinentryCancellation() else { return .failed(.noSecretMemory("no pipe left")) }
        let result = Mutex<Result<SharedSecret, SecurityKeyError>?>(nil)
        let keychainName = name
        // Dismissing the dialog, or the request going away, also tells the key to stop waiting for the touch.
        let stopKey = SecurityKeyCancellation()
        defer { if result.withLock({ $0 }) == nil { stopKey.cancel() } }
        runDetached {
            let outcome: Result<SharedSecret, SecurityKeyError>
            do throws(KeySlotError) {
                let secret = try Fido2Slot.hmacSecret(
                    held, pin: pin, touchTimeout: timeout, cancellation: stopKey)
                outcome = .success(SharedSecret(secret))
            } catch {
                if case .securityKey(let keyError) = error {
                    outcome = .failure(keyError)
                } else {
                    outcome = .failure(.invalidInput(error.description))
                }
            }
            result.withLock { $0 = outcome }
            answered.cancel()
            ProcessHardening.wipeDeadStack()
        }
        let seconds = Int(timeout.components.seconds)
        FingerprintNotice(
            logLine:
                "waiting for a touch of the security key \(PromptText.field(held.device.description)) to unlock"
                + " \(keychainName)",
            terminalLine: "\r\nLatchkey: touch your security key within \(seconds) s to unlock \(keychainName).\r\n",
            place: place
        ).tell()
        if place?.isTerminal == true {
            // The line is said; the answer is waited for here (the request going away ends the wait).
            while !answered.isCancelled, !cancellation.isCancelled { usleep(20_000) }
        } else {
            // A key that answers at once (a wrong PIN, a key that refuses) shows no dialog that would flash by.
            var waited: Duration = .zero
            while !answered.isCancelled, !cancellation.isCancelled, waited < Self.touchPromptDelay {
                usleep(20_000)
                waited += .milliseconds(20)
            }
            // The dialog shows until the key answers (which ends it) or the person dismisses it.
            runDetached {
                while !answered.isCancelled {
                    if cancellation.isCancelled { answered.cancel() }
                    usleep(50_000)
                }
            }
            let request = PinentryRequest(
                title: "Unlock Keychain",
                description:
                    "Touch your security key to unlock the keychain.\n\(PromptText.field(held.parameters.product, bytes: 100))",
                prompt: "", error: nil, okLabel: "Use password", cancelLabel: "Cancel")
            _ = try? pinentry.confirm(request, cancellation: answered)
        }
        switch result.withLock({ $0 }) {
        case .success(let secret)?: return .touched(secret)
        case .failure(let error)?: return .failed(error)
        case nil: return .dismissed
        }
    }
}
