/// Which button of a three-button question ended it.
package enum PinentryChoice: Sendable, Equatable {
    /// The OK button (`SETOK`'s text).
    case ok
    /// The third button (`SETNOTOK`'s text), confirmed by the follow-up question. pinentry answers the third
    /// button with `GPG_ERR_NOT_CONFIRMED`, which is also its answer to anything else that ended in neither OK
    /// nor Cancel (`cmd_confirm`'s catch-all), so that answer alone never makes this choice.
    case notOK
    /// The Cancel button, the window closed or Escape, or the question withdrawn: `GPG_ERR_CANCELED`.
    case cancelled
}

extension Pinentry {
    /// Asks a question with three buttons (`CONFIRM` after `SETOK`, `SETNOTOK` and `SETCANCEL`; give
    /// `request.notOKLabel` and `request.followUp`, or only `.ok` and `.cancelled` can come). `.notOK` comes only
    /// from an explicit OK to the follow-up question: after the third button's answer (`GPG_ERR_NOT_CONFIRMED`,
    /// which pinentry also gives for whatever ended in neither OK nor Cancel) the follow-up asks again, OK being
    /// the third button's text and Cancel the Cancel's, and anything but OK there is `.cancelled`. A program that
    /// shows no third button (``showsThirdButton(_:)``) is asked OK-or-Cancel first, then the follow-up with the
    /// third button's text on OK and the first OK's on Cancel. Blocking; `.cancelled` also when `cancellation`
    /// ends it. A timeout or any other error is thrown.
    package func choose(
        _ request: PinentryRequest, cancellation: PinentryCancellation? = nil
    ) throws(PinentryError) -> PinentryChoice {
        do throws(PinentryError) {
            return try converse(request, cancellation) { (session) throws(PinentryError) -> PinentryChoice in
                guard request.notOKLabel != nil, let followUp = request.followUp else {
                    return try Self.confirm(session, hasThirdButton: false)
                }
                if try Self.showsThirdButton(session) {
                    let first = try Self.confirm(session, hasThirdButton: true)
                    guard first == .notOK else { return first }
                    // The third button, or pinentry's catch-all: only an explicit OK below makes it the third.
                    try Self.askAgain(session, request, followUp.question, cancelLabel: request.cancelLabel)
                    return try Self.confirm(session, hasThirdButton: false, timeoutIsCancel: true) == .ok
                        ? .notOK : .cancelled
                }
                try Self.set(session, [("SETOK", followUp.firstOKLabel)])
                guard try Self.confirm(session, hasThirdButton: false) == .ok else { return .cancelled }
                // The person did allow: the second question's Cancel, its timeout or its catch-all is OK.
                try Self.askAgain(session, request, followUp.question, cancelLabel: request.okLabel)
                return try Self.confirm(session, hasThirdButton: false, timeoutIsCancel: true) == .ok ? .notOK : .ok
            }
        } catch {
            if error == .cancelled { return .cancelled }
            throw error
        }
    }

    /// Whether the program shows `SETNOTOK`'s button. pinentry-gnome3 (flavor `gnome3`, its gcr prompt; not
    /// `gnome3:curses`, its fallback) accepts `SETNOTOK` and shows two buttons only; a program that does not
    /// know `GETINFO flavor` is taken to show it.
    static func showsThirdButton(_ session: AssuanSession) throws(PinentryError) -> Bool {
        var flavor: [UInt8] = []
        guard case .ok = try session.transact(Array("GETINFO flavor".utf8), data: &flavor) else { return true }
        return String(decoding: flavor, as: UTF8.self) != "gnome3"
    }

    /// Shows `question` in place of the first question, with the third button's text on OK and `cancelLabel` on
    /// Cancel, and no third button: `RESET` clears the first question's texts (pinentry keeps its options), and
    /// the second has what is left of the exchange's time (pinentry's own timeout ends it first).
    private static func askAgain(
        _ session: AssuanSession, _ request: PinentryRequest, _ question: String, cancelLabel: String?
    ) throws(PinentryError) {
        var ignored: [UInt8] = []
        if case .error(let code, let message) = try session.transact(Array("RESET".utf8), data: &ignored) {
            throw PinentryError(reason: "RESET failed with error \(code): \(message)")
        }
        let seconds = session.secondsLeft - 2
        try set(
            session,
            [
                ("SETTITLE", request.title), ("SETDESC", question), ("SETOK", request.notOKLabel),
                ("SETCANCEL", cancelLabel), ("SETTIMEOUT", seconds >= 1 ? String(seconds) : nil),
            ])
    }

    /// Sends each text command (`SETDESC`, `SETOK`, …) whose text is given and not empty.
    static func set(_ session: AssuanSession, _ texts: [(String, String?)]) throws(PinentryError) {
        for case (let command, let text?) in texts where !text.isEmpty {
            if case .error(let code, let message) = try session.command(command, text: text) {
                throw PinentryError(reason: "\(command) failed with error \(code): \(message)")
            }
        }
    }

    /// One `CONFIRM`: the button that ended it (with `timeoutIsCancel`, pinentry's timeout counts as Cancel).
    private static func confirm(_ session: AssuanSession, hasThirdButton: Bool, timeoutIsCancel: Bool = false)
        throws(PinentryError) -> PinentryChoice
    {
        var ignored: [UInt8] = []
        defer { AssuanText.wipe(&ignored) }
        switch try session.transact(Array("CONFIRM".utf8), data: &ignored) {
        case .ok:
            return .ok
        case .error(let code, _) where code & 0xFFFF == notConfirmedCode:
            return hasThirdButton ? .notOK : .cancelled
        case .error(let code, _) where code & 0xFFFF == canceledCode:
            return .cancelled
        case .error(let code, _) where timeoutIsCancel && code & 0xFFFF == timeoutCode:
            return .cancelled
        case .error(let code, let text):
            throw PinentryError(reason: "CONFIRM failed with error \(code): \(text)")
        }
    }
}
