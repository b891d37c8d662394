import AccessControl
import CallerIdentity
import DBus
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore

/// The Secret Service face of the access decision (``AccessRules``, in AccessControl): it asks the rules, serves
/// what they allow, defers the reply while the person is asked, and answers a denial with the face's error
/// (docs/threat-model.md, "Access lists"; docs/dbus-mapping.md, "Access prompts").
///
/// Every path that hands out a secret goes through ``SecretServiceDaemon/servingSecrets(of:to:_:)``:
/// `GetSecret`, `GetSecrets` and `org.latchkey.Keychain1.Search` asking for data (the CLI and the `Security`
/// module go through it). Every path that changes or deletes an item goes through
/// ``SecretServiceDaemon/servingChange(_:of:to:_:)``, with the same decision: `Item.SetSecret`, `Item.Delete`,
/// the `Label` and `Attributes` setters, `CreateItem` replacing an item, `Keychain1.Update` and `Delete`.
/// Labels and attributes stay visible to every caller.
extension SecretServiceDaemon {
    /// One item whose secret is asked for, with its attributes when the request has read them already.
    struct SecretTarget {
        let held: HeldKeychain
        let reference: ItemReference
        var attributes: ItemAttributes? = nil
    }

    /// An item the person is asked about, and what to ask.
    private struct AccessAsk {
        let target: SecretTarget
        let question: AccessDecision.Question
    }

    /// The rules this daemon asks: every caller allowed everything when callers are not identified.
    var accessRules: AccessRules { AccessRules(identifiesCallers: callers != nil) }

    /// Who `sender` is, as far as the daemon knows (unknown when callers are not identified).
    func requester(of sender: String?) -> Requester {
        guard let callers else { return .unidentified(.unknown) }
        return callers.requester(of: sender)
    }

    /// What the rules decide of `sender` asking to `kind` the item of `target`.
    func decide(_ kind: AccessKind, _ target: SecretTarget, caller sender: String) -> AccessDecision {
        accessRules.decide(
            item: AccessedItem(kind, target.reference, in: target.held, attributes: target.attributes),
            caller: requester(of: sender))
    }

    /// What the rules decide of `sender` doing `action`.
    func decide(_ action: CallerAction, by sender: String?) -> AccessDecision {
        accessRules.decide(action: action, caller: requester(of: sender))
    }

    /// Refuses (`AccessDenied`) `action` to a sender the rules do not allow it: a Flatpak application, or a
    /// caller the daemon could not identify (only where callers are identified: an embedding trusts its
    /// callers). For what is the person's to decide (where prompts show, the lock settings, the aliases) or
    /// what guesses a password (docs/threat-model.md, "What one client can do to the others").
    func refuse(unlessAllowed action: CallerAction, by sender: String?) throws(DBusError) {
        switch decide(action, by: sender) {
        case .allowed: return
        case .denied(let refusal): throw DBusError(.accessDenied, refusal.explanation(of: action))
        case .ask:
            // Not an action a prompt is shown for here.
            throw DBusError(.accessDenied, "the caller cannot \(action.phrase) without the person's leave")
        }
    }

    /// Serves a request for the secrets of `targets`: at once when the caller may read them all, else once
    /// the person has answered a prompt for each item it may not (one prompt per item, one at a time; the
    /// same item asked for by the same application shares one). `serve` gets, per target, whether it was
    /// allowed, and the outcome: `.denied` when some were not. It makes the reply. Never blocks: the reply is
    /// deferred while prompts are pending. The items allowed whose access control asks for the person are then
    /// confirmed (``confirmingReads(of:allowed:outcome:sender:authentication:then:)``, `authentication` saying
    /// whether the person may be asked and the caller's reason) before `serve` sees them allowed.
    func servingSecrets(
        of targets: [SecretTarget], to call: DBusMethodCall, authentication: AuthenticationOptions = .init(),
        _ serve: @escaping (_ allowed: [Bool], _ outcome: AccessOutcome) -> Result<[DBusValue], DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        let pending = PendingSecretRequest(count: targets.count)
        var asks: [(index: Int, ask: AccessAsk)] = []
        for (index, target) in targets.enumerated() {
            switch decide(.read, target, caller: call.sender) {
            case .allowed: break
            case .ask(let question): asks.append((index, AccessAsk(target: target, question: question)))
            case .denied(let refusal):
                pending.allowed[index] = false
                pending.deniedLabels.append(Self.label(target))
                pending.cause = .refused(refusal)
            }
        }
        guard !asks.isEmpty else {
            let confirmed = confirmingReads(
                of: targets, allowed: pending.allowed, outcome: pending.outcome(.read), sender: call.sender,
                authentication: authentication
            ) { [self] allowed, outcome in reply(to: call, serve(allowed, outcome)) }
            guard let confirmed else { return .deferred }
            switch serve(confirmed.0, confirmed.1) {
            case .success(let values): return .reply(values)
            case .failure(let error): throw error
            }
        }
        pending.waiting = asks.count
        let sender = call.sender
        for (index, ask) in asks {
            let failure = AccessPromptFailure()
            let ticket = registry.promptForAccess(
                sharingKey: Self.sharingKey(ask, sender: sender), client: ask.question.asker.promptClient,
                keychain: ask.target.held,
                question: AccessDecision.Question.words(for: [ask.question]),
                failure: failure,
                trust: {
                    guard case .application(let application) = ask.question.asker else { return }
                    ask.target.held.alwaysAllow(application, item: ask.target.reference, label: ask.question.label)
                },
                // Read afresh: the list may have changed since (another request's Always allow).
                isAllowed: { [self] in
                    let current = SecretTarget(held: ask.target.held, reference: ask.target.reference)
                    return decide(.read, current, caller: sender) == .allowed
                },
                completion: { [self] granted in
                    pending.allowed[index] = granted
                    if !granted {
                        pending.deniedLabels.append(ask.question.label)
                        pending.note(failure)
                    }
                    pending.waiting -= 1
                    guard pending.waiting == 0 else { return }
                    forget(pending.tickets, of: sender)
                    let confirmed = confirmingReads(
                        of: targets, allowed: pending.allowed, outcome: pending.outcome(.read), sender: sender,
                        authentication: authentication
                    ) { [self] allowed, outcome in reply(to: call, serve(allowed, outcome)) }
                    if let confirmed { reply(to: call, serve(confirmed.0, confirmed.1)) }
                })
            if pending.waiting > 0 {
                pending.tickets.append(ticket)
                accessTickets[sender, default: []].append(ticket)
            }
        }
        return .deferred
    }

    /// Serves a request that changes or deletes `targets` (docs/dbus-mapping.md, "Access prompts"): at once when
    /// the rules allow the caller every one (the same decision as for their secrets: the item trusts it, or the
    /// keychain's policy is `allow-all`), else once the person allowed it in one prompt that covers every item
    /// it may not touch (a bulk `Keychain1.Delete` asks once, not per item). Such a prompt offers no Always
    /// allow (the rules offer it to read only): the access list is one for reads and changes, and a change is
    /// no reason to trust a program with the secret. `serve` makes the change and the reply, given the
    /// outcome: `.denied` when the person did not allow it (nothing may change then). Never blocks: the reply
    /// is deferred while the prompt is pending.
    func servingChange(
        _ kind: AccessKind, of targets: [SecretTarget], to call: DBusMethodCall,
        _ serve: @escaping (_ outcome: AccessOutcome) -> Result<[DBusValue], DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        try decidingChange(kind, of: targets, to: call) { outcome in serve(outcome).map { .reply($0) } }
    }

    /// As ``servingChange(_:of:to:_:)``, with a `serve` that may itself answer later (`.deferred`: it replies to
    /// `call` itself), for a change that asks the person more once the access decision is made (`Keychain1.Update`
    /// giving items a password of their own: the decision comes first, so that a refused caller is asked nothing).
    func decidingChange(
        _ kind: AccessKind, of targets: [SecretTarget], to call: DBusMethodCall,
        _ serve: @escaping (_ outcome: AccessOutcome) -> Result<DBusMethodResult, DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        var asks: [AccessAsk] = []
        for target in targets {
            switch decide(kind, target, caller: call.sender) {
            case .allowed: break
            case .ask(let question): asks.append(AccessAsk(target: target, question: question))
            case .denied(let refusal):
                return try serve(
                    .denied(AccessDenial(kind: kind, labels: [Self.label(target)], cause: .refused(refusal)))
                ).get()
            }
        }
        guard !asks.isEmpty else { return try serve(.allowed).get() }
        let sender = call.sender
        let failure = AccessPromptFailure()
        var ticket: PromptTicket?
        var finished = false
        ticket = registry.promptForAccess(
            sharingKey: nil, client: asks[0].question.asker.promptClient, keychain: asks[0].target.held,
            question: AccessDecision.Question.words(for: asks.map(\.question)),
            failure: failure, trust: {},
            // Read afresh: the caller may have been trusted meanwhile (another request's Always allow).
            isAllowed: { [self] in
                asks.allSatisfy {
                    decide(kind, SecretTarget(held: $0.target.held, reference: $0.target.reference), caller: sender)
                        == .allowed
                }
            },
            completion: { [self] granted in
                finished = true
                if let ticket { forget([ticket], of: sender) }
                let labels = asks.map(\.question.label)
                let outcome: AccessOutcome =
                    granted ? .allowed : .denied(AccessDenial(kind: kind, labels: labels, cause: .init(failure)))
                switch serve(outcome) {
                case .success(.reply(let values)): reply(to: call, .success(values))
                case .success(.deferred): break
                case .failure(let error): reply(to: call, .failure(error))
                }
            })
        if !finished, let ticket { accessTickets[sender, default: []].append(ticket) }
        return .deferred
    }

    /// Forgets `tickets` of `sender` once their prompts ended.
    func forget(_ tickets: [PromptTicket], of sender: String) {
        accessTickets[sender]?.removeAll { ticket in tickets.contains { $0 === ticket } }
        if accessTickets[sender]?.isEmpty == true { accessTickets[sender] = nil }
    }

    /// Withdraws the access prompts of a client that left the bus: nobody waits for their answer.
    func withdrawAccessPrompts(of sender: String) {
        for ticket in accessTickets.removeValue(forKey: sender) ?? [] { registry.withdraw(ticket) }
    }

    /// The label of `target`'s item as its attributes read (empty when they were not read).
    private static func label(_ target: SecretTarget) -> String {
        if case .string(let text)? = target.attributes?[.label] { return text }
        return ""
    }

    /// Requests share a prompt when they are for the same item from the same application (an unidentified
    /// caller shares only with itself).
    private static func sharingKey(_ ask: AccessAsk, sender: String) -> String {
        let who: String
        switch ask.question.asker {
        case .application(let application): who = application.name + "\t" + (application.digest?.description ?? "")
        case .unidentified: who = "unidentified\t" + sender
        }
        return ask.target.held.id + "\t" + ask.target.reference.description + "\t" + who
    }

    /// How the confirmation of `sender`'s request names `asker`, whom the rules want asked about it: a Flatpak
    /// application by its app id, an unidentified caller by its bus name.
    func confirmationName(of asker: Requester, sender: String) -> String {
        switch asker {
        case .application(let application): application.description
        case .unidentified: "a program Latchkey could not identify (\(sender))"
        }
    }

    /// Whom a confirmation of `sender`'s request takes its turn for (``Requester/promptClient``): its
    /// application, or the unidentified callers' one turn (also when callers are not identified at all).
    func promptClient(of sender: String) -> PromptClient { requester(of: sender).promptClient }
}

/// How a request's access prompts ended: every item allowed, or some denied (and why).
enum AccessOutcome {
    /// Every item asked about was allowed (or none needed asking).
    case allowed
    /// Some were not.
    case denied(AccessDenial)
}

/// Why some of a request's secrets were not handed over, or its items not changed or deleted: what was asked
/// for, the items' labels, and why.
struct AccessDenial {
    /// Why the request was not allowed.
    enum Cause {
        /// The person denied, dismissed the prompt, or did not answer in time.
        case personDenied
        /// There was no way to ask: the pinentry's failure.
        case noWayToAsk(String)
        /// The rules refuse the caller whatever the person would say.
        case refused(AccessDecision.Refusal)
        /// The item's access control was not met (ItemConfirmations.swift): the status and why.
        case unconfirmed(KeychainStatus, String)

        /// The cause an ended prompt's `failure` says.
        init(_ failure: AccessPromptFailure) {
            if let text = failure.description { self = .noWayToAsk(text) } else { self = .personDenied }
        }
    }

    let kind: AccessKind
    let labels: [String]
    let cause: Cause

    private var message: String {
        let items = AccessQuestion.itemList(labels)
        let doing: String
        switch kind {
        case .read: doing = "reading"
        case .change: doing = "changing"
        case .delete: doing = "deleting"
        }
        switch cause {
        case .noWayToAsk(let failure):
            return "\(doing) \(items) needs your permission, and there was no way to ask (\(failure))"
        case .personDenied: return "\(doing) \(items) was not allowed"
        case .refused(.sandboxed(let appID)): return "\(doing) \(items) is not for a Flatpak application (\(appID))"
        case .refused(.unidentified): return "\(doing) \(items) is not for a caller that could not be identified"
        case .unconfirmed(_, let why): return "\(doing) \(items) needs your confirmation: \(why)"
        }
    }

    /// The Secret Service face's error: `AccessDenied`, not `IsLocked` (unlocking would not help; see
    /// docs/dbus-mapping.md).
    var secretServiceError: DBusError { DBusError(.accessDenied, message) }

    /// `org.latchkey.Keychain1`'s: `errSecInteractionNotAllowed` when nobody could be asked, else
    /// `errSecUserCanceled`, as macOS answers a Deny (`errSecAuthFailed` when the rules refuse the caller).
    var keychainError: DBusError {
        let status: KeychainStatus
        switch cause {
        case .personDenied: status = .userCanceled
        case .noWayToAsk: status = .interactionNotAllowed
        case .refused: status = .authFailed
        case .unconfirmed(let code, _): status = code
        }
        return Keychain1Interface.dbusError(KeychainError(status, message))
    }
}

/// A request waiting for its access prompts: which items were allowed, how many prompts are left.
private final class PendingSecretRequest {
    var allowed: [Bool]
    var waiting = 0
    /// Why the items denied were: no way to ask as soon as one prompt could not ask.
    var cause: AccessDenial.Cause = .personDenied
    var deniedLabels: [String] = []
    var tickets: [PromptTicket] = []

    init(count: Int) {
        allowed = Array(repeating: true, count: count)
    }

    /// Notes how a prompt that did not allow its item ended: the first failure to ask is the one reported.
    func note(_ failure: AccessPromptFailure) {
        guard case .personDenied = cause, let text = failure.description else { return }
        cause = .noWayToAsk(text)
    }

    /// The request's outcome: denied when any item was.
    func outcome(_ kind: AccessKind) -> AccessOutcome {
        deniedLabels.isEmpty ? .allowed : .denied(AccessDenial(kind: kind, labels: deniedLabels, cause: cause))
    }
}
