import KeychainCore
import KeychainStore
import Pinentry
import Synchronization

/// How a confirmation ended, as its prompt's thread saw it (or the queue, when its time limit passed): the
/// first word stands.
private final class ConfirmationOutcome: Sendable {
    enum State: Sendable {
        /// The pinentry never ran (the queue could not start it).
        case notAsked
        /// The person answered: OK (true) or Cancel (false).
        case answered(Bool)
        /// The pinentry could not be run or failed: nobody could be asked.
        case failed(String)
    }

    let state = Mutex(State.notAsked)

    /// Records how it ended, unless that was recorded already.
    func record(_ ending: State) {
        state.withLock { state in
            if case .notAsked = state { state = ending }
        }
    }
}

/// How a confirmation the person was asked for ended.
enum ConfirmationAnswer {
    /// The person chose OK.
    case confirmed
    /// The person said no (or closed it): `errSecUserCanceled`, saying what was declined.
    case declined(KeychainError)
    /// No pinentry could ask (or none answered in time): `errSecInteractionNotAllowed`, saying why.
    case unasked(KeychainError)

    /// The answer as the registry's package API completes: success when confirmed, else why nothing was done.
    var result: Result<Void, KeychainError> {
        switch self {
        case .confirmed: .success(())
        case .declined(let error), .unasked(let error): .failure(error)
        }
    }
}

extension KeychainRegistry {
    /// Asks the person to confirm `request` (a pinentry `CONFIRM`, through the prompt queue, never shared),
    /// within `bounded` when given, then runs `completion` on the serving thread with the answer:
    /// ``ConfirmationAnswer/confirmed``, `errSecUserCanceled` with `declined` when the person said no (or closed
    /// it), `errSecInteractionNotAllowed` with `unasked` when no pinentry could ask. `client`: the client whose request it confirms, in whose turn
    /// it waits (docs/robustness.md, "Fair prompts"; nil: the daemon's own turn). The ticket: withdraw it when
    /// the requester leaves. A request's later step passes its first prompt's `ticket`, so that withdrawing that
    /// ends this one too.
    func confirm(
        _ request: PinentryRequest, bounded: Duration?, declined: String, unasked: String,
        client: PromptClient? = nil, ticket: PromptTicket? = nil, completion: @escaping (ConfirmationAnswer) -> Void
    ) -> PromptTicket {
        let outcome = ConfirmationOutcome()
        var dialog = PromptDialog<Bool>(
            // On a terminal: the password, not a key the program that asked could push into it.
            sharingKey: nil, tries: 3, password: terminalPasswordCheck(for: nil), onTerminal: true,
            consent: "confirm", cancelIsDecline: false, request: { request },
            question: { pinentry, cancellation in
                do throws(PinentryError) {
                    let asking = bounded.map { pinentry.bounded(to: $0) } ?? pinentry
                    let confirmed = try asking.confirm(request, cancellation: cancellation)
                    outcome.record(.answered(confirmed))
                    return confirmed ? .answered(true) : .unanswered
                } catch {
                    outcome.record(.failed(error.reason))
                    return .unanswered
                }
            },
            note: { noted in
                switch noted {
                // Tried on the worker next: wrong every time, it ends as the person's no.
                case .typed, .cancelled: outcome.record(.answered(false))
                case .failed(let reason): outcome.record(.failed(reason))
                }
            },
            apply: { _ in }, isSatisfied: { false })
        if let bounded {
            // Past its time limit it ends as when pinentry's own timeout ends it: nobody could be asked.
            dialog.timeLimit = bounded
            dialog.expire = { outcome.record(.failed("no answer within \(bounded)")) }
        }
        dialog.ended = { ending in
            switch ending {
            case .cannotShow(let error): outcome.record(.failed(error.reason))
            // The person answered, for this one too: as its own Cancel would.
            case .deniedWithOthers: outcome.record(.answered(false))
            }
        }
        dialog.client = client
        return enqueuePrompt(dialog, ticket: ticket, showingNext: ticket != nil) { accepted in
            guard accepted else {
                switch outcome.state.withLock({ $0 }) {
                case .answered: completion(.declined(KeychainError(.userCanceled, declined)))
                case .failed(let reason):
                    completion(.unasked(KeychainError(.interactionNotAllowed, "\(unasked) (pinentry: \(reason))")))
                case .notAsked: completion(.unasked(KeychainError(.interactionNotAllowed, unasked)))
                }
                return
            }
            completion(.confirmed)
        }
    }

    /// Asks the person to confirm that `requester` (a Flatpak application, or a program the daemon could not
    /// identify) may create a keychain labelled `label`: a pinentry `CONFIRM`, within the access prompts' time
    /// bound. `completion` runs on the serving thread: success when confirmed, `errSecUserCanceled` when refused,
    /// `errSecInteractionNotAllowed` when no prompt could be shown. The ticket: withdraw it when the requester
    /// leaves.
    package func confirmKeychainCreation(
        label: String, requester: String, client: PromptClient? = nil,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket {
        // The label is the caller's: one bounded line, so that it cannot write lines that read as the daemon's.
        let shown = label.isEmpty ? "" : " “\(PromptText.field(label, bytes: 100))”"
        let request = PinentryRequest(
            title: "New Keychain",
            description: "A program asks to create a new keychain\(shown).\nAsked by: \(PromptText.field(requester))",
            prompt: "", okLabel: "Create", cancelLabel: "Don't Create")
        return confirm(
            request, bounded: Self.accessPromptTimeout, declined: "the user did not allow creating a keychain",
            unasked:
                "creating a keychain from this program needs the user's confirmation, and no prompt could be shown",
            client: client, completion: { completion($0.result) })
    }

    /// Deletes a keychain created by a client (`Collection.Delete`), once the person confirmed it: the login
    /// and session keychains are refused (`errSecParam`), a locked keychain too
    /// (`errSecInteractionNotAllowed`: whoever asks must first get it unlocked), before anything is asked.
    /// Any process of the user can call the daemon, so every deletion is confirmed, whoever asks: a pinentry
    /// `CONFIRM` naming the keychain, its file and, when known, the program asking (`requester`), within the
    /// access prompts' time bound, in the turn of `client` (the requester's). Cancel gives `errSecUserCanceled`, no way to ask
    /// `errSecInteractionNotAllowed`; nothing is deleted then. `completion` runs on the serving thread.
    ///
    /// - Returns: the prompt's ticket while the confirmation is under way (withdraw it when the requester
    ///   leaves: the prompt ends and nothing is deleted), else nil (`completion` has run).
    @discardableResult
    package func deleteKeychain(
        _ held: HeldKeychain, requester: String?, client: PromptClient? = nil,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        guard held.id != Self.loginID, held.id != Self.sessionID else {
            completion(.failure(KeychainError.param("the \(held.id) collection cannot be deleted")))
            return nil
        }
        guard !held.isLocked else {
            completion(
                .failure(KeychainError(.interactionNotAllowed, "the keychain is locked: unlock it to delete it")))
            return nil
        }
        // The label was chosen by the client that made the keychain: each field one bounded line.
        let place = held.keychain.path.isEmpty ? "" : " (\(PromptText.field(held.keychain.path)))"
        var description =
            "A program asks to DELETE the keychain “\(PromptText.field(held.label, bytes: 100))”\(place) and every"
            + " item in it."
        if let requester { description += "\nAsked by: \(PromptText.field(requester))" }
        description += "\nThis cannot be undone."
        let request = PinentryRequest(
            title: "Delete Keychain", description: description, prompt: "", okLabel: "Delete", cancelLabel: "Keep")
        return confirm(
            request, bounded: Self.accessPromptTimeout, declined: "the user did not confirm deleting the keychain",
            unasked: "deleting a keychain needs the user's confirmation, and no prompt could be shown", client: client
        ) { [self] answer in
            completion(
                applyingOnceConfirmed(answer, to: held, missing: .itemNotFound) {
                    removeKeychain(held)
                    return .success(())
                })
        }
    }
}
