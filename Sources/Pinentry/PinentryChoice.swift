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
    /// Blocking; `.cancelled` also when `cancellation` ends it. A timeout or any other error is thrown.
    package func choose(
        _ request: PinentryRequest, cancellation: PinentryCancellation? = nil
    ) throws(PinentryError) -> PinentryChoice {
        var ignored: [UInt8] = []
        defer { AssuanText.wipe(&ignored) }
        let reply: AssuanReply
        do throws(PinentryError) {
            reply = try converse(request, cancellation) { session throws(PinentryError) in
                try session.transact(Array("CONFIRM".utf8), data: &ignored)
            }
        } catch {
            if error == .cancelled { return .cancelled }
            throw error
        }
        switch reply {
        case .ok:
            return .ok
        case .error(let code, _) where code & 0xFFFF == Self.notConfirmedCode:
            return request.notOKLabel == nil ? .cancelled : .notOK
        case .error(let code, _) where code & 0xFFFF == Self.canceledCode:
            return .cancelled
        case .error(let code, let text):
            throw PinentryError(reason: "CONFIRM failed with error \(code): \(text)")
        }
    }
}
