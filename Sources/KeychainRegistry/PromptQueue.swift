import Glibc
import KeychainCore
import Pinentry
import Posix

/// A face's place in a prompt. When the client that asked goes away or dismisses it, the face hands it back
/// through ``KeychainRegistry/withdraw(_:)``: a prompt nobody waits for any more is ended at once.
package final class PromptTicket {
    let number: UInt64

    init(number: UInt64) {
        self.number = number
    }
}

/// Whom a prompt is asked for, for the queue's fairness (docs/robustness.md, "Fair prompts"): prompts of one
/// client wait behind each other, the clients take turns, and the person can deny all of one client's waiting
/// questions at once.
package struct PromptClient: Sendable, Hashable {
    /// What tells clients apart: the application's name when it was identified (however many connections it
    /// opens), one key for every caller that could not be identified.
    package let key: String
    /// How a prompt names it.
    package let name: String

    /// A client known by `key`, named `name` in prompts.
    package init(key: String, name: String) {
        self.key = key
        self.name = name
    }
}

/// What a question's `ask` returns when the person chose Deny (not when the pinentry failed, timed out or was
/// withdrawn): the prompt ends declined, and when its client has more questions waiting the person is asked
/// whether to deny them all.
struct PromptDeclined: Sendable {}

/// What one prompt asks and how its answer is used; the queue runs it (see ``KeychainRegistry``'s prompts).
/// A password dialog's answer (the secrets typed) is tried on the worker before it is applied; a question's
/// answer (the button chosen) is applied as it comes.
struct PromptDialog {
    /// Requests with the same key share one showing while it is queued or showing (nil: never shared).
    let sharingKey: String?
    /// How many answers may be refused before the prompt gives up.
    let tries: Int
    /// The message shown when asking again after a refused answer.
    let retryMessage: String
    /// Asks the person, on the prompt's own thread: the answer, or nil when they cancelled (or declined), the
    /// prompt failed or was cancelled. The second argument is the message to show after a refused answer.
    let ask: @Sendable (Pinentry, String?, PinentryCancellation) -> (any Sendable)?
    /// Tries the answer, on the worker (one attempt at a time with all other key derivations): what ``apply``
    /// needs, or the error (`errSecAuthFailed` asks again while tries are left). Nil: the answer is applied
    /// as it is.
    let attempt: (@Sendable (any Sendable) -> Result<any Sendable, KeychainError>)?
    /// Applies an accepted answer, on the serving thread.
    let apply: (any Sendable) -> Void
    /// Whether what the prompt is for is already done (checked on the serving thread before showing it and
    /// when an answer comes): the prompt then ends as accepted without asking or trying.
    let isSatisfied: () -> Bool
    /// Whom it is asked for (nil: the daemon's own prompts, unlocks and confirmations, which take their turn
    /// as one client of their own).
    var client: PromptClient? = nil

    /// A password dialog: `ask` gives the secrets typed, `attempt` tries them on the worker.
    init(
        sharingKey: String?, tries: Int, retryMessage: String,
        ask: @escaping @Sendable (Pinentry, String?, PinentryCancellation) -> [SharedSecret]?,
        attempt: @escaping @Sendable ([SharedSecret]) -> Result<any Sendable, KeychainError>,
        apply: @escaping (any Sendable) -> Void, isSatisfied: @escaping () -> Bool
    ) {
        self.sharingKey = sharingKey
        self.tries = tries
        self.retryMessage = retryMessage
        self.ask = { pinentry, error, cancellation in ask(pinentry, error, cancellation) }
        self.attempt = { answer in
            guard let secrets = answer as? [SharedSecret] else {
                return .failure(KeychainError(.internalComponent, "a password dialog was answered otherwise"))
            }
            return attempt(secrets)
        }
        self.apply = apply
        self.isSatisfied = isSatisfied
    }

    /// A question, asked once: `ask` gives the choice made (nil: declined), which `apply` receives.
    init(
        sharingKey: String?, question ask: @escaping @Sendable (Pinentry, PinentryCancellation) -> (any Sendable)?,
        apply: @escaping (any Sendable) -> Void, isSatisfied: @escaping () -> Bool
    ) {
        self.sharingKey = sharingKey
        self.tries = 1
        self.retryMessage = ""
        self.ask = { pinentry, _, cancellation in ask(pinentry, cancellation) }
        self.attempt = nil
        self.apply = apply
        self.isSatisfied = isSatisfied
    }
}

/// A prompt in the queue, with the requests waiting for it.
final class QueuedPrompt {
    let dialog: PromptDialog
    let cancellation: PinentryCancellation
    /// Each waiting request's continuation (with whether the prompt's answer was accepted), by ticket.
    var waiters: [(number: UInt64, completion: (Bool) -> Void)] = []
    var isShowing = false
    /// Shown before the others (the next step of a dialog that has begun, or the question that follows a Deny).
    var isNext = false
    var triesLeft: Int

    /// The key it takes turns by: its client's, "" for the daemon's own.
    var turnKey: String { dialog.client?.key ?? "" }

    init(_ dialog: PromptDialog, cancellation: PinentryCancellation) {
        self.dialog = dialog
        self.cancellation = cancellation
        self.triesLeft = dialog.tries
    }
}

extension KeychainRegistry {
    /// Queues a prompt: one pinentry at a time for the whole daemon (one user). The clients take turns
    /// (``PromptDialog/client``: the next prompt shown is the oldest of the client served least recently, so
    /// that a client with many questions waiting has one of them shown between two of any other's, and the
    /// daemon's own prompts take their turn as one client); each client's prompts are shown first come first
    /// shown. A request whose `dialog` shares its key with one queued or showing joins it (one pinentry for
    /// both). `completion` runs on the serving thread once the prompt has ended (true when an answer was
    /// accepted and applied, or the prompt was already satisfied), unless the ticket was withdrawn first.
    ///
    /// A request made of several prompts in turn passes the first one's ticket to the next (`ticket`, from
    /// the previous prompt's completion), so that withdrawing it ends whichever is queued or showing; with
    /// `showingNext` the prompt goes before those waiting (the next step of a dialog that has begun).
    func enqueuePrompt(
        _ dialog: PromptDialog, ticket reused: PromptTicket? = nil, showingNext: Bool = false,
        completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        let ticket = reused ?? newPromptTicket()
        if let key = dialog.sharingKey,
            let shared = promptQueue.first(where: { $0.dialog.sharingKey == key && !$0.cancellation.isCancelled })
        {
            shared.waiters.append((ticket.number, completion))
            return ticket
        }
        guard let cancellation = try? PinentryCancellation() else {
            completion(false)
            return ticket
        }
        let queued = QueuedPrompt(dialog, cancellation: cancellation)
        queued.waiters.append((ticket.number, completion))
        queued.isNext = showingNext
        promptQueue.append(queued)
        showNextPrompt()
        return ticket
    }

    /// A ticket for a request whose first prompt is enqueued later (or never: withdrawing it is harmless).
    func newPromptTicket() -> PromptTicket {
        promptTicketNumber += 1
        return PromptTicket(number: promptTicketNumber)
    }

    /// Hands back a request's place: its continuation will not run. A prompt left with no request is
    /// dropped from the queue, or, while it shows, ended at once (its pinentry sent `SIGTERM`, then
    /// `SIGKILL`, and reaped on its thread, after which the next prompt shows).
    package func withdraw(_ ticket: PromptTicket) {
        guard let index = promptQueue.firstIndex(where: { $0.waiters.contains { $0.number == ticket.number } })
        else { return }
        let queued = promptQueue[index]
        queued.waiters.removeAll { $0.number == ticket.number }
        guard queued.waiters.isEmpty else { return }
        queued.cancellation.cancel()
        if !queued.isShowing { promptQueue.remove(at: index) }
        // The question whether to deny all of a client's questions goes with the last of them.
        if let client = queued.dialog.client, waitingQuestions(of: client).isEmpty {
            for followUp in promptQueue where followUp.dialog.client?.key == client.key && followUp.waiters.isEmpty {
                followUp.cancellation.cancel()
            }
            promptQueue.removeAll { $0.dialog.client?.key == client.key && $0.waiters.isEmpty && !$0.isShowing }
        }
    }

    /// Prompts queued or showing (one shows at a time).
    package var promptCount: Int { promptQueue.count }

    /// Shows the next prompt, unless one is showing: one to be shown next, else the oldest of the client whose
    /// last turn is the oldest (a client not served since it last had nothing waiting comes first).
    private func showNextPrompt() {
        guard !promptQueue.contains(where: \.isShowing) else { return }
        let chosen =
            promptQueue.first(where: \.isNext)
            ?? promptQueue.min { (promptTurns[$0.turnKey] ?? 0) < (promptTurns[$1.turnKey] ?? 0) }
        guard let next = chosen else { return }
        promptTurnNumber += 1
        promptTurns[next.turnKey] = promptTurnNumber
        if next.dialog.isSatisfied() { return finishPrompt(next, accepted: true) }
        next.isShowing = true
        showPrompt(next, error: nil)
    }

    /// Runs the pinentry on a thread of its own, then tries the answer on the worker; asks again after a
    /// refused answer while tries are left and somebody waits.
    private func showPrompt(_ queued: QueuedPrompt, error: String?) {
        let (dialog, cancellation) = (queued.dialog, queued.cancellation)
        let (ask, attempt) = (dialog.ask, dialog.attempt)
        let (pinentry, session, systemctl) = (configuration.pinentry, sessionEnvironment, configuration.systemctl)
        offLoop(
            onOwnThread: true,
            { AnswerBox(ask(Self.pinentry(pinentry, in: session, systemctl: systemctl), error, cancellation)) },
            then: { [self] (answers: AnswerBox) in
                guard let answers = answers.answer else { return finishPrompt(queued, accepted: false) }
                if answers is PromptDeclined { return finishPrompt(queued, accepted: false, declined: true) }
                // Unlocked meanwhile by another way: nothing to try.
                if dialog.isSatisfied() { return finishPrompt(queued, accepted: true) }
                guard let attempt else {
                    dialog.apply(answers)
                    return finishPrompt(queued, accepted: true)
                }
                // Tried even when every request went meanwhile: the person typed it to be used.
                offLoop(
                    { attempt(answers) },
                    then: { [self] (result: Result<any Sendable, KeychainError>) in
                        switch result {
                        case .success(let accepted):
                            dialog.apply(accepted)
                            finishPrompt(queued, accepted: true)
                        case .failure(let failure)
                        where failure.status == .authFailed && failure.retryAfterSeconds == nil
                            && queued.triesLeft > 1 && !queued.cancellation.isCancelled:
                            queued.triesLeft -= 1
                            showPrompt(queued, error: dialog.retryMessage)
                        case .failure:
                            finishPrompt(queued, accepted: false)
                        }
                    })
            })
    }

    /// `base` with the session's variables: those handed over, over (when neither they nor the daemon's
    /// own environment name a display) the systemd user manager's. Runs on the prompt's thread.
    private static func pinentry(_ base: Pinentry, in session: SessionEnvironment, systemctl: String?) -> Pinentry {
        var session = session
        if let systemctl, !session.over(SessionEnvironment(picking: base.environment)).hasDisplay {
            let runtime = base.environment["XDG_RUNTIME_DIR"] ?? "/run/user/\(getuid())"
            session = session.over(
                SessionEnvironment.fromSystemdUserManager(systemctl: systemctl, runtimeDirectory: runtime))
        }
        return base.inSession(session)
    }

    /// Ends a prompt: its waiting requests' continuations run, and the next prompt shows. When the person
    /// `declined` it and its client has more prompts waiting, the next prompt asks whether to deny them all.
    private func finishPrompt(_ queued: QueuedPrompt, accepted: Bool, declined: Bool = false) {
        promptQueue.removeAll { $0 === queued }
        queued.isShowing = false
        if declined, let client = queued.dialog.client {
            offerToDenyAll(of: client)
        }
        let waiters = queued.waiters
        queued.waiters.removeAll()
        for waiter in waiters { waiter.completion(accepted) }
        if promptTurns.count > promptQueue.count + 1 {
            // Forget the turns of clients with nothing waiting (keeping the daemon's own): a bounded table.
            let waiting = Set(promptQueue.map(\.turnKey))
            promptTurns = promptTurns.filter { $0.key.isEmpty || waiting.contains($0.key) }
        }
        showNextPrompt()
    }

    /// After the person denied one of `client`'s questions, while others of its questions wait: asks, next,
    /// whether to deny them all ("Deny all N" / "Ask each", within the access prompts' time bound; anything but
    /// OK asks each in its turn). Every question of the client still waiting when the person says yes is
    /// denied, as its Deny would (the requests get `AccessDenied`, or `errSecUserCanceled` on Keychain1).
    private func offerToDenyAll(of client: PromptClient) {
        let count = waitingQuestions(of: client).count
        guard count > 0, let cancellation = try? PinentryCancellation() else { return }
        let request = Self.denyAllRequest(client, count: count)
        var dialog = PromptDialog(
            sharingKey: nil,
            question: { pinentry, cancellation in
                let confirmed = try? pinentry.bounded(to: Self.accessPromptTimeout).confirm(
                    request, cancellation: cancellation)
                return confirmed == true ? true : nil
            },
            apply: { [self] _ in denyAll(of: client) },
            isSatisfied: { [self] in waitingQuestions(of: client).isEmpty })
        dialog.client = client
        let followUp = QueuedPrompt(dialog, cancellation: cancellation)
        followUp.isNext = true
        promptQueue.append(followUp)
    }

    /// The question ``offerToDenyAll(of:)`` asks.
    static func denyAllRequest(_ client: PromptClient, count: Int) -> PinentryRequest {
        let questions = count == 1 ? "1 more question" : "\(count) more questions"
        return PinentryRequest(
            title: "Keychain Access",
            description: "\(PromptText.field(client.name))\nhas \(questions) waiting for your answer."
                + "\n\nDeny all of them now? (Otherwise each is asked in its turn.)",
            prompt: "", okLabel: count == 1 ? "Deny it too" : "Deny all \(count)", cancelLabel: "Ask each")
    }

    /// The prompts of `client` waiting for their turn (not the one showing, nor one to be shown next).
    private func waitingQuestions(of client: PromptClient) -> [QueuedPrompt] {
        promptQueue.filter { $0.dialog.client?.key == client.key && !$0.isShowing && !$0.isNext }
    }

    /// Denies every question of `client` waiting, as their Deny would.
    private func denyAll(of client: PromptClient) {
        let denied = waitingQuestions(of: client)
        promptQueue.removeAll { prompt in denied.contains { $0 === prompt } }
        for prompt in denied {
            prompt.cancellation.cancel()
            let waiters = prompt.waiters
            prompt.waiters.removeAll()
            for waiter in waiters { waiter.completion(false) }
        }
    }
}

/// The answer a prompt's thread hands to the serving thread.
private struct AnswerBox: Sendable {
    let answer: (any Sendable)?
    init(_ answer: (any Sendable)?) { self.answer = answer }
}
