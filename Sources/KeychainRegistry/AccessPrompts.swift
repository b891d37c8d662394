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

/// What an access prompt warns of, first, before it names the application and the item.
package enum AccessWarning: Sendable, Equatable {
    /// The application's file is not the one the item trusts (an upgrade, or a replacement).
    case changed
    /// The caller could not be identified, for `reason`.
    case unidentified(reason: String)
    /// A keychain command (secret-tool, latchkey): any program can run it to ask.
    case keychainCommand
    /// A tool that runs what its command line says (inline code, a general D-Bus client): any program can run it
    /// with code of its choice.
    case runsAnything

    /// The warning's line.
    var text: String {
        switch self {
        case .changed:
            "WARNING: this application has CHANGED since you allowed it: its file is not the one you trusted"
                + " (an upgrade, or a replacement)."
        case .unidentified(let reason):
            "WARNING: Latchkey could not identify the program asking (\(PromptText.field(reason, bytes: 120)))."
        case .keychainCommand:
            "Note: any program can run this command to ask for secrets: allowing it allows whichever program runs it."
        case .runsAnything:
            "WARNING: any program can run this tool with code of its choice: allowing it allows whichever program"
                + " runs it, so it is never allowed for good."
        }
    }
}

extension AccessQuestion {
    /// A question about `who` (the application as a prompt names it) asking to `kind` the items `labels` in
    /// `keychain` (``text(_:_:)``, ``itemList(_:)``), offering Always allow when `offersAlways` and it asks to
    /// read: trust to change an item would hand its secret over too, so a change is allowed once at most.
    package init(
        _ kind: AccessKind, who: String, warnings: [AccessWarning], labels: [String], keychain: String,
        offersAlways: Bool
    ) {
        let (who, items, keychain) = (
            PromptText.field(who), Self.itemList(labels), PromptText.field(keychain, bytes: 100)
        )
        let named: String
        switch kind {
        case .read: named = "\(who)\nwants the secret of \(items)\nin the keychain “\(keychain)”."
        case .change:
            named =
                "\(who)\nwants to CHANGE \(items)\nin the keychain “\(keychain)”"
                + "\n(its secret, label or attributes would be replaced)."
        case .delete: named = "\(who)\nwants to DELETE \(items)\nfrom the keychain “\(keychain)”."
        }
        self.init(
            description: Self.text(warnings, named), offersAlways: offersAlways && kind == .read,
            subject: "\(who) may \(kind.verb) \(items) in “\(keychain)”",
            alwaysQuestion: Self.text(warnings, "Allow \(who)\nto read \(items) every time, without asking you again?"))
    }

    /// The items a prompt names, each on the one line ``PromptText/field(_:bytes:)`` makes of it: one label (200
    /// bytes at most), or the first five (48 bytes each) and how many more, so that a bulk change's list cannot
    /// push the warnings or the keychain's name out of pinentry's 1,000-byte description either.
    package static func itemList(_ labels: [String]) -> String {
        let bound = labels.count == 1 ? 200 : 48
        let shown = labels.prefix(5).map { "“\(PromptText.field($0, bytes: bound))”" }.joined(separator: ", ")
        return labels.count > 5 ? shown + " and \(labels.count - 5) more items" : shown
    }

    /// A prompt's text: the warnings first, each on a line of its own, then `named` (the application, the item
    /// and the keychain as ``PromptText/field(_:bytes:)`` made them, each on a line of its own), so that no text of the
    /// caller's or the item's can push a warning out of pinentry's 1,000-byte line or pass for a line of the
    /// daemon's own.
    static func text(_ warnings: [AccessWarning], _ named: String) -> String {
        warnings.isEmpty ? named : warnings.map(\.text).joined(separator: "\n") + "\n\n" + named
    }

    /// The answer `choice` gives: OK is Allow once; the third button (which ``Pinentry/choose(_:cancellation:)``
    /// gives only after its explicit confirmation) is Always allow when it was offered; anything else is Deny.
    static func answer(to choice: PinentryChoice, offersAlways: Bool) -> AccessAnswer? {
        switch choice {
        case .ok: .allowOnce
        case .notOK: offersAlways ? .allowAlways : nil
        case .cancelled: nil
        }
    }
}

/// Why an access prompt ended without an answer, when the pinentry could not ask at all; filled in by the
/// prompt's thread (or the queue, when the prompt's time limit passed: the first reason stands), read on the
/// serving thread after the prompt ended.
package final class AccessPromptFailure: Sendable {
    private let reason = Mutex<String?>(nil)

    /// Nothing failed yet.
    package init() {}

    /// The pinentry's failure (it could not start, no display and no terminal, …), nil when the person
    /// answered (or the prompt was withdrawn).
    package var description: String? { reason.withLock { $0 } }

    func record(_ text: String) {
        reason.withLock { reason in
            if reason == nil { reason = text }
        }
    }
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
    /// when the client leaves. `client` is whom the prompt takes its turn for (``PromptClient``; nil: the
    /// daemon's own turn); a Deny then offers to deny all of its questions waiting. On a terminal the
    /// question is answered by typing the password of `keychain` (the item's keychain; the login keychain's
    /// password unless it has one of its own), three tries, and offers no Always allow.
    package func promptForAccess(
        sharingKey: String?, client: PromptClient? = nil, keychain: HeldKeychain? = nil,
        question: @escaping @Sendable () -> AccessQuestion,
        failure: AccessPromptFailure, trust: @escaping () -> Void, isAllowed: @escaping () -> Bool,
        completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        var dialog = PromptDialog<AccessAnswer>(
            sharingKey: sharingKey.map { "access:" + $0 }, tries: 3, password: terminalPasswordCheck(for: keychain),
            onTerminal: .allowOnce, consent: "allow it this once", cancelIsDecline: true,
            request: { question().request },
            question: { pinentry, cancellation in
                let asked = question()
                let bounded = pinentry.bounded(to: Self.accessPromptTimeout)
                do throws(PinentryError) {
                    let choice = try bounded.choose(asked.request, cancellation: cancellation)
                    if choice == .cancelled, !cancellation.isCancelled { return .declined }
                    return AccessQuestion.answer(to: choice, offersAlways: asked.request.notOKLabel != nil)
                        .map { .answered($0) } ?? .unanswered
                } catch {
                    failure.record(error.description)
                    Self.log("no way to ask whether \(asked.subject): \(error.description); denied")
                    return .unanswered
                }
            },
            note: { noted in
                guard case .failed(let reason) = noted else { return }
                failure.record(reason)
                Self.log("no way to ask on the terminal: \(reason); denied")
            },
            apply: { answer in
                if case .allowAlways = answer { trust() }
            },
            isSatisfied: isAllowed)
        dialog.client = client
        // Past its time limit the prompt ends as when pinentry's own timeout ends it: denied, and why.
        dialog.timeLimit = Self.accessPromptTimeout
        dialog.expire = { failure.record(Self.unansweredWithin(Self.accessPromptTimeout)) }
        // Denied with the rest of its client's questions: the person's Deny, no failure.
        dialog.ended = { ending in
            if case .cannotShow(let error) = ending { failure.record(error.description) }
        }
        return enqueuePrompt(dialog, completion: completion)
    }

    /// Why a prompt whose time limit passed ended: the words pinentry's own timeout gives.
    static func unansweredWithin(_ limit: Duration) -> String {
        PinentryError(reason: "no answer within \(limit)").description
    }

    /// One line to standard error (the journal).
    package static func log(_ line: String) {
        let bytes = Array("latchkeyd: \(line)\n".utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
