import Glibc
import KeychainCore
import Pinentry
import Posix

/// A face's place in a prompt. When the client that asked goes away or dismisses it, the face hands it back
/// through ``KeychainRegistry/withdraw(_:)``: a prompt nobody waits for any more is ended at once.
package final class PromptTicket {
    let number: UInt64
    /// The window of the client whose request this is (a KWallet `wId`), for the prompt it starts as its
    /// parent window; nil for none.
    var parentWindow: Int64?
    /// Where the request's prompts show (the caller's place, docs/prompts-in-terminals.md); nil: no caller
    /// known, or one pinentry named for every prompt.
    var place: PromptPlace?
    /// The queue its prompts wait in: ``PromptPlace/queueKey`` ("desktop", "terminal:ID", "nowhere").
    var queueKey = "desktop"

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

/// What a prompt's `ask` gives back, on the prompt's own thread.
enum PromptReply<Value: Sendable>: Sendable {
    /// The person answered.
    case answered(Value)
    /// The person chose Deny (not a pinentry that failed, timed out or was withdrawn): the prompt ends
    /// declined, and when its client has more questions waiting the person is asked whether to deny them all.
    case declined
    /// No answer: cancelled, closed, failed, timed out or withdrawn.
    case unanswered
}

/// An answer on its way to being applied: as it came (a question's choice), or still to be tried on the worker
/// (a password, which `attempt` turns into what `apply` needs, or refuses).
enum PromptAnswer<Answer: Sendable>: Sendable {
    /// Applied as it is.
    case ready(Answer)
    /// Tried on the worker first (one attempt at a time with all other key derivations).
    case toTry(@Sendable () -> Result<Answer, KeychainError>)
}

/// What one prompt asks and how its answer, of type `Answer`, is used; the queue runs it (see
/// ``KeychainRegistry``'s prompts). A password dialog's answer (the secrets typed) is tried on the worker
/// before it is applied; a question's answer (the button chosen) is applied as it comes.
struct PromptDialog<Answer: Sendable> {
    /// Requests with the same key share one showing while it is queued or showing (nil: never shared).
    let sharingKey: String?
    /// How many answers may be refused before the prompt gives up.
    let tries: Int
    /// The message shown when asking again after a refused answer.
    let retryMessage: String
    /// Asks the person, on the prompt's own thread. The second argument is the message to show after a
    /// refused answer.
    let ask: @Sendable (Pinentry, String?, PinentryCancellation) -> PromptReply<PromptAnswer<Answer>>
    /// Applies an accepted answer, on the serving thread.
    let apply: (Answer) -> Void
    /// Whether what the prompt is for is already done (checked on the serving thread before showing it and
    /// when an answer comes): the prompt then ends as accepted without asking or trying.
    let isSatisfied: () -> Bool
    /// Whom it is asked for (nil: the daemon's own prompts, unlocks and confirmations, which take their turn
    /// as one client of their own).
    var client: PromptClient? = nil
    /// How long it may show before it ends unanswered, on the registry's clock (nil: no bound of the queue's,
    /// only the pinentry's own).
    var timeLimit: Duration? = nil
    /// Runs on the serving thread when ``timeLimit`` passed, before the requests waiting for it are told.
    var expire: () -> Void = {}
    /// Runs on the serving thread when it ends without its own pinentry answering, before the requests waiting
    /// for it are told: it could not be shown (why), or the person denied it with the rest of its client's
    /// questions (Deny all).
    var ended: (PromptSettledElsewhere) -> Void = { _ in }

    /// A password dialog: `ask` gives the secrets typed (nil: none), `attempt` tries them on the worker.
    init(
        sharingKey: String?, tries: Int, retryMessage: String,
        ask: @escaping @Sendable (Pinentry, String?, PinentryCancellation) -> [SharedSecret]?,
        attempt: @escaping @Sendable ([SharedSecret]) -> Result<Answer, KeychainError>,
        apply: @escaping (Answer) -> Void, isSatisfied: @escaping () -> Bool
    ) {
        self.sharingKey = sharingKey
        self.tries = tries
        self.retryMessage = retryMessage
        self.ask = { pinentry, error, cancellation in
            guard let secrets = ask(pinentry, error, cancellation) else { return .unanswered }
            return .answered(.toTry { attempt(secrets) })
        }
        self.apply = apply
        self.isSatisfied = isSatisfied
    }

    /// A question, asked once: `ask` gives the choice made, which `apply` receives.
    init(
        sharingKey: String?, question ask: @escaping @Sendable (Pinentry, PinentryCancellation) -> PromptReply<Answer>,
        apply: @escaping (Answer) -> Void, isSatisfied: @escaping () -> Bool
    ) {
        self.sharingKey = sharingKey
        self.tries = 1
        self.retryMessage = ""
        self.ask = { pinentry, _, cancellation in
            switch ask(pinentry, cancellation) {
            case .answered(let answer): .answered(.ready(answer))
            case .declined: .declined
            case .unanswered: .unanswered
            }
        }
        self.apply = apply
        self.isSatisfied = isSatisfied
    }
}

/// How a prompt ended when its own pinentry did not answer it.
enum PromptSettledElsewhere {
    /// No pinentry could be started for it (no descriptor left for its cancellation pipe, …): why.
    case cannotShow(PinentryError)
    /// The person chose Deny all for its client's questions, this one among them.
    case deniedWithOthers
}

/// How a prompt ended, for the requests waiting for it.
enum PromptEnding {
    /// An answer was accepted and applied, or what it was for was done already.
    case accepted
    /// It ended without an accepted answer (cancelled, refused, failed, timed out).
    case unanswered
    /// The person chose Deny.
    case declined

    /// Whether the requests' continuations are told it was accepted.
    var isAccepted: Bool {
        switch self {
        case .accepted: true
        case .unanswered, .declined: false
        }
    }
}

/// A prompt in the queue, with the requests waiting for it. What its dialog's answer is does not show here:
/// ``show`` runs the dialog, typed, through ``KeychainRegistry``'s prompt steps.
final class QueuedPrompt {
    let sharingKey: String?
    /// Whom it is asked for (``PromptDialog/client``).
    let client: PromptClient?
    /// ``PromptDialog/isSatisfied``.
    let isSatisfied: () -> Bool
    /// ``PromptDialog/timeLimit``.
    let timeLimit: Duration?
    /// ``PromptDialog/expire``.
    let expire: () -> Void
    /// ``PromptDialog/ended``.
    let ended: (PromptSettledElsewhere) -> Void
    /// Shows it (again, after a refused answer, with the message given).
    let show: (KeychainRegistry, QueuedPrompt, String?) -> Void
    let cancellation: PinentryCancellation
    /// Each waiting request's continuation (with whether the prompt's answer was accepted), by ticket.
    var waiters: [(number: UInt64, completion: (Bool) -> Void)] = []
    var isShowing = false
    /// Shown before the others (the next step of a dialog that has begun, or the question that follows a Deny).
    var isNext = false
    var triesLeft: Int
    /// When its time limit passes (nanoseconds on the registry's clock), from when it began to show.
    var deadline: Int64?
    /// The parent window of the request that started it; nil once a request with another one joined it.
    var parentWindow: Int64?
    /// Where it shows: the place of the request that started it (``PromptTicket/place``).
    var place: PromptPlace?

    /// The key it takes turns by: its client's, "" for the daemon's own.
    var turnKey: String { client?.key ?? "" }

    init<Answer>(_ dialog: PromptDialog<Answer>, cancellation: PinentryCancellation) {
        self.sharingKey = dialog.sharingKey
        self.client = dialog.client
        self.isSatisfied = dialog.isSatisfied
        self.timeLimit = dialog.timeLimit
        self.expire = dialog.expire
        self.ended = dialog.ended
        self.show = { registry, queued, error in registry.showPrompt(dialog, queued, error: error) }
        self.cancellation = cancellation
        self.triesLeft = dialog.tries
    }
}

/// The prompts waiting or showing and the clients' turns: the prompt seam's state, held by
/// ``KeychainRegistry``, which shows them one at a time.
struct PromptQueue {
    /// Prompts waiting or showing, the one showing first (see `enqueuePrompt`).
    private(set) var prompts: [QueuedPrompt] = []
    private var ticketNumber: UInt64 = 0
    /// Each client's last turn at the prompt, by ``PromptClient/key`` ("" for the daemon's own prompts), and
    /// the turn count.
    private var turns: [String: UInt64] = [:]
    private var turnNumber: UInt64 = 0

    /// A new ticket.
    mutating func newTicket() -> PromptTicket {
        ticketNumber += 1
        return PromptTicket(number: ticketNumber)
    }

    /// The prompt a request with `sharingKey` and `parentWindow` joins, if one is queued, or showing with that
    /// same parent window (never one showing over another request's window).
    func shared(_ sharingKey: String, parentWindow: Int64?) -> QueuedPrompt? {
        prompts.first {
            $0.sharingKey == sharingKey && !$0.cancellation.isCancelled
                && (!$0.isShowing || $0.parentWindow == parentWindow)
        }
    }

    /// The prompt `ticket` waits for.
    func prompt(holding ticket: PromptTicket) -> QueuedPrompt? {
        prompts.first { $0.waiters.contains { $0.number == ticket.number } }
    }

    /// The prompt showing now.
    var showing: QueuedPrompt? { prompts.first(where: \.isShowing) }

    mutating func append(_ queued: QueuedPrompt) { prompts.append(queued) }

    mutating func remove(where shouldBeRemoved: (QueuedPrompt) -> Bool) { prompts.removeAll(where: shouldBeRemoved) }

    /// The prompt whose turn it is, its client's turn taken: one to be shown next, else the oldest of the
    /// client whose last turn is the oldest (a client not served since it last had nothing waiting comes
    /// first). Nil when one is showing or none waits.
    mutating func takeTurn() -> QueuedPrompt? {
        guard showing == nil else { return nil }
        let chosen =
            prompts.first(where: \.isNext)
            ?? prompts.min { (turns[$0.turnKey] ?? 0) < (turns[$1.turnKey] ?? 0) }
        guard let next = chosen else { return nil }
        turnNumber += 1
        turns[next.turnKey] = turnNumber
        return next
    }

    /// Forgets the turns of clients with nothing waiting (keeping the daemon's own): a bounded table.
    mutating func forgetIdleTurns() {
        guard turns.count > prompts.count + 1 else { return }
        let waiting = Set(prompts.map(\.turnKey))
        turns = turns.filter { $0.key.isEmpty || waiting.contains($0.key) }
    }

    /// The prompts of `client` waiting for their turn (not the one showing, nor one to be shown next).
    func waiting(of client: PromptClient) -> [QueuedPrompt] {
        prompts.filter { $0.client?.key == client.key && !$0.isShowing && !$0.isNext }
    }
}
