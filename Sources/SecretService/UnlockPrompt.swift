import DBus
import FoundationEssentials
import Glibc
import KeychainCore
import KeychainStore
import LoginControl
import Pinentry
import Synchronization

/// A pending unlock: which client asked, what it named, and the collections
/// that need the login password.
final class UnlockPrompt {
    let path: String
    let owner: String
    let objects: [String]
    let waiting: [SecretCollection]
    var started = false

    init(path: String, owner: String, objects: [String], waiting: [SecretCollection]) {
        self.path = path
        self.owner = owner
        self.objects = objects
        self.waiting = waiting
    }
}

/// Results of prompts, handed from prompt threads to the serving thread; a
/// byte on a pipe wakes the serving thread's `poll`.
public final class PromptCompletions: Sendable {
    enum Result: Sendable {
        /// An Unlock prompt (its object path) ended: whether the login keychain is now unlocked.
        case unlock(promptPath: String, unlocked: Bool)
        /// The re-key prompt ended: whether the login keychain was re-keyed and unlocked.
        case rekey(succeeded: Bool)
    }

    private let pending = Mutex<[Result]>([])
    private let readEnd: Int32
    private let writeEnd: Int32

    init() throws(KeychainError) {
        (readEnd, writeEnd) = try makeWakePipe()
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// The descriptor that becomes readable when a result is waiting.
    public var fileDescriptor: Int32 { readEnd }

    func post(_ result: Result) {
        pending.withLock { $0.append(result) }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func take() -> [Result] {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
        return pending.withLock { results in
            defer { results.removeAll() }
            return results
        }
    }
}

extension SecretService {
    /// Unlocks what can be unlocked at once (the session collection, and
    /// collections under an unlocked login keychain) and makes a prompt for the rest.
    func unlock(_ objects: [String], caller: String) throws(DBusError) -> [DBusValue] {
        try configuration.limits.check(objects: objects)
        var waiting: [SecretCollection] = []
        // Resolve each path once: an item path costs a store query.
        let owned = objects.compactMap { path in owningCollection(path).map { (path: path, collection: $0) } }
        for (_, collection) in owned where collection.isLocked && !waiting.contains(where: { $0 === collection }) {
            if tryUnlockWithoutPassword(collection) {
                announceLockChange(collection)
            } else {
                waiting.append(collection)
            }
        }
        let valid = owned.map(\.path)
        let unlocked = owned.filter { !$0.collection.isLocked }.map(\.path)
        guard !waiting.isEmpty else { return [.objectPaths(unlocked), .objectPath(ObjectPaths.none)] }
        let path = ObjectPaths.promptPrefix + "p\(nextSerial())"
        prompts[path] = UnlockPrompt(path: path, owner: caller, objects: valid, waiting: waiting)
        return [.objectPaths(unlocked), .objectPath(path)]
    }

    func tryUnlockWithoutPassword(_ collection: SecretCollection) -> Bool {
        switch collection.unlocking {
        case .heldPassword(let password):
            return (try? collection.keychain.unlock(password: password)) != nil
        case .loginKey:
            guard let login = loginCollection, !login.isLocked else { return false }
            return (try? collection.keychain.unlock(using: login.keychain)) != nil
        case .loginPassword:
            return false
        }
    }

    /// Unlocks the given collections whose key the (unlocked) login keychain wraps.
    func unlockCollections(protectedBy login: SecretCollection, among candidates: [SecretCollection]) {
        for collection in candidates where collection.isLocked {
            guard case .loginKey = collection.unlocking else { continue }
            if (try? collection.keychain.unlock(using: login.keychain)) != nil { announceLockChange(collection) }
        }
    }

    func callPrompt(_ prompt: UnlockPrompt, _ member: String, _ signature: String) throws(DBusError) -> [DBusValue] {
        switch member {
        case "Prompt":
            try expect(signature: signature, "s", member: member)
            guard !prompt.started else { return [] }
            prompt.started = true
            guard let login = loginCollection?.keychain else {
                completions.post(.unlock(promptPath: prompt.path, unlocked: false))
                return []
            }
            let pinentry = configuration.pinentry
            let completions = completions
            let path = prompt.path
            runDetached {
                completions.post(.unlock(promptPath: path, unlocked: Self.askLoginPassword(login, pinentry)))
            }
            return []
        case "Dismiss":
            try expect(signature: signature, "", member: member)
            prompts[prompt.path] = nil
            emit(
                prompt.path, "org.freedesktop.Secret.Prompt", "Completed",
                [.bool(true), .variant(.objectPaths([]))])
            return []
        default:
            throw DBusError(.unknownMethod, "no method \(member) on org.freedesktop.Secret.Prompt")
        }
    }

    /// Asks for the login password until it unlocks the login keychain (true),
    /// or the user cancels, the prompt fails, or five tries are wrong (false).
    private static func askLoginPassword(_ login: Keychain, _ pinentry: Pinentry) -> Bool {
        let request = PinentryRequest(
            title: "Unlock Keychain",
            description: "An application wants to use your login keychain.\nEnter your login password to unlock it.",
            prompt: "Password:", error: nil, okLabel: "Unlock")
        return askUntilAccepted(
            pinentry, request, tries: 5, retryMessage: "The password was not correct. Try again."
        ) { (password) throws(KeychainError) in try login.unlock(password: password) }
    }

    /// Asks with `request` until `accept` takes the password (true), or the
    /// user cancels, the prompt fails, `accept` fails other than with a wrong
    /// password, or `tries` are wrong (false). Each password is wiped after use.
    static func askUntilAccepted(
        _ pinentry: Pinentry, _ request: PinentryRequest, tries: Int, retryMessage: String,
        accept: ([UInt8]) throws(KeychainError) -> Void
    ) -> Bool {
        var request = request
        for _ in 0..<tries {
            guard case .password(var password)? = try? pinentry.askPassword(request) else { return false }
            defer { wipeBytes(&password) }
            do {
                try accept(password)
                return true
            } catch {
                guard error.status == .authFailed else { return false }
            }
            request.error = retryMessage
        }
        return false
    }

    /// Delivers the results of finished prompts, on the serving thread.
    public func deliverPromptResults() {
        for result in completions.take() {
            switch result {
            case .unlock(let promptPath, let unlocked): deliverUnlockResult(promptPath: promptPath, unlocked: unlocked)
            case .rekey(let succeeded): deliverRekeyResult(rekeyed: succeeded)
            }
        }
    }

    /// Unlocks what the login password opens and sends the prompt's `Completed` signal.
    private func deliverUnlockResult(promptPath: String, unlocked: Bool) {
        guard let prompt = prompts.removeValue(forKey: promptPath) else { return }
        guard unlocked, let login = loginCollection, !login.isLocked else {
            emit(prompt.path, "org.freedesktop.Secret.Prompt", "Completed", [.bool(true), .variant(.objectPaths([]))])
            return
        }
        announceLockChange(login)
        unlockCollections(protectedBy: login, among: prompt.waiting)
        let unlockedPaths = prompt.objects.filter { owningCollection($0)?.isLocked == false }
        emit(
            prompt.path, "org.freedesktop.Secret.Prompt", "Completed",
            [.bool(false), .variant(.objectPaths(unlockedPaths))])
    }
}
