import KeychainCore
import KeychainStore
import Pinentry

/// The person's yes to an export or an import through the daemon (`Keychain1.Export`, `Import`;
/// docs/threat-model.md, "Export and import"): an export hands every secret of the keychains to the caller,
/// an import writes many items (and with `--replace` overwrites some), so neither is ever silent, whatever the
/// keychain's access policy.
extension KeychainRegistry {
    /// Unlocks `keychains` through the usual prompts when any is locked, then asks the person to confirm an
    /// export of their `itemCount` items; `completion` gets the answer (`errSecUserCanceled` when declined or
    /// an unlock was cancelled, `errSecInteractionNotAllowed` when nobody could be asked). The ticket of the
    /// first prompt: withdraw it when the requester leaves.
    package func confirmExport(
        of keychains: [HeldKeychain], itemCount: @escaping () -> Int, encrypted: Bool, requester: String?,
        client: PromptClient?, completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        unlockingFirst(keychains, completion: completion) { [self] ticket in
            let names = keychains.map { "“\(PromptText.field($0.label.isEmpty ? $0.id : $0.label, bytes: 60))”" }
            let count = itemCount()
            let how = encrypted ? "an encrypted file" : "an UNENCRYPTED file that anyone who reads it can use"
            return confirmProgramChange(
                PinentryRequest(
                    title: "Export Keychain Items",
                    description: "A program asks to export \(count) item\(count == 1 ? "" : "s") of the keychain"
                        + "\(names.count == 1 ? "" : "s") \(names.joined(separator: ", ")), with their secrets,"
                        + " into \(how).",
                    prompt: "", okLabel: "Export", cancelLabel: "Cancel"),
                requester: requester, command: "latchkey export", declined: "the user did not allow the export",
                unasked: "an export needs the user's confirmation, and no prompt could be shown", client: client,
                ticket: ticket
            ) { answer in completion(answer.result) }
        }
    }

    /// Unlocks `held` when it is locked, then asks the person to confirm an import of `adding` items into it,
    /// `replacing` of them in place of items there, from `source` (`a file`, or a gnome-keyring keyring named so),
    /// as `command` would; as ``confirmExport(of:itemCount:encrypted:requester:client:completion:)``.
    package func confirmImport(
        into held: HeldKeychain, adding: Int, replacing: Int, from source: String = "a file",
        command: String = "latchkey import", requester: String?, client: PromptClient?,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        unlockingFirst([held], completion: completion) { [self] ticket in
            let name = PromptText.field(held.label.isEmpty ? held.id : held.label, bytes: 60)
            let replaced = replacing > 0 ? ", overwriting \(replacing) item\(replacing == 1 ? "" : "s") there" : ""
            return confirmProgramChange(
                PinentryRequest(
                    title: "Import Keychain Items",
                    description: "A program asks to import \(adding) item\(adding == 1 ? "" : "s") from \(source) into"
                        + " the keychain “\(name)”\(replaced).",
                    prompt: "", okLabel: "Import", cancelLabel: "Cancel"),
                requester: requester, command: command, declined: "the user did not allow the import",
                unasked: "an import needs the user's confirmation, and no prompt could be shown", client: client,
                ticket: ticket
            ) { answer in completion(answer.result) }
        }
    }

    /// Runs `ask` once every keychain of `keychains` is unlocked (asking for their passwords first when one is
    /// locked); a cancelled unlock completes with `errSecUserCanceled`. After an unlock prompt, `ask` gets its
    /// ticket and queues its question under it (as the next step of the same request), so that withdrawing the
    /// ticket returned here, when the requester leaves the bus, ends the question too.
    private func unlockingFirst(
        _ keychains: [HeldKeychain], completion: @escaping (Result<Void, KeychainError>) -> Void,
        _ ask: @escaping (PromptTicket?) -> PromptTicket
    ) -> PromptTicket? {
        let locked = keychains.filter(\.isLocked)
        guard !locked.isEmpty else { return ask(nil) }
        var first: PromptTicket?
        first = promptForPasswords(unlocking: locked) { unlocked in
            guard unlocked, !keychains.contains(where: \.isLocked) else {
                return completion(.failure(KeychainError(.userCanceled, "the keychain was not unlocked")))
            }
            _ = ask(first)
        }
        return first
    }
}
