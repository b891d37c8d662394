import KeychainCore
import KeychainRegistry
import LoginControl

/// Who sent a control request, as the daemon can tell it.
package enum ControlOrigin: Sendable {
    /// A login: pam_latchkey as root (the peer's credentials say uid 0), or a request on the standard input
    /// of a daemon pam_latchkey started, when that is a socket pair root made (`isSocketPairMadeByRoot`). Its
    /// password is the one PAM verified: it may create the login keychain and re-key it.
    case login
    /// Another process of the user: its password only unlocks.
    case userProcess

    /// The origin of a request that came on the control socket from a peer running as `uid`.
    package init(peerUID uid: UInt32) {
        self = uid == 0 ? .login : .userProcess
    }
}

/// The control socket's requests (from pam_latchkey) answered over the registry.
extension SecretServiceDaemon {
    /// Answers one control socket request from `origin`; `reply` runs on the serving thread, at once or
    /// when the key derivation it needs is done.
    package func answer(
        _ request: ControlRequest, from origin: ControlOrigin, reply: @escaping (ControlReply) -> Void
    ) {
        switch request {
        case .handOver(let password):
            guard case .login = origin else {
                return reply(ControlReply(.badRequest, "only a login (pam_latchkey as root) hands over a password"))
            }
            registry.openLoginSessions += 1
            guard let password else {
                // A login with no password (autologin, fingerprint): a tpm2 slot without a PIN opens the
                // login keychain; the reply does not wait for the TPM.
                return reply(ControlReply(.ok, "session counted; no password given: " + registry.unlockLoginFromTPM()))
            }
            let creating = registry.login == nil
            registry.unlockLogin(password: password, from: .verifiedByPAM, holdingClients: true) { _ in }
            // When it is unlocked already, nothing is left to do; otherwise the key is being derived.
            reply(
                ControlReply(
                    .ok,
                    registry.isUnlockingAtLogin
                        ? (creating ? "creating the login keychain" : "unlocking the login keychain")
                        : "login keychain \(loginState)"))
        case .openSession(let password):
            // Only a login counts a session: a process of the user that did would keep the last logout from
            // locking the login keychain.
            if case .login = origin { registry.openLoginSessions += 1 }
            guard let password else {
                let counted = origin == .login ? "session counted" : "not counted as a session (only a login is)"
                return reply(ControlReply(.ok, "\(counted); no password given: \(loginState)"))
            }
            registry.unlockLogin(password: password, from: origin == .login ? .root : .userProcess) { outcome in
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
                            wrong: origin == .login
                                ? "the login password does not unlock the login keychain; the user is offered to re-key it"
                                : "the password does not unlock the login keychain"))
                }
            }
        case .closeSession(let lockIfLast):
            guard case .login = origin else {
                return reply(ControlReply(.badRequest, "only a login (pam_latchkey as root) closes a session"))
            }
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
            registry.changePassword(of: login, from: old, to: new, limited: origin != .login) { outcome in
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
