import KeychainCore
import KeychainStore
import Pinentry
import Synchronization

extension KeychainRegistry {
    /// Changes a keychain's access policy (kept in its file, authenticated under its key), then runs
    /// `completion` on the serving thread with nil or the error.
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
        completion: @escaping (KeychainError?) -> Void
    ) -> PromptTicket? {
        func store() -> KeychainError? {
            do throws(KeychainError) {
                try held.keychain.setAccessPolicy(policy)
                return nil
            } catch {
                return error
            }
        }
        guard !held.isLocked else {
            completion(KeychainError(.interactionNotAllowed, "the keychain is locked: unlock it to change its policy"))
            return nil
        }
        guard policy == .allowAll, (try? held.keychain.accessPolicy()) != .allowAll else {
            completion(store())
            return nil
        }
        return confirm(
            Self.allowAllRequest(for: held, requester: requester), bounded: nil,
            declined: "the user did not confirm allowing every application",
            unasked: "allow-all needs the user's confirmation, and no prompt could be shown", client: client
        ) { error in
            completion(error ?? store())
        }
    }

    /// What the confirmation shows.
    private static func allowAllRequest(for held: HeldKeychain, requester: String?) -> PinentryRequest {
        let place = held.keychain.path.isEmpty ? "" : " (\(PromptText.field(held.keychain.path)))"
        var description =
            "A program asks to let every application of yours read the secrets of the keychain"
            + " “\(PromptText.field(held.label, bytes: 100))”\(place) without asking you first."
        if let requester { description += "\nAsked by: \(PromptText.field(requester))" }
        description += "\nAllow this only if you asked for it (latchkey set-access-policy allow-all)."
        return PinentryRequest(
            title: "Keychain Access Policy", description: description, prompt: "", okLabel: "Allow All",
            cancelLabel: "Keep Asking")
    }
}
