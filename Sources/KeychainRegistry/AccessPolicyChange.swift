import KeychainCore
import KeychainStore
import Pinentry
import Synchronization

extension KeychainRegistry {
    /// Changes a keychain's access policy (kept in its file, authenticated under its key), then runs
    /// `completion` on the serving thread with whether it was changed, or why not.
    ///
    /// Any process of the user can call the daemon, so a switch to the weaker ``KeychainAccessPolicy/allowAll``
    /// is first confirmed by the user: a pinentry `CONFIRM` through the prompt queue, naming the keychain and,
    /// when known, the program asking (`requester`), in the turn of `client` (the requester's). Cancel gives `errSecUserCanceled`; a pinentry that cannot
    /// be run (no display, no terminal) gives `errSecInteractionNotAllowed`. A switch to
    /// ``KeychainAccessPolicy/prompt``, or to the policy the keychain already has, asks nothing.
    ///
    /// - Returns: the prompt's ticket while a confirmation is under way (withdraw it when the requester
    ///   leaves: the prompt ends and nothing changes), else nil (`completion` has run).
    @discardableResult
    package func setAccessPolicy(
        _ policy: KeychainAccessPolicy, of held: HeldKeychain, requester: String?, client: PromptClient? = nil,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        func store() -> Result<Void, KeychainError> {
            Result { () throws(KeychainError) in try held.keychain.setAccessPolicy(policy) }
        }
        guard !held.isLocked else {
            completion(
                .failure(
                    KeychainError(.interactionNotAllowed, "the keychain is locked: unlock it to change its policy")))
            return nil
        }
        guard policy == .allowAll, (try? held.keychain.accessPolicy()) != .allowAll else {
            completion(store())
            return nil
        }
        let place = held.keychain.path.isEmpty ? "" : " (\(PromptText.field(held.keychain.path)))"
        return confirmProgramChange(
            PinentryRequest(
                title: "Keychain Access Policy",
                description: "A program asks to let every application of yours read the secrets of the keychain"
                    + " “\(PromptText.field(held.label, bytes: 100))”\(place) without asking you first.",
                prompt: "", okLabel: "Allow All", cancelLabel: "Keep Asking"),
            requester: requester, command: "latchkey set-access-policy allow-all",
            declined: "the user did not confirm allowing every application",
            unasked: "allow-all needs the user's confirmation, and no prompt could be shown", client: client
        ) { [self] answer in
            completion(applyingOnceConfirmed(answer, to: held, store))
        }
    }

    /// Asks the person to confirm a change a program asked for, as ``confirm(_:bounded:declined:unasked:completion:)``
    /// does (within the access prompts' time bound, in `client`'s turn): `request`'s description gets who asks (`requester`, when known) and "Allow this
    /// only if you asked for it" with the `command` that asks for it, when there is one.
    func confirmProgramChange(
        _ request: PinentryRequest, requester: String?, command: String?, declined: String, unasked: String,
        client: PromptClient? = nil, ticket: PromptTicket? = nil, completion: @escaping (ConfirmationAnswer) -> Void
    ) -> PromptTicket {
        var request = request
        if let requester { request.description += "\nAsked by: \(PromptText.field(requester))" }
        request.description += "\nAllow this only if you asked for it" + (command.map { " (\($0))." } ?? ".")
        return confirm(
            request, bounded: Self.accessPromptTimeout, declined: declined, unasked: unasked, client: client,
            ticket: ticket, completion: completion)
    }

    /// How a confirmed change ends: the refusal when the person did not confirm it; `missing` when `held` (nil:
    /// nothing to check) was deleted while the person was asked, since there is nothing left to change; else
    /// what `apply` gives.
    func applyingOnceConfirmed(
        _ answer: ConfirmationAnswer, to held: HeldKeychain?, missing: KeychainStatus = .noSuchKeychain,
        _ apply: () -> Result<Void, KeychainError>
    ) -> Result<Void, KeychainError> {
        guard case .confirmed = answer else { return answer.result }
        if let held, !keychains.contains(where: { $0 === held }) {
            return .failure(KeychainError(missing, "the keychain was deleted meanwhile"))
        }
        return apply()
    }
}
