import AccessControl
import DBus
import FoundationEssentials
import KWalletFormat
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// What `org.kde.KWallet`'s calls do (KWalletObject.swift declares them): wallets onto collections, handles,
/// folders and entries onto items (docs/kwallet.md §2, §3).
extension KWalletObject {
    var sessions: KWalletSessions { daemon.kwallet }
    private var registry: KeychainRegistry { daemon.registry }

    /// A handle and its collection, as a call may use it.
    struct Opened {
        let handle: KWalletSessions.Handle
        let held: HeldKeychain
    }

    /// What a read hands back: the raw value (`readEntry`), a map only, or a password only (as text).
    enum ReadKind {
        case entry
        case map
        case password

        /// The empty answer of a single read.
        var emptyValue: DBusValue { self == .password ? .string("") : .bytes([]) }

        /// Whether an entry kept as `form` is one this read gives.
        func takes(_ form: KWalletStoredForm) -> Bool {
            switch self {
            case .entry: true
            case .map: form == .map
            case .password: form == .plaintext
            }
        }
    }

    // MARK: Wallets and handles

    /// The collection a wallet name means: the names kwalletrc gives are the `default` collection, any other
    /// the collection with that label (never the session collection).
    func collection(named wallet: String) -> HeldKeychain? {
        let names = sessions.names
        if wallet == names.networkWallet || wallet == names.localWallet { return registry.keychain(alias: "default") }
        return registry.keychains.first { $0.id != KeychainRegistry.sessionID && $0.label == wallet }
    }

    /// The name a collection goes by as a wallet.
    func walletName(of held: HeldKeychain) -> String {
        held === registry.keychain(alias: "default") ? sessions.names.networkWallet : held.label
    }

    /// `wallets`: the network wallet's name first (and the local one's when it differs), then the other
    /// collections' labels.
    func walletNames() -> [String] {
        let names = sessions.names
        var list = [names.networkWallet]
        if names.localWallet != names.networkWallet { list.append(names.localWallet) }
        let defaultCollection = registry.keychain(alias: "default")
        for held in registry.keychains where held.id != KeychainRegistry.sessionID && held !== defaultCollection {
            if !list.contains(held.label) { list.append(held.label) }
        }
        return list
    }

    /// The caller's live handle `number` and its collection; nil for anything else.
    func session(_ number: Int32, _ call: DBusMethodCall) -> Opened? {
        guard let handle = sessions.handle(number, of: call.sender, in: registry) else { return nil }
        handle.collection.markUsed()
        return Opened(handle: handle, held: handle.collection)
    }

    /// Whether `text` may name a wallet, folder or key: within the bounds on labels and attribute values.
    private func isAcceptedName(_ text: String) -> Bool {
        text.utf8.count <= daemon.limits.labelBytes && text.utf8.count <= daemon.limits.attributeValueBytes
    }

    /// The label of the entry `key` of `folder`, `folder/key`, cut at a character boundary to the bound on
    /// labels: the entry is its attributes and the label is only shown, so names each within their bound are
    /// never refused for their label's length (kwalletd5 has no bound, and QtKeychain does not look at
    /// `writePassword`'s answer: a refusal there is a silent loss).
    private func entryLabel(folder: String, key: String) -> String {
        let label = KWalletScheme.label(folder: folder, key: key)
        var end = label.startIndex
        var bytes = 0
        for index in label.indices {
            bytes += label[index].utf8.count
            guard bytes <= daemon.limits.labelBytes else { return String(label[..<end]) }
            end = label.index(after: index)
        }
        return label
    }

    /// `open`: the handle, after the unlock prompt if the keychain is locked; a wallet no collection has is
    /// created (as `CreateCollection`). `-1` for a bad name, a refusal, or a new wallet while a confirmation the
    /// caller (or its Flatpak app) asked for still waits; a negative window id is taken, as kwalletd5 takes it.
    func open(_ wallet: String, window: Int64, appid: String, call: DBusMethodCall) -> DBusMethodResult {
        var answered: Int32?
        var deferred = false
        openHandle(wallet, window: window, appid: appid, call: call) { [daemon] handle in
            if deferred { daemon.reply(to: call, .success([.int32(handle)])) } else { answered = handle }
        }
        if let answered { return .reply([.int32(answered)]) }
        deferred = true
        return .deferred
    }

    /// `openAsync`: a transaction id at once, then `walletAsyncOpened(tId, handle)` to the caller.
    func openAsync(_ wallet: String, window: Int64, appid: String, call: DBusMethodCall) -> DBusMethodResult {
        let transaction = sessions.nextTransaction()
        // The reply first, so that the client knows the id before the signal carrying it comes.
        daemon.reply(to: call, .success([.int32(transaction)]))
        let path = path
        openHandle(wallet, window: window, appid: appid, call: call) { [daemon] handle in
            daemon.emit(Self.walletAsyncOpened, at: path, to: call.sender, transaction, handle)
        }
        return .deferred
    }

    /// Opens `wallet` for the caller and gives the handle (`-1` when it cannot) to `completion`, now or once
    /// a prompt ended.
    private func openHandle(
        _ wallet: String, window: Int64, appid: String, call: DBusMethodCall,
        completion: @escaping (Int32) -> Void
    ) {
        // A window id below zero is taken, as kwalletd5 takes it (the KF6 bridge refuses it).
        guard !wallet.isEmpty, isAcceptedName(wallet), isAcceptedName(appid) else { return completion(-1) }
        let owner = call.sender
        let path = path
        let issue = { [daemon] (held: HeldKeychain) -> Int32 in
            guard !held.isLocked, daemon.registry.keychain(id: held.id) === held else { return -1 }
            return daemon.kwallet.open(held, wallet: wallet, for: owner, appid: appid, path: path) ?? -1
        }
        if let held = collection(named: wallet) {
            if held.isLocked, !registry.unlockWithoutPassword(held) {
                return waitForUnlock(of: [held], owner: owner, window: window) { completion($0 ? issue(held) : -1) }
            }
            return completion(issue(held))
        }
        guard daemon.limits.labelBytes >= wallet.utf8.count else { return completion(-1) }
        // A new wallet: a collection under the login key, which must be unlocked first.
        let create = { [daemon] () -> Int32 in
            guard let held = KWalletObject.createCollection(wallet, daemon: daemon) else { return -1 }
            return issue(held)
        }
        switch daemon.decide(.createCollection, by: owner) {
        case .denied: return completion(-1)
        case .allowed:
            guard let login = registry.login, login.isLocked else { return completion(create()) }
            waitForUnlock(of: [login], owner: owner, window: window) { completion($0 ? create() : -1) }
        case .ask(let question):
            // As `CreateCollection`: within the bound on collections, and one confirmation waiting per
            // connection and per Flatpak app (another answers -1 at once).
            guard (try? daemon.limits.check(collectionsHeld: registry.madeKeychainCount)) != nil,
                !daemon.isWaitingForConfirmation(owner)
            else { return completion(-1) }
            guard let pending = sessions.wait(for: owner) else { return completion(-1) }
            let ticket = daemon.trackConfirmation(for: call) { [registry, daemon] confirmed in
                registry.confirmKeychainCreation(
                    label: wallet, requester: daemon.confirmationName(of: question.asker, sender: owner),
                    client: daemon.promptClient(of: owner), completion: confirmed)
            } completion: { [daemon] outcome in
                guard daemon.kwallet.take(pending) else { return }
                guard case .success = outcome, daemon.registry.login?.isLocked == false else { return completion(-1) }
                completion(create())
            }
            if sessions.isWaiting(pending) { pending.ticket = ticket }
        }
    }

    /// Asks for the passwords of `collections` with the registry's unlock prompt; `completion` gets whether
    /// they unlocked (never runs when the caller left meanwhile). The caller's `window` (its `wId`) parents the
    /// prompt when it is above zero.
    private func waitForUnlock(
        of collections: [HeldKeychain], owner: String, window: Int64, completion: @escaping (Bool) -> Void
    ) {
        guard let pending = sessions.wait(for: owner) else { return completion(false) }
        let ticket = registry.promptForPasswords(unlocking: collections, parentWindow: window) { [daemon] unlocked in
            guard daemon.kwallet.take(pending) else { return }
            completion(unlocked && collections.allSatisfy { !$0.isLocked })
        }
        if sessions.isWaiting(pending) { pending.ticket = ticket }
    }

    /// Makes the collection labelled `wallet` through `CreateCollection`'s path: nil when it cannot be made.
    private static func createCollection(_ wallet: String, daemon: SecretServiceDaemon) -> HeldKeychain? {
        guard let made = try? ServiceObject(daemon: daemon).create(label: wallet, alias: ""),
            let path = made.first?.text, case .collection(let held) = daemon.resolve(path)
        else { return nil }
        return held
    }

    /// `close(wallet, force)`: drops the caller's handles on the wallet (`0`), `-1` when it had none.
    func close(wallet: String, caller: String) -> Int32 {
        guard let held = collection(named: wallet) else { return -1 }
        let ended = sessions.end { $0.owner == caller && $0.collection === held }
        endHandles(ended)
        return ended.isEmpty ? -1 : 0
    }

    /// `close(handle, force, appid)`: one session of `appid` dropped (``KWalletSessions/close``).
    func close(handle number: Int32, force: Bool, appid: String, caller: String) -> Int32 {
        let (result, ended) = sessions.close(number, of: caller, appid: appid, force: force)
        if let ended { endHandles([ended]) }
        return result
    }

    /// Tells each ended handle's owner (`walletClosedId`, `walletClosed(i)`, to it only).
    func endHandles(_ ended: [KWalletSessions.Handle]) {
        for handle in ended {
            daemon.emit(Self.walletClosedId, at: handle.path, to: handle.owner, handle.number)
            daemon.emit(Self.walletClosedHandle, at: handle.path, to: handle.owner, handle.number)
        }
    }

    /// `disconnectApplication`: drops the caller's sessions opened as `application` on the wallet.
    func disconnect(_ application: String, from wallet: String, caller: String) -> Bool {
        guard let held = collection(named: wallet) else { return false }
        let (ended, had) = sessions.disconnect(application, of: caller, on: held)
        endHandles(ended)
        if had {
            for path in Set(sessions.handles.values.filter { $0.owner == caller }.map(\.path) + ended.map(\.path)) {
                daemon.emit(Self.applicationDisconnected, at: path, to: caller, wallet, application)
            }
        }
        return had
    }

    /// `users`: the appids of the caller's own sessions on the wallet.
    func users(of wallet: String, caller: String) -> [String] {
        guard let held = collection(named: wallet) else { return [] }
        var appids: Set<String> = []
        for handle in sessions.handles.values where handle.owner == caller && handle.collection === held {
            appids.formUnion(handle.appids.keys)
        }
        return appids.sorted()
    }

    /// `deleteWallet`: `-1` for the default collection and unknown wallets; another, once the person
    /// confirmed its deletion (as `Collection.Delete`), `0`.
    func deleteWallet(_ wallet: String, call: DBusMethodCall) -> DBusMethodResult {
        guard let held = collection(named: wallet), held !== registry.keychain(alias: "default"),
            held.id != KeychainRegistry.loginID
        else { return .reply([.int32(-1)]) }
        guard let pending = sessions.wait(for: call.sender) else { return .reply([.int32(-1)]) }
        var answered: Int32?
        var deferred = false
        let ticket = registry.deleteKeychain(
            held, requester: daemon.application(of: call.sender)?.description,
            client: daemon.promptClient(of: call.sender)
        ) { [daemon] outcome in
            guard daemon.kwallet.take(pending) else { return }
            var result: Int32 = -1
            if case .success = outcome {
                daemon.applicationUsage.release(collection: held)
                result = 0
            }
            if deferred { daemon.reply(to: call, .success([.int32(result)])) } else { answered = result }
        }
        if let answered { return .reply([.int32(answered)]) }
        deferred = true
        pending.ticket = ticket
        return .deferred
    }

    /// `changePassword`: the keychain's password change prompt (as gnome-keyring's `ChangeWithPrompt`), the
    /// empty reply when it ends; at once for an unknown wallet. `window` parents the prompts when above zero.
    func changePassword(of wallet: String, window: Int64, call: DBusMethodCall) -> DBusMethodResult {
        guard isAcceptedName(wallet), let held = collection(named: wallet),
            let pending = sessions.wait(for: call.sender)
        else { return .reply([]) }
        var deferred = false
        let ticket = registry.promptToChangePassword(of: held, parentWindow: window) { [daemon] changed in
            guard daemon.kwallet.take(pending) else { return }
            if changed {
                daemon.emit(ServiceObject.collectionChanged, at: ObjectPaths.service, ObjectPath(held.path))
            }
            if deferred { daemon.reply(to: call, .success([])) }
        }
        guard sessions.isWaiting(pending) else { return .reply([]) }
        deferred = true
        pending.ticket = ticket
        return .deferred
    }

    /// `folderDoesNotExist`/`keyDoesNotExist`: from the keyed index, without a handle (works while locked);
    /// `true` for an unknown wallet.
    func doesNotExist(wallet: String, folder: String, key: String?) -> Bool {
        guard isAcceptedName(folder), isAcceptedName(key ?? ""), let held = collection(named: wallet) else {
            return true
        }
        guard let key else { return !folderExists(folder, in: held) }
        return ((try? held.kwalletItems(folder: folder, key: key)) ?? []).isEmpty
    }

    // MARK: Folders and entries

    /// The caller's handle's folders, empty ones included; empty for a bad handle.
    func folders(_ number: Int32, _ call: DBusMethodCall) -> [String] {
        guard let opened = session(number, call), let entries = try? opened.held.kwalletEntries(folder: nil) else {
            return []
        }
        var folders = Set(entries.map(\.folder))
        folders.formUnion(sessions.emptyFolders[opened.held.id] ?? [])
        return folders.sorted()
    }

    /// `hasFolder`: whether `folder` exists through the caller's handle.
    func hasFolder(_ number: Int32, _ folder: String, _ call: DBusMethodCall) -> Bool {
        guard isAcceptedName(folder), let opened = session(number, call) else { return false }
        return folderExists(folder, in: opened.held)
    }

    /// Whether `held` has `folder`: an empty one made by `createFolder`, or an item with that `server` (from
    /// the keyed index, as `folderDoesNotExist` answers; the first found will do).
    private func folderExists(_ folder: String, in held: HeldKeychain) -> Bool {
        if sessions.emptyFolders[held.id]?.contains(folder) == true { return true }
        return (try? held.hasKWalletFolder(folder)) ?? false
    }

    /// The entries of `folder` through the caller's handle.
    func entries(_ number: Int32, _ folder: String, _ call: DBusMethodCall) -> (
        opened: Opened, entries: [KWalletEntry]
    )? {
        guard isAcceptedName(folder), let opened = session(number, call),
            let entries = try? opened.held.kwalletEntries(folder: folder)
        else { return nil }
        return (opened, entries)
    }

    /// The entry `key` of `folder` through the caller's handle.
    func entry(_ number: Int32, _ folder: String, _ key: String, _ call: DBusMethodCall) -> (
        opened: Opened, entry: KWalletEntry
    )? {
        guard isAcceptedName(folder), isAcceptedName(key), let opened = session(number, call),
            let found = try? opened.held.kwalletEntry(folder: folder, key: key)
        else { return nil }
        return (opened, found)
    }

    /// The value of `entry` as `kind` gives it on the wire; nil when it is none of that kind or unreadable.
    /// An entry with a password of its own gives the secret opened for this reply
    /// (``SecretServiceDaemon/servedSecret(of:in:stored:)``), never its envelope.
    private func wireValue(_ entry: KWalletEntry, in held: HeldKeychain, _ kind: ReadKind) -> DBusValue? {
        guard kind.takes(entry.form), !held.isLocked, let found = try? held.itemWithSecret(entry.reference),
            let secret = try? daemon.servedSecret(of: found.item, in: held, stored: found.secret)
        else { return nil }
        switch kind {
        case .password:
            // The protocol carries a password as `s`: the only place it becomes a String.
            return secret.withUnsafeBytes { .string(String(decoding: $0, as: UTF8.self)) }
        case .entry, .map:
            guard var wire = try? KWalletScheme.wireValue(stored: secret.bytes, form: entry.form) else { return nil }
            defer { wire.truncate(to: 0) }
            return wire.withUnsafeBytes { .bytes([UInt8]($0)) }
        }
    }

    /// `readEntry`, `readMap`, `readPassword`: the value once the rules allow the caller to read it (a
    /// prompt while they ask), else the empty value.
    func readOne(
        _ number: Int32, _ folder: String, _ key: String, _ kind: ReadKind, call: DBusMethodCall
    ) -> DBusMethodResult {
        guard let (opened, entry) = entry(number, folder, key, call), kind.takes(entry.form) else {
            return .reply([kind.emptyValue])
        }
        let target = entry.target(in: opened.held)
        let served = try? daemon.servingSecrets(of: [target], to: call) { allowed, _ in
            guard allowed.first == true else { return .success([kind.emptyValue]) }
            return .success([wireValue(entry, in: opened.held, kind) ?? kind.emptyValue])
        }
        return served ?? .reply([kind.emptyValue])
    }

    /// `entriesList`, `passwordList`, `mapList` and the `read*List` forms with a key pattern: key → value of
    /// each entry of that kind the caller may read (one prompt per entry it may not; denied ones left out).
    func readMany(
        _ number: Int32, _ folder: String, pattern: String?, _ kind: ReadKind, call: DBusMethodCall
    ) -> DBusMethodResult {
        let empty = DBusValue.variantDictionary([:])
        guard isAcceptedName(pattern ?? ""), let (opened, all) = entries(number, folder, call) else {
            return .reply([empty])
        }
        var matcher = pattern.map(KWalletPattern.init)
        let chosen = all.filter { kind.takes($0.form) && (matcher?.matches($0.key) ?? true) }
        let targets = chosen.map { $0.target(in: opened.held) }
        let served = try? daemon.servingSecrets(of: targets, to: call) { allowed, _ in
            var values: [String: DBusValue] = [:]
            for (index, entry) in chosen.enumerated() where allowed[index] {
                if let value = wireValue(entry, in: opened.held, kind) { values[entry.key] = value }
            }
            return .success([.variantDictionary(values)])
        }
        return served ?? .reply([empty])
    }

    /// `createFolder`: an empty folder (in memory), `folderListUpdated`, and `true`; `false` when it exists
    /// already (as kwalletd5 answers), or when the collection holds
    /// ``KWalletSessions/emptyFoldersPerCollection`` empty folders.
    func createFolder(_ number: Int32, _ folder: String, _ call: DBusMethodCall) -> Bool {
        guard isAcceptedName(folder), let opened = session(number, call) else { return false }
        // kwalletd5 sends folderListUpdated also for a folder that was there (and answers false).
        defer { broadcast(Self.folderListUpdated, opened.handle.wallet) }
        guard !folderExists(folder, in: opened.held),
            sessions.emptyFolders[opened.held.id, default: []].count < KWalletSessions.emptyFoldersPerCollection
        else { return false }
        sessions.emptyFolders[opened.held.id, default: []].insert(folder)
        return true
    }

    /// `removeFolder`: every entry of the folder deleted, once the caller may (as `Item.Delete`), and the
    /// empty folder; `false` for a bad handle, a folder that does not exist (as kwalletd5) or a refusal.
    func removeFolder(_ number: Int32, _ folder: String, call: DBusMethodCall) -> DBusMethodResult {
        guard isAcceptedName(folder), let opened = session(number, call), folderExists(folder, in: opened.held),
            let references = try? opened.held.kwalletItems(folder: folder)
        else { return .reply([.bool(false)]) }
        let held = opened.held
        let targets = references.map { SecretServiceDaemon.SecretTarget(held: held, reference: $0) }
        let served = try? daemon.servingChange(.delete, of: targets, to: call) { [self] outcome in
            guard case .allowed = outcome, !held.isLocked else { return .success([.bool(false)]) }
            for reference in references {
                guard (try? held.delete(reference)) != nil else { continue }
                daemon.releaseApplicationUsage(in: held, [reference])
                daemon.announceItems(held, CollectionObject.itemDeleted, reference)
            }
            sessions.emptyFolders[held.id]?.remove(folder)
            broadcast(Self.folderListUpdated, opened.handle.wallet)
            return .success([.bool(true)])
        }
        return served ?? .reply([.bool(false)])
    }

    /// `writePassword`: the text kept as its UTF-8.
    func writePassword(
        _ number: Int32, _ folder: String, _ key: String, _ value: String, call: DBusMethodCall
    ) -> DBusMethodResult {
        let secret: SharedSecret
        do {
            secret = try SharedSecret(copying: value.utf8)
        } catch {
            return .reply([.int32(-1)])
        }
        return store(number, folder, key, secret, form: .plaintext, call: call)
    }

    /// `writeEntry`, `writeMap`: `wire` kept in the form of `type` (a password must be one `QString`, a map
    /// one `QMap<QString,QString>`; else `-1`, nothing written).
    func write(
        _ number: Int32, _ folder: String, _ key: String, wire: [UInt8], type: KWalletEntryType?,
        call: DBusMethodCall
    ) -> DBusMethodResult {
        defer { wipeSharedStorage(of: wire) }
        guard let type, wire.count <= daemon.limits.secretBytes else { return .reply([.int32(-1)]) }
        let secret: SharedSecret
        do {
            secret = try wire.withUnsafeBytes { SharedSecret(try KWalletScheme.storedValue(wire: $0, type: type)) }
        } catch {
            return .reply([.int32(-1)])
        }
        return store(number, folder, key, secret, form: KWalletStoredForm(writing: type), call: call)
    }

    /// Writes `secret` as the entry `key` of `folder`: replaces the newest item with that folder and key
    /// (whatever its type; a change the caller must be allowed, as `Item.SetSecret`), else makes one that
    /// trusts the caller's application. `0`, or `-1` for a bad handle, a name or value past the bounds, a
    /// quota, or a refusal.
    private func store(
        _ number: Int32, _ folder: String, _ key: String, _ secret: SharedSecret, form: KWalletStoredForm,
        call: DBusMethodCall
    ) -> DBusMethodResult {
        let failed = DBusMethodResult.reply([.int32(-1)])
        let label = entryLabel(folder: folder, key: key)
        guard isAcceptedName(folder), isAcceptedName(key), let opened = session(number, call),
            secret.count <= daemon.limits.secretBytes,
            (try? daemon.limits.check(attributes: [
                KWalletScheme.folderAttribute: folder, KWalletScheme.keyAttribute: key,
            ]))
                != nil
        else { return failed }
        let held = opened.held
        let existing: KWalletEntry?
        let other: ItemReference?
        do {
            existing = try held.kwalletEntry(folder: folder, key: key)
            other = existing == nil ? try held.kwalletItems(folder: folder, key: key).first : nil
        } catch {
            return failed
        }
        let wasFolder = folderExists(folder, in: held)
        let write = { [self] () -> Result<[DBusValue], DBusError> in
            guard !held.isLocked else { return .success([.int32(-1)]) }
            var attributes = existing?.attributes ?? [:]
            attributes[KWalletScheme.folderAttribute] = folder
            attributes[KWalletScheme.keyAttribute] = key
            attributes[KWalletScheme.typeAttribute] = form.rawValue
            let replacing = existing?.reference ?? other
            let bytes = secret.count + label.utf8.count + folder.utf8.count + key.utf8.count
            do throws(DBusError) {
                try held.checkQuota(
                    daemon.limits, secretBytes: secret.count, label: label, attributes: attributes,
                    isNew: replacing == nil)
                try daemon.checkApplicationQuota(of: call.sender, storing: bytes, in: held, replacing: replacing)
            } catch {
                return .success([.int32(-1)])
            }
            let made: (reference: ItemReference, replaced: Bool)
            do throws(KeychainError) {
                made = try secret.withUnownedData { (data) throws(KeychainError) in
                    try held.createItem(
                        label: label, attributes: attributes, secret: data, contentType: "text/plain",
                        replacing: replacing, creator: daemon.application(of: call.sender))
                }
            } catch {
                return .success([.int32(-1)])
            }
            daemon.recordApplicationUsage(of: call.sender, storing: bytes, in: held, at: made.reference)
            daemon.announceItems(
                held, made.replaced ? CollectionObject.itemChanged : CollectionObject.itemCreated, made.reference)
            // folderUpdated comes from announceItems, as for a change through the Secret Service.
            if !wasFolder { broadcast(Self.folderListUpdated, opened.handle.wallet) }
            return .success([.int32(0)])
        }
        guard let replacing = existing?.reference ?? other else {
            if case .success(let values) = write() { return .reply(values) }
            return failed
        }
        let target = SecretServiceDaemon.SecretTarget(held: held, reference: replacing)
        let served = try? daemon.servingChange(.change, of: [target], to: call) { outcome in
            guard case .allowed = outcome else { return .success([.int32(-1)]) }
            return write()
        }
        return served ?? failed
    }

    /// `renameEntry`: `0` once the caller may change the item, `-1` when there is no such entry, the new
    /// key is taken, or the change is refused.
    func rename(
        _ number: Int32, _ folder: String, _ oldName: String, to newName: String, call: DBusMethodCall
    ) -> DBusMethodResult {
        let failed = DBusMethodResult.reply([.int32(-1)])
        guard isAcceptedName(newName), let (opened, found) = entry(number, folder, oldName, call),
            (try? opened.held.kwalletItems(folder: folder, key: newName))?.isEmpty == true
        else { return failed }
        let held = opened.held
        let target = found.target(in: held)
        let served = try? daemon.servingChange(.change, of: [target], to: call) { [self] outcome in
            guard case .allowed = outcome, !held.isLocked else { return .success([.int32(-1)]) }
            var attributes = found.attributes
            attributes[KWalletScheme.keyAttribute] = newName
            do throws(KeychainError) {
                try held.update(
                    found.reference, label: entryLabel(folder: folder, key: newName), attributes: attributes)
            } catch {
                return .success([.int32(-1)])
            }
            daemon.announceItems(held, CollectionObject.itemChanged, found.reference)
            return .success([.int32(0)])
        }
        return served ?? failed
    }

    /// `removeEntry`: every item with that folder and key deleted once the caller may (as `Item.Delete`):
    /// `0` (also when the folder does not exist), `-3` when refused or when the folder has no such key (as
    /// kwalletd5 answers), `-1` for a bad handle.
    func removeEntry(_ number: Int32, _ folder: String, _ key: String, call: DBusMethodCall) -> DBusMethodResult {
        guard isAcceptedName(folder), isAcceptedName(key), let opened = session(number, call),
            let references = try? opened.held.kwalletItems(folder: folder, key: key)
        else { return .reply([.int32(-1)]) }
        guard !references.isEmpty else { return .reply([.int32(folderExists(folder, in: opened.held) ? -3 : 0)]) }
        let held = opened.held
        let targets = references.map { SecretServiceDaemon.SecretTarget(held: held, reference: $0) }
        let served = try? daemon.servingChange(.delete, of: targets, to: call) { [self] outcome in
            guard case .allowed = outcome, !held.isLocked else { return .success([.int32(-3)]) }
            for reference in references {
                guard (try? held.delete(reference)) != nil else { return .success([.int32(-3)]) }
                daemon.releaseApplicationUsage(in: held, [reference])
                daemon.announceItems(held, CollectionObject.itemDeleted, reference)
            }
            broadcast(Self.folderUpdated, opened.handle.wallet, folder)
            return .success([.int32(0)])
        }
        return served ?? .reply([.int32(-3)])
    }

    /// Sends `signal` to every client, from both paths.
    func broadcast<each Argument: DBusType>(
        _ signal: DBusSignal<repeat each Argument>, _ arguments: repeat each Argument
    ) {
        for path in Self.paths { daemon.emit(signal, at: path, repeat each arguments) }
    }
}

extension SecretServiceDaemon {
    /// Queues `signal` from `path` for `destination` only (a unicast signal: a handle's owner).
    func emit<each Argument: DBusType>(
        _ signal: DBusSignal<repeat each Argument>, at path: String, to destination: String,
        _ arguments: repeat each Argument
    ) {
        guard let message = try? signal.message(path: path, repeat each arguments) else { return }
        message.destination = destination
        outbox.append(message)
    }

    /// The KWallet face's part of a registry change: a keychain that locked ends its handles (their owners
    /// told), `walletClosed(wallet)` to all, and `allWalletsClosed` when no handle is left; one that unlocked
    /// is `walletOpened`; a made or deleted one, `walletCreated`/`walletDeleted` and `walletListDirty`.
    func announceToKWallet(_ event: RegistryEvent) {
        let face = KWalletObject(daemon: self, path: KWalletObject.paths[0])
        switch event {
        case .lockChanged(let held) where held.id != KeychainRegistry.sessionID:
            let wallet = face.walletName(of: held)
            guard held.isLocked else { return face.broadcast(KWalletObject.walletOpened, wallet) }
            let hadHandles = !kwallet.handles.isEmpty
            face.endHandles(kwallet.end { $0.collection === held })
            face.broadcast(KWalletObject.walletClosed, wallet)
            if hadHandles, kwallet.handles.isEmpty { face.broadcast(KWalletObject.allWalletsClosed) }
        case .created(let held):
            face.broadcast(KWalletObject.walletCreated, face.walletName(of: held))
            face.broadcast(KWalletObject.walletListDirty)
        case .deleted(let held):
            face.endHandles(kwallet.end { $0.collection === held })
            kwallet.emptyFolders[held.id] = nil
            face.broadcast(KWalletObject.walletDeleted, held.label)
            face.broadcast(KWalletObject.walletListDirty)
        default:
            break
        }
    }

    /// `folderUpdated(wallet, folder)` to all for an item made or changed through either face that is a
    /// KWallet entry, while some client holds a handle on its collection (only they listen; reading the
    /// item's attributes costs a query).
    func announceItemToKWallet(_ held: HeldKeychain, _ reference: ItemReference) {
        announceKWalletFolder(kwalletFolder(of: reference, in: held), in: held)
    }

    /// The folder of the KWallet entry `reference` is (an item with `server` and `user`), read while some
    /// client holds a handle on `held` and it is unlocked; nil otherwise. Read before a deletion, so that the
    /// folder can be announced after it.
    func kwalletFolder(of reference: ItemReference, in held: HeldKeychain) -> String? {
        guard kwallet.handles.values.contains(where: { $0.collection === held }), !held.isLocked,
            let stored = (try? held.item(reference, returning: .attributes))?.attributes
        else { return nil }
        let attributes = AttributeMapping.secretServiceAttributes(stored, of: reference.itemClass)
        guard let folder = attributes[KWalletScheme.folderAttribute], attributes[KWalletScheme.keyAttribute] != nil
        else { return nil }
        return folder
    }

    /// `folderUpdated(wallet, folder)` to all when `folder` is not nil (``kwalletFolder(of:in:)``).
    func announceKWalletFolder(_ folder: String?, in held: HeldKeychain) {
        guard let folder else { return }
        let face = KWalletObject(daemon: self, path: KWalletObject.paths[0])
        face.broadcast(KWalletObject.folderUpdated, face.walletName(of: held), folder)
    }

    /// Forgets a client that left: its handles and the prompts its opens wait for.
    func forgetKWalletClient(_ name: String) {
        let (_, tickets) = kwallet.forget(name)
        for ticket in tickets { registry.withdraw(ticket) }
    }
}
