import FoundationEssentials
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import TPMSealing

/// What the registry serves from and how it prompts.
package struct RegistryConfiguration: Sendable {
    /// Where keychain files live (the login keychain and client-made collections).
    package var keychainDirectory: String
    /// The password prompt.
    package var pinentry: Pinentry
    /// The scrypt cost of a login keychain the daemon creates.
    package var kdf: KDFParameters
    /// gnome-keyring's directory, whose keyrings are imported at login; nil: none.
    package var gnomeKeyringDirectory: String?
    /// Where Flatpak apps keep their data (`~/.var/app`): their libsecret files are imported at login
    /// with the keys gnome-keyring's Secret portal kept; nil: none.
    package var flatpakAppDirectory: String?
    /// The TPM the login keychain's tpm2 slots are unsealed by (`LATCHKEY_TPM_TCTI`, default `/dev/tpmrm0`).
    package var sealing: KeySealing
    /// The `systemctl` asked for the desktop session's variables when a prompt has no display; nil: not asked.
    package var systemctl: String?

    /// A configuration; `kdf` stays `.production` outside tests.
    package init(
        keychainDirectory: String, pinentry: Pinentry, kdf: KDFParameters = .production,
        gnomeKeyringDirectory: String? = nil, flatpakAppDirectory: String? = nil, sealing: KeySealing = KeySealing(),
        systemctl: String? = "/usr/bin/systemctl"
    ) {
        self.sealing = sealing
        self.systemctl = systemctl
        self.keychainDirectory = keychainDirectory
        self.pinentry = pinentry
        self.kdf = kdf
        self.gnomeKeyringDirectory = gnomeKeyringDirectory
        self.flatpakAppDirectory = flatpakAppDirectory
    }
}

/// A change the registry made that the faces over it announce (as Secret Service signals).
package enum RegistryEvent {
    /// A keychain was locked or unlocked.
    case lockChanged(HeldKeychain)
    /// A keychain appeared (created by a client or at first login).
    case created(HeldKeychain)
    /// A keychain was deleted.
    case deleted(HeldKeychain)
    /// A keychain's label changed.
    case relabelled(HeldKeychain)
    /// Items were added to a keychain other than through a face (an import at login).
    case itemsAdded(HeldKeychain)
}

/// The keychains one user's daemon holds, with no bus in it: the login keychain, the in-memory session
/// keychain and client-made collections, their aliases, lock timers, the wrong-password limit and the
/// keychains unlocked under the login key. The Secret Service objects, `org.latchkey.Keychain1` and the
/// control socket are adapters over it.
///
/// It lives on the serving thread. Slow work (key derivation, checkpoints, the passwords typed into prompts)
/// goes to one worker thread, and the pinentry showing (one at a time) to a thread of its own; their
/// results come back through ``inbox`` and are applied by ``deliverCompletions()`` on the serving thread,
/// so every change of state happens on that one thread.
package final class KeychainRegistry {
    /// The configuration.
    package let configuration: RegistryConfiguration
    /// The keychains, in the order they are listed.
    package internal(set) var keychains: [HeldKeychain] = []
    /// Alias name → keychain id.
    package private(set) var aliases: [String: String] = [:]
    /// The user's login: its sessions, hand-over, re-key, tpm2 slots and import (see ``UserLogin``).
    package private(set) lazy var userLogin = UserLogin(registry: self)
    /// Where results of work done elsewhere arrive; poll its descriptor.
    package let inbox: LoopInbox
    let worker: Worker
    /// A second worker thread, for jobs of a few milliseconds that must not queue behind a key derivation
    /// (identifying a D-Bus caller).
    let quickWorker: Worker
    /// The desktop session's variables, as the session last handed them over (``updateSessionEnvironment(_:)``):
    /// prompts show with them.
    package internal(set) var sessionEnvironment = SessionEnvironment()
    /// Prompts waiting or showing, the one showing first (see `enqueuePrompt`).
    var promptQueue: [QueuedPrompt] = []
    var promptTicketNumber: UInt64 = 0
    /// Each client's last turn at the prompt (see `enqueuePrompt`), by ``PromptClient/key`` ("" for the
    /// daemon's own prompts), and the turn count.
    var promptTurns: [String: UInt64] = [:]
    var promptTurnNumber: UInt64 = 0
    /// Ids of keychains with a password of their own whose files are being made on the worker.
    var reservedKeychainIDs: Set<String> = []
    private var continuations: [UInt64: (any Sendable) -> Void] = [:]
    private var continuationNumber: UInt64 = 0
    private var events: [RegistryEvent] = []
    /// Keychain files whose write-ahead log must still be emptied, with when to try next (monotonic ms).
    private var pendingCheckpoints: [String: (due: Int64, tries: Int)] = [:]
    /// Whether a checkpoint is on the worker now.
    private var checkpointRunning = false
    /// What waits for the log of a file to be emptied (a password change's reply).
    private var checkpointWaiters: [String: [(Bool) -> Void]] = [:]
    /// How many checkpoints were asked for each path: a checkpoint that started before the latest request
    /// (a password change committed while it ran) does not answer that request's waiters.
    private var checkpointRequests: [String: UInt64] = [:]

    /// The id of the login keychain.
    package static let loginID = "login"
    /// The id of the in-memory session keychain.
    package static let sessionID = "session"

    /// Opens the keychains in the configured directory. With `loginPassword`, the login keychain is
    /// unlocked with it, or created with it when missing (on this thread: the daemon is not serving yet).
    ///
    /// - Throws: `errSecAuthFailed` if `loginPassword` does not unlock the login keychain.
    package init(configuration: RegistryConfiguration, loginPassword: borrowing SecretBytes?) throws(KeychainError) {
        self.configuration = configuration
        self.inbox = try LoopInbox()
        self.worker = try Worker()
        self.quickWorker = try Worker()
        try openKeychains(loginPassword: loginPassword)
    }

    /// The login keychain, when there is one.
    package var login: HeldKeychain? { keychains.first { $0.id == Self.loginID } }

    /// The keychain with `id`.
    package func keychain(id: String) -> HeldKeychain? { keychains.first { $0.id == id } }

    /// The keychain an alias names.
    package func keychain(alias: String) -> HeldKeychain? { aliases[alias].flatMap { keychain(id: $0) } }

    private func openKeychains(loginPassword: borrowing SecretBytes?) throws(KeychainError) {
        let directory = configuration.keychainDirectory
        try userLogin.open(password: loginPassword)
        let login = login?.keychain
        var random = try KeychainError.allocating { () throws(SecretMemoryError) in try SecretBytes(zeros: 32) }
        try random.withUnsafeMutableBytes { (raw) throws(KeychainError) in try SecureRandom.fill(raw) }
        let held = SharedSecret(random)
        let session = try held.withUnsafeBytes { (bytes) throws(KeychainError) in
            try Keychain.createInMemory(password: bytes)
        }
        keychains.append(
            HeldKeychain(id: Self.sessionID, keychain: session, unlocking: .heldPassword(held), label: "Session"))
        aliases["session"] = Self.sessionID

        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in files.sorted() where file.hasSuffix(".keychain-db") && file != "login.keychain-db" {
            let id = String(file.dropLast(".keychain-db".count))
            guard Self.isPathElement(id), let keychain = try? Keychain(opening: directory + "/" + file) else {
                continue
            }
            // Under the login key, or with a password of its own (it stays locked until given it).
            let unlocking: HeldKeychain.Unlocking
            if keychain.parentIdentifier != nil {
                unlocking = .loginKey
                if let login, !login.isLocked { try? keychain.unlock(using: login) }
            } else if keychain.kdfParameters != nil {
                unlocking = .ownPassword
            } else {
                continue
            }
            try? keychain.limitMemory(to: .lean)
            let label = (try? keychain.metadata("label")).map { String(decoding: $0, as: UTF8.self) } ?? id
            keychains.append(HeldKeychain(id: id, keychain: keychain, unlocking: unlocking, label: label))
        }
        loadAliases()
    }

    /// Serves `keychain` as `login`, aliases `default` and `login`.
    func addLogin(_ keychain: Keychain) throws(KeychainError) {
        try keychain.limitMemory(to: .lean)
        keychains.insert(
            HeldKeychain(id: Self.loginID, keychain: keychain, unlocking: .loginPassword, label: "Login"), at: 0)
        if aliases["default"] == nil { aliases["default"] = Self.loginID }
        // As gnome-keyring: the login collection is also the alias "login".
        if aliases["login"] == nil { aliases["login"] = Self.loginID }
    }

    /// Whether `text` is already a valid object-path element (ASCII letters, digits, `_`).
    static func isPathElement(_ text: String) -> Bool {
        !text.isEmpty
            && text.unicodeScalars.allSatisfy {
                $0 == "_" || ($0.isASCII && $0.properties.isAlphabetic) || ("0"..."9").contains($0)
            }
    }

    // MARK: Events

    func announce(_ event: RegistryEvent) { events.append(event) }

    /// The changes made since the last call, oldest first.
    package func takeEvents() -> [RegistryEvent] {
        defer { events.removeAll() }
        return events
    }

    // MARK: Aliases

    private func loadAliases() {
        for (name, id) in CollectionAliases.load(inDirectory: configuration.keychainDirectory)
        where keychain(id: id) != nil {
            aliases[name] = id
        }
    }

    /// Points alias `name` at `target`, or removes it (nil); saved at once.
    package func setAlias(_ name: String, to target: HeldKeychain?) {
        aliases[name] = target?.id
        saveAliases()
    }

    private func saveAliases() {
        CollectionAliases.save(
            aliases.filter { $0.value != Self.sessionID }, inDirectory: configuration.keychainDirectory)
    }

    // MARK: Collections

    /// Creates a keychain protected by the login keychain's key, labelled `label`, with an id made from the
    /// label (`pathElement` turns text into an id).
    ///
    /// - Throws: `errSecNoSuchKeychain` without a login keychain, `errSecInteractionNotAllowed` while it is locked.
    package func createKeychain(label: String, pathElement: (String) -> String) throws(KeychainError) -> HeldKeychain {
        guard let login else {
            throw KeychainError(
                .noSuchKeychain, "there is no login keychain to protect a new collection (start latchkeyd --unlock)")
        }
        guard !login.isLocked else {
            throw KeychainError(.interactionNotAllowed, "unlock the login collection before creating a collection")
        }
        let id = newKeychainID(label: label, pathElement: pathElement)
        let keychain = try Keychain.create(
            at: KeychainLocation.keychainPath(id: id, inDirectory: configuration.keychainDirectory),
            protectedBy: login.keychain)
        try keychain.limitMemory(to: .lean)
        try keychain.recordCreation(label: label)
        let created = HeldKeychain(id: id, keychain: keychain, unlocking: .loginKey, label: label)
        keychains.append(created)
        announce(.created(created))
        return created
    }

    /// How many keychains besides the login and session ones are held or being made (those clients made, and
    /// keyrings imported at login): what ``InputLimits``' collection bound counts.
    package var madeKeychainCount: Int {
        keychains.count { $0.id != Self.loginID && $0.id != Self.sessionID } + reservedKeychainIDs.count
    }

    /// An id for a new keychain labelled `label`, made from the label, that no keychain held or file has.
    func newKeychainID(label: String, pathElement: (String) -> String) -> String {
        KeychainLocation.newKeychainID(
            from: pathElement(label.isEmpty ? "collection" : label.lowercased()),
            inDirectory: configuration.keychainDirectory
        ) { keychain(id: $0) != nil || reservedKeychainIDs.contains($0) }
    }

    /// Deletes a client-made keychain and its file, and the aliases naming it (after the checks and the
    /// confirmation of ``deleteKeychain(_:requester:completion:)``).
    func removeKeychain(_ held: HeldKeychain) {
        keychains.removeAll { $0 === held }
        aliases = aliases.filter { $0.value != held.id }
        saveAliases()
        held.keychain.lock()
        Keychain.removeFiles(at: held.keychain.path)
        announce(.deleted(held))
    }

    /// Relabels a keychain (kept in its file).
    package func setLabel(_ label: String, of held: HeldKeychain) {
        try? held.keychain.setMetadata("label", Data(label.utf8))
        held.label = label
        announce(.relabelled(held))
    }

    /// Changes a keychain's lock settings (kept in its file).
    ///
    /// - Throws: `errSecParam` for the session keychain, which keeps no settings.
    package func setSettings(_ settings: KeychainSettings, of held: HeldKeychain) throws(KeychainError) {
        if case .heldPassword = held.unlocking {
            throw KeychainError.param("the session collection is in memory and keeps no settings")
        }
        try held.keychain.setSettings(settings)
        held.settings = settings
    }

    // MARK: Locking

    /// Locks a keychain (its key is wiped) and announces it, if it was unlocked.
    package func lock(_ held: HeldKeychain) {
        if held.id == Self.loginID { userLogin.locksOfLogin += 1 }
        held.locks += 1
        guard !held.isLocked else { return }
        held.keychain.lock()
        announce(.lockChanged(held))
    }

    /// Locks every keychain but the session one.
    package func lockLoginKeychains() {
        for held in keychains where held.id != Self.sessionID { lock(held) }
    }

    /// Locks every keychain whose settings have `setting` on (``KeychainSettings/lockOnSleep`` when the machine
    /// goes to sleep, ``KeychainSettings/lockOnScreenLock`` when the screen locks).
    package func lock(where setting: KeyPath<KeychainSettings, Bool>) {
        for held in keychains where held.appliedSettings[keyPath: setting] { lock(held) }
    }

    /// Unlocks a keychain that needs no password: the session keychain, or one under the unlocked login
    /// keychain. False when it needs the login password.
    package func unlockWithoutPassword(_ held: HeldKeychain) -> Bool {
        guard held.isLocked else { return true }
        let unlocked: Bool
        switch held.unlocking {
        case .heldPassword(let password):
            let keychain = held.keychain
            unlocked =
                (try? password.withUnsafeBytes { (bytes) throws(KeychainError) in try keychain.unlock(password: bytes) })
                != nil
        case .loginKey:
            guard let login, !login.isLocked else { return false }
            unlocked = (try? held.keychain.unlock(using: login.keychain)) != nil
        case .loginPassword, .ownPassword:
            return false
        }
        if unlocked { announce(.lockChanged(held)) }
        return unlocked
    }

    /// Unlocks, among `candidates`, those the (unlocked) login keychain's key wraps.
    func unlockUnderLogin(among candidates: [HeldKeychain]) {
        for held in candidates where held.isLocked {
            guard case .loginKey = held.unlocking else { continue }
            _ = unlockWithoutPassword(held)
        }
    }

    // MARK: The serving loop's timers and results

    /// Locks every keychain whose lock timeout has passed and starts due checkpoints; the milliseconds until
    /// the next timer, nil when none is set.
    package func runTimers() -> Int32? {
        let now = MonotonicClock.seconds()
        var next: Int64?
        for held in keychains {
            // The in-memory session collection has no log to empty.
            if held.keychain.takeCheckpointRequest(), held.keychain.path != ":memory:" {
                scheduleCheckpoint(held.keychain.path)
            }
            guard let deadline = held.lockDeadline else { continue }
            if deadline <= now {
                lock(held)
            } else {
                next = min(next ?? (deadline - now) * 1000, (deadline - now) * 1000)
            }
        }
        if let due = startDueCheckpoint() { next = min(next ?? due, due) }
        return next.map { Int32(clamping: max(0, $0)) }
    }

    /// Runs, on the serving thread, what finished elsewhere.
    package func deliverCompletions() {
        for (number, result) in inbox.take() {
            continuations.removeValue(forKey: number)?(result)
        }
    }

    /// Runs `work` on the worker thread (`onOwnThread`: on a thread of its own, for prompts that wait for a
    /// person), then `continuation` with its result on the serving thread. The stack `work` used is wiped
    /// after it (``ProcessHardening/wipeDeadStack()``).
    package func offLoop<Result: Sendable>(
        onOwnThread: Bool = false, quick: Bool = false, _ work: @escaping @Sendable () -> Result,
        then continuation: @escaping (Result) -> Void
    ) {
        continuationNumber += 1
        let number = continuationNumber
        continuations[number] = { result in
            guard let result = result as? Result else { return }
            continuation(result)
        }
        let inbox = inbox
        // Work done off the loop handles secrets (a password through the key derivation, a typed answer, a
        // decrypted keyring): once it has returned, the stack it used below this frame is overwritten, on a
        // standing worker before its next job, and on a prompt's thread before the thread ends (glibc keeps
        // the stacks of ended threads for reuse, bytes untouched).
        let job: @Sendable () -> Void = {
            inbox.post(number, work())
            ProcessHardening.wipeDeadStack()
        }
        if onOwnThread {
            runDetached(job)
        } else {
            (quick ? quickWorker : worker).enqueue(job)
        }
    }

    /// Whether work handed off is still to come back.
    package var hasWorkInProgress: Bool { !continuations.isEmpty }

    // MARK: Checkpoints

    /// Asks for the write-ahead log of `path` to be emptied, off the serving thread, retried until it
    /// completes (a reader holding an older snapshot makes it wait); then `completion` runs on the serving
    /// thread with whether it did (false once it was retried for ``checkpointTries``).
    func scheduleCheckpoint(_ path: String, then completion: ((Bool) -> Void)? = nil) {
        pendingCheckpoints[path] = (due: 0, tries: 0)
        checkpointRequests[path, default: 0] += 1
        if let completion { checkpointWaiters[path, default: []].append(completion) }
        _ = startDueCheckpoint()
    }

    /// Starts one due checkpoint on the worker; the milliseconds until the next is due.
    private func startDueCheckpoint() -> Int64? {
        guard !pendingCheckpoints.isEmpty else { return nil }
        let now = MonotonicClock.nanoseconds() / 1_000_000
        guard !checkpointRunning else { return 250 }
        guard let (path, state) = pendingCheckpoints.min(by: { $0.value.due < $1.value.due }) else { return nil }
        guard state.due <= now else { return state.due - now }
        checkpointRunning = true
        let request = checkpointRequests[path, default: 0]
        offLoop(
            { Keychain.checkpoint(at: path, waitMilliseconds: 0) },
            then: { [self] completed in
                checkpointRunning = false
                if checkpointRequests[path, default: 0] != request {
                    // Asked for again while it ran: what was committed since may still be in the log.
                    pendingCheckpoints[path] = (due: 0, tries: 0)
                    _ = startDueCheckpoint()
                    return
                }
                if completed || state.tries >= Self.checkpointTries {
                    pendingCheckpoints[path] = nil
                    for waiter in checkpointWaiters.removeValue(forKey: path) ?? [] { waiter(completed) }
                } else {
                    // A reply waits at most ``checkpointReplyTries`` (the retries go on).
                    if state.tries >= Self.checkpointReplyTries {
                        for waiter in checkpointWaiters.removeValue(forKey: path) ?? [] { waiter(false) }
                    }
                    pendingCheckpoints[path] = (
                        due: MonotonicClock.nanoseconds() / 1_000_000 + 250, tries: state.tries + 1
                    )
                }
            })
        return 250
    }

    /// How often a checkpoint is retried (every 250 ms: ten minutes) before it is left to SQLite.
    static let checkpointTries = 2_400

    /// How long a reply waiting for a checkpoint waits (every 250 ms: twenty seconds, within a D-Bus call's
    /// default 25 s timeout).
    static let checkpointReplyTries = 80

    /// Whether checkpoints are still to be made.
    package var hasPendingCheckpoints: Bool { !pendingCheckpoints.isEmpty }

    /// Locks every keychain, wiping their keys (the daemon is stopping).
    package func shutDown() {
        for held in keychains { held.keychain.lock() }
    }
}
