import Glibc
import KeychainCore
import KeychainStore
import Pinentry
import Posix

/// Where each request's prompts show (docs/prompts-in-terminals.md): the face says, per request, where its
/// caller is (``promptPlaceOfRequest``); the tickets it takes carry that place; the prompt's pinentry is made
/// for it when it shows. `latchkeyd --pinentry PROGRAM` keeps one prompter for every prompt.
extension KeychainRegistry {
    /// Whether prompts show where their caller is: false when the daemon was given one pinentry outright
    /// (`--pinentry`), which then shows every prompt as it always did.
    package var choosesPromptPlace: Bool { configuration.pinentry.followsSessionProgram }

    /// The session's variables as far as they are known without asking anyone: those handed over, the
    /// daemon's own, and the systemd user manager's as last read.
    package var knownSession: SessionEnvironment {
        sessionEnvironment.over(SessionEnvironment(picking: configuration.pinentry.environment)).over(
            placeState.systemdSession ?? SessionEnvironment())
    }

    /// Whether a display is known: true, false (none anywhere, the systemd user manager asked), nil (not
    /// known yet: the systemd user manager is still to answer). Reading the manager's variables again starts,
    /// on the quick worker, when none is known, so that a display exported since is seen by the next request.
    package var displayIsKnown: Bool? {
        if knownSession.hasDisplay { return true }
        guard configuration.systemctl != nil else { return false }
        refreshSystemdSession()
        return placeState.systemdSession == nil ? nil : false
    }

    /// How long a read of the systemd user manager's variables stands for the requests that follow: a prompt
    /// is asked for by two requests of its client (Secret Service `Unlock`, which says whether a prompt can
    /// show at all, then `Prompt`), which read them once.
    static let systemdSessionFreshness: Duration = .seconds(1)

    /// Reads the systemd user manager's session variables again, on the quick worker (at most one read at a
    /// time, none within ``systemdSessionFreshness`` of the last one's start).
    func refreshSystemdSession() {
        guard let systemctl = configuration.systemctl, !placeState.isReadingSystemd else { return }
        let now = self.now
        if let started = placeState.systemdReadStarted,
            now - started < RegistryClock.nanoseconds(Self.systemdSessionFreshness)
        {
            return
        }
        placeState.systemdReadStarted = now
        placeState.isReadingSystemd = true
        let runtime = configuration.pinentry.environment["XDG_RUNTIME_DIR"] ?? "/run/user/\(getuid())"
        offLoop(
            quick: true, { SessionEnvironment.fromSystemdUserManager(systemctl: systemctl, runtimeDirectory: runtime) },
            then: { [self] found in
                placeState.isReadingSystemd = false
                placeState.systemdSession = found
            })
    }

    /// `ticket` with the place of the request being served, when the face says where its caller is.
    func placed(_ ticket: PromptTicket) -> PromptTicket {
        if choosesPromptPlace, let place = promptPlaceOfRequest?() {
            ticket.place = place
            ticket.queueKey = place.queueKey
        }
        return ticket
    }

    /// The pinentry for a prompt at `place` (nil: no caller known, as before places were chosen): a pinentry
    /// named outright shows every prompt; a terminal gets a terminal pinentry on it; the desktop gets the
    /// session's pinentry with the session's display (``pinentry(_:in:systemctl:)``), and nothing at all when
    /// there is none. Runs on the prompt's thread (the systemd user manager may be asked).
    static func prompter(
        _ base: Pinentry, at place: PromptPlace?, in session: SessionEnvironment, systemctl: String?,
        sessionPinentry: (Pinentry, SessionEnvironment, String?) -> Pinentry
    ) -> Pinentry {
        guard base.followsSessionProgram, let place else { return sessionPinentry(base, session, systemctl) }
        switch place {
        case .terminal(let terminal): return base.inSession(session).onTerminal(terminal, in: session)
        case .nowhere(let reason): return base.nowhere(Self.nothingShown(reason))
        case .desktop:
            let shown = sessionPinentry(base, session, systemctl)
            guard SessionEnvironment(picking: shown.environment).hasDisplay else {
                return shown.nowhere(Self.nothingShown(PromptPlace.noDisplayNoTerminal))
            }
            return shown
        }
    }

    /// Why a prompt was not shown, as the request's error and the log say it.
    static func nothingShown(_ reason: String) -> String {
        "no prompt can be shown to this program (\(reason)): run it in a terminal or in the desktop session"
    }

    /// The error a request that needs a keychain unlocked gets when its caller is nowhere a prompt can show
    /// (``PromptPlace/nowhere(_:)``), nil when a prompt can be shown to it; said in the log too.
    /// `subject` says what is locked in place of the keychains' names.
    package func unlockRefusal(_ keychains: [HeldKeychain], subject: String? = nil) -> String? {
        guard choosesPromptPlace, case .nowhere(let reason)? = promptPlaceOfRequest?() else { return nil }
        let names = keychains.map { $0.id == Self.loginID ? "login" : "“\(PromptText.field($0.label, bytes: 60))”" }
        let subject =
            subject
            ?? (names.count == 1
                ? "The \(names[0]) keychain is locked"
                : "The keychains \(names.joined(separator: " and ")) are locked")
        let message = PromptPlace.nothingShown(subject, because: reason)
        Self.log(message)
        return message
    }

    /// How a question on a terminal is answered: by typing a password (as sudo asks), not a key a program
    /// sharing the terminal could push into it (docs/threat-model.md, "Prompts on a terminal"). The password
    /// of `held` when it has one of its own, else the login keychain's; checked on the worker as an unlock
    /// attempt of the daemon's own prompt is. Nil when there is no password to ask (no login keychain).
    func terminalPasswordCheck(for held: HeldKeychain?) -> TerminalPasswordCheck? {
        let keychain: Keychain
        let whose: String
        if let held, case .ownPassword = held.unlocking {
            keychain = held.keychain
            whose = "the password of the keychain “\(PromptText.field(held.label, bytes: 60))”"
        } else if let login = login?.keychain {
            keychain = login
            whose = "your login password"
        } else {
            return nil
        }
        let check = Self.attempt { (password) throws(KeychainError) in
            // Typed on a terminal, which the program that asked may hold (a pseudo-terminal of its own): under
            // the wrong-password limit and counted, as a program's attempt.
            _ = try Self.unwrapKey(keychain, typed: password, inPrompt: false)
        }
        return TerminalPasswordCheck(check: check, whose: whose)
    }
}

/// The password that answers a question on a terminal (``KeychainRegistry/terminalPasswordCheck(for:)``).
struct TerminalPasswordCheck: Sendable {
    /// Tries the password typed, on the worker.
    let check: @Sendable ([SharedSecret]) -> Result<Void, KeychainError>
    /// Whose password it is, as the prompt names it ("your login password").
    let whose: String
}

/// What happened to a question asked on a terminal, for the dialog's own record of it.
enum TerminalAnswerNote: Sendable {
    /// A password was typed (to be tried).
    case typed
    /// The person chose Refuse.
    case cancelled
    /// No prompt could be shown, or there was no password to ask: why.
    case failed(String)
}

/// What the registry keeps for choosing places: the systemd user manager's variables as last read.
struct PromptPlaceState {
    /// nil until first read.
    var systemdSession: SessionEnvironment?
    var isReadingSystemd = false
    /// When the last read started (the registry's clock).
    var systemdReadStarted: Int64?
}

extension PromptDialog {
    /// A question that, on a terminal, is answered by typing a password (`password`, "to `consent`"): right,
    /// it gives `onTerminal`; wrong, it asks again within `tries`; Refuse ends it declined when `cancelIsDecline`, else
    /// unanswered (pinentry-curses: Tab to Refuse, Enter). Elsewhere `question` asks it (with a yes/no or three buttons). `note` hears what happened
    /// on the terminal, on the prompt's thread.
    init(
        sharingKey: String?, tries: Int, password: TerminalPasswordCheck?, onTerminal answer: Answer,
        consent: String, cancelIsDecline: Bool, request: @escaping @Sendable () -> PinentryRequest,
        question: @escaping @Sendable (Pinentry, PinentryCancellation) -> PromptReply<Answer>,
        note: @escaping @Sendable (TerminalAnswerNote) -> Void,
        apply: @escaping (Answer) -> Void, isSatisfied: @escaping () -> Bool
    ) {
        self.sharingKey = sharingKey
        self.tries = tries
        self.retryMessage = "The password was not correct. Try again."
        self.ask = { pinentry, error, cancellation in
            guard pinentry.terminal != nil else {
                switch question(pinentry, cancellation) {
                case .answered(let answer): return .answered(.ready(answer))
                case .declined: return .declined
                case .unanswered: return .unanswered
                }
            }
            guard let password else {
                note(.failed("there is no password to ask on the terminal"))
                return .unanswered
            }
            var asked = request()
            asked.description += "\n\nType \(password.whose) to \(consent), or choose Refuse."
            asked.prompt = "Password:"
            asked.okLabel = "OK"
            asked.cancelLabel = "Refuse"
            asked.notOKLabel = nil
            asked.followUp = nil
            asked.error = error
            do throws(PinentryError) {
                switch try pinentry.askPassword(asked, cancellation: cancellation) {
                case .password(let typed):
                    note(.typed)
                    let check = password.check
                    return .answered(.toTry { check([typed]).map { answer } })
                case .cancelled:
                    if cancellation.isCancelled { return .unanswered }
                    note(.cancelled)
                    return cancelIsDecline ? .declined : .unanswered
                }
            } catch {
                note(.failed(error.description))
                return .unanswered
            }
        }
        self.apply = apply
        self.isSatisfied = isSatisfied
    }
}
