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

    let state: Mutex<State>

    struct State {
        let db: SQLiteDatabase
        var header: KeychainHeader
        let indexer: AttributeIndexer
        var key: SecretKey?
        /// The class keys in memory (``ClassKeys``): all of them while unlocked; after a lock, those of the classes
        /// that outlast it (``Accessibility/outlastsLock``) until ``Keychain/lock(allClasses:)`` wipes them.
        var classKeys: [Accessibility: SecretKey] = [:]
        /// What seals the `…ThisDeviceOnly` class keys to this machine (``Keychain/defaultDeviceSealing`` when
        /// the keychain was made or opened), nil on a machine without a TPM.
        var deviceSealing: (any DeviceSealing)?
        /// Why the device secret did not unseal at the last unlock (another machine's TPM), if it did not.
        var deviceFailure: KeychainError?
        /// The access policy checked under the keychain key when it last locked, with the rows it was read from:
        /// what ``Keychain/accessPolicy()`` answers while locked and class keys are held.
        var policyAtLock: (rows: (encoded: Data?, mac: Data?), policy: KeychainAccessPolicy)?
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
                deviceSealing: Self.deviceSealingHere ?? Self.defaultDeviceSealing.withLock { $0 },
                formatVersion: formatVersion))
        if let key {
            let identifier = header.identifier
            try state.withLock { (state) throws(KeychainError) in
                try state.upgradeToCurrent(identifier: identifier)
                state.install(key, identifier: identifier)
            }
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

    /// Unlocks with a key ``unwrapKey(password:)`` derived from this keychain's password.
    public func unlock(with unwrapped: UnwrappedKeychainKey) {
        guard unwrapped.keychain == identifier else { return }
        let identifier = identifier
        state.withLock { (state) in state.install(unwrapped.key, identifier: identifier) }
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
        state.withLock { (state) in state.install(key, identifier: identifier) }
    }

    /// Forgets the keychain key and the class keys that do not outlast a lock; their memory is wiped. Items of
    /// the classes that do (`AfterFirstUnlock` and its kin: ``Accessibility/outlastsLock``) stay readable, if
    /// the keychain was unlocked since it was opened, until ``lock(allClasses:)`` with `true`.
    public func lock() {
        lock(allClasses: false)
    }

    /// Forgets the keychain key and the class keys: every class key when `allClasses` (logout, the daemon's
    /// exit, `latchkey lock-keychain --all-classes`), else as ``lock()``.
    public func lock(allClasses: Bool) {
        state.withLock { $0.lock(allClasses: allClasses) }
    }

    /// The accessibility classes whose items can be read now: every class while unlocked (a class whose key
    /// the file does not give aside); while locked, those whose key outlasted the lock.
    public var readableClasses: Set<Accessibility> {
        state.withLock { Set($0.classKeys.keys) }
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

    /// Copies the write-ahead log of the keychain file at `path` into the file and empties it, through a
    /// connection of its own, so that no earlier version of a changed row stays in the log. It waits at
    /// most `waitMilliseconds` for readers of older snapshots; false when it could not complete (retry later).
    public static func checkpoint(at path: String, waitMilliseconds: Int32) -> Bool {
        guard path != ":memory:", let db = try? SQLiteDatabase(path: path, create: false) else { return false }
        return (try? db.checkpoint(waitMilliseconds: waitMilliseconds)) ?? false
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
            try state.db.withStatement("SELECT value FROM meta WHERE name = \("x-" + name)") {
                (select) throws(KeychainError) in
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
            try state.db.setMetaRow("x-" + name, value)
        }
    }

    /// Refuses metadata names the store keeps for itself.
    static func checkMetadataName(_ name: String) throws(KeychainError) {
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

    /// Where the file's contents stand: equal stamps taken at two moments mean nothing was written in between,
    /// through this keychain (any row: items, metadata) or by another connection's commit
    /// (`PRAGMA data_version`). Read also while locked.
    public func changeStamp() throws(KeychainError) -> ChangeStamp {
        try state.withLock { (state) throws(KeychainError) in
            let dataVersion = try state.db.withStatement("PRAGMA data_version") { (statement) throws(KeychainError) in
                try statement.step() ? statement.int64(0) : 0
            }
            return ChangeStamp(ownChanges: state.db.totalChanges, dataVersion: dataVersion)
        }
    }

    /// Each item of `itemClass` (of `references` only, when given) with its version, which every change of the
    /// item moves on (its sealed values are bound to it): an item whose version is the same at two moments was not
    /// changed in between. Reads only plain columns, nothing is decrypted; the file must be in the current format,
    /// as an unlocked keychain's always is (a format-1 file has no version column: an error).
    package func itemVersions(
        of itemClass: ItemClass, among references: [ItemReference]? = nil
    ) throws(KeychainError) -> [ItemReference: Int64] {
        var sql: SQL = "SELECT uuid, version FROM items WHERE class = \(itemClass.rawValue)"
        if let references { sql += " AND uuid IN (\(list: references.map(\.identifier)))" }
        return try state.withLock { (state) throws(KeychainError) in
            try state.db.withStatement(sql) { (statement) throws(KeychainError) in
                var versions: [ItemReference: Int64] = [:]
                while try statement.step() {
                    guard let uuid = statement.data(0), uuid.count == 16 else {
                        throw KeychainError(.decode, "an item row has a damaged identifier")
                    }
                    versions[ItemReference(itemClass: itemClass, identifier: uuid)] = statement.int64(1)
                }
                return versions
            }
        }
    }

    /// What ``changeStamp()`` returns.
    public struct ChangeStamp: Equatable, Sendable {
        let ownChanges: Int64
        let dataVersion: Int64
    }

    // MARK: Internals

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
            let version = try FileSchema.userVersion(db)
            guard version < FileSchema.currentVersion else { return }
            if version < 2 {
                try db.execute(FileSchema.keyedMigration)
                let stored = try SettingsRecord.record.load(from: db)
                try SettingsRecord.record.save(
                    stored.encoded ?? KeychainSettings().encoded, key: key, keychain: identifier, db)
            }
            // Format 3: a key per accessibility class, and every item sealed under its class's key.
            try db.execute(FileSchema.classKeyMigration)
            var keys: [Accessibility: SecretKey] = [:]
            let device = try ClassKeys.createDeviceSecret(deviceSealing, db)
            for accessibility in Accessibility.allCases {
                keys[accessibility] = try ClassKeys.create(
                    accessibility, keychainKey: key, keychain: identifier, device: device, db)
            }
            try resealItemsUnderClassKeys(keychainKey: key, classKeys: keys, identifier: identifier)
            try db.execute("PRAGMA user_version = \(FileSchema.currentVersion)")
        }
        formatVersion = FileSchema.currentVersion
    }
}
