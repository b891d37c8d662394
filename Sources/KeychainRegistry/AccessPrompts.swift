import Glibc
import KeychainCore
import Pinentry
import Synchronization

/// What the person answered when asked whether an application may read an item's secret (docs/threat-model.md,
/// "Access lists"). Deny, or no way to ask, is no answer: the prompt ends declined.
package enum AccessAnswer: Sendable, Equatable {
    /// This request only.
    case allowOnce
    /// This request, and the application is added to the item's access list.
    case allowAlways
}

/// What an access prompt asks leave for: to hand an item's secret over, to change an item (its secret, label or
/// attributes) or to delete it (docs/threat-model.md, "Access lists"). The decision is the same for each (the
/// item's access list, else the person); the words differ, and only a read offers Always allow.
package enum AccessKind: Sendable, Equatable {
    /// The item's secret is asked for.
    case read
    /// The item's secret, label or attributes would be replaced.
    case change
    /// The item would be deleted.
    case delete

    /// The verb a prompt and an error message use: "read", "CHANGE", "DELETE" (capitals, so that a change is
    /// not taken for the usual read).
    package var verb: String {
        switch self {
        case .read: "read"
        case .change: "CHANGE"
        case .delete: "DELETE"
        }
    }
}

/// The words of an access prompt, made on the prompt's own thread just before it shows (so that a slow
/// lookup, `dpkg -S`, never runs on the serving thread).
package struct AccessQuestion: Sendable {
    /// The pinentry request: title, description and the three buttons' labels.
    package let request: PinentryRequest
    /// The application and item, for the log line written when there is no way to ask.
    package let subject: String

    /// A question: `description` names the application and the item; Allow once is pinentry's OK button,
    /// Always allow its third (`SETNOTOK`; not offered when `offersAlways` is false) and Deny its Cancel
    /// (also closing the window, Escape, and the prompt's timeout). A pinentry that shows no third button
    /// (pinentry-gnome3) asks Allow… / Deny, then `alwaysQuestion` with Always allow / Allow once.
    package init(description: String, offersAlways: Bool, subject: String, alwaysQuestion: String) {
        self.request = PinentryRequest(
            title: "Keychain Access", description: description, prompt: "", okLabel: "Allow once",
            cancelLabel: "Deny", notOKLabel: offersAlways ? "Always allow" : nil,
            followUp: offersAlways ? PinentryFollowUp(firstOKLabel: "Allow…", question: alwaysQuestion) : nil)
        self.subject = subject
    }
}

/// Why an access prompt ended without an answer, when the pinentry could not ask at all; filled in by the
/// prompt's thread, read on the serving thread after the prompt ended.
package final class AccessPromptFailure: Sendable {
    private let reason = Mutex<String?>(nil)

    /// Nothing failed yet.
    package init() {}

    /// The pinentry's failure (it could not start, no display and no terminal, …), nil when the person
    /// answered (or the prompt was withdrawn).
    package var description: String? { reason.withLock { $0 } }

    func record(_ text: String) { reason.withLock { $0 = text } }
}

extension KeychainRegistry {
    /// How long an access prompt may wait for the person: under D-Bus's default 25-second call timeout, so
    /// that the client waiting for the secret hears the answer (or the denial) rather than `NoReply`.
    static let accessPromptTimeout: Duration = .seconds(20)

    /// Asks, through pinentry and the prompt queue, whether an application may read an item's secret (or
    /// change or delete items: the question says which). `question` makes the words on the prompt's thread.
    /// Requests with the same `sharingKey` (the same item and the same application) share one pinentry; nil
    /// shares with none. `trust` runs on the serving thread when the answer is
    /// Always allow; `isAllowed` says whether the application meanwhile became trusted (then nothing is
    /// asked). `completion` runs on the serving thread: true to hand the secret over, false when denied,
    /// dismissed, timed out or when pinentry could not ask (`failure` then says why). Withdraw the ticket
    /// when the client leaves.
    package func promptForAccess(
        sharingKey: String?, question: @escaping @Sendable () -> AccessQuestion, failure: AccessPromptFailure,
        trust: @escaping () -> Void, isAllowed: @escaping () -> Bool, completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        let dialog = PromptDialog(
            sharingKey: sharingKey.map { "access:" + $0 },
            question: { pinentry, cancellation in
                let asked = question()
                let bounded = pinentry.bounded(to: Self.accessPromptTimeout)
                do throws(PinentryError) {
                    switch try bounded.choose(asked.request, cancellation: cancellation) {
                    case .ok: return AccessAnswer.allowOnce
                    case .notOK: return asked.request.notOKLabel == nil ? nil : AccessAnswer.allowAlways
                    case .cancelled: return nil
                    }
                } catch {
                    failure.record(error.description)
                    Self.log("no way to ask whether \(asked.subject): \(error.description); denied")
                    return nil
                }
            },
            apply: { answer in
                if case .allowAlways? = answer as? AccessAnswer { trust() }
            },
            isSatisfied: isAllowed)
        return enqueuePrompt(dialog, completion: completion)
    }

    /// One line to standard error (the journal).
    package static func log(_ line: String) {
        let bytes = Array("latchkeyd: \(line)\n".utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
