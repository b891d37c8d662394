import Fingerprint
import FoundationEssentials
import KWalletImport
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
    /// KWallet's wallet directory and kwalletrc, whose wallets the login password opens are imported at login;
    /// nil: none.
    package var kwallet: KWalletLocations?
    /// The TPM the login keychain's tpm2 slots are unsealed by (`LATCHKEY_TPM_TCTI`, default `/dev/tpmrm0`).
    package var sealing: KeySealing
    /// The `systemctl` asked for the desktop session's variables when a prompt has no display; nil: not asked.
    package var systemctl: String?
    /// Where "now" is read for lock timeouts, checkpoint retries and prompt deadlines (``RegistryClock``).
    package var clock: RegistryClock
    /// The fingerprint reader `kSecAccessControlBiometry*` items are checked with (``NoFingerprintReader`` unless
    /// latchkeyd is given one: `Latchkeyd.swift`).
    package var fingerprints: any FingerprintChecking = NoFingerprintReader()

    /// A configuration; `kdf` stays `.production` outside tests.
    package init(
        keychainDirectory: String, pinentry: Pinentry, kdf: KDFParameters = .production,
        gnomeKeyringDirectory: String? = nil, flatpakAppDirectory: String? = nil, sealing: KeySealing = KeySealing(),
        systemctl: String? = "/usr/bin/systemctl", clock: RegistryClock = .system, kwallet: KWalletLocations? = nil
    ) {
        self.kwallet = kwallet
        self.clock = clock
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
    package var inbox: LoopInbox { jobs.inbox }
    /// Work handed off the serving thread, and the continuations waiting for it.
    let jobs: OffLoopJobs
    /// The desktop session's variables, as the session last handed them over (``updateSessionEnvironment(_:)``):
    /// prompts show with them.
    package internal(set) var sessionEnvironment = SessionEnvironment()
    /// Prompts waiting or showing and the clients' turns (see `enqueuePrompt`).
    var prompts = PromptQueue()
    /// Where the request being served has its prompts shown, set by the face while it serves one
    /// (``PromptPlace``, memoized per request; nil: no caller known). See PromptPlaces.swift.
    package var promptPlaceOfRequest: (() -> PromptPlace?)?
    /// What choosing places keeps (``PromptPlaceState``).
    var placeState = PromptPlaceState()
    /// Ids of keychains with a password of their own whose files are being made on the worker.
    var reservedKeychainIDs: Set<String> = []
    private var events: [RegistryEvent] = []
    /// Called by ``lock(_:)`` with a keychain about to be locked, while its key is still in memory (the Secret
    /// Service keeps what it shows of the items while locked).
    package var beforeLocking: ((HeldKeychain) -> Void)?
    /// Keychain files whose write-ahead log must still be emptied.
    var checkpoints = CheckpointSchedule()

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
        self.jobs = try OffLoopJobs()
        try openKeychains(loginPassword: loginPassword)
        // Whether the systemd user manager knows a display, read before the first prompt's place is chosen.
        if choosesPromptPlace { refreshSystemdSession() }
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
            HeldKeychain(
                id: Self.sessionID, keychain: session, unlocking: .heldPassword(held), label: "Session",
                clock: configuration.clock))
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
            keychains.append(
                HeldKeychain(id: id, keychain: keychain, unlocking: unlocking, label: label, clock: configuration.clock)
            )
        }
        loadAliases()
    }

    /// Serves `keychain` as `login`, aliases `default` and `login`.
    func addLogin(_ keychain: Keychain) throws(KeychainError) {
        try keychain.limitMemory(to: .lean)
        keychains.insert(
            HeldKeychain(
                id: Self.loginID, keychain: keychain, unlocking: .loginPassword, label: "Login",
                clock: configuration.clock),
            at: 0)
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
        let created = HeldKeychain(
            id: id, keychain: keychain, unlocking: .loginKey, label: label, clock: configuration.clock)
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
        held.keychain.lock(allClasses: true)
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

    /// Locks every keychain, wiping their keys and every class key (the daemon is stopping).
    package func shutDown() {
        for held in keychains { held.keychain.lock(allClasses: true) }
    }
}
