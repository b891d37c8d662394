/// Which button of a three-button question ended it.
package enum PinentryChoice: Sendable, Equatable {
    /// The OK button (`SETOK`'s text).
    case ok
    /// The third button (`SETNOTOK`'s text): pinentry answers `CONFIRM` with `GPG_ERR_NOT_CONFIRMED`.
    case notOK
    /// The Cancel button, the window closed or Escape, or the question withdrawn: `GPG_ERR_CANCELED`.
    case cancelled
}

extension Pinentry {
    /// Asks a question with three buttons (`CONFIRM` after `SETOK`, `SETNOTOK` and `SETCANCEL`; give
    /// `request.notOKLabel`, or the third button is not shown and only `.ok` and `.cancelled` can come).
    /// A program that shows no third button (``showsThirdButton(_:)``) is asked `request.followUp`'s two
    /// questions instead, when given. Blocking; `.cancelled` also when `cancellation` ends it. A timeout or
    /// any other error is thrown.
    package func choose(
        _ request: PinentryRequest, cancellation: PinentryCancellation? = nil
    ) throws(PinentryError) -> PinentryChoice {
        do throws(PinentryError) {
            return try converse(request, cancellation) { (session) throws(PinentryError) -> PinentryChoice in
                let hasThirdButton = request.notOKLabel != nil
                guard hasThirdButton, let followUp = request.followUp, try !Self.showsThirdButton(session) else {
                    return try Self.confirm(session, hasThirdButton: hasThirdButton)
                }
                try Self.set(session, [("SETOK", followUp.firstOKLabel)])
                guard try Self.confirm(session, hasThirdButton: false) == .ok else { return .cancelled }
                // The second question has what is left of the exchange's time: pinentry's own timeout ends it
                // first, and that (as its Cancel) is Allow once: the person did allow.
                let seconds = session.secondsLeft - 2
                try Self.set(
                    session,
                    [
                        ("SETDESC", followUp.question), ("SETOK", request.notOKLabel), ("SETCANCEL", request.okLabel),
                        ("SETTIMEOUT", seconds >= 1 ? String(seconds) : nil),
                    ])
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
