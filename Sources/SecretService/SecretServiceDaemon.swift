import CallerIdentity
import DBus
import FoundationEssentials
import Glibc
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import Pinentry
import Posix

/// What the daemon serves and how it prompts.
package struct SecretServiceConfiguration: Sendable {
    /// The keychains and prompts.
    package var registry: RegistryConfiguration
    /// Bounds on client input.
    package var limits: InputLimits
    /// Whether each client is identified from the bus and `/proc` (docs/threat-model.md, "Who is asking");
    /// off, every caller is unidentified (and the Secret portal's backend answers nobody).
    package var identifiesCallers: Bool
    /// The file name of the executable the Secret portal's backend answers (xdg-desktop-portal's); only
    /// in-process tests name another.
    package var portalProgram: String

    /// A configuration.
    package init(
        registry: RegistryConfiguration, limits: InputLimits = InputLimits(), identifiesCallers: Bool = false,
        portalProgram: String = PortalGate.portalProgram
    ) {
        self.registry = registry
        self.limits = limits
        self.identifiesCallers = identifiesCallers
        self.portalProgram = portalProgram
    }
}

/// The bus face of the daemon: `org.freedesktop.secrets` (service, collections, items, sessions, prompts)
/// and `org.latchkey.Keychain1`, over one ``KeychainRegistry``. It does no I/O: ``handle(_:)`` takes an
/// incoming message and gives back what to send (the reply, signals), and ``deliverCompletions()`` gives
/// the replies and signals of work that finished off the serving thread. Tests drive it in-process;
/// latchkeyd's `ServiceLoop` (DaemonLoop) moves its messages over a real connection.
package final class SecretServiceDaemon {
    /// The keychains.
    package let registry: KeychainRegistry
    let limits: InputLimits
    /// Open sessions by path.
    var sessions: [String: SecretSession] = [:]
    /// The session each client opened with `Keychain1`'s `OpenSession`, by its unique name: its `Keychain1`
    /// secrets are sealed under it (also in ``sessions``).
    var keychainSessions: [String: SecretSession] = [:]
    /// Pending prompts by path.
    var prompts: [String: UnlockPrompt] = [:]
    /// Secret portal requests waiting for the unlock prompt, by handle.
    var portalRequests: [String: PortalRequest] = [:]
    /// Whether another process took `org.freedesktop.secrets` (with `--replace`).
    package private(set) var hasLostName = false
    private var serial: UInt64 = 0
    /// What to send, gathered while a message is handled.
    var outbox: [DBusMessage] = []
    /// Calls that came while a login's unlock was under way, in order: served when it is done.
    private var heldCalls: [DBusMessage] = []
    /// Who may call the Secret portal's backend: the owner of `org.freedesktop.portal.Desktop`, as followed.
    private(set) var portalGate: PortalGate
    /// Switches to `allow-all`, looser lock settings, moved aliases and collection deletions waiting for the
    /// user's confirmation, by caller: withdrawn when it leaves.
    var policyConfirmations: [(owner: String, call: DBusMethodCall, ticket: PromptTicket)] = []
    /// Who each client is, when callers are identified.
    let callers: CallerDirectory?
    /// Each client's places in access prompts, withdrawn when it leaves (AccessChecks.swift).
    var accessTickets: [String: [PromptTicket]] = [:]
    /// Until when (nanoseconds on the registry's clock) each connection's confirmed reads of items with an access
    /// control hold, by connection and item (ItemConfirmations.swift).
    var confirmedReads: [String: [String: Int64]] = [:]
    /// The connections with an export or import under way (from the call to its reply; one each at most:
    /// Keychain1Exchange.swift).
    var exchangesUnderWay: Set<String> = []
    /// The secrets of items with a password of their own opened for the reply being made, by item (set only
    /// while it is made: ItemConfirmations.swift).
    var openedForServing: [String: OpenedItemSecret] = [:]
    /// What each application stored, across collections, for the per-application quotas (ApplicationUsage.swift).
    var applicationUsage = ApplicationUsage()
    /// The KWallet face's handles, waiting opens, empty folders and kwalletrc names (KWalletSessions.swift).
    var kwallet = KWalletSessions()
    /// What locked collections' items show: their properties as they were when each locked.
    var lockedViews = LockedItemViews()
    /// The item signals of locks and unlocks still to send, a batch at a time (``nextItemAnnouncements()``).
    var itemAnnouncements = ItemAnnouncements()
    /// The callers' terminals open for prompts, by ``PromptTerminal/id``, held weakly: the requests waiting on
    /// one terminal share one descriptor of it (``promptPlace(of:)``).
    var openTerminals = OpenTerminals()

    /// Serves `registry`; with `identifiesCallers`, each client is identified before its calls are served. The
    /// Secret portal's backend answers only `portalProgram` (``PortalGate``).
    package init(
        registry: KeychainRegistry, limits: InputLimits = InputLimits(), identifiesCallers: Bool = false,
        portalProgram: String = PortalGate.portalProgram
    ) {
        self.registry = registry
        self.limits = limits
        self.callers = identifiesCallers ? CallerDirectory() : nil
        self.portalGate = PortalGate(programName: portalProgram)
        registry.beforeLocking = { [weak self] held in self?.lockedViews.keep(held) }
        for held in registry.keychains { readLockedViewInBackground(held) }
    }

    /// Opens the keychains (with `loginPassword`, unlocking or creating the login keychain) and serves them.
    package convenience init(
        configuration: SecretServiceConfiguration, loginPassword: borrowing SecretBytes?
    ) throws(KeychainError) {
        self.init(
            registry: try KeychainRegistry(configuration: configuration.registry, loginPassword: loginPassword),
            limits: configuration.limits, identifiesCallers: configuration.identifiesCallers,
            portalProgram: configuration.portalProgram)
    }

    func nextSerial() -> UInt64 {
        serial += 1
        return serial
    }

    // MARK: Messages in, messages out

    /// Serves one incoming message: a method call gets its reply or error (now, or from
    /// ``deliverCompletions()`` when its work finishes elsewhere); a departing client's sessions and prompts
    /// are dropped. What to send, in order.
    package func handle(_ message: DBusMessage) -> [DBusMessage] {
        switch message.kind {
        case .methodCall where registry.userLogin.isUnlockingAtLogin:
            heldCalls.append(message)
        case .methodCall where callers?.hold(message, asking: &outbox) == true:
            break
        case .methodCall:
            if let call = DBusMethodCall(message) {
                // Where this request's prompts show: chosen from its caller when a prompt is first asked for.
                var place: PromptPlace??
                registry.promptPlaceOfRequest = { [self] in
                    if let place { return place }
                    let chosen = promptPlace(of: call.sender)
                    place = .some(chosen)
                    return chosen
                }
                defer { registry.promptPlaceOfRequest = nil }
                if let reply = route(call) { outbox.append(reply) }
            } else if !message.expectsNoReply,
                let reply = message.errorReply(DBusError(.unknownMethod, "a method call needs a path and a member"))
            {
                outbox.append(reply)
            }
        case .signal:
            busSignal(message)
        case .methodReturn, .error:
            if let callers, let answer = callers.takeAnswer(message) {
                identify(answer.sender, answer.credentials, callers)
            }
        default:
            break
        }
        return takeOutgoing()
    }

    /// The program behind `sender` (a bus unique name), nil when it is not identified.
    func application(of sender: String?) -> Application? { callers?.application(of: sender) }

    /// `IsLocked` for `collection`, and, when no prompt can be shown to the caller of the request being served,
    /// what to do (the message clients such as `secret-tool search --unlock` print).
    func lockedError(_ collection: HeldKeychain) -> DBusError {
        guard let refusal = registry.unlockRefusal([collection], subject: "\(collection.path) is locked") else {
            return SecretServiceError.isLocked("\(collection.path) is locked")
        }
        return SecretServiceError.isLocked(refusal)
    }

    /// Where the prompts of `sender`'s requests show (docs/prompts-in-terminals.md); nil when its process is not
    /// known (callers not identified) or one pinentry shows every prompt (`--pinentry`).
    func promptPlace(of sender: String?) -> PromptPlace? {
        guard registry.choosesPromptPlace, let sender, let process = callers?.processes[sender] else { return nil }
        let place = PromptPlace.of(
            pid: process.pid, startTime: process.startTime, session: registry.knownSession,
            displayIsKnown: registry.displayIsKnown)
        guard case .terminal(let opened) = place else { return place }
        return .terminal(openTerminals.shared(opened))
    }

    /// Runs `start`, a change the person may be asked to confirm first (it gives the prompt's ticket while it
    /// asks, nil when it has finished), and answers `call` when it ends: `reply`, or `failure` of the error.
    /// The ticket is withdrawn when the caller leaves (the prompt ends, nothing changes).
    func answerAfterConfirmation(
        _ call: DBusMethodCall, reply values: [DBusValue] = [], failure: @escaping (KeychainError) -> DBusError,
        _ start: (_ completion: @escaping (Result<Void, KeychainError>) -> Void) -> PromptTicket?
    ) -> DBusMethodResult {
        answerAfterConfirmation(call, failure: failure, then: { values }, start)
    }

    /// ``answerAfterConfirmation(_:reply:failure:_:)`` whose reply is made once the change is allowed: what
    /// `succeed` gives, or the error it throws (`CreateCollection` makes the collection then).
    func answerAfterConfirmation(
        _ call: DBusMethodCall, failure: @escaping (KeychainError) -> DBusError,
        then succeed: @escaping () throws(DBusError) -> [DBusValue],
        _ start: (_ completion: @escaping (Result<Void, KeychainError>) -> Void) -> PromptTicket?
    ) -> DBusMethodResult {
        _ = trackConfirmation(for: call, start) { [self] outcome in
            if case .failure(let error) = outcome { return reply(to: call, .failure(failure(error))) }
            do throws(DBusError) {
                reply(to: call, .success(try succeed()))
            } catch {
                reply(to: call, .failure(error))
            }
        }
        return .deferred
    }

    /// Starts the confirmation `start` asks for `call`, kept in ``policyConfirmations`` while it waits (so that
    /// it is withdrawn when the caller leaves, and counts in ``isWaitingForConfirmation(_:)``); `completion`
    /// gets its outcome. The ticket, nil when no prompt was queued.
    func trackConfirmation(
        for call: DBusMethodCall,
        _ start: (_ completion: @escaping (Result<Void, KeychainError>) -> Void) -> PromptTicket?,
        completion: @escaping (Result<Void, KeychainError>) -> Void
    ) -> PromptTicket? {
        var finished = false
        let ticket = start { [self] outcome in
            finished = true
            policyConfirmations.removeAll { $0.call.message === call.message }
            completion(outcome)
        }
        if let ticket, !finished { policyConfirmations.append((call.sender, call, ticket)) }
        return ticket
    }

    /// Whether `sender`, or another connection of the same Flatpak app, has a confirmation waiting for the
    /// user: one at a time per connection and per app (`CreateCollection`, KWallet's `open` of a new wallet),
    /// so that a client cannot queue prompts without end.
    func isWaitingForConfirmation(_ sender: String) -> Bool {
        let application = application(of: sender)
        return policyConfirmations.contains { waiting in
            waiting.owner == sender || (application != nil && self.application(of: waiting.owner) == application)
        }
    }

    /// Identifies `sender` from the credentials the bus gave, on the registry's quick worker (it reads `/proc`
    /// and may hash a large file; the main worker may be busy deriving a key), then serves the calls it held.
    private func identify(_ sender: String, _ credentials: (pid: pid_t, uid: uid_t)?, _ callers: CallerDirectory) {
        guard let credentials else {
            for call in callers.settle(sender, .failure(.processGone(0))) { outbox += handle(call) }
            return
        }
        let inspector = callers.inspector
        let uid = callers.uid
        // Now, on the serving thread: the identification may wait behind other callers' on the quick worker.
        let firstLook = callers.firstLook(at: credentials.pid)
        callers.record(sender, pid: credentials.pid, startTime: firstLook?.startTime)
        registry.offLoop(
            quick: true,
            {
                inspector.identifyHolding(
                    pid: credentials.pid, uid: credentials.uid, expectedUID: uid, firstLook: firstLook)
            },
            then: { [self] identified in
                for call in callers.settle(sender, identified.outcome, handle: identified.handle) {
                    outbox += handle(call)
                }
            })
    }

    /// Applies what finished off the serving thread (key derivations, prompts): their replies and signals.
    package func deliverCompletions() -> [DBusMessage] {
        registry.deliverCompletions()
        var sent = takeOutgoing()
        while !heldCalls.isEmpty, !registry.userLogin.isUnlockingAtLogin {
            sent += handle(heldCalls.removeFirst())
        }
        return sent
    }

    /// Locks what is due and starts due checkpoints: the signals, and the milliseconds to the next timer.
    package func runTimers() -> (messages: [DBusMessage], nextMilliseconds: Int32?) {
        let next = registry.runTimers()
        return (takeOutgoing(), next)
    }

    /// Locks every keychain set to lock on sleep: the signals.
    package func lockForSleep() -> [DBusMessage] {
        registry.lock(where: \.lockOnSleep)
        return takeOutgoing()
    }

    /// The machine hibernates (logind's sleep, and systemd runs a hibernating sleep's job): every locked keychain
    /// forgets the class keys that outlast a lock (`AfterFirstUnlock`), which would otherwise be written to disk
    /// with the daemon's memory; their items need the next unlock. Keychains still unlocked (not set to lock on
    /// sleep) stay as they are. The signals.
    package func forgetClassKeysForHibernation() -> [DBusMessage] {
        registry.forgetClassKeysOfLockedKeychains()
        return takeOutgoing()
    }

    /// Locks every keychain set to lock with the screen (logind's `Lock` for one of the user's sessions, or
    /// the screen saver activating, as the loop's watches tell): the signals.
    package func lockForScreenLock() -> [DBusMessage] {
        registry.lock(where: \.lockOnScreenLock)
        return takeOutgoing()
    }

    /// The bus names whose owners ``noteOwner(_:of:)`` should be told of once, before their calls count.
    package static var followedNames: [String] { [PortalGate.portalName] }

    /// Records the current owner of a followed name, as `GetNameOwner` answered at start (later changes come
    /// through the bus's `NameOwnerChanged`).
    package func noteOwner(_ owner: String?, of name: String) {
        portalGate.noteOwner(owner, of: name)
    }

    /// The registry's changes as signals, after everything queued.
    func takeOutgoing() -> [DBusMessage] {
        for event in registry.takeEvents() { announce(event) }
        defer { outbox.removeAll() }
        return outbox
    }

    /// Queues a reply to a call answered later.
    func reply(to call: DBusMethodCall, _ result: Result<[DBusValue], DBusError>) {
        endExchange(call)
        guard !call.message.expectsNoReply else { return }
        let message: DBusMessage?
        switch result {
        case .success(let values): message = (try? call.message.reply(values)) ?? nil
        case .failure(let error): message = call.message.errorReply(error)
        }
        if let message { outbox.append(message) }
    }

    private func busSignal(_ message: DBusMessage) {
        // Only the bus itself may say who owns what; a client could send these to us directly.
        guard message.sender == "org.freedesktop.DBus", message.interface == "org.freedesktop.DBus" else { return }
        if message.member == "NameLost", case .string("org.freedesktop.secrets")? = try? message.arguments().first {
            hasLostName = true
        }
        guard let change = message.nameOwnerChange else { return }
        let (name, oldOwner, newOwner) = (change.name, change.oldOwner, change.newOwner)
        noteOwner(newOwner, of: name)
        // A new connection: identified now, before it can ask anything (CallerDirectory).
        if oldOwner.isEmpty, newOwner == name { callers?.appeared(name, asking: &outbox) }
        if newOwner.isEmpty, name.hasPrefix(":") {
            callers?.forget(name)
            withdrawAccessPrompts(of: name)
            confirmedReads[name] = nil
            exchangesUnderWay.remove(name)
            sessions = sessions.filter { $0.value.owner != name }
            keychainSessions[name] = nil
            for prompt in prompts.values where prompt.owner == name { drop(prompt) }
            portalRequests = portalRequests.filter { $0.value.owner != name }
            for confirmation in policyConfirmations where confirmation.owner == name {
                registry.withdraw(confirmation.ticket)
            }
            policyConfirmations.removeAll { $0.owner == name }
            forgetKWalletClient(name)
        }
    }

    // MARK: Objects

    /// The object at `call`'s path answers it; unknown paths get `NoSuchObject`.
    private func route(_ call: DBusMethodCall) -> DBusMessage? {
        let path = call.path
        if let children = nodeChildren(path) { return DBusNode(children: children).serve(call) }
        if path == Keychain1Interface.rootPath { return Keychain1ListObject(daemon: self).serve(call) }
        if path == PortalSecretObject.path { return PortalSecretObject(daemon: self).serve(call) }
        if KWalletObject.paths.contains(path) { return KWalletObject(daemon: self, path: path).serve(call) }
        if let request = portalRequests[path] { return PortalRequestObject(daemon: self, request: request).serve(call) }
        if path.hasPrefix(Keychain1Interface.pathPrefix) {
            guard let held = registry.keychain(id: String(path.dropFirst(Keychain1Interface.pathPrefix.count))) else {
                return noSuchObject(call)
            }
            held.markUsed()
            return Keychain1Object(daemon: self, keychain: held).serve(call)
        }
        switch resolve(path) {
        case .service: return ServiceObject(daemon: self).serve(call)
        case .collection(let held): return CollectionObject(daemon: self, collection: held).serve(call)
        case .item(let held, let reference):
            return ItemObject(daemon: self, collection: held, reference: reference).serve(call)
        case .session(let session): return SessionObject(daemon: self, session: session).serve(call)
        case .prompt(let prompt): return PromptObject(daemon: self, prompt: prompt).serve(call)
        case nil: return noSuchObject(call)
        }
    }

    private func noSuchObject(_ call: DBusMethodCall) -> DBusMessage? {
        guard !call.message.expectsNoReply else { return nil }
        return call.message.errorReply(SecretServiceError.noSuchObject(call.path))
    }

    /// The children of a path that is only a node of the tree, nil for other paths.
    private func nodeChildren(_ path: String) -> [String]? {
        switch path {
        case "/": ["modules", "org"]
        case "/modules": ["kwalletd5", "kwalletd6"]
        case "/org": ["freedesktop", "latchkey"]
        case "/org/freedesktop": ["portal", "secrets"]
        case "/org/freedesktop/portal": ["desktop"]
        case "/org/latchkey": ["keychain"]
        case "/org/freedesktop/secrets/collection": registry.keychains.map(\.id)
        case "/org/freedesktop/secrets/aliases": registry.aliases.keys.sorted()
        case "/org/freedesktop/secrets/session":
            sessions.keys.map { String($0.dropFirst(ObjectPaths.sessionPrefix.count)) }.sorted()
        case "/org/freedesktop/secrets/prompt":
            prompts.keys.map { String($0.dropFirst(ObjectPaths.promptPrefix.count)) }.sorted()
        default: nil
        }
    }

    /// A Secret Service object.
    enum BusObject {
        case service
        case collection(HeldKeychain)
        case item(HeldKeychain, ItemReference)
        case session(SecretSession)
        case prompt(UnlockPrompt)
    }

    /// The object at `path`; an alias path stands for its collection.
    func resolve(_ path: String) -> BusObject? {
        if path == ObjectPaths.service { return .service }
        if let session = sessions[path] { return .session(session) }
        if let prompt = prompts[path] { return .prompt(prompt) }
        let collectionID: Substring
        let rest: Substring
        if path.hasPrefix(ObjectPaths.collectionPrefix) {
            rest = path.dropFirst(ObjectPaths.collectionPrefix.count)
            collectionID = rest.prefix { $0 != "/" }
        } else if path.hasPrefix(ObjectPaths.aliasPrefix) {
            rest = path.dropFirst(ObjectPaths.aliasPrefix.count)
            guard let id = registry.aliases[String(rest.prefix { $0 != "/" })] else { return nil }
            collectionID = Substring(id)
        } else {
            return nil
        }
        guard let held = registry.keychain(id: String(collectionID)) else { return nil }
        held.markUsed()
        let itemElement = rest.drop { $0 != "/" }.dropFirst()
        if itemElement.isEmpty { return .collection(held) }
        guard !itemElement.contains("/"), let reference = ObjectPaths.reference(fromElement: itemElement),
            (try? held.item(reference, returning: [])) ?? nil != nil
        else { return nil }
        return .item(held, reference)
    }

    /// The collection at `path`, or `NoSuchObject`.
    func collection(at path: String) throws(DBusError) -> HeldKeychain {
        if case .collection(let held) = resolve(path) { return held }
        throw SecretServiceError.noSuchObject(path)
    }

    /// The collection a collection or item path belongs to.
    func owningCollection(_ path: String) -> HeldKeychain? {
        switch resolve(path) {
        case .collection(let held), .item(let held, _): held
        default: nil
        }
    }

    /// The session at `path`, which must belong to `caller`.
    func session(_ path: String, of caller: String) throws(DBusError) -> SecretSession {
        guard let session = sessions[path], session.owner == caller else {
            throw SecretServiceError.noSession("\(path) is not a session of this client")
        }
        return session
    }

    // MARK: Signals

    /// Queues `signal` from the object at `path`, carrying `arguments`.
    func emit<each Argument: DBusType>(
        _ signal: DBusSignal<repeat each Argument>, at path: String, _ arguments: repeat each Argument
    ) {
        if let message = try? signal.message(path: path, repeat each arguments) { outbox.append(message) }
    }

    /// Queues `PropertiesChanged` for properties of `interface` at `path` and their new values.
    func emitPropertiesChanged(_ path: String, _ interface: String, _ changed: [String: DBusValue]) {
        emit(DBusIntrospection.propertiesChanged, at: path, interface, DBusPropertyList(changed), [])
    }

    private func announce(_ event: RegistryEvent) {
        announceToKWallet(event)
        switch event {
        case .lockChanged(let held): announceLockChange(held)
        case .created(let held): announceCollections(ServiceObject.collectionCreated, held)
        case .deleted(let held):
            lockedViews.forget(held.id)
            itemAnnouncements.forget(held)
            announceCollections(ServiceObject.collectionDeleted, held)
        case .itemsAdded(let held):
            readLockedViewInBackground(held)
            invalidateItems(of: held)
            emit(ServiceObject.collectionChanged, at: ObjectPaths.service, ObjectPath(held.path))
        case .relabelled(let held):
            emitPropertiesChanged(held.path, CollectionObject.interfaceName, ["Label": .string(held.label)])
            announceCollections(ServiceObject.collectionChanged, held)
        }
    }

    /// Announces a collection's new lock state: on it now, `Locked` and the service's `CollectionChanged`; on
    /// each of its items in batches between other clients' calls (``ItemAnnouncements``): `Locked` alone when it
    /// locked (its items keep showing what they showed, ``LockedItemViews``); on unlock, with `Locked`, each
    /// item's `Label`, `Attributes`, `Created` and `Modified` and the collection's `ItemChanged` (libsecret
    /// reads the item again then), for the items whose values differ from what they showed while locked: all
    /// of them when the daemon never held the collection unlocked (they showed nothing), none that stayed the
    /// same since it locked. Read here: the items' references (and an unlock's versions), plain columns.
    private func announceLockChange(_ held: HeldKeychain) {
        held.markUsed()
        emitPropertiesChanged(held.path, CollectionObject.interfaceName, ["Locked": .bool(held.isLocked)])
        emit(ServiceObject.collectionChanged, at: ObjectPaths.service, ObjectPath(held.path))
        var pending = ItemAnnouncements.Pending(held: held, references: ((try? held.itemReferences()) ?? [])[...])
        if !held.isLocked {
            pending.shownWhileLocked = lockedViews.unlocked(held.id)
            pending.stamp = try? held.keychain.changeStamp()
            pending.versions = (try? held.itemVersions()) ?? [:]
        }
        itemAnnouncements.start(pending)
    }

    /// Reads what the items of `held`, unlocked with nothing kept of them (the daemon started with it unlocked,
    /// or items were imported into it), show, on the worker and a batch at a time
    /// (``LockedItemViews/readAll(_:)``), so that its next lock reads only what was written since.
    private func readLockedViewInBackground(_ held: HeldKeychain) {
        guard !held.isLocked else { return }
        let keychain = held.keychain
        registry.offLoop(
            { LockedItemViews.readAll(keychain) },
            then: { [weak self] items in
                guard let self, self.registry.keychains.contains(where: { $0 === held }) else { return }
                self.lockedViews.learn(items, of: held)
                KeychainRegistry.log("\(held.id): read what \(items.count) items show, in the background")
            })
    }

    /// Announces a changed item list of a collection: the Secret Service
    /// signal, and `Items` as invalidated (sending the whole list would cost
    /// time in proportion to the collection at every change).
    func announceItems(_ held: HeldKeychain, _ signal: DBusSignal<ObjectPath>, _ reference: ItemReference) {
        lockedViews.wrote(reference, in: held, deleted: signal.name == CollectionObject.itemDeleted.name)
        emit(signal, at: held.path, ObjectPath(ObjectPaths.item(reference, in: held.id)))
        if signal.name != CollectionObject.itemChanged.name { invalidateItems(of: held) }
        if signal.name != CollectionObject.itemDeleted.name { announceItemToKWallet(held, reference) }
    }

    /// Tells Secret Service clients that `held`'s items changed (a `Keychain1` write: `Add`, `Update`, `Delete`,
    /// `Import`): its `Items` property and `CollectionChanged`; the keychain counts as used.
    func itemsChanged(in held: HeldKeychain) {
        held.touch()
        invalidateItems(of: held)
        emit(ServiceObject.collectionChanged, at: ObjectPaths.service, ObjectPath(held.path))
    }

    /// Sends `PropertiesChanged` naming `Items` as invalidated.
    func invalidateItems(of held: HeldKeychain) {
        emit(
            DBusIntrospection.propertiesChanged, at: held.path, CollectionObject.interfaceName,
            DBusPropertyList([:]), ["Items"])
    }

    private func announceCollections(_ signal: DBusSignal<ObjectPath>, _ held: HeldKeychain) {
        emit(signal, at: ObjectPaths.service, ObjectPath(held.path))
        if signal.name != ServiceObject.collectionChanged.name {
            emitPropertiesChanged(
                ObjectPaths.service, ServiceObject.interfaceName,
                ["Collections": .objectPaths(registry.keychains.map(\.path))])
        }
    }
}

/// The Secret Service's interfaces as one document: what `dbus/org.freedesktop.Secrets.xml` holds and
/// `latchkeyd --print-introspection` prints, written from the declarations.
package enum SecretServiceIntrospection {
    /// The service, collection, item, session and prompt interfaces.
    package static var document: String {
        func own<Object>(_ interfaces: [DBusInterface<Object>]) -> [String] {
            interfaces.filter { !DBusIntrospection.standardNames.contains($0.name) }.map(DBusIntrospection.xml)
        }
        return DBusIntrospection.document(
            own(ServiceObject.interfaces) + own(CollectionObject.interfaces) + own(ItemObject.interfaces)
                + own(SessionObject.interfaces) + own(PromptObject.interfaces))
    }
}
