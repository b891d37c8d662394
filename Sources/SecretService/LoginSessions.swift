import FoundationEssentials
import Glibc
import KeychainCore
import KeychainStore
import LoginControl
import Pinentry

/// Counts wrong login passwords and makes the caller wait after the third:
/// 2 s after the fourth, doubling up to a minute. A right password resets it.
/// A refused attempt is not tried at all, so nothing blocks.
struct WrongPasswordLimiter {
    private var failures = 0
    private var lastFailure: Int64 = 0
    static let freeAttempts = 3

    /// Seconds still to wait before the next try, 0 if it may be tried now.
    func secondsToWait(now: Int64 = monotonicSeconds()) -> Int64 {
        guard failures >= Self.freeAttempts else { return 0 }
        let delay = Int64(1) << min(failures - Self.freeAttempts + 1, 6)
        return max(0, lastFailure + min(delay, 60) - now)
    }

    mutating func failed(now: Int64 = monotonicSeconds()) {
        failures += 1
        lastFailure = now
    }

    mutating func succeeded() { failures = 0 }
}

func monotonicSeconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Int64(time.tv_sec)
}

/// The login sessions pam_latchkey reported and the state of re-keying.
struct LoginSessionState {
    var openSessions = 0
    var limiter = WrongPasswordLimiter()
    /// Whether a "your login password changed" prompt is showing.
    var rekeyPromptShowing = false
}

extension SecretService {
    /// Answers one control socket request (from pam_latchkey, as the user or root).
    public func answer(_ request: inout ControlRequest) -> ControlReply {
        switch request {
        case .openSession(let password):
            loginSessions.openSessions += 1
            guard let password else { return ControlReply(.ok, "session counted; no password given: \(loginState)") }
            return openLogin(password: password)
        case .closeSession(let lockIfLast):
            loginSessions.openSessions = max(0, loginSessions.openSessions - 1)
            guard lockIfLast, loginSessions.openSessions == 0 else {
                return ControlReply(.ok, "session closed; \(loginSessions.openSessions) left")
            }
            lockLoginKeychains()
            return ControlReply(.ok, "last session closed; login keychain locked")
        case .changePassword(let old, let new):
            return changeLoginPassword(from: old, to: new)
        case .status:
            return ControlReply(.ok, "\(loginState); \(loginSessions.openSessions) sessions")
        }
    }

    /// "absent", "locked" or "unlocked".
    var loginState: String {
        guard let login = loginCollection else { return "absent" }
        return login.isLocked ? "locked" : "unlocked"
    }

    /// Unlocks the login keychain with the login password, creating it when
    /// there is none. A password that does not unlock it means the login
    /// password changed without the keychain: the user is asked to re-key.
    func openLogin(password: [UInt8]) -> ControlReply {
        guard let login = loginCollection else {
            do {
                try createLoginKeychain(password: password)
            } catch {
                return ControlReply(.failed, "cannot create the login keychain: \(error.reason)")
            }
            if let created = loginCollection { announceCollections("CollectionCreated", created) }
            return ControlReply(.ok, "login keychain created and unlocked")
        }
        guard login.isLocked else { return ControlReply(.ok, "login keychain already unlocked") }
        if let refusal = tryLoginPassword(
            { () throws(KeychainError) in try login.keychain.unlock(password: password) },
            failing: "cannot unlock the login keychain",
            wrong: "the login password does not unlock the login keychain; the user is offered to re-key it")
        {
            if refusal.status == .wrongPassword { offerRekey(to: password, login: login.keychain) }
            return refusal
        }
        announceLoginUnlocked(login)
        return ControlReply(.ok, "login keychain unlocked")
    }

    /// Re-wraps the login keychain's key from `old` to `new`.
    func changeLoginPassword(from old: [UInt8], to new: [UInt8]) -> ControlReply {
        guard let login = loginCollection else { return ControlReply(.ok, "no login keychain; nothing to re-key") }
        return tryLoginPassword(
            { () throws(KeychainError) in try login.keychain.changePassword(from: old, to: new) },
            failing: "cannot re-key the login keychain",
            wrong: "the old password does not unlock the login keychain; nothing changed")
            ?? ControlReply(.ok, "login keychain re-keyed to the new password")
    }

    /// Runs `attempt`, which tries a login password, under the wrong-password
    /// limit: nil when it succeeded, else the reply (refused without trying,
    /// wrong password counted, or another failure prefixed by `failing`).
    private func tryLoginPassword(
        _ attempt: () throws(KeychainError) -> Void, failing: String, wrong: String
    ) -> ControlReply? {
        switch attemptLoginPassword(attempt) {
        case .accepted:
            return nil
        case .notTried(let wait):
            return ControlReply(.tooManyAttempts, "too many wrong passwords; not tried (wait \(wait) s)")
        case .failed(let error) where error.status == .authFailed:
            return ControlReply(.wrongPassword, wrong)
        case .failed(let error):
            return ControlReply(.failed, "\(failing): \(error.reason)")
        }
    }

    /// How a try of a login password under the limit ended.
    enum LoginPasswordAttempt {
        /// The attempt succeeded; the count of wrong passwords starts again.
        case accepted
        /// Refused without trying: this many seconds are left to wait.
        case notTried(waitSeconds: Int64)
        /// The attempt failed; `errSecAuthFailed` was counted as a wrong password.
        case failed(KeychainError)
    }

    /// Runs `attempt`, which tries a password of the login keychain (from a
    /// login, `passwd` or a client), under the one wrong-password limit.
    func attemptLoginPassword(_ attempt: () throws(KeychainError) -> Void) -> LoginPasswordAttempt {
        let wait = loginSessions.limiter.secondsToWait()
        guard wait == 0 else { return .notTried(waitSeconds: wait) }
        do {
            try attempt()
        } catch {
            if error.status == .authFailed { loginSessions.limiter.failed() }
            return .failed(error)
        }
        loginSessions.limiter.succeeded()
        return .accepted
    }

    /// Locks the login keychain and every collection its key protects.
    func lockLoginKeychains() {
        for collection in collections where collection.id != Self.sessionID { lock(collection) }
    }

    private func announceLoginUnlocked(_ login: SecretCollection) {
        announceLockChange(login)
        unlockCollections(protectedBy: login, among: collections)
    }

    /// Asks the user, through pinentry in a thread, for the keychain's old
    /// password and re-keys the login keychain to `loginPassword` with it.
    private func offerRekey(to loginPassword: [UInt8], login: Keychain) {
        guard !loginSessions.rekeyPromptShowing else { return }
        loginSessions.rekeyPromptShowing = true
        let pinentry = configuration.pinentry
        let completions = completions
        let newPassword = SecretBytes(loginPassword)
        runDetached {
            let rekeyed = Self.askOldPassword(login, rekeyingTo: newPassword, pinentry)
            completions.post(.rekey(succeeded: rekeyed))
        }
    }

    private static func askOldPassword(_ login: Keychain, rekeyingTo newPassword: SecretBytes, _ pinentry: Pinentry)
        -> Bool
    {
        let request = PinentryRequest(
            title: "Login Keychain",
            description:
                "Your login password no longer unlocks your login keychain: it was changed without the keychain."
                + "\nEnter the keychain's previous password to re-key it to your login password.",
            prompt: "Previous password:", error: nil, okLabel: "Re-key")
        return askUntilAccepted(
            pinentry, request, tries: 3, retryMessage: "That password does not unlock the keychain either. Try again."
        ) { (old) throws(KeychainError) in
            try login.changePassword(from: old, to: newPassword.bytes)
            try login.unlock(password: newPassword.bytes)
        }
    }

    /// Takes the re-key prompt's result on the serving thread.
    func deliverRekeyResult(rekeyed: Bool) {
        loginSessions.rekeyPromptShowing = false
        guard rekeyed, let login = loginCollection else { return }
        loginSessions.limiter.succeeded()
        announceLoginUnlocked(login)
    }
}

/// A password handed to a prompt thread; wiped when the last reference goes.
final class SecretBytes: @unchecked Sendable {
    private(set) var bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    deinit { wipeBytes(&bytes) }
}
