import KeychainCore
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

/// The control socket's requests (from pam_latchkey) answered over the login (docs/control-socket.md): what
/// each origin may ask, and the reply's text, made here from the login's outcomes.
extension UserLogin {
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
            reply(ControlReply(.ok, Self.text(handOver(password: password))))
        case .openSession(let password):
            // Only a login counts a session: a process of the user that did would keep the last logout from
            // locking the login keychain.
            if case .login = origin { countSession() }
            guard let password else {
                let counted = origin == .login ? "session counted" : "not counted as a session (only a login is)"
                return reply(ControlReply(.ok, "\(counted); no password given: \(Self.text(state))"))
            }
            unlock(password: password, from: origin == .login ? .root : .userProcess) { [self] outcome in
                switch outcome {
                case .created: reply(ControlReply(.ok, "login keychain created and unlocked"))
                case .unlocked: reply(ControlReply(.ok, "login keychain unlocked"))
                case .alreadyUnlocked: reply(ControlReply(.ok, "login keychain already unlocked"))
                case .notUnlocked(let why):
                    let failing = login == nil ? "cannot create the login keychain" : "cannot unlock the login keychain"
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
            switch closeSession(lockIfLast: lockIfLast) {
            case .closed(let left): reply(ControlReply(.ok, "session closed; \(left) left"))
            case .lastClosedAndLocked: reply(ControlReply(.ok, "last session closed; login keychain locked"))
            }
        case .changePassword(let old, let new):
            rekey(from: old, to: new, limited: origin != .login) { outcome in reply(Self.reply(outcome)) }
        case .status:
            reply(ControlReply(.ok, "\(Self.text(state)); \(openSessions) sessions"))
        }
    }

    /// Answers the one change-password request `latchkeyd --change-login-password` read from its standard input
    /// (`received`), with no daemon: re-keys the login keychain file in `directory` (``rekeyFile(inDirectory:from:to:limited:)``),
    /// with the same replies as the daemon gives. A login's request (`passwd` through pam_latchkey, whose PAM
    /// stack verified the old password) is not under the wrong-password limit; a user process's is.
    package static func answerWithoutDaemon(
        _ received: Result<ControlRequest, ControlClientError>, keychainDirectory directory: String,
        from origin: ControlOrigin
    ) -> ControlReply {
        guard case .success(let request) = received, case .changePassword(let old, let new) = request else {
            return ControlReply(.badRequest, "standard input must hold one change-password request")
        }
        return reply(rekeyFile(inDirectory: directory, from: old, to: new, limited: origin != .login))
    }

    /// "absent", "locked" or "unlocked".
    static func text(_ state: LoginState) -> String {
        switch state {
        case .absent: "absent"
        case .locked: "locked"
        case .unlocked: "unlocked"
        }
    }

    /// The hand-over reply's text.
    static func text(_ start: HandOverStart) -> String {
        switch start {
        case .creating: "creating the login keychain"
        case .unlocking: "unlocking the login keychain"
        case .nothingToDo(let state): "login keychain \(text(state))"
        case .withoutPassword(let tpm): "session counted; no password given: " + text(tpm)
        }
    }

    /// What a login without a password started with the tpm2 slots, as the hand-over's reply says it.
    static func text(_ tpm: LoginTPMUnlock) -> String {
        switch tpm {
        case .noLoginKeychain: "login keychain absent"
        case .alreadyUnlocked: "login keychain unlocked"
        case .pinAskedAtFirstRequest: "login keychain locked; its tpm2 slot's PIN is asked at the first request"
        case .noTPMSlot: "login keychain locked"
        case .unlocking: "unlocking the login keychain from its tpm2 slot"
        }
    }

    /// The reply to a change-password request, through the daemon or on the file.
    static func reply(_ outcome: LoginRekeyOutcome) -> ControlReply {
        switch outcome {
        case .noLoginKeychain: ControlReply(.ok, "no login keychain; nothing to re-key")
        case .rekeyed: ControlReply(.ok, "login keychain re-keyed to the new password")
        case .rekeyedOldKeyStillInLog:
            ControlReply(
                .ok,
                "login keychain re-keyed to the new password; another process holds an older snapshot, so the"
                    + " previous wrapped key stays in the file's write-ahead log until the next checkpoint")
        case .refused(let why):
            refusal(
                why, failing: "cannot re-key the login keychain",
                wrong: "the old password does not unlock the login keychain; nothing changed")
        }
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
