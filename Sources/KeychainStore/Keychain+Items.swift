import FoundationEssentials
import KeychainCore
import Posix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

extension Keychain {
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
        try add(NewItem(itemClass, attributes: attributes, secret: secret))
    }

    /// Adds one item, as ``add(_:attributes:secret:)``, with the reference it carries when it has one.
    @discardableResult
    public func add(_ item: NewItem) throws(KeychainError) -> KeychainItem {
        let added = try add([item])
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
        let prepared = try prepare(items)
        try state.withLock { (state) throws(KeychainError) in
            _ = try state.unlockedKey()
            let sealed = try seal(prepared, state: &state)
            let db = state.db
            let indexer = state.indexer
            try db.transaction { () throws(KeychainError) in
                try Self.insert(prepared, sealed, indexer: indexer, db)
                for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
                    try db.setMetaRow("x-" + name, value)
                }
            }
            if let usage = state.usage {
                let bytes = sealed.reduce(0) { $0 + $1.attributes.count + ($1.secret?.count ?? 0) }
                state.usage = (usage.items + prepared.count, usage.bytes + bytes, usage.dataVersion)
            }
        }
        return prepared.map { KeychainItem(reference: $0.reference, attributes: $0.attributes, secret: $0.secret) }
    }

    /// Whether adding an item of `itemClass` with `attributes` would fail with `errSecDuplicateItem` now: one of
    /// the class with the same primary key is stored (checked before the person is asked for a new item's own
    /// password, so that nobody chooses one for an add that cannot be made).
    package func hasDuplicate(of itemClass: ItemClass, attributes: ItemAttributes) throws(KeychainError) -> Bool {
        var stored = attributes.filter { !$0.key.isSetByStore }
        if stored[.synchronizable] == nil { stored[.synchronizable] = .bool(false) }
        return try state.withLock { (state) throws(KeychainError) in
            _ = try state.unlockedKey()
            let hash = state.indexer.primaryKeyHash(itemClass, stored)
            return try state.db.withStatement(
                "SELECT 1 FROM items WHERE class = \(itemClass.rawValue) AND pk = \(hash)"
            ) { (select) throws(KeychainError) in try select.step() }
        }
    }

    /// An item checked against its class's schema, with its dates and a new reference: ready to seal.
    typealias PreparedItem = (reference: ItemReference, attributes: ItemAttributes, secret: Data?)

    /// `items` checked and given their dates (an item's own, else now) and new references.
    func prepare(_ items: [NewItem]) throws(KeychainError) -> [PreparedItem] {
        let now = Date()
        var prepared: [PreparedItem] = []
        prepared.reserveCapacity(items.count)
        for item in items {
            var stored = item.attributes.filter { !$0.key.isSetByStore }
            try ItemSchema.of(item.itemClass).validate(stored)
            try Self.checkDates(item, stored)
            stored[.creationDate] = .date(item.creationDate ?? now)
            stored[.modificationDate] = .date(item.modificationDate ?? item.creationDate ?? now)
            if stored[.synchronizable] == nil { stored[.synchronizable] = .bool(false) }
            // An item whose secret is sealed to its reference (an item's own password) comes with it.
            var identifier = item.reference?.identifier
            if identifier == nil { identifier = try SecureRandom.data(count: 16) }
            let reference = ItemReference(itemClass: item.itemClass, identifier: identifier ?? Data(count: 16))
            prepared.append((reference, stored, item.secret))
        }
        return prepared
    }

    /// Refuses an item whose dates (its own, or a date attribute) are outside ``StorableDates`` (a file's, at an
    /// import): no face could show them.
    static func checkDates(_ item: NewItem, _ attributes: ItemAttributes) throws(KeychainError) {
        let dates =
            [item.creationDate, item.modificationDate].compactMap { $0 }
            + attributes.values.compactMap { if case .date(let date) = $0 { date } else { nil } }
        for date in dates where !StorableDates.contains(date) {
            throw KeychainError(.param, "an item's date is not of the years 1 to 9999")
        }
    }

    /// `prepared`'s attributes and secrets sealed under their classes' keys (made when missing).
    func seal(_ prepared: [PreparedItem], state: inout State) throws(KeychainError) -> [(
        attributes: Data, secret: Data?
    )] {
        var sealed: [(attributes: Data, secret: Data?)] = []
        sealed.reserveCapacity(prepared.count)
        for item in prepared {
            let accessibility = Accessibility(of: item.attributes)
            try state.requirePasscode(for: accessibility)
            let key = try state.classKey(for: accessibility, identifier: identifier)
            let attributes = try AuthenticatedCipher.seal(
                AttributeCodec.encode(item.attributes), key: key,
                context: ItemSealing.itemField(
                    keychain: identifier, item: item.reference, .attributes, version: Self.firstItemVersion))
            let secret = try item.secret.map { (secret) throws(KeychainError) in
                try AuthenticatedCipher.seal(
                    secret, key: key,
                    context: ItemSealing.itemField(
                        keychain: identifier, item: item.reference, .secret, version: Self.firstItemVersion))
            }
            sealed.append((attributes, secret))
        }
        return sealed
    }

    /// Inserts sealed items and their index tags (inside the caller's transaction).
    static func insert(
        _ prepared: [PreparedItem], _ sealed: [(attributes: Data, secret: Data?)], indexer: AttributeIndexer,
        _ db: SQLiteDatabase
    ) throws(KeychainError) {
        for (item, seal) in zip(prepared, sealed) {
            let itemClass = item.reference.itemClass
            let primaryKeyHash = indexer.primaryKeyHash(itemClass, item.attributes)
            try db.run(
                """
                INSERT INTO items (uuid, class, pk, attributes, secret, sync, version, pclass)
                VALUES (\(item.reference.identifier), \(itemClass.rawValue), \(primaryKeyHash),
                    \(seal.attributes), \(seal.secret), \(item.attributes.isSynchronizable),
                    \(Self.firstItemVersion), \(Accessibility(of: item.attributes).rawValue))
                """)
            try insertTags(indexer.tags(itemClass, item.attributes), item: db.lastInsertRowID, db)
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
        try update(matching: query, with: changes, secrets: [:])
    }

    /// As ``update(matching:with:)``, in the same one transaction, with the items named in `secrets` given that
    /// secret instead of `changes.secret` (or their own): the daemon's update of several items that each have a
    /// password of their own, whose secrets are each sealed under its own (docs/secitem-semantics.md).
    package func update(
        matching query: ItemQuery, with changes: ItemChanges, secrets: [ItemReference: SharedSecret]
    ) throws(KeychainError) -> Int {
        try query.validate()
        let newAttributes = changes.attributes.filter { !$0.key.isSetByStore }
        try ItemSchema.of(query.itemClass).validate(newAttributes)
        return try state.withLock { (state) throws(KeychainError) in
            _ = try state.unlockedKey()
            state.usage = nil
            // A secret the update keeps is opened too (into secret memory), to be sealed again under the item's
            // next version; one it replaces is never opened (nor needs to open: a damaged one can be replaced).
            let keepsSecret = changes.secret == nil
            let matches = try state.find(
                query, in: self, limit: nil, returning: keepsSecret ? [.attributes, .data] : [.attributes],
                secretInSecretMemory: true)
            guard !matches.isEmpty else {
                throw KeychainError(.itemNotFound, "no item matches the update query")
            }
            // The key of a class the change moves items to is had (or made) before the transaction; the classes
            // the items are in already gave their keys to open them.
            if let level = newAttributes[.accessible] {
                let accessibility = Accessibility(of: [.accessible: level])
                try state.requirePasscode(for: accessibility)
                _ = try state.classKey(for: accessibility, identifier: identifier)
            } else if changes.removedAttributes.contains(.accessible) {
                _ = try state.classKey(for: .whenUnlocked, identifier: identifier)
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
                    // Sealed under the key of the class the item has after the change (a change of
                    // kSecAttrAccessible moves it to another class key).
                    let accessibility = Accessibility(of: attributes)
                    guard let key = state.classKeys[accessibility] else { throw ClassKeys.missing(accessibility) }
                    // Every change seals under a new version, so an older sealed value put back is refused.
                    guard match.version < Int64.max else {
                        throw KeychainError(.internalComponent, "an item's version is exhausted")
                    }
                    let version = match.version + 1
                    let sealedAttributes = try AuthenticatedCipher.seal(
                        AttributeCodec.encode(attributes), key: key,
                        context: ItemSealing.itemField(
                            keychain: identifier, item: reference, .attributes, version: version))
                    let secretContext = ItemSealing.itemField(
                        keychain: identifier, item: reference, .secret, version: version)
                    let sealedSecret: Data?
                    if let given = secrets[reference] {
                        sealedSecret = try given.withUnsafeBytes { (raw) throws(KeychainError) in
                            try AuthenticatedCipher.seal(unowned: raw, key: key, context: secretContext)
                        }
                    } else if let secret = changes.secret {
                        sealedSecret = try AuthenticatedCipher.seal(secret, key: key, context: secretContext)
                    } else if let kept = match.secretInSecretMemory {
                        sealedSecret = try kept.withUnsafeBytes { (raw) throws(KeychainError) in
                            try AuthenticatedCipher.seal(unowned: raw, key: key, context: secretContext)
                        }
                    } else {
                        sealedSecret = nil
                    }
                    let primaryKeyHash = indexer.primaryKeyHash(reference.itemClass, attributes)
                    try db.run(
                        """
                        UPDATE items SET pk = \(primaryKeyHash), attributes = \(sealedAttributes),
                            secret = \(sealedSecret), sync = \(attributes.isSynchronizable), version = \(version),
                            pclass = \(accessibility.rawValue)
                        WHERE id = \(match.row)
                        """)
                    try db.run("DELETE FROM attribute_index WHERE item = \(match.row)")
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
                for match in matches { try db.run("DELETE FROM items WHERE id = \(match.row)") }
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

    /// The version of an item when added; each change adds one. Version 0 is an item written in format 1.
    static let firstItemVersion: Int64 = 1

    private static func insertTags(_ tags: [Data], item: Int64, _ db: SQLiteDatabase) throws(KeychainError) {
        for tag in tags { try db.run("INSERT OR IGNORE INTO attribute_index (tag, item) VALUES (\(tag), \(item))") }
    }
}

extension ItemAttributes {
    /// Whether `kSecAttrSynchronizable` is set and true.
    var isSynchronizable: Bool { self[.synchronizable] == .bool(true) }
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
    /// The reference it gets, of its class (made beforehand when its secret is bound to it: an item with a
    /// password of its own, ``ItemPasswordEnvelope``); nil: a new random one.
    public var reference: ItemReference?

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
