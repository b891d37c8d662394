import DBus
import KeychainRegistry

/// A pending unlock: which client asked, what it named, and the collections that need the login password.
final class UnlockPrompt {
    let path: String
    let owner: String
    let objects: [String]
    let waiting: [HeldKeychain]
    var started = false
    /// Its place in the registry's prompt queue once started: handed back when it ends early.
    var ticket: PromptTicket?
    /// Set for gnome-keyring's `ChangeWithPrompt`: the collection whose password the prompt changes.
    var changing: HeldKeychain?

    init(path: String, owner: String, objects: [String], waiting: [HeldKeychain]) {
        self.path = path
        self.owner = owner
        self.objects = objects
        self.waiting = waiting
    }
}

/// `/org/freedesktop/secrets/prompt/…`: `org.freedesktop.Secret.Prompt`.
struct PromptObject: DBusObject {
    let daemon: SecretServiceDaemon
    let prompt: UnlockPrompt

    static let interfaceName = "org.freedesktop.Secret.Prompt"

    /// The prompt ended: dismissed, or done with its result (the paths unlocked; an empty string for a
    /// password change).
    static let completed = DBusSignal(
        interfaceName, "Completed", DBusInput("dismissed", Bool.self), DBusInput("result", DBusVariant.self))

    static let interfaces: [DBusInterface<PromptObject>] =
        standardInterfaces() + [
            DBusInterface(
                interfaceName,
                methods: [
                    DBusMethod("Prompt", DBusInput("window-id", String.self)) { (object, call, _) throws(DBusError) in
                        try object.requireOwner(call)
                        object.daemon.start(object.prompt)
                        return .reply([])
                    },
                    DBusMethod("Dismiss") { (object, call) throws(DBusError) in
                        try object.requireOwner(call)
                        object.daemon.drop(object.prompt)
                        object.daemon.completed(object.prompt, unlocked: nil)
                        return .reply([])
                    },
                ],
                signals: [completed.declaration])
        ]
}

extension PromptObject {
    /// A prompt belongs to the connection that caused it: another client may neither show nor dismiss it
    /// (`AccessDenied`, as gnome-keyring answers).
    func requireOwner(_ call: DBusMethodCall) throws(DBusError) {
        guard call.sender == prompt.owner else {
            throw DBusError(.accessDenied, "\(prompt.path) belongs to another client")
        }
    }
}

extension SecretServiceDaemon {
    /// Unlocks what can be unlocked at once (the session collection, and
    /// collections under an unlocked login keychain) and makes a prompt for the rest.
    func unlock(_ objects: [String], caller: String) throws(DBusError) -> [DBusValue] {
        try limits.check(objects: objects)
        var waiting: [HeldKeychain] = []
        // Resolve each path once: an item path costs a store query.
        let owned = objects.compactMap { path in owningCollection(path).map { (path: path, collection: $0) } }
        for (_, held) in owned where held.isLocked && !waiting.contains(where: { $0 === held }) {
            if !registry.unlockWithoutPassword(held) { waiting.append(held) }
        }
        let unlocked = owned.filter { !$0.collection.isLocked }.map(\.path)
        guard !waiting.isEmpty else { return [.objectPaths(unlocked), .objectPath(ObjectPaths.none)] }
        // No prompt can reach the caller: the call says so and what to do, rather than a prompt that would
        // complete dismissed with no word.
        if let refusal = registry.unlockRefusal(waiting) { throw SecretServiceError.isLocked(refusal) }
        let path = ObjectPaths.promptPrefix + "p\(nextSerial())"
        prompts[path] = UnlockPrompt(path: path, owner: caller, objects: owned.map(\.path), waiting: waiting)
        return [.objectPaths(unlocked), .objectPath(path)]
    }

    /// Shows a prompt's pinentry (once); its `Completed` signal follows when the user answers.
    func start(_ prompt: UnlockPrompt) {
        guard !prompt.started else { return }
        prompt.started = true
        if let changing = prompt.changing { return startPasswordChange(prompt, of: changing) }
        prompt.ticket = registry.promptForPasswords(unlocking: prompt.waiting) { [self] unlocked in
            // A prompt dismissed or dropped meanwhile has already ended.
            guard prompts.removeValue(forKey: prompt.path) != nil else { return }
            completed(
                prompt, unlocked: unlocked ? prompt.objects.filter { owningCollection($0)?.isLocked == false } : nil)
        }
    }

    /// Forgets a prompt that ended before its answer (dismissed, or its client left): its pinentry is ended
    /// unless another request shares it.
    func drop(_ prompt: UnlockPrompt) {
        prompts[prompt.path] = nil
        if let ticket = prompt.ticket { registry.withdraw(ticket) }
        prompt.ticket = nil
    }

    /// Sends a prompt's `Completed`: with the paths unlocked, or dismissed (nil). A change-password prompt's
    /// result is an empty string, dismissed or not (as gnome-keyring sends).
    func completed(_ prompt: UnlockPrompt, unlocked: [String]?) {
        let result: DBusValue = prompt.changing == nil ? .objectPaths(unlocked ?? []) : .string("")
        emit(PromptObject.completed, at: prompt.path, unlocked == nil, DBusVariant(result))
    }
}
