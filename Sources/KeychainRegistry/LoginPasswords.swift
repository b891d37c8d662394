import KeychainCore
import KeychainStore
import Pinentry
import Posix

/// Counts wrong login passwords and makes the caller wait after the third:
/// 2 s after the fourth, doubling up to a minute. A right password resets it.
/// A refused attempt is not tried at all, so nothing blocks.
struct WrongPasswordLimiter {
    private var failures = 0
    private var lastFailure: Int64 = 0
    static let freeAttempts = 3

    /// Seconds still to wait before the next try, 0 if it may be tried now.
    func secondsToWait(now: Int64 = MonotonicClock.seconds()) -> Int64 {
        guard failures >= Self.freeAttempts else { return 0 }
        let delay = Int64(1) << min(failures - Self.freeAttempts + 1, 6)
        return max(0, lastFailure + min(delay, 60) - now)
    }

    mutating func failed(now: Int64 = MonotonicClock.seconds()) {
        failures += 1
        lastFailure = now
    }

    mutating func succeeded() { failures = 0 }
}

/// How a try of a login password under the wrong-password limit ended.
package enum LoginPasswordOutcome {
    /// The password was right.
    case accepted
    /// Refused without trying: this many seconds are left to wait.
    case notTried(waitSeconds: Int64)
    /// The attempt failed; `errSecAuthFailed` was counted as a wrong password.
    case failed(KeychainError)
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

/// A password handed to another thread; wiped when the last reference goes.
final class SecretBytes: @unchecked Sendable {
    private(set) var bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    deinit { wipeBytes(&bytes) }
}

extension KeychainRegistry {
    /// Unlocks the login keychain with the login password, or creates it when there is none, deriving the
    /// key on the worker; `completion` runs on the serving thread. A wrong password means the login password
    /// changed without the keychain: with `offerRekey`, the user is asked for the old one to re-key.
    package func unlockLogin(
        password: [UInt8], offerRekey: Bool, completion: @escaping (LoginUnlockOutcome) -> Void
    ) {
        if let login, !login.isLocked { return completion(.alreadyUnlocked) }
        let wait = limiter.secondsToWait()
        guard wait == 0 else { return completion(.notUnlocked(.notTried(waitSeconds: wait))) }
        let secret = SecretBytes(password)
        let existing = login?.keychain
        let path = loginKeychainPath
        let kdf = configuration.kdf
        offLoop(
            { () -> Result<LoginKeyDerivation, KeychainError> in
                do throws(KeychainError) {
                    if let existing { return .success(.unwrapped(try existing.unwrapKey(password: secret.bytes))) }
                    return .success(.created(try Self.createLoginKeychain(at: path, password: secret.bytes, kdf)))
                } catch {
                    return .failure(error)
                }
            },
            then: { [self] result in
                switch result {
                case .success(.created(let keychain)) where login == nil:
                    do throws(KeychainError) {
                        try addLogin(keychain)
                    } catch {
                        return completion(.notUnlocked(.failed(error)))
                    }
                    limiter.succeeded()
                    if let created = login { announce(.created(created)) }
                    completion(.created)
                case .success(.created):
                    // Another request created it first; this one's file cannot exist.
                    completion(.unlocked)
                case .success(.unwrapped(let key)):
                    limiter.succeeded()
                    if let login, login.isLocked {
                        login.keychain.unlock(with: key)
                        announceLoginUnlocked()
                    }
                    completion(.unlocked)
                case .failure(let error):
                    if error.status == .authFailed {
                        limiter.failed()
                        if offerRekey, let login = login?.keychain { askToRekey(login, to: secret) }
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
    /// write-ahead log emptied of the old wrapped key on the worker, retried until it can be.
    package func changePassword(
        of held: HeldKeychain, from old: [UInt8], to new: [UInt8],
        completion: @escaping (LoginPasswordOutcome) -> Void
    ) {
        let wait = limiter.secondsToWait()
        guard wait == 0 else { return completion(.notTried(waitSeconds: wait)) }
        let (oldSecret, newSecret) = (SecretBytes(old), SecretBytes(new))
        let keychain = held.keychain
        offLoop(
            { () -> Result<PasswordChange, KeychainError> in
                do throws(KeychainError) {
                    return .success(try keychain.rewrap(from: oldSecret.bytes, to: newSecret.bytes))
                } catch {
                    return .failure(error)
                }
            },
            then: { [self] result in
                do throws(KeychainError) {
                    try keychain.commit(try result.get())
                } catch {
                    if error.status == .authFailed { limiter.failed() }
                    return completion(.failed(error))
                }
                limiter.succeeded()
                scheduleCheckpoint(keychain.path)
                completion(.accepted)
            })
    }

    /// Tells the faces the login keychain unlocked, and unlocks the collections its key wraps.
    func announceLoginUnlocked() {
        guard let login else { return }
        announce(.lockChanged(login))
        unlockUnderLogin(among: keychains)
    }

    // MARK: Prompts

    /// Asks the user for the login password through pinentry, on a thread of its own, until it unlocks the
    /// login keychain; then unlocks `waiting` (collections under the login key) on the serving thread and
    /// runs `completion` with whether the login keychain is unlocked.
    package func promptForLoginPassword(unlocking waiting: [HeldKeychain], completion: @escaping (Bool) -> Void) {
        guard let login = login?.keychain else { return completion(false) }
        let pinentry = configuration.pinentry
        offLoop(
            onOwnThread: true, { Self.askLoginPassword(login, pinentry) },
            then: { [self] key in
                if let key, let held = self.login, held.isLocked {
                    limiter.succeeded()
                    held.keychain.unlock(with: key)
                    announce(.lockChanged(held))
                }
                guard let held = self.login, !held.isLocked else { return completion(false) }
                unlockUnderLogin(among: waiting)
                completion(true)
            })
    }

    /// Asks for the login password until it opens the login keychain (its key), or the user cancels, the
    /// prompt fails, or five tries are wrong (nil).
    private static func askLoginPassword(_ login: Keychain, _ pinentry: Pinentry) -> UnwrappedKeychainKey? {
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use your login keychain.\nEnter your login password to unlock it.",
            prompt: "Password:", error: nil, okLabel: "Unlock")
        var key: UnwrappedKeychainKey?
        _ = askUntilAccepted(pinentry, request, tries: 5, retryMessage: "The password was not correct. Try again.") {
            (password) throws(KeychainError) in key = try login.unwrapKey(password: password)
        }
        return key
    }

    /// Asks, through pinentry on a thread of its own, for the keychain's previous password, and re-keys the
    /// login keychain to `loginPassword` with it (once at a time).
    private func askToRekey(_ login: Keychain, to loginPassword: SecretBytes) {
        guard !rekeyPromptShowing else { return }
        rekeyPromptShowing = true
        let pinentry = configuration.pinentry
        offLoop(
            onOwnThread: true, { Self.askOldPassword(login, rekeyingTo: loginPassword, pinentry) },
            then: {
                [self] rekeyed in
                rekeyPromptShowing = false
                guard let (change, key) = rekeyed, let held = self.login, held.keychain === login else { return }
                do throws(KeychainError) {
                    try login.commit(change)
                } catch {
                    return
                }
                scheduleCheckpoint(login.path)
                limiter.succeeded()
                if held.isLocked {
                    login.unlock(with: key)
                    announceLoginUnlocked()
                }
            })
    }

    private static func askOldPassword(
        _ login: Keychain, rekeyingTo newPassword: SecretBytes, _ pinentry: Pinentry
    ) -> (PasswordChange, UnwrappedKeychainKey)? {
        let request = PinentryRequest(
            title: "Login Keychain",
            description:
                "Your login password no longer unlocks your login keychain: it was changed without the keychain."
                + "\nEnter the keychain's previous password to re-key it to your login password.",
            prompt: "Previous password:", error: nil, okLabel: "Re-key")
        var prepared: (PasswordChange, UnwrappedKeychainKey)?
        _ = askUntilAccepted(
            pinentry, request, tries: 3, retryMessage: "That password does not unlock the keychain either. Try again."
        ) { (old) throws(KeychainError) in
            let key = try login.unwrapKey(password: old)
            prepared = (try login.rewrap(from: old, to: newPassword.bytes), key)
        }
        return prepared
    }

    /// Asks with `request` until `accept` takes the password (true), or the
    /// user cancels, the prompt fails, `accept` fails other than with a wrong
    /// password, or `tries` are wrong (false). Each password is wiped after use.
    static func askUntilAccepted(
        _ pinentry: Pinentry, _ request: PinentryRequest, tries: Int, retryMessage: String,
        accept: ([UInt8]) throws(KeychainError) -> Void
    ) -> Bool {
        var request = request
        for _ in 0..<tries {
            guard case .password(var password)? = try? pinentry.askPassword(request) else { return false }
            defer { wipeBytes(&password) }
            do {
                try accept(password)
                return true
            } catch {
                guard error.status == .authFailed else { return false }
            }
            request.error = retryMessage
        }
        return false
    }
}
