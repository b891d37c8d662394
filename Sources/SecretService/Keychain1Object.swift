import AccessControl
import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import Pinentry
import Posix

/// `/org/latchkey/keychain/<id>`: `org.latchkey.Keychain1`, the typed `SecItem` operations the `Security`
/// module sends. Store errors travel as their `OSStatus` (``Keychain1Interface/statusError``).
struct Keychain1Object: DBusObject {
    let daemon: SecretServiceDaemon
    let keychain: HeldKeychain

    static let interfaces: [DBusInterface<Keychain1Object>] =
        standardInterfaces() + [
            DBusInterface(
                Keychain1Interface.interface,
                methods: [
                    DBusMethod(
                        "Add", DBusInput("class", String.self), DBusInput("attributes", Keychain1Attributes.self),
                        DBusInput("secret", [UInt8].self), DBusInput("hasSecret", Bool.self),
                        returns: [.init("item", "a{sv}")]
                    ) { (object, call, itemClass, attributes, secret, hasSecret) throws(DBusError) in
                        let secret = try object.secret(secret, present: hasSecret, from: call.sender)
                        // The same quotas as the Secret Service's CreateItem (InputLimits).
                        try object.keychain.checkQuota(
                            object.daemon.limits, secretBytes: secret?.count ?? 0, isNew: true)
                        try object.daemon.checkApplicationQuota(
                            of: call.sender, storing: secret?.count ?? 0, in: object.keychain, replacing: nil)
                        let checked: (ItemClass, ItemAttributes)
                        do throws(KeychainError) {
                            guard let itemClass = ItemClass(rawValue: itemClass) else {
                                throw KeychainError(.noSuchClass, "not a keychain item class")
                            }
                            try object.checkBounds(attributes.attributes)
                            try Self.refuseBackendMarks(attributes.attributes)
                            var stored = try object.recordingEnrolledFingers(attributes.attributes)
                            // An item given no access list trusts the application that made it, when known.
                            if !stored.keys.contains(where: ItemAccess.keys.contains),
                                let creator = object.daemon.application(of: call.sender)
                            {
                                stored.merge(ItemAccess.creatorAccess(creator).attributes) { $1 }
                            }
                            checked = (itemClass, stored)
                        } catch {
                            throw Keychain1Interface.dbusError(error)
                        }
                        // A password of its own: asked first, the secret stored sealed under it.
                        if let deferred = try object.addingWithItemPassword(
                            checked.1, of: checked.0, secret: secret, call: call)
                        {
                            return deferred
                        }
                        return try native { () throws(KeychainError) in
                            try object.add(NewItem(checked.0, attributes: checked.1, secret: nil), secret, call: call)
                        }
                    },
                    DBusMethod("Search", DBusInput("query", Keychain1Query.self), returns: [.init("items", "aa{sv}")]) {
                        (object, call, query) throws(DBusError) in
                        try object.search(query.query, call: call)
                    },
                    DBusMethod(
                        "Update", DBusInput("query", Keychain1Query.self),
                        DBusInput("attributes", Keychain1Attributes.self),
                        DBusInput("secret", [UInt8].self), DBusInput("hasSecret", Bool.self),
                        returns: [.init("count", UInt32.self)]
                    ) { (object, call, query, attributes, bytes, hasSecret) throws(DBusError) in
                        let secret = try object.secret(bytes, present: hasSecret, from: call.sender)
                        do throws(KeychainError) {
                            try object.checkBounds(attributes.attributes)
                        } catch {
                            throw Keychain1Interface.dbusError(error)
                        }
                        let given: ItemAttributes
                        do throws(KeychainError) {
                            given = try object.recordingEnrolledFingers(attributes.attributes)
                        } catch {
                            throw Keychain1Interface.dbusError(error)
                        }
                        // The access decision first (a refused caller is asked nothing more), then the confirmation
                        // of an access-control change, then, for items given a password of their own, that password,
                        // one by one; then the change, of the items the decision was about.
                        return try object.changingOnceDecided(.change, matching: query.query, call: call) { matching in
                            // `opened`: the secrets (and keys) of items with a password of their own the confirmation
                            // opened, taken when it ended: kept for the change through the new passwords' dialogs
                            // (the daemon's openedForServing holds them only while the confirmation's reply runs).
                            let update = {
                                (opened: [String: OpenedItemSecret], sealed: [ItemReference: Data])
                                    -> Result<DBusMethodResult, DBusError> in
                                do throws(KeychainError) {
                                    let count = try Self.lendingData(secret) { (secret) throws(KeychainError) in
                                        let changes = ItemChanges(attributes: given, secret: secret)
                                        try Self.refuseBackendMarks(changes.attributes)
                                        try object.refuseWideningAccess(matching: matching, with: changes)
                                        // Items with a password of their own (before or after): each its own.
                                        return try object.updateWithItemPasswords(
                                            matching: matching, with: changes, sealed: sealed, opened: opened)
                                    }
                                    object.changed()
                                    return .success(.reply([.uint32(UInt32(clamping: count))]))
                                } catch {
                                    return .failure(Keychain1Interface.dbusError(error))
                                }
                            }
                            let sealing = {
                                (opened: [String: OpenedItemSecret]) -> Result<DBusMethodResult, DBusError> in
                                Result { () throws(DBusError) in
                                    try object.sealingUnderNewItemPasswords(
                                        matching: matching, to: given, secret: secret, call: call
                                    ) { sealed in update(opened, sealed) }
                                }
                            }
                            guard
                                let targets = object.accessControlChangeToConfirm(
                                    of: matching, to: given, changingSecret: secret != nil, caller: call.sender)
                            else { return sealing([:]) }
                            return object.confirmingAccessControlChange(
                                of: targets, authentication: query.query.authentication, call: call, sealing)
                        }
                    },
                    DBusMethod(
                        "Delete", DBusInput("query", Keychain1Query.self), returns: [.init("count", UInt32.self)]
                    ) {
                        (object, call, query) throws(DBusError) in
                        try object.changing(.delete, matching: query.query, call: call) {
                            (matching) throws(KeychainError) in
                            let count = try object.keychain.keychain.delete(matching: matching)
                            object.daemon.releaseApplicationUsage(in: object.keychain, matching.references ?? [])
                            return count
                        }
                    },
                    // A CXF file's items (or a CSV's), added in one transaction once the person allowed it
                    // (Keychain1Exchange.swift, docs/export-import.md).
                    DBusMethod(
                        "Import", DBusInput("file", [UInt8].self), DBusInput("key", [UInt8].self),
                        DBusInput("keyKind", String.self), DBusInput("dryRun", Bool.self),
                        DBusInput("replace", Bool.self), returns: [.init("summary", "a{sv}")]
                    ) { (object, call, file, key, keyKind, dryRun, replace) throws(DBusError) in
                        try object.daemon.importFile(
                            file, key: key, keyKind: keyKind, dryRun: dryRun, replace: replace, into: object.keychain,
                            call: call)
                    },
                    // A gnome-keyring keyring file the client read, with its import record, in one transaction
                    // once the person allowed it (`latchkey import-gnome-keyring`; Keychain1Exchange.swift).
                    DBusMethod(
                        "ImportKeyring", DBusInput("file", [UInt8].self), DBusInput("password", [UInt8].self),
                        DBusInput("path", String.self), DBusInput("modified", UInt64.self),
                        DBusInput("dryRun", Bool.self), returns: [.init("summary", "a{sv}")]
                    ) { (object, call, file, password, path, modified, dryRun) throws(DBusError) in
                        try object.daemon.importKeyring(
                            file, password: password, path: path, modified: modified, dryRun: dryRun,
                            into: object.keychain, call: call)
                    },
                    DBusMethod("Status", returns: [.init("status", "a{sv}")]) { object, _ in
                        .reply([Keychain1Interface.encode(object.keychain.description)])
                    },
                    DBusMethod("Unlock", DBusInput("password", [UInt8].self)) {
                        (object, call, password) throws(DBusError) in
                        defer { wipeSharedStorage(of: password) }
                        // Password guesses from a sandboxed or unknown caller: refused, not counted.
                        try object.daemon.refuse(unlessAllowed: .sendKeychainPassword, by: call.sender)
                        // Into secret memory (unsealed there, or copied and the decoded array's own storage wiped).
                        let secret = try object.daemon.keychainSession(of: call.sender).unseal(password)
                        return try object.unlock(password: secret, call: call)
                    },
                    DBusMethod("Lock") { object, _ in
                        object.daemon.registry.lock(object.keychain)
                        return .reply([])
                    },
                    // As `Lock`, and the class keys that outlast a lock (AfterFirstUnlock) go too.
                    DBusMethod("LockAllClasses") { object, _ in
                        object.daemon.registry.lock(object.keychain, allClasses: true)
                        return .reply([])
                    },
                    DBusMethod("ChangePassword", DBusInput("old", [UInt8].self), DBusInput("new", [UInt8].self)) {
                        (object, call, old, new) throws(DBusError) in
                        let session = object.daemon.keychainSession(of: call.sender)
                        defer {
                            wipeSharedStorage(of: old)
                            wipeSharedStorage(of: new)
                        }
                        try object.daemon.refuse(unlessAllowed: .sendKeychainPassword, by: call.sender)
                        let oldSecret = try session.unseal(old)
                        let newSecret = try session.unseal(new)
                        return try object.changePassword(from: oldSecret, to: newSecret, call: call)
                    },
                    DBusMethod("SetAccessPolicy", DBusInput("policy", String.self)) {
                        (object, call, policy) throws(DBusError) in
                        try object.setAccessPolicy(policy, call: call)
                    },
                    DBusMethod("SetSettings", DBusInput("settings", Keychain1Settings.self)) {
                        (object, call, settings) throws(DBusError) in
                        try object.setSettings(settings.settings, call: call)
                    },
                ])
        ]

    /// The secret `caller` sent, unsealed under its session into secret memory (nil when it sent none); the
    /// decoded array's own storage is wiped either way.
    private func secret(_ bytes: [UInt8], present: Bool, from caller: String) throws(DBusError) -> SharedSecret? {
        defer { wipeSharedStorage(of: bytes) }
        guard present else { return nil }
        let session = daemon.keychainSession(of: caller)
        let most = daemon.limits.secretBytes
        let tooLarge = Keychain1Interface.dbusError(
            KeychainError(.dataTooLarge, "the secret is larger than \(most) bytes"))
        // Sealed, it is at most an IV and a padding block longer: checked before it takes secret memory.
        guard bytes.count <= most + (session.isSealing ? SecretSession.sealingOverhead : 0) else { throw tooLarge }
        let secret = try session.unseal(bytes)
        guard secret.count <= most else { throw tooLarge }
        return secret
    }

    /// Adds `item`, with `secret` (in secret memory, lent to the store) when given, else the secret it carries
    /// (an envelope, which is not replied), as `Add` replies it.
    func add(_ item: NewItem, _ secret: SharedSecret?, call: DBusMethodCall) throws(KeychainError) -> [DBusValue] {
        let added = try Self.lendingData(secret) { (lent) throws(KeychainError) in
            var item = item
            if secret != nil { item.secret = lent }
            return try keychain.keychain.add(item)
        }
        let bytes = secret?.count ?? item.secret?.count ?? 0
        daemon.recordApplicationUsage(of: call.sender, storing: bytes, in: keychain, at: added.reference)
        changed()
        // A caller with a session has the secret it sent: it does not cross again.
        guard secret != nil, !daemon.keychainSession(of: call.sender).isSealing else {
            return [Keychain1Interface.encode(added, secretBytes: nil)]
        }
        return [Keychain1Interface.encode(added)]
    }

    /// Lends `secret` to the store as `Data` without a copy (nil when there is none), for `body` only.
    private static func lendingData<R>(_ secret: SharedSecret?, _ body: (Data?) throws(KeychainError) -> R)
        throws(KeychainError) -> R
    {
        guard let secret else { return try body(nil) }
        return try secret.withUnownedData { (data) throws(KeychainError) in try body(data) }
    }

    /// The same bounds as the Secret Service face: how many attributes, and how long each name and value.
    private func checkBounds(_ attributes: ItemAttributes) throws(KeychainError) {
        try daemon.limits.check(attributes)
    }

    /// `Search`: the items now, or, when the query asks for secrets the caller is not trusted with, once the
    /// person allowed it each of them (AccessChecks.swift), and then only the items asked about; a denial fails
    /// the whole search.
    private func search(_ query: ItemQuery, call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        guard query.returning.contains(.data) else {
            do {
                try checkBounds(query.attributes)
                let found = try keychain.keychain.items(matching: query)
                return .reply([.array(elementSignature: "a{sv}", found.map(Keychain1Interface.encode))])
            } catch {
                throw Keychain1Interface.dbusError(error)
            }
        }
        // Sealed under the caller's session as it is now, also for a reply that waits for a prompt.
        let session = daemon.keychainSession(of: call.sender)
        var found: [(item: KeychainItem, secret: SharedSecret?)]
        var reading = query
        reading.returning.formUnion([.attributes, .reference])
        do {
            try checkBounds(query.attributes)
            // Secrets decrypted into secret memory, copied only into the reply.
            found = try keychain.keychain.itemsWithSecrets(matching: reading)
        } catch {
            throw Keychain1Interface.dbusError(error)
        }
        var targets = found.map {
            SecretServiceDaemon.SecretTarget(
                held: keychain, reference: $0.item.reference, attributes: $0.item.attributes ?? [:])
        }
        // kSecUseAuthenticationUISkip: the items that would ask for the person are left out.
        if query.authentication.interaction == .skip {
            let kept = targets.indices.filter { !daemon.needsConfirmation(targets[$0], by: call.sender) }
            found = kept.map { found[$0] }
            targets = kept.map { targets[$0] }
        }
        // Every item trusts the caller and asks for no confirmation (the usual case): served from the one read.
        if targets.allSatisfy({ daemon.servesAtOnce($0, caller: call.sender) }) {
            let items = try found.map { (item, secret) throws(DBusError) in
                try Self.encode(
                    KeychainItem(
                        reference: item.reference,
                        attributes: query.returning.contains(.attributes) ? item.attributes : nil, secret: nil),
                    secret: secret, sealedFor: session)
            }
            return .reply([.array(elementSignature: "a{sv}", items)])
        }
        let held = keychain
        // Once allowed, only the items asked about: an item that matches by then (made meanwhile) was not.
        var asked = query
        asked.references = targets.map(\.reference)
        return try daemon.servingSecrets(of: targets, to: call, authentication: query.authentication) {
            allowed, outcome in
            guard case .denied(let denial) = outcome else {
                // Only the items still allowed when the answers came (Skip leaves out one whose confirmation
                // lapsed while another item's prompt was open).
                var served = asked
                served.references = zip(targets, allowed).filter(\.1).map(\.0.reference)
                return Self.items(of: held, matching: served, sealedFor: session, daemon: daemon)
            }
            return .failure(denial.keychainError)
        }
    }

    /// An item and its secret held in secret memory as `Search` replies them: the secret sealed under the
    /// caller's session, straight from secret memory (a plain session copies it only into the reply's array,
    /// which libdbus needs).
    private static func encode(_ item: KeychainItem, secret: SharedSecret?, sealedFor session: SecretSession)
        throws(DBusError) -> DBusValue
    {
        guard let secret else { return Keychain1Interface.encode(item, secretBytes: nil) }
        let sealed = try secret.withUnsafeBytes { (bytes) throws(DBusError) in try session.seal(bytes) }
        return Keychain1Interface.encode(item, secretBytes: sealed)
    }

    /// The items `query` finds, as `Search` replies them (an item with a password of its own with the secret
    /// opened for this reply: ``SecretServiceDaemon/servedSecret(of:in:stored:)``).
    private static func items(
        of keychain: HeldKeychain, matching query: ItemQuery, sealedFor session: SecretSession,
        daemon: SecretServiceDaemon
    ) -> Result<[DBusValue], DBusError> {
        let items: [(item: KeychainItem, secret: SharedSecret?)]
        do {
            items = try keychain.keychain.itemsWithSecrets(matching: query)
        } catch {
            return .failure(Keychain1Interface.dbusError(error))
        }
        do throws(DBusError) {
            let encoded = try items.map { (found) throws(DBusError) in
                let secret: SharedSecret?
                do throws(KeychainError) {
                    secret = try daemon.servedSecret(of: found.item, in: keychain, stored: found.secret)
                } catch {
                    throw Keychain1Interface.dbusError(error)
                }
                return try Self.encode(found.item, secret: secret, sealedFor: session)
            }
            return .success([.array(elementSignature: "a{sv}", encoded)])
        } catch {
            return .failure(error)
        }
    }

    /// `Update` and `Delete`: `body` changes the items `query` matches (given the query to run) and gives how
    /// many. At once when the caller may change every match (AccessChecks.swift: the item trusts it, or the
    /// keychain's policy is `allow-all`), else once the person allowed it in one prompt for all of them, and
    /// then only the items asked about (an item that matches by then is not touched). Denied: `errSecUserCanceled`,
    /// or `errSecInteractionNotAllowed` when nobody could be asked, and nothing changes.
    private func changing(
        _ kind: AccessKind, matching query: ItemQuery, call: DBusMethodCall,
        _ body: @escaping (ItemQuery) throws(KeychainError) -> Int
    ) throws(DBusError) -> DBusMethodResult {
        try changingOnceDecided(kind, matching: query, call: call) { [self] matching in
            do throws(KeychainError) {
                let count = try body(matching)
                changed()
                return .success(.reply([.uint32(UInt32(clamping: count))]))
            } catch {
                return .failure(Keychain1Interface.dbusError(error))
            }
        }
    }

    /// The access decision of ``changing(_:matching:call:_:)`` (asking the person when the rules say so), then
    /// `serve`, given the query to run, which may answer later itself (`.deferred`). Denied: the denial's error,
    /// and `serve` never runs.
    private func changingOnceDecided(
        _ kind: AccessKind, matching query: ItemQuery, call: DBusMethodCall,
        _ serve: @escaping (ItemQuery) -> Result<DBusMethodResult, DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        // A keychain whose policy allows every caller everything (AccessRules): no access list to read. A delete
        // still reads which items it deletes (not returning their attributes), to give back what they counted
        // against their applications' quotas (ApplicationUsage).
        if daemon.callers != nil, (try? keychain.keychain.accessPolicy()) == .allowAll {
            var matched = query
            do throws(KeychainError) {
                try checkBounds(query.attributes)
                if kind == .delete {
                    var reading = query
                    reading.returning = .reference
                    reading.limit = .all
                    let deleted = try keychain.keychain.items(matching: reading)
                    if !deleted.isEmpty { matched.references = deleted.map(\.reference) }
                }
            } catch {
                throw Keychain1Interface.dbusError(error)
            }
            return try serve(matched).get()
        }
        let targets: [SecretServiceDaemon.SecretTarget]
        do {
            try checkBounds(query.attributes)
            var reading = query
            reading.returning = [.attributes, .reference]
            reading.limit = .all
            // Callers not identified (an embedding): nothing is checked, so nothing is read first.
            let found = daemon.callers == nil ? [] : try keychain.keychain.items(matching: reading)
            targets = found.map {
                SecretServiceDaemon.SecretTarget(
                    held: keychain, reference: $0.reference, attributes: $0.attributes ?? [:])
            }
        } catch {
            throw Keychain1Interface.dbusError(error)
        }
        // What was matched (and asked about); nothing matched: the store's own answer (errSecItemNotFound).
        var matched = query
        if !targets.isEmpty { matched.references = targets.map(\.reference) }
        return try daemon.decidingChange(kind, of: targets, to: call) { outcome in
            if case .denied(let denial) = outcome { return .failure(denial.keychainError) }
            return serve(matched)
        }
    }

    /// Refuses ``AttributeKey/portalKey``: only the Secret portal's backend marks an application's key, so that
    /// no client can make an item of its own (with a secret it knows) pass for one.
    private static func refuseBackendMarks(_ attributes: ItemAttributes) throws(KeychainError) {
        guard attributes[.portalKey] == nil else {
            throw KeychainError.param("\(AttributeKey.portalKey.rawValue) is set only by the Secret portal's backend")
        }
    }

    /// Refuses a change that would add to an item's access list: through `Keychain1` a list can only be
    /// narrowed after the item is made (`remove-access`), so that no client can trust itself with another
    /// application's item. Trust is added by the user, in an access prompt.
    private func refuseWideningAccess(matching query: ItemQuery, with changes: ItemChanges) throws(KeychainError) {
        guard changes.attributes.keys.contains(where: ItemAccess.keys.contains) else { return }
        var reading = query
        reading.returning = .attributes
        reading.limit = .all
        for item in try keychain.keychain.items(matching: reading) {
            let current = item.attributes ?? [:]
            let changed = current.merging(changes.attributes) { $1 }
            guard ItemAccess(attributes: changed).isNarrowing(ItemAccess(attributes: current)) else {
                throw KeychainError.param("an item's access list can only be narrowed once it is made")
            }
        }
    }

    /// Tells Secret Service clients that the collection's items changed.
    private func changed() {
        daemon.itemsChanged(in: keychain)
    }

    /// Unlocks: the login keychain with its password, derived on the worker (the reply comes then); the
    /// others with the login keychain's key.
    private func unlock(password: SharedSecret, call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        guard keychain.isLocked else { return .reply([]) }
        if case .ownPassword = keychain.unlocking {
            daemon.registry.unlock(keychain, password: password) { [daemon] outcome in
                switch outcome {
                case .accepted: daemon.reply(to: call, .success([]))
                default: daemon.reply(to: call, .failure(Keychain1Interface.dbusError(outcome.keychainError)))
                }
            }
            return .deferred
        }
        guard case .loginPassword = keychain.unlocking else {
            guard daemon.registry.unlockWithoutPassword(keychain) else {
                throw Keychain1Interface.dbusError(
                    KeychainError(.interactionNotAllowed, "unlock the login keychain first"))
            }
            return .reply([])
        }
        daemon.registry.userLogin.unlock(password: password, from: .userProcess) { [daemon] outcome in
            switch outcome {
            case .created, .unlocked, .alreadyUnlocked: daemon.reply(to: call, .success([]))
            case .notUnlocked(let why):
                daemon.reply(to: call, .failure(Keychain1Interface.dbusError(why.keychainError)))
            }
        }
        return .deferred
    }

    /// Sets the access policy: `allow-all` once the user confirmed it in a prompt (the reply comes then, and
    /// the prompt ends if the caller leaves first), `prompt` at once.
    private func setAccessPolicy(_ name: String, call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        guard let policy = KeychainAccessPolicy(rawValue: name) else {
            throw Keychain1Interface.dbusError(KeychainError.param("the access policy is 'prompt' or 'allow-all'"))
        }
        return daemon.answerAfterConfirmation(call, failure: Keychain1Interface.dbusError) { [self] completion in
            daemon.registry.setAccessPolicy(
                policy, of: keychain, requester: daemon.application(of: call.sender)?.description,
                client: daemon.promptClient(of: call.sender), completion: completion)
        }
    }

    /// Sets the lock settings: tighter ones at once, looser ones (a lock turned off, a longer timeout or none)
    /// once the user confirmed them in a prompt, as `allow-all` is (KeychainRegistry's `setSettings`). A
    /// Flatpak application or a caller not identified cannot change them at all.
    private func setSettings(_ settings: KeychainSettings, call: DBusMethodCall) throws(DBusError)
        -> DBusMethodResult
    {
        try daemon.refuse(unlessAllowed: .changeLockSettings, by: call.sender)
        return daemon.answerAfterConfirmation(call, failure: Keychain1Interface.dbusError) { [self] completion in
            daemon.registry.setSettings(
                settings, of: keychain, requester: daemon.application(of: call.sender)?.description,
                client: daemon.promptClient(of: call.sender), completion: completion)
        }
    }

    private func changePassword(from old: SharedSecret, to new: SharedSecret, call: DBusMethodCall) throws(DBusError)
        -> DBusMethodResult
    {
        switch keychain.unlocking {
        case .loginPassword, .ownPassword: break
        case .loginKey, .heldPassword:
            throw Keychain1Interface.dbusError(
                KeychainError.param("'\(keychain.id)' has no password of its own: it opens with the login keychain"))
        }
        daemon.registry.changePassword(of: keychain, from: old, to: new) { [daemon] outcome in
            switch outcome {
            case .accepted: daemon.reply(to: call, .success([]))
            default: daemon.reply(to: call, .failure(Keychain1Interface.dbusError(outcome.keychainError)))
            }
        }
        return .deferred
    }
}

/// Runs a `Keychain1` operation: store errors become their `OSStatus` error.
private func native(_ body: () throws(KeychainError) -> [DBusValue]) throws(DBusError) -> DBusMethodResult {
    do {
        return .reply(try body())
    } catch {
        throw Keychain1Interface.dbusError(error)
    }
}

extension LoginPasswordOutcome {
    /// The store error a refused or failed attempt is reported as.
    var keychainError: KeychainError {
        switch self {
        case .accepted: KeychainError(.success, "")
        case .notTried(let wait): .tooManyAttempts(waitSeconds: wait)
        case .failed(let error): error
        }
    }
}

extension HeldKeychain {
    /// How the daemon holds it, as `org.latchkey.Keychain1` tells.
    var description: KeychainDescription {
        let protection: KeychainDescription.Protection
        switch unlocking {
        case .loginPassword, .ownPassword: protection = .password
        case .loginKey: protection = .loginKeychain
        case .heldPassword: protection = .memory
        }
        let policy = try? keychain.storedAccessPolicy()
        return KeychainDescription(
            id: id, file: protection == .memory ? "" : keychain.path, label: label, isLocked: isLocked,
            protection: protection, settings: appliedSettings, accessPolicy: policy?.policy,
            accessPolicyChecked: policy?.checked ?? true)
    }
}

/// `SecItem` attributes as `Keychain1` carries them (`a{sv}`).
struct Keychain1Attributes: DBusType {
    let attributes: ItemAttributes
    static var dbusSignature: String { "a{sv}" }
    init(dbusValue value: DBusValue) throws(DBusError) {
        do {
            attributes = try Keychain1Interface.decodeAttributes(value)
        } catch {
            throw Keychain1Interface.dbusError(error)
        }
    }
    var dbusValue: DBusValue { Keychain1Interface.encode(attributes) }
}

/// A `SecItem` query as `Keychain1` carries it (`a{sv}`).
struct Keychain1Query: DBusType {
    let query: ItemQuery
    static var dbusSignature: String { "a{sv}" }
    init(dbusValue value: DBusValue) throws(DBusError) {
        do {
            query = try Keychain1Interface.decodeQuery(value)
        } catch {
            throw Keychain1Interface.dbusError(error)
        }
    }
    var dbusValue: DBusValue { Keychain1Interface.encode(query) }
}

/// Keychain lock settings as `Keychain1` carries them (`a{sv}`).
struct Keychain1Settings: DBusType {
    let settings: KeychainSettings
    static var dbusSignature: String { "a{sv}" }
    init(dbusValue value: DBusValue) throws(DBusError) {
        do {
            settings = try Keychain1Interface.decodeSettings(value)
        } catch {
            throw Keychain1Interface.dbusError(error)
        }
    }
    var dbusValue: DBusValue { Keychain1Interface.encode(settings) }
}
