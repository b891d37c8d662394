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
    /// The queue it waits in: the place it shows (``PromptTicket/queueKey`` of the request that started it).
    let queueKey: String
    /// When it began to show (nanoseconds on the registry's clock), for ``PromptQueue/holdLimit``.
    var shownAt: Int64?
    /// Where it shows: the place of the request that started it (``PromptTicket/place``).
    var place: PromptPlace?

    /// The key it takes turns by: its client's, "" for the daemon's own.
    var turnKey: String { client?.key ?? "" }

    init<Answer>(_ dialog: PromptDialog<Answer>, cancellation: PinentryCancellation, queueKey: String) {
        self.sharingKey = dialog.sharingKey
        self.queueKey = queueKey
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

/// The prompts waiting or showing and the clients' turns: the prompt seam's state, held by ``KeychainRegistry``. Each
/// place (``PromptTicket/queueKey``) is a queue of its own, with its own showing prompts and turns: prompts of
/// different places never wait for each other. Within a place an application's prompts show one at a time, and a prompt
/// holds the place's other prompts for ``holdLimit`` at most: then the next shows beside it, on the desktop up to
/// ``desktopShowingLimit`` at once; a terminal shows one at a time (docs/robustness.md, "Prompts in several places").
struct PromptQueue {
    /// The desktop session's place, the one place where prompts show beside each other.
    static let desktop = "desktop"
    /// How long a showing prompt keeps the other clients of its place waiting: once every prompt showing in a
    /// place has shown this long, the next client's prompt shows beside them (when the place has room).
    static let holdLimit: Duration = .seconds(3)
    /// How many prompts the desktop shows at once at most, so that a flood cannot fill the screen.
    static let desktopShowingLimit = 3

    /// Prompts waiting or showing, in the order they came.
    private(set) var prompts: [QueuedPrompt] = []
    private var ticketNumber: UInt64 = 0
    /// Each client's last turn at its place's prompt, by place and ``PromptClient/key`` ("" for the daemon's
    /// own prompts), and the turn count.
    private var turns: [Turn: UInt64] = [:]
    private var turnNumber: UInt64 = 0

    /// A client's turns in one place.
    private struct Turn: Hashable {
        let queueKey: String
        let client: String
    }

    /// How many prompts the place `queueKey` shows at once at most: several on the desktop, one anywhere
    /// else (a terminal shows one at a time).
    static func showingLimit(of queueKey: String) -> Int {
        queueKey == desktop ? desktopShowingLimit : 1
    }

    /// A new ticket.
    mutating func newTicket() -> PromptTicket {
        ticketNumber += 1
        return PromptTicket(number: ticketNumber)
    }

    /// The prompt a request with `sharingKey` and `parentWindow` in the place `queueKey` joins, if one is
    /// queued there, or showing there with that same parent window (never one showing over another request's
    /// window, nor one of another place: each place asks its own).
    func shared(_ sharingKey: String, parentWindow: Int64?, in queueKey: String) -> QueuedPrompt? {
        prompts.first {
            $0.queueKey == queueKey && $0.sharingKey == sharingKey && !$0.cancellation.isCancelled
                && (!$0.isShowing || $0.parentWindow == parentWindow)
        }
    }

    /// The prompt `ticket` waits for.
    func prompt(holding ticket: PromptTicket) -> QueuedPrompt? {
        prompts.first { $0.waiters.contains { $0.number == ticket.number } }
    }

    /// The prompts showing now, in every place.
    var showing: [QueuedPrompt] { prompts.filter(\.isShowing) }

    /// The places where prompts wait for their turn.
    var placesWaiting: [String] {
        prompts.filter { !$0.isShowing }.map(\.queueKey).reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    mutating func append(_ queued: QueuedPrompt) { prompts.append(queued) }

    mutating func remove(where shouldBeRemoved: (QueuedPrompt) -> Bool) { prompts.removeAll(where: shouldBeRemoved) }

    /// The prompt of the place `queueKey` whose turn it is at `now` (nanoseconds on the registry's clock), its client's
    /// turn taken; nil when none may show yet. Of the prompts waiting whose application has none showing in the place
    /// (``mayShow(of:)``): one to be shown next, else the oldest of the client whose last turn is the oldest (a client
    /// not served since it last had nothing waiting comes first). A prompt to be shown next needs only room in the
    /// place; any other also needs every prompt showing there to have shown for ``holdLimit``.
    mutating func takeTurn(in queueKey: String, now: Int64) -> QueuedPrompt? {
        let place = prompts.filter { $0.queueKey == queueKey }
        let showing = place.filter(\.isShowing)
        guard showing.count < Self.showingLimit(of: queueKey) else { return nil }
        let candidates = Self.mayShow(of: place)
        let held = showing.contains { now - ($0.shownAt ?? now) < RegistryClock.nanoseconds(Self.holdLimit) }
        let chosen =
            candidates.first(where: \.isNext)
            ?? (held ? nil : candidates.min { turn(of: $0) < turn(of: $1) })
        guard let next = chosen else { return nil }
        turnNumber += 1
        turns[Turn(queueKey: queueKey, client: next.turnKey)] = turnNumber
        return next
    }

    /// When (nanoseconds on the registry's clock) the next prompt held by ``holdLimit`` may show: the
    /// earliest moment in the places where a prompt waits that could show beside the ones showing once they
    /// have shown long enough; nil for none.
    func nextHoldLapse() -> Int64? {
        placesWaiting.compactMap { queueKey -> Int64? in
            let place = prompts.filter { $0.queueKey == queueKey }
            let showing = place.filter(\.isShowing)
            guard showing.count < Self.showingLimit(of: queueKey) else { return nil }
            guard !Self.mayShow(of: place).isEmpty, let youngest = showing.compactMap(\.shownAt).max()
            else { return nil }
            return youngest + RegistryClock.nanoseconds(Self.holdLimit)
        }.min()
    }

    /// The prompts of one place's `prompts` that may show beside the ones showing there: those waiting whose
    /// application has none showing (an application's prompts show one at a time). The daemon's own prompts
    /// (no ``PromptClient``: unlocks, changes) are asked for any client, so one may show beside another.
    private static func mayShow(of place: [QueuedPrompt]) -> [QueuedPrompt] {
        let busy = Set(place.filter(\.isShowing).compactMap(\.client?.key))
        return place.filter { prompt in !prompt.isShowing && !(prompt.client.map { busy.contains($0.key) } ?? false) }
    }

    private func turn(of prompt: QueuedPrompt) -> UInt64 {
        turns[Turn(queueKey: prompt.queueKey, client: prompt.turnKey)] ?? 0
    }

    /// Forgets the turns of clients with nothing waiting in a place (keeping the daemon's own on the
    /// desktop): a bounded table.
    mutating func forgetIdleTurns() {
        guard turns.count > prompts.count + 1 else { return }
        let waiting = Set(prompts.map { Turn(queueKey: $0.queueKey, client: $0.turnKey) })
        turns = turns.filter { ($0.key.client.isEmpty && $0.key.queueKey == Self.desktop) || waiting.contains($0.key) }
    }

    /// The prompts of `client` in the place `queueKey` waiting for their turn (not one showing, nor one to be
    /// shown next).
    func waiting(of client: PromptClient, in queueKey: String) -> [QueuedPrompt] {
        prompts.filter {
            $0.queueKey == queueKey && $0.client?.key == client.key && !$0.isShowing && !$0.isNext
        }
    }
}
