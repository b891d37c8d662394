import FoundationEssentials
import Glibc
import Posix

/// What the prompt shows.
package struct PinentryRequest: Sendable, Hashable {
    /// The window title (`SETTITLE`); not sent when empty.
    package var title: String
    /// The explanation of what is asked and why (`SETDESC`); may span several lines.
    package var description: String
    /// The label next to the entry field (`SETPROMPT`).
    package var prompt: String
    /// An error shown above the entry field (`SETERROR`), e.g. after a wrong password.
    package var error: String?
    /// The text of the OK button (`SETOK`); the program's default when nil.
    package var okLabel: String?
    /// The text of the Cancel button (`SETCANCEL`); the program's default when nil.
    package var cancelLabel: String?
    /// The text of a third button (`SETNOTOK`), shown by `CONFIRM` between OK and Cancel; none when nil.
    package var notOKLabel: String?
    /// How the third button is offered by a program that shows none (pinentry-gnome3, whose gcr prompt has
    /// two buttons); nil: it is simply missing there.
    package var followUp: PinentryFollowUp?

    /// Describes a prompt.
    package init(
        title: String, description: String, prompt: String = "Password:", error: String? = nil,
        okLabel: String? = nil, cancelLabel: String? = nil, notOKLabel: String? = nil,
        followUp: PinentryFollowUp? = nil
    ) {
        self.followUp = followUp
        self.title = title
        self.description = description
        self.prompt = prompt
        self.error = error
        self.okLabel = okLabel
        self.cancelLabel = cancelLabel
        self.notOKLabel = notOKLabel
    }
}

/// A three-button question asked as two on a program that shows no third button: the first has OK
/// relabelled (`firstOKLabel`, and Cancel as asked); after OK, a second (`question`) has the third button's
/// text on OK and the first's OK text on Cancel. OK there is the third button; Cancel, Escape or closing it is
/// OK.
package struct PinentryFollowUp: Sendable, Hashable {
    /// The OK button of the first question (e.g. "Allow…").
    package var firstOKLabel: String
    /// The description of the second question.
    package var question: String

    /// Describes the two questions.
    package init(firstOKLabel: String, question: String) {
        self.firstOKLabel = firstOKLabel
        self.question = question
    }
}

/// How a prompt ended.
package enum PinentryOutcome: Sendable, Equatable {
    /// The user entered this password: the UTF-8 bytes the program sent, in secret memory (wiped when the
    /// last holder lets go).
    case password(SharedSecret)
    /// The user dismissed the prompt.
    case cancelled
}

/// How a new-password dialog with its confirmation (``Pinentry/askNewPassword(_:repeatPrompt:mismatchError:cancellation:)``)
/// ended.
package enum NewPasswordOutcome: Sendable, Equatable {
    /// The password, typed twice alike (the program said `S PIN_REPEATED`).
    case confirmed(SharedSecret)
    /// The password, typed once: the program took `SETREPEAT` but did not say the repeat matched, so it still
    /// needs a confirmation.
    case unconfirmed(SharedSecret)
    /// The user dismissed the prompt.
    case cancelled
}

/// A failure to run the prompt at all (program missing, protocol error, timeout).
package struct PinentryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in words.
    package let reason: String

    /// Wraps a reason.
    package init(reason: String) {
        self.reason = reason
    }

    /// The reason, prefixed so that it reads well in a log.
    package var description: String { "pinentry: \(reason)" }

    /// The exchange was ended through its ``PinentryCancellation``; `askPassword` and `confirm` answer it as a
    /// cancel rather than throw it.
    static let cancelled = PinentryError(reason: "the prompt was withdrawn")
}

/// Runs a pinentry program.
///
/// Each call starts a fresh child process, talks Assuan to it over a socket that is the child's stdin and stdout,
/// says `BYE`, and reaps it. Calls block and may run on several threads at once. A call given a
/// ``PinentryCancellation`` ends as soon as it is cancelled: the child gets `SIGTERM`, then `SIGKILL`, and
/// is reaped before the call returns.
package struct Pinentry: Sendable {
    /// The program: a path, or a name searched in the `PATH` of `environment`.
    package let program: String
    /// The environment the child runs with.
    package let environment: [String: String]
    /// How long a whole exchange may take before the child is killed.
    package private(set) var timeout: Duration
    /// Whether a session's `PINENTRY` (``inSession(_:)``) chooses the program: true when the program came
    /// from an environment rather than being named outright.
    package let followsSessionProgram: Bool
    /// Whether the program must be one only root can change (``PinentryProgram/isProtected(_:)``), a name
    /// alone looked for in ``PinentryProgram/protectedSearchPath``: true for a program the daemon takes from an
    /// environment (its own, a session's), which other processes of the user can set.
    package let requiresProtectedProgram: Bool
    /// The window the prompt is a dialog of (`OPTION parent-wid`, as gpg-agent sends a client's
    /// `--parent-wid`): an X11 window id a client gave, nil for none (``parented(by:)``).
    package private(set) var parentWindow: Int64?
    /// The caller's terminal the prompt shows on (``onTerminal(_:in:)``), nil for a window.
    package private(set) var terminal: PromptTerminal?
    /// Why no prompt can be shown where the request came from (``PromptPlace/nowhere(_:)``): every exchange
    /// then fails with it, nothing started.
    package private(set) var unavailable: String?

    /// `program` is a path or a name searched in PATH; `environment` is passed to the child (DISPLAY,
    /// WAYLAND_DISPLAY, GPG_TTY, DBUS_SESSION_BUS_ADDRESS … matter to real pinentries); `timeout` bounds the whole
    /// exchange (the child is killed after it).
    package init(
        program: String = "pinentry", environment: [String: String] = ProcessInfo.processInfo.environment,
        timeout: Duration = .seconds(120)
    ) {
        self.init(
            program: program, environment: environment, timeout: timeout, followsSessionProgram: false,
            requiresProtectedProgram: false)
    }

    private init(
        program: String, environment: [String: String], timeout: Duration, followsSessionProgram: Bool,
        requiresProtectedProgram: Bool
    ) {
        self.program = program
        self.environment = environment
        self.timeout = timeout
        self.followsSessionProgram = followsSessionProgram
        self.requiresProtectedProgram = requiresProtectedProgram
    }

    /// The program chosen the way the daemon should: `PINENTRY` from `environment` if set, else "pinentry"
    /// (and a session's `PINENTRY` later, see ``inSession(_:)``). With `requiringProtectedProgram` (the
    /// daemon), the program must be one only root can change.
    package static func fromEnvironment(
        _ environment: [String: String], requiringProtectedProgram: Bool = false
    ) -> Pinentry {
        let chosen = environment["PINENTRY"].flatMap { $0.isEmpty ? nil : $0 } ?? "pinentry"
        return Pinentry(
            program: chosen, environment: environment, timeout: .seconds(120), followsSessionProgram: true,
            requiresProtectedProgram: requiringProtectedProgram)
    }

    /// This pinentry with its program resolved once to its real path and checked (``PinentryProgram``): what
    /// runs from then on is that path, whatever a symlink on the way points at later.
    package func resolved() throws(PinentryError) -> Pinentry {
        Pinentry(
            program: try executablePath(), environment: environment, timeout: timeout,
            followsSessionProgram: followsSessionProgram, requiresProtectedProgram: requiresProtectedProgram)
    }

    /// This pinentry with `session`'s variables over its environment (those the session said it does not have
    /// removed from it), and the session's `PINENTRY` as the program unless the program was named outright.
    package func inSession(_ session: SessionEnvironment) -> Pinentry {
        var merged = environment.filter { !session.unset.contains($0.key) }
        merged.merge(session.values) { $1 }
        let chosen = followsSessionProgram ? session.values["PINENTRY"] ?? program : program
        var result = Pinentry(
            program: chosen, environment: merged, timeout: timeout, followsSessionProgram: followsSessionProgram,
            requiresProtectedProgram: requiresProtectedProgram)
        result.parentWindow = parentWindow
        result.terminal = terminal
        result.unavailable = unavailable
        return result
    }

    /// The names of the pinentry programs that show on a terminal, tried in this order.
    package static let terminalPrograms = ["pinentry-curses", "pinentry-tty"]

    /// A pinentry on `terminal` (its descriptor handed to the child as 3, `OPTION ttyname=/dev/fd/3`): the
    /// session's `PINENTRY` when it is one of ``terminalPrograms``, else the first of them found where only
    /// root can change it (``PinentryProgram/protectedSearchPath``). This pinentry's environment without the
    /// display's variables, with the terminal's `TERM` and `LC_CTYPE`.
    package func onTerminal(_ terminal: PromptTerminal, in session: SessionEnvironment) -> Pinentry {
        let named = session.values["PINENTRY"].flatMap { path in
            Self.terminalPrograms.contains(String(path.split(separator: "/").last ?? "")) ? path : nil
        }
        let program =
            named ?? Self.terminalPrograms.first { SessionEnvironment.protectedProgram($0) != nil }
            ?? Self.terminalPrograms[0]
        var variables = environment.filter {
            !["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "GPG_TTY", "PINENTRY", "LC_ALL"].contains($0.key)
        }
        variables["TERM"] = terminal.type
        variables["LC_CTYPE"] = terminal.characterType
        var result = Pinentry(
            program: program, environment: variables, timeout: timeout, followsSessionProgram: false,
            requiresProtectedProgram: true)
        result.terminal = terminal
        return result
    }

    /// This pinentry, unable to show anything: every exchange fails with `reason` (``unavailable``).
    package func nowhere(_ reason: String) -> Pinentry {
        var result = self
        result.unavailable = reason
        return result
    }

    /// This pinentry with `window` as the prompt's parent window when it is above zero; none otherwise.
    package func parented(by window: Int64?) -> Pinentry {
        var result = self
        result.parentWindow = window.flatMap { $0 > 0 ? $0 : nil }
        return result
    }

    /// This pinentry with an exchange bounded to `limit` at most.
    package func bounded(to limit: Duration) -> Pinentry {
        var result = self
        result.timeout = min(timeout, limit)
        return result
    }

    /// Asks for a password (GETPIN). Blocking; `.cancelled` also when `cancellation` ends it.
    package func askPassword(
        _ request: PinentryRequest, cancellation: PinentryCancellation? = nil
    ) throws(PinentryError) -> PinentryOutcome {
        // The answer is decoded straight into secret memory, which grows (to new pages, the old ones wiped)
        // when a long or many-line answer needs it: no other copy of it is made.
        var pin: SecretBytes
        do {
            pin = try SecretBytes(capacity: AssuanText.maxLineLength)
        } catch {
            throw PinentryError(reason: "\(error)")
        }
        let reply: AssuanReply
        do throws(PinentryError) {
            reply = try converse(request, cancellation) { session throws(PinentryError) in
                try session.transact(Array("GETPIN".utf8), secret: &pin)
            }
        } catch {
            if error == .cancelled { return .cancelled }
            throw error
        }
        switch reply {
        case .ok:
            return .password(SharedSecret(pin))
        case .error(let code, _) where code & 0xFFFF == Self.canceledCode:
            return .cancelled
        case .error(let code, let text):
            throw PinentryError(reason: "GETPIN failed with error \(code): \(text)")
        }
    }

    /// Asks for a new password with its confirmation in one dialog, as gpg-agent does: `SETREPEAT` (the
    /// confirmation field's label) and `SETREPEATERROR` (shown when the two differ), then `GETPIN`. The program
    /// asks again itself until both match (pinentry-tty and -curses show the error and ask both again;
    /// pinentry-gnome3 shows gcr's new-password prompt) and says so with the status `S PIN_REPEATED`.
    /// Nil when the program does not know `SETREPEAT` (it answers an error): ask twice then. Blocking.
    package func askNewPassword(
        _ request: PinentryRequest, repeatPrompt: String, mismatchError: String,
        cancellation: PinentryCancellation? = nil
    ) throws(PinentryError) -> NewPasswordOutcome? {
        var pin: SecretBytes
        do {
            pin = try SecretBytes(capacity: AssuanText.maxLineLength)
        } catch {
            throw PinentryError(reason: "\(error)")
        }
        let answer: (reply: AssuanReply, repeated: Bool)?
        do throws(PinentryError) {
            answer = try converse(request, cancellation) { (session) throws(PinentryError) -> (AssuanReply, Bool)? in
                guard try session.command("SETREPEAT", text: repeatPrompt) == .ok else { return nil }
                _ = try session.command("SETREPEATERROR", text: mismatchError)
                let reply = try session.transact(Array("GETPIN".utf8), secret: &pin)
                return (reply, session.statusKeywords.contains("PIN_REPEATED"))
            }
        } catch {
            if error == .cancelled { return .cancelled }
            throw error
        }
        guard let answer else { return nil }
        switch answer.reply {
        case .ok:
            return answer.repeated ? .confirmed(SharedSecret(pin)) : .unconfirmed(SharedSecret(pin))
        case .error(let code, _) where code & 0xFFFF == Self.canceledCode:
            return .cancelled
        case .error(let code, let text):
            throw PinentryError(reason: "GETPIN failed with error \(code): \(text)")
        }
    }

    /// Asks for a yes/no confirmation (CONFIRM): true for OK, false for cancel or "not confirmed" (also when
    /// `cancellation` ends it). Blocking. The two-button form of ``choose(_:cancellation:)``.
    package func confirm(
        _ request: PinentryRequest, cancellation: PinentryCancellation? = nil
    ) throws(PinentryError) -> Bool {
        var twoButtons = request
        twoButtons.notOKLabel = nil
        return try choose(twoButtons, cancellation: cancellation) == .ok
    }

    /// `GPG_ERR_CANCELED`, the low 16 bits of the code a pinentry answers when the user cancels.
    static let canceledCode: UInt32 = 99
    /// `GPG_ERR_TIMEOUT`, answered when the prompt's own timeout (`SETTIMEOUT`) ran out.
    static let timeoutCode: UInt32 = 62
    /// `GPG_ERR_NOT_CONFIRMED`, answered to `CONFIRM` when the user declines.
    static let notConfirmedCode: UInt32 = 114

    /// Starts the program, shows `request`, runs `ask`, then ends politely with `BYE`; on any thrown error
    /// (a cancellation among them) the child is ended instead. Either way it is reaped before this returns.
    func converse<Answer>(
        _ request: PinentryRequest, _ cancellation: PinentryCancellation?,
        _ ask: (AssuanSession) throws(PinentryError) -> Answer
    ) throws(PinentryError) -> Answer {
        if cancellation?.isCancelled == true { throw .cancelled }
        if let unavailable { throw PinentryError(reason: unavailable) }
        let path = try executablePath()
        let session = try AssuanSession(
            executable: path, environment: environment, timeout: timeout, cancellation: cancellation,
            terminal: terminal?.descriptor)
        do throws(PinentryError) {
            try session.expectGreeting()
            for (name, value) in terminalOptions() {
                _ = try session.command("OPTION", raw: "\(name)=\(value)")
            }
            // A pinentry that does not know it answers an error, which is ignored (as gpg-agent does).
            if let parentWindow { _ = try session.command("OPTION", raw: "parent-wid=\(parentWindow)") }
            let seconds = session.secondsLeft - 2
            if seconds >= 1 {
                _ = try session.command("SETTIMEOUT", raw: String(seconds))
            }
            let texts: [(String, String?)] = [
                ("SETTITLE", request.title), ("SETDESC", request.description), ("SETPROMPT", request.prompt),
                ("SETERROR", request.error), ("SETOK", request.okLabel), ("SETCANCEL", request.cancelLabel),
                // A third button only with the question that confirms it (``choose(_:cancellation:)``).
                ("SETNOTOK", request.followUp == nil ? nil : request.notOKLabel),
            ]
            try Self.set(session, texts)
            let reply = try ask(session)
            session.finish()
            return reply
        } catch {
            session.terminate()
            throw error
        }
    }

    /// The `OPTION`s gpg-agent would send for a terminal pinentry, taken from `environment`. Values are sent raw
    /// (pinentry does not unescape them), so values with control characters are left out.
    private func terminalOptions() -> [(String, String)] {
        let locale = environment["LC_ALL"] ?? environment["LC_CTYPE"] ?? environment["LANG"]
        let messages = environment["LC_ALL"] ?? environment["LC_MESSAGES"] ?? environment["LANG"]
        // On a caller's terminal: the descriptor the child got as 3, never a name to open again.
        let candidates: [(String, String?)] = [
            ("ttyname", terminal == nil ? environment["GPG_TTY"] : "/dev/fd/3"), ("ttytype", environment["TERM"]),
            ("lc-ctype", locale), ("lc-messages", messages),
        ]
        return candidates.compactMap { name, value in
            guard let value, !value.isEmpty, !value.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                return nil
            }
            return (name, value)
        }
    }

    /// `program` resolved to the real path of an executable file (``PinentryProgram/resolve(_:searchPath:onlyRoot:)``):
    /// a name alone is looked for in the child's `PATH`, or, when the program must be one only root can change,
    /// in ``PinentryProgram/protectedSearchPath``. Resolved again at each start, so that an already resolved
    /// program is checked again; the path returned is the one started.
    private func executablePath() throws(PinentryError) -> String {
        let search =
            requiresProtectedProgram
            ? PinentryProgram.protectedSearchPath
            : (environment["PATH"] ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
                .split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        return try PinentryProgram.resolve(program, searchPath: search, onlyRoot: requiresProtectedProgram)
    }
}
