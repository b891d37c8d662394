import FoundationEssentials
import KeychainCore
import Posix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One keychain file: an SQLite database whose items are sealed with a
/// random keychain key, itself wrapped under a key derived from the
/// keychain password.
///
/// Opening a keychain needs no password: it starts locked. While locked,
/// searches still find which items match (through the keyed attribute
/// index) and return their references, but reading attributes or secrets,
/// and every change, fails with `errSecInteractionNotAllowed`.
///
/// A `Keychain` may be used from any thread; calls are serialised.
public final class Keychain: Sendable {
    /// Where the file is.
    public let path: String
    /// The keychain's random 16-byte identity (bound into every sealed value).
    public let identifier: Data

    private let state: Mutex<State>

    fileprivate struct State {
        let db: SQLiteDatabase
        var header: KeychainHeader
        let indexer: AttributeIndexer
        var key: SecretKey?
        /// The file's format (`FileSchema`): a format-1 file is brought to the current one at its first unlock.
        var formatVersion: Int64
        /// Whether a delete leaves its checkpoint to the holder (see ``Keychain/deferCheckpoints()``).
        var defersCheckpoints = false
        /// Whether a delete happened since the holder last asked (``Keychain/takeCheckpointRequest()``).
        var checkpointWanted = false
        /// What ``Keychain/usage()`` last counted, with the file's `data_version` then (another connection's
        /// commit changes it); kept up by adds, forgotten by changes and deletes.
        var usage: (items: Int, bytes: Int, dataVersion: Int64)?
    }

    private init(path: String, db: sending SQLiteDatabase, header: KeychainHeader, key: SecretKey?)
        throws(KeychainError)
    {
        guard let indexKey = try SecretKey(copying: header.indexKey) else {
            throw KeychainError(.invalidKeychain, "index key has the wrong length")
        }
        let formatVersion = try FileSchema.userVersion(db)
        self.path = path
        self.identifier = header.identifier
        self.state = Mutex(
            State(
                db: db, header: header, indexer: try AttributeIndexer(key: indexKey), key: key,
                formatVersion: formatVersion))
        if key != nil {
            let identifier = header.identifier
            try state.withLock { (state) throws(KeychainError) in try state.upgradeToCurrent(identifier: identifier) }
        }
    }

    /// Creates a new keychain file at `path` (mode 0600; missing parent
    /// directories are made with mode 0700) and returns it unlocked.
    ///
    /// - Parameter kdf: the cost of turning `password` into a key. Keep the
    ///   default outside tests.
    /// - Throws: `errSecDuplicateKeychain` if the file exists.
    public static func create(
        at path: String, password: some Collection<UInt8>, kdf: KDFParameters = .production
    ) throws(KeychainError) -> Keychain {
        try create(at: path) { (key) throws(KeychainError) in
            try KeychainHeader.create(keychainKey: key, password: password, kdf: kdf)
        }
    }

    /// Creates the file, its schema and a new keychain key, with the header `makeHeader` builds.
    ///
    /// The file is built complete (schema, header, current format, write-ahead log copied into it) under a
    /// private name beside `path` and then linked at `path` in one step, so that no other process (the daemon,
    /// the command, pam_latchkey, a user's tool) ever finds an empty or half-made keychain there, nor writes into
    /// one (docs/robustness.md, "A keychain file appears complete").
    private static func create(
        at path: String, header makeHeader: (SecretKey) throws(KeychainError) -> KeychainHeader
    ) throws(KeychainError) -> Keychain {
        try createParentDirectory(of: path)
        // Before the slow part (the key derivation): a file there already is the usual duplicate.
        guard access(path, F_OK) != 0 else { throw duplicateKeychain(path, EEXIST) }
        let staging = try createStagingFile(beside: path)
        defer { removeFiles(at: staging) }
        let key = try SecretKey.random()
        let header: KeychainHeader
        do {
            let db = try SQLiteDatabase(path: staging, create: false)
            try configure(db)
            try FileSchema.migrate(db)
            header = try makeHeader(key)
            try db.transaction { () throws(KeychainError) in try header.save(to: db) }
            // Brought to the current format while the file is still private (`upgradeToCurrent`), then the
            // log copied into the file: the staging connection is the only one, so its close removes the log.
            let staged = try Keychain(path: staging, db: db, header: header, key: key)
            try staged.state.withLock { (state) throws(KeychainError) in
                guard try state.db.checkpoint(waitMilliseconds: 0) else {
                    throw KeychainError(.io, "cannot complete the new keychain \(staging): its log was not emptied")
                }
            }
        }
        var size = stat()
        guard stat(staging + "-wal", &size) != 0 || size.st_size == 0 else {
            throw KeychainError(.io, "cannot complete the new keychain \(staging): its log was not emptied")
        }
        try linkNew(staging, at: path)
        do {
            let db = try SQLiteDatabase(path: path, create: false)
            try configure(db)
            return try Keychain(path: path, db: db, header: header, key: key)
        } catch {
            removeFiles(at: path)
            throw error
        }
    }

    /// Creates a keychain file at `path` whose key is wrapped by the key of
    /// `parent` (which must be unlocked), and returns it unlocked. It has no
    /// password: ``unlock(using:)`` opens it while `parent` is unlocked.
    public static func create(at path: String, protectedBy parent: Keychain) throws(KeychainError) -> Keychain {
        let parentKey = try parent.state.withLock { (state) throws(KeychainError) in try state.unlockedKey() }
        return try create(at: path) { (key) throws(KeychainError) in
            try KeychainHeader.create(keychainKey: key, parentKey: parentKey, parentIdentifier: parent.identifier)
        }
    }

    /// Creates a keychain that lives in memory only, unlocked, gone when
    /// released. `password` unlocks it after a lock; being meant for a random
    /// key held by the caller, not a human password, it goes through minimal
    /// KDF parameters.
    public static func createInMemory(password: some Collection<UInt8>) throws(KeychainError) -> Keychain {
        let db = try SQLiteDatabase(path: ":memory:", create: true)
        try FileSchema.migrate(db)
        let key = try SecretKey.random()
        let header = try KeychainHeader.create(keychainKey: key, password: password, kdf: .insecureForTesting)
        try db.transaction { () throws(KeychainError) in try header.save(to: db) }
        return try Keychain(path: ":memory:", db: db, header: header, key: key)
    }

    /// Creates a keychain whose password is the UTF-8 bytes of `password`.
    public static func create(
        at path: String, password: String, kdf: KDFParameters = .production
    ) throws(KeychainError) -> Keychain {
        try create(at: path, password: Array(password.utf8), kdf: kdf)
    }

    /// Opens an existing keychain file, locked.
    ///
    /// - Throws: `errSecNoSuchKeychain` if there is no file, `errSecInvalidKeychain`
    ///   if it is not a keychain.
    public convenience init(opening path: String) throws(KeychainError) {
        guard access(path, F_OK) == 0 else {
            throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
        }
        let db = try SQLiteDatabase(path: path, create: false)
        // A file without a schema is not a keychain (an empty file someone made, or one an older build was still
        // creating): refused before anything is written in it (setting WAL mode writes its first page).
        let version: Int64
        do {
            version = try FileSchema.userVersion(db)
        } catch  where error.status == .io {
            throw KeychainError(.invalidKeychain, "\(path) is not a keychain: \(error.reason)")
        }
        guard version >= FileSchema.unkeyedVersion else {
            throw KeychainError(.invalidKeychain, "\(path) is not a keychain: it has no keychain schema")
        }
        do {
            try Self.configure(db)
            try FileSchema.migrate(db)
        } catch  where error.status == .io {
            throw KeychainError(.invalidKeychain, "\(path) is not a keychain: \(error.reason)")
        }
        try self.init(path: path, db: db, header: try KeychainHeader.load(from: db), key: nil)
    }

    // MARK: Lock state

    /// Whether the keychain key is out of memory.
    public var isLocked: Bool { state.withLock { $0.key == nil } }

    /// The KDF cost stored in the file; nil for a keychain wrapped by a parent keychain.
    public var kdfParameters: KDFParameters? { state.withLock { $0.header.kdf } }

    /// The identity of the keychain whose key wraps this one's, if any.
    public var parentIdentifier: Data? {
        state.withLock {
            if case .parent(let identifier) = $0.header.wrapping { return identifier }
            return nil
        }
    }

    /// Unlocks with the keychain password (its bytes).
    ///
    /// - Throws: `errSecAuthFailed` if the password is wrong; the keychain stays locked.
    public func unlock(password: some Collection<UInt8>) throws(KeychainError) {
        unlock(with: try unwrapKey(password: password))
    }

    /// Derives the keychain key from `password` without unlocking: the slow half of an unlock (scrypt),
    /// which a daemon runs off its serving thread before applying the result with ``unlock(with:)``.
    ///
    /// `limited` false: not refused for earlier wrong passwords (a password a login verified); `counted` false:
    /// neither refused for the count nor counted in it, nor clearing it (what the person types into the daemon's
    /// own prompt: the count is the programs' one, see `PasswordAttempts`).
    ///
    /// - Throws: `errSecAuthFailed` if the password is wrong.
    public func unwrapKey(password: some Collection<UInt8>, limited: Bool = true, counted: Bool = true)
        throws(KeychainError) -> UnwrappedKeychainKey
    {
        let header = try currentHeader()
        let key = try countingAttempt(limited: limited, counted: counted) { () throws(KeychainError) in
            try header.unwrap(password: password)
        }
        return UnwrappedKeychainKey(key: key, keychain: identifier)
    }

    /// The header as the file holds it now, read again: another process (pam_latchkey re-keying the file
    /// while no daemon ran, the command) may have changed the password since this keychain was opened.
    func currentHeader() throws(KeychainError) -> KeychainHeader {
        guard path != ":memory:" else { return state.withLock { $0.header } }
        return try state.withLock { (state) throws(KeychainError) in
            let stored = try KeychainHeader.load(from: state.db)
            guard stored.identifier == state.header.identifier else {
                throw KeychainError(.invalidKeychain, "\(path) was replaced by another keychain")
            }
            state.header = stored
            return stored
        }
    }

    /// Seconds before a password may be tried again after too many wrong ones, 0 when it may be now.
    public func passwordRetryWait() -> Int64 {
        (try? storedAttempts().secondsToWait()) ?? 0
    }

    /// Tries a password with `attempt` under the wrong-password count kept in the file (see
    /// `PasswordAttempts`): refused without trying while too many wrong ones came lately (unless
    /// `limited` is false: a password a login verified), counted when wrong, resetting the count when right;
    /// outside the count altogether when `counted` is false (the person, in the daemon's own prompt).
    private func countingAttempt<Result>(
        limited: Bool, counted: Bool = true, _ attempt: () throws(KeychainError) -> Result
    ) throws(KeychainError) -> Result {
        guard counted else { return try attempt() }
        let attempts = (try? storedAttempts()) ?? PasswordAttempts()
        let wait = attempts.secondsToWait()
        if limited, wait > 0 { throw .tooManyAttempts(waitSeconds: wait) }
        do {
            let result = try attempt()
            if attempts.failures > 0 { try? storeAttempts(PasswordAttempts()) }
            return result
        } catch  where error.status == .authFailed {
            var counted = attempts
            counted.failures = counted.failures == .max ? .max : counted.failures + 1
            counted.lastFailure = Int64(time(nil))
            try? storeAttempts(counted)
            throw error
        }
    }

    private func storedAttempts() throws(KeychainError) -> PasswordAttempts {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement("SELECT value FROM meta WHERE name = ?1") { (select) throws(KeychainError) in
                select.bind(1, PasswordAttempts.rowName)
                return try select.step() ? PasswordAttempts(stored: select.data(0) ?? Data()) : PasswordAttempts()
            }
        }
    }

    private func storeAttempts(_ attempts: PasswordAttempts) throws(KeychainError) {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement("INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)") {
                (insert) throws(KeychainError) in
                insert.bind(1, PasswordAttempts.rowName)
                insert.bind(2, attempts.encoded)
                try insert.run()
            }
        }
    }

    /// Unlocks with a key ``unwrapKey(password:)`` derived from this keychain's password.
    public func unlock(with unwrapped: UnwrappedKeychainKey) {
        guard unwrapped.keychain == identifier else { return }
        let identifier = identifier
        state.withLock { (state) in
            state.key = unwrapped.key
            // When this fails (a read-only file), every use of the key says so (see `unlockedKey`).
            try? state.upgradeToCurrent(identifier: identifier)
        }
    }

    /// Unlocks with the UTF-8 bytes of `password`.
    public func unlock(password: String) throws(KeychainError) {
        try unlock(password: Array(password.utf8))
    }

    /// Unlocks a keychain whose key is wrapped by `parent`'s, which must be unlocked.
    ///
    /// - Throws: `errSecInteractionNotAllowed` if `parent` is locked,
    ///   `errSecAuthFailed` if this keychain is not wrapped by `parent`.
    public func unlock(using parent: Keychain) throws(KeychainError) {
        guard parentIdentifier == parent.identifier else {
            throw KeychainError(.authFailed, "this keychain is not wrapped by the keychain given")
        }
        let parentKey = try parent.state.withLock { (state) throws(KeychainError) in try state.unlockedKey() }
        let header = state.withLock { $0.header }
        let key = try header.unwrap(with: parentKey)
        let identifier = identifier
        state.withLock { (state) in
            state.key = key
            // When this fails (a read-only file), every use of the key says so (see `unlockedKey`).
            try? state.upgradeToCurrent(identifier: identifier)
        }
    }

    /// Forgets the keychain key; the key's memory is wiped.
    public func lock() {
        state.withLock { $0.key = nil }
    }

    /// Re-wraps the keychain key under `newPassword`. Items are not
    /// re-encrypted, so this takes the same time for any number of items.
    /// Works whether the keychain is locked or not, and leaves the lock state as it was.
    ///
    /// - Throws: `errSecAuthFailed` if `oldPassword` is wrong; nothing changes.
    public func changePassword(
        from oldPassword: some Collection<UInt8>, to newPassword: some Collection<UInt8>,
        kdf: KDFParameters? = nil, limited: Bool = true
    ) throws(KeychainError) {
        let change = try rewrap(from: oldPassword, to: newPassword, kdf: kdf, limited: limited)
        try commit(change)
        try waitForEmptyLog(milliseconds: 30_000)
    }

    /// Checkpoints the file until its write-ahead log is copied into it and emptied (so that no earlier
    /// version of a changed row, such as the key wrapped under an old password, is left in the log or in the
    /// file), retrying while another connection reads an older snapshot, for at most `milliseconds`.
    ///
    /// - Throws: `errSecIO` when a reader still holds an older snapshot after that: the change is saved,
    ///   but the old rows are on disk until that reader lets go and a later checkpoint completes.
    public func waitForEmptyLog(milliseconds: Int) throws(KeychainError) {
        guard path != ":memory:" else { return }
        let step: Int32 = 250
        for _ in 0..<max(1, (milliseconds + Int(step) - 1) / Int(step)) {
            if Self.checkpoint(at: path, waitMilliseconds: min(step, Int32(clamping: milliseconds))) { return }
        }
        throw KeychainError(
            .io,
            "the change is saved, but another process has held an older snapshot of \(path) for \(milliseconds) ms,"
                + " so its earlier rows are still on disk until that process lets go")
    }

    /// Wraps the keychain key under `newPassword` without saving it: the slow half of a password change
    /// (two scrypt runs), which a daemon runs off its serving thread before ``commit(_:)``. `limited` and
    /// `counted` as for ``unwrapKey(password:limited:counted:)``.
    ///
    /// - Throws: `errSecAuthFailed` if `oldPassword` is wrong.
    public func rewrap(
        from oldPassword: some Collection<UInt8>, to newPassword: some Collection<UInt8>, kdf: KDFParameters? = nil,
        limited: Bool = true, counted: Bool = true
    ) throws(KeychainError) -> PasswordChange {
        let current = try currentHeader()
        var header = current
        let key = try countingAttempt(limited: limited, counted: counted) { () throws(KeychainError) in
            try header.unwrap(password: oldPassword)
        }
        try header.wrap(key, password: newPassword, kdf: kdf ?? header.kdf?.raisedToProduction ?? .production)
        return PasswordChange(header: header, replacing: current.wrappedKey)
    }

    /// Derives this keychain's key from the key of the keychain whose key wraps it (``parentIdentifier``),
    /// without unlocking: how a keychain wrapped by the login keychain's key is opened by the login password.
    ///
    /// - Throws: `errSecAuthFailed` if `parentKey` is not the key of this keychain's parent.
    public func unwrapKey(using parentKey: UnwrappedKeychainKey) throws(KeychainError) -> UnwrappedKeychainKey {
        guard let parent = parentIdentifier, parent == parentKey.keychain else {
            throw KeychainError(.authFailed, "this keychain is not wrapped by the keychain given")
        }
        let header = try currentHeader()
        return UnwrappedKeychainKey(key: try header.unwrap(with: parentKey.key), keychain: identifier)
    }

    /// Wraps this keychain's key (derived by ``unwrapKey(password:limited:counted:)`` or ``unwrapKey(using:)``) under
    /// `newPassword`, without saving it: a keychain wrapped by a parent's key gets a password of its own, one
    /// with a password gets a new one. Slow (scrypt); save it with ``commit(_:)``.
    ///
    /// - Throws: `errSecAuthFailed` if `key` is not this keychain's key.
    public func rewrap(
        _ key: UnwrappedKeychainKey, to newPassword: some Collection<UInt8>, kdf: KDFParameters? = nil
    ) throws(KeychainError) -> PasswordChange {
        guard key.keychain == identifier else {
            throw KeychainError(.authFailed, "the key given is not this keychain's")
        }
        let current = try currentHeader()
        var header = current
        try header.wrap(key.key, password: newPassword, kdf: kdf ?? header.kdf?.raisedToProduction ?? .production)
        return PasswordChange(header: header, replacing: current.wrappedKey)
    }

    /// Saves a password change made by ``rewrap(from:to:kdf:)`` (one short transaction). The old wrapped
    /// key may remain in the write-ahead log until ``checkpoint(at:waitMilliseconds:)`` completes.
    ///
    /// - Throws: `errSecAuthFailed` if the password changed meanwhile; nothing changes.
    public func commit(_ change: PasswordChange) throws(KeychainError) {
        try state.withLock { (state) throws(KeychainError) in
            // Compared with the file, not with what this process last read: another process may have changed it.
            let stored = path == ":memory:" ? state.header : try KeychainHeader.load(from: state.db)
            guard stored.wrappedKey == change.replacing, stored.identifier == change.header.identifier
            else { throw KeychainError(.authFailed, "the keychain's password changed meanwhile; nothing changed") }
            let db = state.db
            try db.transaction { () throws(KeychainError) in try change.header.save(to: db) }
            state.header = change.header
        }
    }

    /// Copies the write-ahead log of the keychain file at `path` into the file and empties it, through a
    /// connection of its own, so that no earlier version of a changed row stays in the log. It waits at
    /// most `waitMilliseconds` for readers of older snapshots; false when it could not complete (retry later).
    public static func checkpoint(at path: String, waitMilliseconds: Int32) -> Bool {
        guard path != ":memory:", let db = try? SQLiteDatabase(path: path, create: false) else { return false }
        return (try? db.checkpoint(waitMilliseconds: waitMilliseconds)) ?? false
    }

    /// Changes the password given as UTF-8 text.
    public func changePassword(from oldPassword: String, to newPassword: String) throws(KeychainError) {
        try changePassword(from: Array(oldPassword.utf8), to: Array(newPassword.utf8))
    }

    // MARK: Items

    /// Adds an item and returns it with its reference, its attributes as stored
    /// (with the creation and modification dates the store set) and its secret.
    ///
    /// - Throws: `errSecDuplicateItem` if an item of the class has the same
    ///   primary key; `errSecNoSuchAttr`/`errSecParam` for attributes that do
    ///   not fit the class; `errSecInteractionNotAllowed` while locked.
    @discardableResult
    public func add(_ itemClass: ItemClass, attributes: ItemAttributes, secret: Data?)
        throws(KeychainError) -> KeychainItem
    {
        let added = try add([NewItem(itemClass, attributes: attributes, secret: secret)])
        guard let item = added.first else { throw KeychainError(.internalComponent, "an add returned no item") }
        return item
    }

    /// Adds several items, and sets metadata rows (see ``setMetadata(_:_:)``), in one transaction:
    /// either every item is added and every row set, or, when one fails, nothing changes. An item
    /// keeps the creation and modification dates it carries (an import keeps the dates the item had
    /// elsewhere); an item without them gets the time of the call, as ``add(_:attributes:secret:)``.
    ///
    /// - Throws: as ``add(_:attributes:secret:)``, for the first item that cannot be added (then none is).
    @discardableResult
    public func add(_ items: [NewItem], metadata: [String: Data] = [:]) throws(KeychainError) -> [KeychainItem] {
        for name in metadata.keys { try Self.checkMetadataName(name) }
        let now = Date()
        var prepared: [(reference: ItemReference, attributes: ItemAttributes, secret: Data?)] = []
        prepared.reserveCapacity(items.count)
        for item in items {
            var stored = item.attributes.filter { !$0.key.isSetByStore }
            try ItemSchema.of(item.itemClass).validate(stored)
            stored[.creationDate] = .date(item.creationDate ?? now)
            stored[.modificationDate] = .date(item.modificationDate ?? item.creationDate ?? now)
            if stored[.synchronizable] == nil { stored[.synchronizable] = .bool(false) }
            let reference = ItemReference(itemClass: item.itemClass, identifier: try SecureRandom.data(count: 16))
            prepared.append((reference, stored, item.secret))
        }
        try state.withLock { (state) throws(KeychainError) in
            let key = try state.unlockedKey()
            var sealed: [(attributes: Data, secret: Data?)] = []
            sealed.reserveCapacity(prepared.count)
            for item in prepared {
                let attributes = try AuthenticatedCipher.seal(
                    AttributeCodec.encode(item.attributes), key: key,
                    context: context(item.reference, .attributes, version: Self.firstItemVersion))
                let secret = try item.secret.map { (secret) throws(KeychainError) in
                    try AuthenticatedCipher.seal(
                        secret, key: key, context: context(item.reference, .secret, version: Self.firstItemVersion))
                }
                sealed.append((attributes, secret))
            }
            let db = state.db
            let indexer = state.indexer
            try db.transaction { () throws(KeychainError) in
                for (item, seal) in zip(prepared, sealed) {
                    let itemClass = item.reference.itemClass
                    try db.withStatement(
                        "INSERT INTO items (uuid, class, pk, attributes, secret, sync, version)"
                            + " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                    ) { (insert) throws(KeychainError) in
                        insert.bind(6, item.attributes.isSynchronizable ? 1 : 0)
                        insert.bind(7, Self.firstItemVersion)
                        insert.bind(1, item.reference.identifier)
                        insert.bind(2, itemClass.rawValue)
                        insert.bind(3, indexer.primaryKeyHash(itemClass, item.attributes))
                        insert.bind(4, seal.attributes)
                        insert.bind(5, seal.secret)
                        try insert.run()
                    }
                    try Self.insertTags(indexer.tags(itemClass, item.attributes), item: db.lastInsertRowID, db)
                }
                for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
                    try db.withStatement("INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)") {
                        (insert) throws(KeychainError) in
                        insert.bind(1, "x-" + name)
                        insert.bind(2, value)
                        try insert.run()
                    }
                }
            }
            if let usage = state.usage {
                let bytes = sealed.reduce(0) { $0 + $1.attributes.count + ($1.secret?.count ?? 0) }
                state.usage = (usage.items + prepared.count, usage.bytes + bytes, usage.dataVersion)
            }
        }
        return prepared.map { KeychainItem(reference: $0.reference, attributes: $0.attributes, secret: $0.secret) }
    }

    /// The items that match `query`, oldest first, up to its limit, with what
    /// it asks to return (the reference is always there).
    ///
    /// Returns an empty array when nothing matches. While locked, a query that
    /// asks only for references succeeds; one that asks for attributes or
    /// data fails with `errSecInteractionNotAllowed`.
    public func items(matching query: ItemQuery) throws(KeychainError) -> [KeychainItem] {
        try query.validate()
        return try state.withLock { (state) throws(KeychainError) in
            try state.find(query, in: self, limit: query.limit.maximum, returning: query.returning)
                .map { $0.item }
        }
    }

    /// The items that match `query`, as ``items(matching:)`` returns them but with each secret decrypted
    /// straight into secret memory (the items' own `secret` is nil) when the query asks for data.
    package func itemsWithSecrets(matching query: ItemQuery) throws(KeychainError) -> [(
        item: KeychainItem, secret: SharedSecret?
    )] {
        try query.validate()
        return try state.withLock { (state) throws(KeychainError) in
            try state.find(
                query, in: self, limit: query.limit.maximum, returning: query.returning, secretInSecretMemory: true
            ).map { ($0.item, $0.secretInSecretMemory) }
        }
    }

    /// The first item that matches `query`, with its attributes when it asks for them, and its secret
    /// decrypted straight into secret memory (``SharedSecret``; the returned item's `secret` is nil): for a
    /// holder that hands the secret on (the daemon's session cipher) and leaves no `Data` copy of it behind.
    /// Nil when nothing matches.
    package func itemWithSecret(matching query: ItemQuery) throws(KeychainError) -> (
        item: KeychainItem, secret: SharedSecret?
    )? {
        try query.validate()
        return try state.withLock { (state) throws(KeychainError) in
            var returning = query.returning
            returning.insert(.data)
            return try state.find(query, in: self, limit: 1, returning: returning, secretInSecretMemory: true)
                .first.map { ($0.item, $0.secretInSecretMemory) }
        }
    }

    /// Changes every item that matches `query` (its limit is ignored) and
    /// returns how many changed. The modification date is set to now.
    ///
    /// - Throws: `errSecItemNotFound` if nothing matches; `errSecDuplicateItem`
    ///   if a change would give two items the same primary key (then nothing
    ///   changes); `errSecInteractionNotAllowed` while locked.
    @discardableResult
    public func update(matching query: ItemQuery, with changes: ItemChanges) throws(KeychainError) -> Int {
        try query.validate()
        let newAttributes = changes.attributes.filter { !$0.key.isSetByStore }
        try ItemSchema.of(query.itemClass).validate(newAttributes)
        return try state.withLock { (state) throws(KeychainError) in
            let key = try state.unlockedKey()
            state.usage = nil
            // The secret is opened too (into secret memory): it is sealed again under the item's next version.
            let matches = try state.find(
                query, in: self, limit: nil, returning: [.attributes, .data], secretInSecretMemory: true)
            guard !matches.isEmpty else {
                throw KeychainError(.itemNotFound, "no item matches the update query")
            }
            let db = state.db
            let indexer = state.indexer
            let now = Date()
            try db.transaction { () throws(KeychainError) in
                for match in matches {
                    let reference = match.item.reference
                    var attributes = (match.item.attributes ?? [:]).filter {
                        !changes.removedAttributes.contains($0.key) || $0.key.isSetByStore
                    }
                    attributes.merge(newAttributes) { $1 }
                    attributes[.modificationDate] = .date(now)
                    // Every change seals under a new version, so an older sealed value put back is refused.
                    guard match.version < Int64.max else {
                        throw KeychainError(.internalComponent, "an item's version is exhausted")
                    }
                    let version = match.version + 1
                    let sealedAttributes = try AuthenticatedCipher.seal(
                        AttributeCodec.encode(attributes), key: key,
                        context: context(reference, .attributes, version: version))
                    let secretContext = context(reference, .secret, version: version)
                    let sealedSecret: Data?
                    if let secret = changes.secret {
                        sealedSecret = try AuthenticatedCipher.seal(secret, key: key, context: secretContext)
                    } else if let kept = match.secretInSecretMemory {
                        sealedSecret = try kept.withUnsafeBytes { (raw) throws(KeychainError) in
                            try AuthenticatedCipher.seal(unowned: raw, key: key, context: secretContext)
                        }
                    } else {
                        sealedSecret = nil
                    }
                    try db.withStatement(
                        "UPDATE items SET pk = ?2, attributes = ?3, secret = ?4, sync = ?5, version = ?6 WHERE id = ?1"
                    ) { (update) throws(KeychainError) in
                        update.bind(5, attributes.isSynchronizable ? 1 : 0)
                        update.bind(6, version)
                        update.bind(1, match.row)
                        update.bind(2, indexer.primaryKeyHash(reference.itemClass, attributes))
                        update.bind(3, sealedAttributes)
                        update.bind(4, sealedSecret)
                        try update.run()
                    }
                    try db.withStatement("DELETE FROM attribute_index WHERE item = ?1") {
                        (clear) throws(KeychainError) in
                        clear.bind(1, match.row)
                        try clear.run()
                    }
                    try Self.insertTags(indexer.tags(reference.itemClass, attributes), item: match.row, db)
                }
            }
            return matches.count
        }
    }

    /// Deletes every item that matches `query` (its limit is ignored) and returns how many. The deleted
    /// rows are zeroed in the file (`secure_delete`), and the write-ahead log, which holds earlier copies of
    /// their pages, is then emptied (waiting at most a second for readers of older snapshots; a daemon that
    /// called ``deferCheckpoints()`` does this on its worker, retried until it completes).
    ///
    /// - Throws: `errSecItemNotFound` if nothing matches; `errSecInteractionNotAllowed` while locked.
    @discardableResult
    public func delete(matching query: ItemQuery) throws(KeychainError) -> Int {
        try query.validate()
        let (count, deferred) = try state.withLock { (state) throws(KeychainError) -> (Int, Bool) in
            _ = try state.unlockedKey()
            state.usage = nil
            let matches = try state.find(query, in: self, limit: nil, returning: [])
            guard !matches.isEmpty else {
                throw KeychainError(.itemNotFound, "no item matches the delete query")
            }
            let db = state.db
            try db.transaction { () throws(KeychainError) in
                try db.withStatement("DELETE FROM items WHERE id = ?1") { (delete) throws(KeychainError) in
                    for match in matches {
                        delete.reset()
                        delete.bind(1, match.row)
                        try delete.run()
                    }
                }
            }
            // secure_delete zeroes the freed cells and pages, but earlier copies of those pages (with the
            // item's index tags and sealed values) stay in the write-ahead log until a checkpoint empties it.
            state.checkpointWanted = state.defersCheckpoints
            let deferred = state.defersCheckpoints
            return (matches.count, deferred)
        }
        if !deferred { _ = Self.checkpoint(at: path, waitMilliseconds: 1_000) }
        return count
    }

    /// Makes ``delete(matching:)`` leave the checkpoint that empties the write-ahead log to the caller, which
    /// runs it off its serving thread when ``takeCheckpointRequest()`` says one is due (a daemon).
    public func deferCheckpoints() {
        state.withLock { $0.defersCheckpoints = true }
    }

    /// Whether a delete happened since the last call, so a checkpoint is due (see ``deferCheckpoints()``).
    public func takeCheckpointRequest() -> Bool {
        state.withLock { (state) in
            defer { state.checkpointWanted = false }
            return state.checkpointWanted
        }
    }

    /// Runs `body` with the connection and, while unlocked, the keychain key, under the keychain's lock.
    func withDatabase<Result: Sendable>(_ body: (SQLiteDatabase, SecretKey?) throws(KeychainError) -> Result)
        throws(KeychainError) -> Result
    {
        try state.withLock { (state) throws(KeychainError) in
            try body(state.db, state.key == nil ? nil : try state.unlockedKey())
        }
    }

    /// A value stored beside the items, in clear (for things that are not
    /// secret, such as a collection's label).
    public func metadata(_ name: String) throws(KeychainError) -> Data? {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement("SELECT value FROM meta WHERE name = ?1") { (select) throws(KeychainError) in
                select.bind(1, "x-" + name)
                return try select.step() ? select.data(0) : nil
            }
        }
    }

    /// Stores a value beside the items, in clear; see ``metadata(_:)``.
    ///
    /// - Throws: `errSecParam` for `settings` and `access-policy`, which ``setSettings(_:)`` and
    ///   ``setAccessPolicy(_:)`` store with their MAC.
    public func setMetadata(_ name: String, _ value: Data) throws(KeychainError) {
        try Self.checkMetadataName(name)
        try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement("INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)") {
                (insert) throws(KeychainError) in
                insert.bind(1, "x-" + name)
                insert.bind(2, value)
                try insert.run()
            }
        }
    }

    /// Refuses metadata names the store keeps for itself.
    private static func checkMetadataName(_ name: String) throws(KeychainError) {
        guard "x-" + name != SettingsRecord.record.valueName else {
            throw KeychainError.param("the settings are stored with setSettings, which authenticates them")
        }
        guard "x-" + name != AccessPolicyRecord.record.valueName else {
            throw KeychainError.param("the access policy is stored with setAccessPolicy, which authenticates it")
        }
    }

    /// How much memory SQLite may use for this keychain: its page cache, and
    /// how much of the file it maps into memory.
    public struct MemoryUse: Sendable {
        /// Page cache, in KiB.
        public var cacheKiB: Int
        /// Bytes of the file mapped into memory (0: read through the page cache only).
        public var mappedBytes: Int

        /// The default: an 8 MiB cache and up to 256 MiB mapped, for lookups
        /// that stay flat to 100,000 items in process.
        public static let fast = MemoryUse(cacheKiB: 8 * 1024, mappedBytes: 256 << 20)
        /// A 1 MiB cache and no mapping, for a long-running daemon whose calls
        /// cost a bus round trip anyway.
        public static let lean = MemoryUse(cacheKiB: 1024, mappedBytes: 0)
    }

    /// Changes how much memory SQLite uses for this keychain (see ``MemoryUse``).
    public func limitMemory(to use: MemoryUse) throws(KeychainError) {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.execute("PRAGMA cache_size = -\(use.cacheKiB); PRAGMA mmap_size = \(use.mappedBytes);")
        }
    }

    /// The number of items of every class.
    public func count() throws(KeychainError) -> Int {
        try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement("SELECT count(*) FROM items") { (statement) throws(KeychainError) in
                try statement.step() ? Int(statement.int64(0)) : 0
            }
        }
    }

    /// How many items of every class it holds and the bytes they take in the file (sealed attributes and
    /// secrets), read from the rows' headers without reading the values; also while locked.
    /// Counted once, then kept up as items are added (a change or delete through this keychain, or a commit
    /// by another connection to the file, has it counted again).
    public func usage() throws(KeychainError) -> (items: Int, bytes: Int) {
        try state.withLock { (state) throws(KeychainError) in
            let dataVersion = try state.db.withStatement("PRAGMA data_version") { (statement) throws(KeychainError) in
                try statement.step() ? statement.int64(0) : 0
            }
            if let usage = state.usage, usage.dataVersion == dataVersion { return (usage.items, usage.bytes) }
            let counted = try state.db.withStatement(
                "SELECT count(*), coalesce(sum(length(attributes)), 0) + coalesce(sum(length(secret)), 0) FROM items"
            ) { (statement) throws(KeychainError) in
                try statement.step() ? (Int(statement.int64(0)), Int(statement.int64(1))) : (0, 0)
            }
            state.usage = (counted.0, counted.1, dataVersion)
            return counted
        }
    }

    // MARK: Internals

    enum SealedField: UInt8 {
        case attributes = 0x61  // "a"
        case secret = 0x73  // "s"
    }

    /// The version of an item when added; each change adds one. Version 0 is an item written in format 1.
    static let firstItemVersion: Int64 = 1

    /// The associated data a sealed field is bound to: keychain, item, class, field and the item's version
    /// (format 1's associated data, without a version, for version 0).
    func context(_ reference: ItemReference, _ field: SealedField, version: Int64) -> Data {
        var context =
            identifier + reference.identifier + Data(reference.itemClass.rawValue.utf8) + Data([field.rawValue])
        if version != 0 {
            context.append(0x76)  // "v"
            withUnsafeBytes(of: UInt64(bitPattern: version).bigEndian) { context.append(contentsOf: $0) }
        }
        return context
    }

    private static func insertTags(_ tags: [Data], item: Int64, _ db: SQLiteDatabase) throws(KeychainError) {
        try db.withStatement("INSERT OR IGNORE INTO attribute_index (tag, item) VALUES (?1, ?2)") {
            (insert) throws(KeychainError) in
            for tag in tags {
                insert.reset()
                insert.bind(1, tag)
                insert.bind(2, item)
                try insert.run()
            }
        }
    }

    private static func configure(_ db: SQLiteDatabase) throws(KeychainError) {
        try db.execute(
            """
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = NORMAL;
            PRAGMA foreign_keys = ON;
            PRAGMA secure_delete = ON;
            PRAGMA cache_size = -8192;
            PRAGMA mmap_size = 268435456;
            """)
    }

    /// Deletes a keychain file with its write-ahead log and shared-memory files.
    public static func removeFiles(at path: String) {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }

    /// Makes the missing parent directories of `path`, mode 0700.
    private static func createParentDirectory(of path: String) throws(KeychainError) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/")
        if !directory.isEmpty, access(directory, F_OK) != 0 {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                throw KeychainError(.io, "cannot create directory \(directory): \(error)")
            }
        }
    }

    /// Creates an empty file (mode 0600) with a private, random name in the directory of `path`, where a new
    /// keychain is built before ``linkNew(_:at:)`` puts it at `path`; returns its path.
    private static func createStagingFile(beside path: String) throws(KeychainError) -> String {
        var parts = path.split(separator: "/", omittingEmptySubsequences: false)
        let name = parts.popLast().map(String.init) ?? path
        let random = try SecureRandom.data(count: 8).map { String($0, radix: 16) }.joined()
        let staging = (parts + ["." + name + ".new-" + random]).joined(separator: "/")
        let fd = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw KeychainError(.io, "cannot create keychain \(path): \(String(cString: strerror(code)))")
        }
        close(fd)
        return staging
    }

    /// Puts the complete keychain file `staging` at `path`, unless something is there already
    /// (`errSecDuplicateKeychain`): a hard link, which never replaces a file. On a file system without hard
    /// links, a rename after a last look at `path`.
    private static func linkNew(_ staging: String, at path: String) throws(KeychainError) {
        if link(staging, path) == 0 { return }
        let code = errno
        switch code {
        case EEXIST: throw duplicateKeychain(path, code)
        case EPERM, EOPNOTSUPP, EMLINK:
            guard access(path, F_OK) != 0 else { throw duplicateKeychain(path, EEXIST) }
            guard rename(staging, path) == 0 else {
                let code = errno
                throw KeychainError(.io, "cannot create keychain \(path): \(String(cString: strerror(code)))")
            }
        default:
            throw KeychainError(.io, "cannot create keychain \(path): \(String(cString: strerror(code)))")
        }
    }

    private static func duplicateKeychain(_ path: String, _ code: Int32) -> KeychainError {
        KeychainError(.duplicateKeychain, "cannot create keychain \(path): \(String(cString: strerror(code)))")
    }
}

/// One row found by a query: its rowid and the item as asked for.
private struct Match {
    let row: Int64
    /// The item's version (see ``Keychain/context(_:_:version:)``).
    let version: Int64
    let item: KeychainItem
    /// The item's secret, when ``Keychain/State/find(_:in:limit:returning:secretInSecretMemory:)`` was asked to
    /// decrypt it into secret memory.
    var secretInSecretMemory: SharedSecret? = nil
}

extension Keychain.State {
    func unlockedKey() throws(KeychainError) -> SecretKey {
        guard let key else {
            throw KeychainError(.interactionNotAllowed, "the keychain is locked")
        }
        guard formatVersion >= FileSchema.currentVersion else {
            throw KeychainError(
                .writePermission,
                "the keychain file is in format \(formatVersion) and could not be brought to format"
                    + " \(FileSchema.currentVersion) when it was unlocked (is it writable?)")
        }
        return key
    }

    /// Brings a file of an older format to the current one (`FileSchema`), now that the keychain key is in
    /// memory: adds the items' versions (those written before keep version 0, format 1's associated data)
    /// and authenticates the settings as the file holds them (the defaults when it holds none). One
    /// transaction; nothing to do when another process did it first.
    mutating func upgradeToCurrent(identifier: Data) throws(KeychainError) {
        guard formatVersion < FileSchema.currentVersion, let key else { return }
        let db = db
        try db.transaction { () throws(KeychainError) in
            guard try FileSchema.userVersion(db) < FileSchema.currentVersion else { return }
            try db.execute(FileSchema.keyedMigration)
            let stored = try SettingsRecord.record.load(from: db)
            try SettingsRecord.record.save(
                stored.encoded ?? KeychainSettings().encoded, key: key, keychain: identifier, db)
            try db.execute("PRAGMA user_version = \(FileSchema.currentVersion)")
        }
        formatVersion = FileSchema.currentVersion
    }

    /// Runs a query against the index and opens what `returning` asks for.
    fileprivate func find(
        _ query: ItemQuery, in keychain: Keychain, limit: Int?, returning: ReturnOptions,
        secretInSecretMemory: Bool = false
    ) throws(KeychainError) -> [Match] {
        // Attributes outside the index (the dates) are compared after decryption. While the keychain is
        // unlocked, every match the index gives is also confirmed against its decrypted attributes, and the
        // item's index entries (its tags, primary-key hash and sync flag, all computed from its attributes
        // under the index key) are checked against what those attributes give: a row of the index written by
        // someone else never hands out another item, and an item whose entries were altered is not returned.
        let unindexed = query.attributes.filter { !$0.key.isIndexed }
        let confirming = self.key != nil
        let wantsAttributes = returning.contains(.attributes) || !unindexed.isEmpty || confirming
        let wantsSecret = returning.contains(.data)
        let key: SecretKey? = (wantsAttributes || wantsSecret) ? try unlockedKey() : nil

        // The first tag drives the search through the (tag, item) primary key;
        // the others are point lookups. Put the likely most selective first and
        // the synchronizable flag, which nearly every item shares, last.
        let tags: [Data] = query.attributes.filter { $0.key.isIndexed }.sorted { $0.key.searchRank < $1.key.searchRank }
            .map {
                (name, value) in
                if query.caseInsensitive, let folded = indexer.foldedTag(query.itemClass, name, value) {
                    return folded
                }
                return indexer.tag(query.itemClass, name, value)
            }
        let references = query.references?.filter { $0.itemClass == query.itemClass }
        if let references, references.isEmpty { return [] }

        var columns = "i.id, i.uuid, \(wantsAttributes ? "i.attributes" : "NULL"), \(wantsSecret ? "i.secret" : "NULL")"
        // The version column exists once the file is in format 2, which an unlocked keychain's always is.
        columns += confirming ? ", i.version, i.sync, i.pk" : ", 0, 0, NULL"
        var sql: String
        var parameter: Int32 = 2
        if tags.isEmpty {
            sql = "SELECT \(columns) FROM items i WHERE +i.class = ?1"
        } else {
            sql = "SELECT \(columns) FROM attribute_index a0 JOIN items i ON i.id = a0.item"
            sql += " WHERE a0.tag = ?2 AND +i.class = ?1"
            for offset in 1..<tags.count {
                sql += " AND EXISTS (SELECT 1 FROM attribute_index WHERE tag = ?\(2 + offset) AND item = i.id)"
            }
            parameter += Int32(tags.count)
        }
        switch query.synchronizable {
        case .no: sql += " AND i.sync = 0"
        case .yes: sql += " AND i.sync = 1"
        case .any: break
        }
        if let references {
            let list = references.indices.map { "?\(Int(parameter) + $0)" }.joined(separator: ", ")
            sql += " AND i.uuid IN (\(list))"
        }
        let limitParameter = parameter + Int32(references?.count ?? 0)
        sql += " ORDER BY i.id LIMIT ?\(limitParameter)"

        return try db.withStatement(sql) { (statement) throws(KeychainError) -> [Match] in
            statement.bind(1, query.itemClass.rawValue)
            for (offset, tag) in tags.enumerated() { statement.bind(2 + Int32(offset), tag) }
            for (offset, reference) in (references ?? []).enumerated() {
                statement.bind(parameter + Int32(offset), reference.identifier)
            }
            statement.bind(limitParameter, unindexed.isEmpty && !confirming ? Int64(limit ?? -1) : -1)
            var matches: [Match] = []
            while try statement.step() {
                guard let uuid = statement.data(1), uuid.count == 16 else {
                    throw KeychainError(.decode, "an item row has a damaged identifier")
                }
                let reference = ItemReference(itemClass: query.itemClass, identifier: uuid)
                let row = statement.int64(0)
                let version = statement.int64(4)
                var attributes: ItemAttributes?
                var secret: Data?
                var protectedSecret: SharedSecret?
                if let key, wantsAttributes {
                    let sealed = statement.data(2) ?? Data()
                    let opened = try AttributeCodec.decode(
                        try Self.open(sealed, key, keychain.context(reference, .attributes, version: version)))
                    guard unindexed.allSatisfy({ opened[$0.key] == $0.value }), Self.confirms(opened, query) else {
                        continue
                    }
                    if confirming {
                        let entries = IndexEntries(
                            synchronizable: statement.int64(5) != 0, primaryKeyHash: statement.data(6),
                            tags: try Self.storedTags(of: row, db))
                        guard entries == IndexEntries(reference.itemClass, opened, indexer) else { continue }
                    }
                    attributes = returning.contains(.attributes) ? opened : nil
                }
                if let key, wantsSecret, let sealed = statement.data(3) {
                    let context = keychain.context(reference, .secret, version: version)
                    if secretInSecretMemory {
                        protectedSecret = SharedSecret(try Self.openSecret(sealed, key, context))
                    } else {
                        secret = try Self.open(sealed, key, context)
                    }
                }
                matches.append(
                    Match(
                        row: row, version: version,
                        item: KeychainItem(reference: reference, attributes: attributes, secret: secret),
                        secretInSecretMemory: protectedSecret))
                if let limit, matches.count >= limit { break }
            }
            return matches
        }
    }
}

/// What the index tables and columns hold for one item: all of it computed from the item's attributes under
/// the index key, so an unlocked keychain checks it by computing it again.
private struct IndexEntries: Equatable {
    let synchronizable: Bool
    let primaryKeyHash: Data?
    let tags: Set<Data>

    init(synchronizable: Bool, primaryKeyHash: Data?, tags: Set<Data>) {
        self.synchronizable = synchronizable
        self.primaryKeyHash = primaryKeyHash
        self.tags = tags
    }

    /// The entries an item of `itemClass` with `attributes` has.
    init(_ itemClass: ItemClass, _ attributes: ItemAttributes, _ indexer: AttributeIndexer) {
        self.init(
            synchronizable: attributes.isSynchronizable,
            primaryKeyHash: indexer.primaryKeyHash(itemClass, attributes),
            tags: Set(indexer.tags(itemClass, attributes)))
    }
}

extension Keychain.State {
    /// Opens an item's sealed value; `errSecDecode` saying what that means when it fails.
    fileprivate static func open(_ sealed: Data, _ key: SecretKey, _ context: Data) throws(KeychainError) -> Data {
        do {
            return try AuthenticatedCipher.open(sealed, key: key, context: context)
        } catch {
            throw alteredValue
        }
    }

    /// Opens an item's sealed secret straight into secret memory; as ``open(_:_:_:)``.
    fileprivate static func openSecret(_ sealed: Data, _ key: SecretKey, _ context: Data) throws(KeychainError)
        -> SecretBytes
    {
        do {
            return try AuthenticatedCipher.openSecret(sealed, key: key, context: context)
        } catch  where error.status == .allocate {
            throw error
        } catch {
            throw alteredValue
        }
    }

    /// `errSecDecode` for a sealed value that does not open, saying what that means.
    private static var alteredValue: KeychainError {
        KeychainError(
            .decode,
            "an item's stored value failed authentication: the keychain file was altered (damaged, or a value"
                + " of another item or an older one of this item put in its place)")
    }

    /// The tags the attribute index holds for the item in `row`.
    fileprivate static func storedTags(of row: Int64, _ db: SQLiteDatabase) throws(KeychainError) -> Set<Data> {
        try db.withStatement("SELECT tag FROM attribute_index WHERE item = ?1") { (select) throws(KeychainError) in
            select.bind(1, row)
            var tags: Set<Data> = []
            while try select.step() { tags.insert(select.data(0) ?? Data()) }
            return tags
        }
    }

    /// Whether decrypted `attributes` hold what `query` asks: each attribute equal (text and its UTF-8
    /// bytes count as equal, as the index counts them; without regard to case when the query says so),
    /// and the synchronizable flag as asked.
    fileprivate static func confirms(_ attributes: ItemAttributes, _ query: ItemQuery) -> Bool {
        for (name, wanted) in query.attributes where attributes[name] != wanted {
            guard let stored = attributes[name], let storedText = name.text(of: stored),
                let wantedText = name.text(of: wanted)
            else { return false }
            if storedText == wantedText { continue }
            guard query.caseInsensitive, storedText.lowercased() == wantedText.lowercased() else { return false }
        }
        let synchronizable = attributes[.synchronizable] == .bool(true)
        switch query.synchronizable {
        case .no: return !synchronizable
        case .yes: return synchronizable
        case .any: return true
        }
    }
}

extension AttributeKey {
    /// Where a query's tag for this attribute goes in the search: attributes
    /// that usually tell items apart come first, flags and small numbers last.
    fileprivate var searchRank: Int {
        switch self {
        case .account, .server, .applicationTag, .applicationLabel, .serialNumber: 0
        case .service, .label, .subjectKeyID, .publicKeyHash, .issuer, .subject, .path: 1
        case .securityDomain, .generic, .comment, .itemDescription, .accessGroup: 2
        default: kind == .bool || kind == .number ? 4 : 3
        }
    }
}

extension ItemAttributes {
    /// Whether `kSecAttrSynchronizable` is set and true.
    fileprivate var isSynchronizable: Bool { self[.synchronizable] == .bool(true) }
}

/// An item to add with ``Keychain/add(_:metadata:)``.
public struct NewItem: Sendable {
    /// Its class.
    public var itemClass: ItemClass
    /// Its attributes; the dates among them are ignored (see ``creationDate``).
    public var attributes: ItemAttributes
    /// Its secret, if it has one.
    public var secret: Data?
    /// When it was made; nil: now.
    public var creationDate: Date?
    /// When it last changed; nil: its creation date.
    public var modificationDate: Date?

    /// An item of `itemClass`, with dates to keep or nil for the time it is added.
    public init(
        _ itemClass: ItemClass, attributes: ItemAttributes, secret: Data?, creationDate: Date? = nil,
        modificationDate: Date? = nil
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.secret = secret
        self.creationDate = creationDate
        self.modificationDate = modificationDate
    }
}

/// A keychain key derived from a password, not yet installed: see ``Keychain/unwrapKey(password:)``. Its
/// memory is wiped when the last copy goes.
public struct UnwrappedKeychainKey: Sendable {
    let key: SecretKey
    let keychain: Data
}

/// A password change prepared by ``Keychain/rewrap(from:to:kdf:)``, to be saved by ``Keychain/commit(_:)``.
public struct PasswordChange: Sendable {
    let header: KeychainHeader
    /// The wrapped key it replaces: a commit after another change is refused.
    let replacing: Data
}
