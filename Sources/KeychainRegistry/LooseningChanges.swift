import KeychainCore
import KeychainStore
import Pinentry

/// Changes any client could make that weaken what protects the person's secrets: lock settings that lock less,
/// and an alias (`default`) moved to another collection. Any process of the user can call the daemon, so they
/// are confirmed by the person first, as a switch to `allow-all` is (AccessPolicyChange.swift); the reverse
/// (locking more, a new alias) is made at once.
extension KeychainRegistry {
    /// Changes the lock settings of `held`, then runs `completion` on the serving thread with whether it was
    /// changed, or why not.
    /// Settings that lock less than those applied now (``KeychainSettings/loosens(_:)``: a lock on sleep or on
    /// screen lock turned off, a timeout removed or made longer) are first confirmed by the person in a pinentry
    /// `CONFIRM` naming the keychain, what changes and, when known, the program asking (`requester`); Cancel
    /// gives `errSecUserCanceled`, no pinentry `errSecInteractionNotAllowed`, and nothing changes. Settings
    /// that lock as much or more are saved at once. The session keychain keeps none (`errSecParam`); a locked
    /// keychain's settings cannot be saved (they are authenticated under its key).
    ///
    /// - Returns: the prompt's ticket while a confirmation is under way (withdraw it when the requester
    ///   leaves), else nil (`completion` has run).
    @discardableResult
    package func setSettings(
        _ settings: KeychainSettings, of held: HeldKeychain, requester: String?, client: PromptClient? = nil,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        func store() -> Result<Void, KeychainError> {
            Result { () throws(KeychainError) in try setSettings(settings, of: held) }
        }
        let current = held.appliedSettings
        guard !held.isLocked, settings.loosens(current) else {
            completion(store())
            return nil
        }
        let place = held.keychain.path.isEmpty ? "" : " (\(PromptText.field(held.keychain.path)))"
        let description =
            "A program asks to make the keychain “\(PromptText.field(held.label, bytes: 100))”\(place) lock"
            + " less often:\n\(Self.describe(current)) → \(Self.describe(settings))"
        let request = PinentryRequest(
            title: "Keychain Lock Settings", description: description, prompt: "", okLabel: "Lock Less",
            cancelLabel: "Keep Settings")
        return confirmProgramChange(
            request, requester: requester, command: "latchkey set-keychain-settings",
            declined: "the user did not confirm locking the keychain less",
            unasked: "locking a keychain less needs the user's confirmation, and no prompt could be shown",
            client: client
        ) { [self] answer in
            completion(applyingOnceConfirmed(answer, to: held, store))
        }
    }

    /// Settings in a few words, for the confirmation.
    private static func describe(_ settings: KeychainSettings) -> String {
        var parts: [String] = []
        if let timeout = settings.lockTimeout {
            parts.append("locks after \(timeout) s unused")
        } else {
            parts.append("no lock timeout")
        }
        if settings.lockOnSleep { parts.append("on sleep") }
        if settings.lockOnScreenLock { parts.append("on screen lock") }
        return parts.joined(separator: ", ")
    }

    /// Points alias `name` at `target` (nil removes it) for a client, then runs `completion` on the serving
    /// thread with whether it was changed, or why not. An alias that points at a collection now (`default`: where applications
    /// store new secrets) is moved or removed only once the person confirmed it, in a pinentry `CONFIRM` naming
    /// both collections and, when known, the program asking (`requester`); Cancel gives `errSecUserCanceled`,
    /// no pinentry `errSecInteractionNotAllowed`, and nothing changes. A new alias, or one pointed where it
    /// points already, is set at once.
    ///
    /// - Returns: the prompt's ticket while a confirmation is under way (withdraw it when the requester
    ///   leaves), else nil (`completion` has run).
    @discardableResult
    package func setAlias(
        _ name: String, to target: HeldKeychain?, requester: String?, client: PromptClient? = nil,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        guard let current = keychain(alias: name), current !== target else {
            setAlias(name, to: target)
            completion(.success(()))
            return nil
        }
        func label(_ held: HeldKeychain) -> String {
            "“\(PromptText.field(held.label.isEmpty ? held.id : held.label, bytes: 100))”"
        }
        var description =
            target.map {
                "A program asks to make the keychain \(label($0)) the “\(PromptText.field(name))” collection"
                    + " in place of \(label(current))."
            } ?? "A program asks to remove the “\(PromptText.field(name))” collection alias from \(label(current))."
        if name == "default" {
            description += "\nApplications store new secrets in the default collection."
        }
        let request = PinentryRequest(
            title: "Keychain Alias", description: description, prompt: "", okLabel: "Change",
            cancelLabel: "Keep As Is")
        return confirmProgramChange(
            request, requester: requester, command: nil,
            declined: "the user did not confirm changing the \(name) alias",
            unasked: "changing an alias needs the user's confirmation, and no prompt could be shown",
            client: client
        ) { [self] answer in
            completion(
                applyingOnceConfirmed(answer, to: target) {
                    setAlias(name, to: target)
                    return .success(())
                })
        }
    }
}
