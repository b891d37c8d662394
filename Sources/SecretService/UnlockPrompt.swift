import DBus
import FoundationEssentials
import Glibc
import KeychainCore
import KeychainStore
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
    struct Result: Sendable {
        let promptPath: String
        let unlocked: Bool
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
                completions.post(.init(promptPath: prompt.path, unlocked: false))
                return []
            }
            let pinentry = configuration.pinentry
            let completions = completions
            let path = prompt.path
            runDetached {
                completions.post(.init(promptPath: path, unlocked: Self.askLoginPassword(login, pinentry)))
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
        var retryMessage: String?
        for _ in 0..<5 {
            let request = PinentryRequest(
                title: "Unlock Keychain",
                description:
                    "An application wants to use your login keychain.\nEnter your login password to unlock it.",
                prompt: "Password:", error: retryMessage, okLabel: "Unlock")
            guard case .password(var password)? = try? pinentry.askPassword(request) else { return false }
            defer { password.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
            do {
                try login.unlock(password: password)
                return true
            } catch {
                guard error.status == .authFailed else { return false }
            }
            retryMessage = "The password was not correct. Try again."
        }
        return false
    }

    /// Delivers the results of finished prompts: unlocks what the login
    /// password opens and sends each prompt's `Completed` signal.
    public func deliverPromptResults() {
        for result in completions.take() {
            if result.promptPath == Self.rekeyPromptID {
                deliverRekeyResult(rekeyed: result.unlocked)
                continue
            }
            guard let prompt = prompts.removeValue(forKey: result.promptPath) else { continue }
            guard result.unlocked, let login = loginCollection, !login.isLocked else {
                emit(
                    prompt.path, "org.freedesktop.Secret.Prompt", "Completed",
                    [.bool(true), .variant(.objectPaths([]))])
                continue
            }
            announceLockChange(login)
            unlockCollections(protectedBy: login, among: prompt.waiting)
            let unlocked = prompt.objects.filter { owningCollection($0)?.isLocked == false }
            emit(
                prompt.path, "org.freedesktop.Secret.Prompt", "Completed",
                [.bool(false), .variant(.objectPaths(unlocked))])
        }
    }
}
