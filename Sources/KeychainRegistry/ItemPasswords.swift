import FoundationEssentials
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import Synchronization

/// One item with a password of its own (`kSecAccessControlApplicationPassword`) in a read: its stored envelope
/// (``ItemPasswordEnvelope``), opened with the password the person types.
package struct OwnPasswordRead: Sendable {
    /// The item.
    package let reference: ItemReference
    /// Its label, as the prompt names it.
    package let label: String
    /// Its stored secret: the envelope.
    package let envelope: Data

    /// The item `reference` labelled `label`, whose stored secret is `envelope`.
    package init(reference: ItemReference, label: String, envelope: Data) {
        self.reference = reference
        self.label = label
        self.envelope = envelope
    }
}

/// The secrets of items with a password of their own, opened for one read (by their index in the request's
/// ``ItemAuthenticationRequest/ownPasswords``), in secret memory. Filled on the serving thread.
package final class OpenedItemSecrets {
    /// The secrets opened, by index, with the keys that opened them.
    package var secrets: [Int: OpenedItemSecret] = [:]

    init() {}
}

/// What a new item's own password (``KeychainRegistry/askNewItemPassword(_:completion:)``) is asked for.
package struct NewItemPasswordRequest {
    /// The item's label, as the prompt names it.
    package let label: String
    /// The keychain it goes into.
    package let keychain: HeldKeychain
    /// Who asks, as the prompt names it.
    package let who: String
    /// Whose turn the prompt takes in the queue.
    package let client: PromptClient?
    /// Seals the secret under the password typed (on the worker): the envelope to store.
    package let seal: @Sendable (UnsafeRawBufferPointer) throws(KeychainError) -> Data

    /// A request for the password of a new item labelled `label` in `keychain`, made by `who`.
    package init(
        label: String, keychain: HeldKeychain, who: String, client: PromptClient?,
        seal: @escaping @Sendable (UnsafeRawBufferPointer) throws(KeychainError) -> Data
    ) {
        self.label = label
        self.keychain = keychain
        self.who = who
        self.client = client
        self.seal = seal
    }
}

/// Items with a password of their own (docs/secitem-semantics.md, "An item's own password"): the person chooses
/// it when the item is made (with its confirmation, in one dialog), and types it at each read; the secret is
/// stored sealed under a key scrypt derives from it (``ItemPasswordEnvelope``), derived on the worker as a
/// keychain password is. The prompts show where the request's other prompts do (desktop or the caller's
/// terminal), in the queue's turns.
extension KeychainRegistry {
    /// Asks the person for the password of a new item (typed twice alike), and seals its secret under it on the
    /// worker (`request.seal`). `completion` runs on the serving thread with the envelope, or
    /// `errSecUserCanceled` (cancelled), `errSecInteractionNotAllowed` (nobody could be asked). The ticket:
    /// withdraw it when the client leaves (nothing is added then).
    package func askNewItemPassword(
        _ request: NewItemPasswordRequest, completion: @escaping (Result<Data, KeychainError>) -> Void
    ) -> PromptTicket {
        let label = PromptText.field(request.label, bytes: 100)
        let prompt = PinentryRequest(
            title: "Keychain Access: new item password",
            description:
                "\(PromptText.field(request.who))\nadds the item “\(label)” to the keychain"
                + " “\(PromptText.field(request.keychain.label, bytes: 100))” with a password of its own.\n\n"
                + "Choose the item's password: it will be asked at each read of the item's secret.",
            prompt: "Item password:", okLabel: "Add", cancelLabel: "Cancel")
        let record = ConfirmationRecord()
        let sealed = Mutex<Data?>(nil)
        var dialog = PromptDialog<Data>(
            sharingKey: nil, tries: 1, retryMessage: "",
            ask: { pinentry, _, cancellation in
                do throws(PinentryError) {
                    guard
                        let typed = try Self.askNewPassword(
                            prompt, again: "Enter the item's new password again.", pinentry: pinentry,
                            cancellation: cancellation)
                    else { return nil }
                    record.note(.typed)
                    return [typed]
                } catch {
                    record.note(.failed(error.description))
                    Self.log("no way to ask for a new item's password: \(error.description)")
                    return nil
                }
            },
            attempt: Self.attempt(request.seal), apply: { envelope in sealed.withLock { $0 = envelope } },
            isSatisfied: { false })
        // Within the access prompts' bound, so that it ends before the client stops waiting for its reply.
        dialog.bound(for: request.client, recording: record)
        return enqueuePrompt(dialog) { accepted in
            if accepted, let envelope = sealed.withLock({ $0 }) { return completion(.success(envelope)) }
            switch record.outcome {
            case .refused(.authFailed, _):
                completion(.failure(KeychainError(.internalComponent, "the item's secret could not be sealed")))
            case .refused(let status, let why): completion(.failure(KeychainError(status, why)))
            case .confirmed: completion(.failure(KeychainError(.userCanceled, "the person cancelled")))
            }
        }
    }

    /// Asks for the password of each of `request`'s items with a password of its own, one after the other (three
    /// tries each, each wrong one counted under the keychain's wrong-password limit), and opens its secret on the
    /// worker into `request.opened`. `completion` runs on the serving thread once all were opened, or with the
    /// first refusal.
    func askItemPasswords(
        _ request: ItemAuthenticationRequest, ticket: @escaping (PromptTicket) -> Void,
        completion: @escaping (ItemAuthenticationOutcome) -> Void
    ) {
        func ask(_ index: Int, after previous: PromptTicket?) {
            guard index < request.ownPasswords.count else { return completion(.confirmed) }
            let item = request.ownPasswords[index]
            let keychain = request.keychain.keychain
            let prompt = PinentryRequest(
                title: "Keychain Access: item password",
                description: Self.itemPasswordText(request, label: item.label), prompt: "Item password:",
                okLabel: "Allow", cancelLabel: "Refuse")
            let record = ConfirmationRecord()
            let opened = request.opened
            var dialog = PromptDialog<OpenedItemSecret>(
                sharingKey: nil, tries: 3, retryMessage: "The item's password was not correct. Try again.",
                ask: Self.recordedAsk(prompt, record, asking: "an item's password"),
                attempt: Self.attempt { (password) throws(KeychainError) in
                    try keychain.openItemSecret(item.envelope, password: password, item: item.reference)
                },
                apply: { secret in opened.secrets[index] = secret }, isSatisfied: { false })
            dialog.bound(for: request.client, recording: record)
            // The next items' prompts take this request's ticket (withdrawn together), and show next.
            var made: PromptTicket?
            made = enqueuePrompt(dialog, ticket: previous, showingNext: previous != nil) { accepted in
                guard accepted else {
                    Self.log("the read of an item with a password of its own is refused")
                    return completion(record.outcome)
                }
                ask(index + 1, after: made ?? previous)
            }
            if previous == nil, let made { ticket(made) }
        }
        ask(0, after: nil)
    }

    /// The item password prompt's description: who asks for which item, the caller's reason marked as its own
    /// words, and what to type.
    static func itemPasswordText(_ request: ItemAuthenticationRequest, label: String) -> String {
        var text =
            "\(PromptText.field(request.who))\nwants the secret of the item “\(PromptText.field(label, bytes: 100))”"
            + "\nin the keychain “\(PromptText.field(request.keychain.label, bytes: 100))”,"
            + " which has a password of its own."
        if let reason = request.reason, !reason.isEmpty {
            text +=
                "\n\nThe application says (its own words, not Latchkey's): “\(PromptText.field(reason, bytes: 160))”"
        }
        return text
            + "\n\nType the password of item “\(PromptText.field(label, bytes: 100))” to allow this read, or cancel."
    }

    /// Asks for a new password with its confirmation: in one dialog (pinentry's `SETREPEAT`: the program itself
    /// asks until the two match), else, from a program that does not know `SETREPEAT` or did not confirm the
    /// repeat, a second dialog asks for it again (`again`), until both match (three tries). Nil when cancelled;
    /// throws when no pinentry could ask.
    static func askNewPassword(
        _ request: PinentryRequest, again: String, pinentry: Pinentry, cancellation: PinentryCancellation
    ) throws(PinentryError) -> SharedSecret? {
        var request = request
        let okLabel = request.okLabel
        let oneDialog = try pinentry.askNewPassword(
            request, repeatPrompt: "Confirm:", mismatchError: "The passwords did not match. Try again.",
            cancellation: cancellation)
        var typedOnce: SharedSecret?
        switch oneDialog {
        case .confirmed(let password)?: return password
        case .cancelled?: return nil
        case .unconfirmed(let password)?: typedOnce = password
        case nil: break
        }
        request.okLabel = "Continue"
        for _ in 0..<3 {
            let first: SharedSecret
            if let typed = typedOnce {
                first = typed
                typedOnce = nil
            } else {
                guard case .password(let typed) = try pinentry.askPassword(request, cancellation: cancellation)
                else { return nil }
                first = typed
            }
            var confirmation = request
            confirmation.description = again
            confirmation.prompt = "Confirm:"
            confirmation.error = nil
            confirmation.okLabel = okLabel
            // Both answers are in secret memory, wiped when the last holder lets go.
            guard case .password(let second) = try pinentry.askPassword(confirmation, cancellation: cancellation)
            else { return nil }
            if first == second { return first }
            request.error = "The passwords did not match. Try again."
        }
        return nil
    }
}
