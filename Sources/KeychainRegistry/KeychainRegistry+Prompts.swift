import Glibc
import KeychainCore
import Pinentry
import Posix

/// The registry's prompt steps over its ``PromptQueue``: a queue per place, the clients taking turns in each.
extension KeychainRegistry {
    /// Queues a prompt in the place its ticket names (``PromptTicket/queueKey``): each place is a queue of its own, and
    /// prompts of different places never wait for each other. In a place, each application's prompts show one at a
    /// time, and a showing prompt keeps the place's other prompts waiting for ``PromptQueue/holdLimit`` at most: then
    /// the next shows beside it on the desktop (up to ``PromptQueue/desktopShowingLimit`` at once); a terminal shows
    /// one at a time. The clients take turns (``PromptDialog/client``: the next prompt shown is the oldest of the
    /// client served least recently, so that a client with many questions waiting has one of them shown between two of
    /// any other's, and the daemon's own prompts take their turn as one client); each client's prompts are shown first
    /// come first shown. A request whose `dialog` shares its key with one queued or showing in its place joins it (one
    /// pinentry for both); in another place it is asked again, and the first answer accepted ends the other places'
    /// prompts it satisfied. `completion` runs on the serving thread once the prompt has ended (true when an answer was
    /// accepted and applied, or the prompt was already satisfied), unless the ticket was withdrawn first.
    ///
    /// A request made of several prompts in turn passes the first one's ticket to the next (`ticket`, from
    /// the previous prompt's completion), so that withdrawing it ends whichever is queued or showing; with
    /// `showingNext` the prompt goes before those waiting (the next step of a dialog that has begun).
    func enqueuePrompt<Answer>(
        _ dialog: PromptDialog<Answer>, ticket reused: PromptTicket? = nil, showingNext: Bool = false,
        completion: @escaping (Bool) -> Void
    ) -> PromptTicket {
        let ticket = reused ?? newPromptTicket()
        // One client's window never parents a prompt that also asks for another's request: a queued prompt
        // joined with another window loses its parent; one already showing over another window is not joined
        // (this request queues its own, which ends unshown if the other satisfied it).
        if let key = dialog.sharingKey,
            let shared = prompts.shared(key, parentWindow: ticket.parentWindow, in: ticket.queueKey)
        {
            shared.waiters.append((ticket.number, completion))
            if shared.parentWindow != ticket.parentWindow { shared.parentWindow = nil }
            return ticket
        }
        let cancellation: PinentryCancellation
        do throws(PinentryError) {
            cancellation = try PinentryCancellation()
        } catch {
            // Said in the log, and by the dialog in the request's error where the face's reply can carry it.
            Self.log("no prompt could be shown: \(error)")
            dialog.ended(.cannotShow(error))
            completion(false)
            return ticket
        }
        let queued = QueuedPrompt(dialog, cancellation: cancellation, queueKey: ticket.queueKey)
        queued.waiters.append((ticket.number, completion))
        queued.parentWindow = ticket.parentWindow
        queued.place = ticket.place
        queued.isNext = showingNext
        prompts.append(queued)
        showNextPrompt(in: queued.queueKey)
        return ticket
    }

    /// A ticket for a request whose first prompt is enqueued later (or never: withdrawing it is harmless).
    func newPromptTicket() -> PromptTicket {
        placed(prompts.newTicket())
    }

    /// Hands back a request's place: its continuation will not run. A prompt left with no request is
    /// dropped from the queue, or, while it shows, ended at once (its pinentry sent `SIGTERM`, then
    /// `SIGKILL`, and reaped on its thread, after which the next prompt shows).
    package func withdraw(_ ticket: PromptTicket) {
        guard let queued = prompts.prompt(holding: ticket) else { return }
        queued.waiters.removeAll { $0.number == ticket.number }
        guard queued.waiters.isEmpty else { return }
        queued.cancellation.cancel()
        if !queued.isShowing { prompts.remove { $0 === queued } }
        // The question whether to deny all of a client's questions in a place goes with the last of them.
        let place = queued.queueKey
        if let client = queued.client, prompts.waiting(of: client, in: place).isEmpty {
            let isFollowUp = { (prompt: QueuedPrompt) in
                prompt.queueKey == place && prompt.client?.key == client.key && prompt.waiters.isEmpty
            }
            for followUp in prompts.prompts where isFollowUp(followUp) {
                followUp.cancellation.cancel()
            }
            prompts.remove { isFollowUp($0) && !$0.isShowing }
        }
    }

    /// Prompts queued or showing, in every place.
    package var promptCount: Int { prompts.prompts.count }

    /// Shows the next prompt of the place `queueKey`, if one may show now (``PromptQueue/takeTurn(in:now:)``).
    private func showNextPrompt(in queueKey: String) {
        let now = configuration.clock.nanoseconds()
        guard let next = prompts.takeTurn(in: queueKey, now: now) else { return }
        if next.isSatisfied() { return finishPrompt(next, .accepted) }
        next.isShowing = true
        next.shownAt = now
        next.deadline = next.timeLimit.map { now + RegistryClock.nanoseconds($0) }
        next.show(self, next, nil)
    }

    /// Runs the pinentry on a thread of its own, then tries the answer on the worker; asks again after a
    /// refused answer while tries are left and somebody waits.
    func showPrompt<Answer>(_ dialog: PromptDialog<Answer>, _ queued: QueuedPrompt, error: String?) {
        let (ask, cancellation) = (dialog.ask, queued.cancellation)
        let (pinentry, session, systemctl) = (configuration.pinentry, sessionEnvironment, configuration.systemctl)
        let (parent, place) = (queued.parentWindow, queued.place)
        offLoop(
            onOwnThread: true,
            {
                let prompter = Self.prompter(
                    pinentry, at: place, in: session, systemctl: systemctl, sessionPinentry: Self.pinentry)
                return ask(prompter.parented(by: parent), error, cancellation)
            },
            then: { [self] (reply: PromptReply<PromptAnswer<Answer>>) in
                let answer: PromptAnswer<Answer>
                switch reply {
                case .unanswered: return finishPrompt(queued, .unanswered)
                case .declined: return finishPrompt(queued, .declined)
                case .answered(let given): answer = given
                }
                // Unlocked meanwhile by another way: nothing to try.
                if dialog.isSatisfied() { return finishPrompt(queued, .accepted) }
                switch answer {
                case .ready(let ready):
                    dialog.apply(ready)
                    finishPrompt(queued, .accepted)
                case .toTry(let attempt):
                    // Tried even when every request went meanwhile: the person typed it to be used.
                    offLoop(
                        attempt,
                        then: { [self] (result: Result<Answer, KeychainError>) in
                            switch result {
                            case .success(let accepted):
                                dialog.apply(accepted)
                                finishPrompt(queued, .accepted)
                            case .failure(let failure)
                            where failure.status == .authFailed && failure.retryAfterSeconds == nil
                                && queued.triesLeft > 1 && !queued.cancellation.isCancelled:
                                queued.triesLeft -= 1
                                showPrompt(dialog, queued, error: dialog.retryMessage)
                            case .failure:
                                finishPrompt(queued, .unanswered)
                            }
                        })
                }
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

    /// Ends a prompt: its waiting requests' continuations run, and the next prompt of its place shows. When
    /// the person declined it and its client has more prompts waiting there, the next prompt asks whether to
    /// deny them all. When its answer was accepted, the prompts of the same question (its sharing key) that
    /// it satisfied end too, in every place.
    private func finishPrompt(_ queued: QueuedPrompt, _ ending: PromptEnding) {
        prompts.remove { $0 === queued }
        queued.isShowing = false
        if case .declined = ending, let client = queued.client {
            offerToDenyAll(of: client, in: queued.queueKey, at: queued.place)
        }
        let waiters = queued.waiters
        queued.waiters.removeAll()
        for waiter in waiters { waiter.completion(ending.isAccepted) }
        if ending.isAccepted, let key = queued.sharingKey { endSatisfied(sharing: key) }
        prompts.forgetIdleTurns()
        showNextPrompt(in: queued.queueKey)
    }

    /// Ends the prompts asking the question `sharingKey` whose purpose is done (an unlock answered in another
    /// place, or over another window): their requests are told it was accepted; one waiting leaves the queue,
    /// one showing has its pinentry ended (it leaves the queue once its thread is back).
    private func endSatisfied(sharing sharingKey: String) {
        let settled = prompts.prompts.filter { $0.sharingKey == sharingKey && !$0.waiters.isEmpty && $0.isSatisfied() }
        prompts.remove { prompt in !prompt.isShowing && settled.contains { $0 === prompt } }
        for prompt in settled {
            prompt.cancellation.cancel()
            let waiters = prompt.waiters
            prompt.waiters.removeAll()
            for waiter in waiters { waiter.completion(true) }
        }
    }

    /// The prompt queue's timers at `now` (nanoseconds on the registry's clock): ends each showing prompt whose
    /// time limit has passed (its dialog's ``PromptDialog/expire`` runs, its requests are told it was not
    /// answered, then its pinentry is ended, and the next prompt of its place shows once the pinentry's
    /// thread is back), and shows, beside the ones showing, a prompt that waited ``PromptQueue/holdLimit``
    /// for them. The milliseconds until the next deadline or end of a hold, when one is still to come.
    func runPromptTimers(now: Int64) -> Int64? {
        var next: Int64?
        for showing in prompts.showing {
            guard let deadline = showing.deadline else { continue }
            guard deadline <= now else {
                next = min(next ?? deadline, deadline)
                continue
            }
            showing.deadline = nil
            showing.expire()
            let waiters = showing.waiters
            showing.waiters.removeAll()
            for waiter in waiters { waiter.completion(false) }
            showing.cancellation.cancel()
        }
        for place in prompts.placesWaiting { showNextPrompt(in: place) }
        if let lapse = prompts.nextHoldLapse() { next = min(next ?? lapse, lapse) }
        return next.map { RegistryClock.milliseconds(from: now, until: $0) }
    }

    /// After the person denied one of `client`'s questions, while others of its questions wait in the same place
    /// (`queueKey`): asks there, next, whether to deny them all ("Deny all N" / "Ask each", within the access prompts'
    /// time bound; anything but OK asks each in its turn). Every question of the client still waiting when the person
    /// says yes is denied, as its Deny would (the requests get `AccessDenied`, or `errSecUserCanceled` on Keychain1).
    private func offerToDenyAll(of client: PromptClient, in queueKey: String, at place: PromptPlace?) {
        let count = prompts.waiting(of: client, in: queueKey).count
        guard count > 0, let cancellation = try? PinentryCancellation() else { return }
        let request = Self.denyAllRequest(client, count: count)
        var dialog = PromptDialog<Bool>(
            sharingKey: nil,
            question: { pinentry, cancellation in
                let confirmed = try? pinentry.bounded(to: Self.accessPromptTimeout).confirm(
                    request, cancellation: cancellation)
                return confirmed == true ? .answered(true) : .unanswered
            },
            apply: { [self] _ in denyAll(of: client, in: queueKey) },
            isSatisfied: { [self] in prompts.waiting(of: client, in: queueKey).isEmpty })
        dialog.client = client
        dialog.timeLimit = Self.accessPromptTimeout
        let followUp = QueuedPrompt(dialog, cancellation: cancellation, queueKey: queueKey)
        followUp.isNext = true
        followUp.place = place
        prompts.append(followUp)
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

    /// Denies every question of `client` waiting in the place `queueKey`, as their Deny would.
    private func denyAll(of client: PromptClient, in queueKey: String) {
        let denied = prompts.waiting(of: client, in: queueKey)
        prompts.remove { prompt in denied.contains { $0 === prompt } }
        for prompt in denied {
            prompt.cancellation.cancel()
            prompt.ended(.deniedWithOthers)
            let waiters = prompt.waiters
            prompt.waiters.removeAll()
            for waiter in waiters { waiter.completion(false) }
        }
    }
}
