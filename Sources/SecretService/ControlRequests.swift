import KeychainCore
import KeychainRegistry
import LoginControl

/// The control socket's requests (from pam_latchkey) answered over the registry.
extension SecretServiceDaemon {
    /// Answers one control socket request; `reply` runs on the serving thread, at once or when the key
    /// derivation it needs is done.
    package func answer(_ request: ControlRequest, reply: @escaping (ControlReply) -> Void) {
        switch request {
        case .openSession(let password):
            registry.openLoginSessions += 1
            guard let password else {
                return reply(ControlReply(.ok, "session counted; no password given: \(loginState)"))
            }
            registry.unlockLogin(password: password, offerRekey: true) { outcome in
                switch outcome {
                case .created: reply(ControlReply(.ok, "login keychain created and unlocked"))
                case .unlocked: reply(ControlReply(.ok, "login keychain unlocked"))
                case .alreadyUnlocked: reply(ControlReply(.ok, "login keychain already unlocked"))
                case .notUnlocked(let why):
                    let failing =
                        self.registry.login == nil
                        ? "cannot create the login keychain" : "cannot unlock the login keychain"
                    reply(
                        Self.refusal(
                            why, failing: failing,
                            wrong:
                                "the login password does not unlock the login keychain; the user is offered to re-key it"
                        ))
                }
            }
        case .closeSession(let lockIfLast):
            registry.openLoginSessions = max(0, registry.openLoginSessions - 1)
            guard lockIfLast, registry.openLoginSessions == 0 else {
                return reply(ControlReply(.ok, "session closed; \(registry.openLoginSessions) left"))
            }
            registry.lockLoginKeychains()
            reply(ControlReply(.ok, "last session closed; login keychain locked"))
        case .changePassword(let old, let new):
            guard let login = registry.login else {
                return reply(ControlReply(.ok, "no login keychain; nothing to re-key"))
            }
            registry.changePassword(of: login, from: old, to: new) { outcome in
                guard case .accepted = outcome else {
                    return reply(
                        Self.refusal(
                            outcome, failing: "cannot re-key the login keychain",
                            wrong: "the old password does not unlock the login keychain; nothing changed"))
                }
                reply(ControlReply(.ok, "login keychain re-keyed to the new password"))
            }
        case .status:
            reply(ControlReply(.ok, "\(loginState); \(registry.openLoginSessions) sessions"))
        }
    }

    /// "absent", "locked" or "unlocked".
    var loginState: String {
        guard let login = registry.login else { return "absent" }
        return login.isLocked ? "locked" : "unlocked"
    }

    private static func refusal(_ outcome: LoginPasswordOutcome, failing: String, wrong: String) -> ControlReply {
        switch outcome {
        case .notTried(let wait):
            ControlReply(.tooManyAttempts, "too many wrong passwords; not tried (wait \(wait) s)")
        case .failed(let error) where error.status == .authFailed: ControlReply(.wrongPassword, wrong)
        case .failed(let error): ControlReply(.failed, "\(failing): \(error.reason)")
        case .accepted: ControlReply(.ok, "")
        }
    }
}
