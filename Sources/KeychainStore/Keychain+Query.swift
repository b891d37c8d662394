import FoundationEssentials
import KeychainCore
import Posix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

extension Keychain {
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
}

/// One row found by a query: its rowid and the item as asked for.
struct Match {
    let row: Int64
    /// The item's version (see ``ItemSealing/itemField(keychain:item:_:version:)``).
    let version: Int64
    let item: KeychainItem
    /// The item's secret, when ``Keychain/State/find(_:in:limit:returning:secretInSecretMemory:)`` was asked to
    /// decrypt it into secret memory.
    var secretInSecretMemory: SharedSecret? = nil
}

extension SQLiteDatabase {
    /// How many index rows a tag is counted up to when choosing which tag drives a query.
    static let tagProbeRows = 32

    /// `tags` with the one that has the fewest index rows first (counted up to ``tagProbeRows``; ties keep
    /// the given order, most selective kind of attribute first). The rank alone cannot tell two extension
    /// attributes apart, such as a KWallet entry's folder (`server`, shared by the folder's every entry) and
    /// key (`user`): a query driven by the shared one reads every row of it.
    func fewestRowsFirst(_ tags: [Data]) throws(KeychainError) -> [Data] {
        guard tags.count > 1 else { return tags }
        var counts: [Int64] = []
        for tag in tags {
            let count = try withStatement(
                "SELECT count(*) FROM (SELECT 1 FROM attribute_index WHERE tag = \(tag) LIMIT \(Int64(Self.tagProbeRows)))"
            ) { (statement) throws(KeychainError) -> Int64 in
                try statement.step() ? statement.int64(0) : 0
            }
            counts.append(count)
        }
        guard let fewest = counts.indices.min(by: { counts[$0] < counts[$1] }), fewest != 0 else { return tags }
        var ordered = tags
        ordered.insert(ordered.remove(at: fewest), at: 0)
        return ordered
    }
}

extension Keychain.State {
    /// Runs a query against the index and opens what `returning` asks for.
    func find(
        _ query: ItemQuery, in keychain: Keychain, limit: Int?, returning: ReturnOptions,
        secretInSecretMemory: Bool = false
    ) throws(KeychainError) -> [Match] {
        // Attributes outside the index (the dates) are compared after decryption. While the keychain is
        // unlocked, every match the index gives is also confirmed against its decrypted attributes, and the
        // item's index entries (its tags, primary-key hash and sync flag, all computed from its attributes
        // under the index key) are checked against what those attributes give: a row of the index written by
        // someone else never hands out another item, and an item whose entries were altered is not returned.
        //
        // Each item is opened with its class's key (``ClassKeys``). While locked, the keys of the classes that
        // outlast a lock may still be in memory: their items are opened and confirmed as while unlocked, and
        // the others are left out of a query that needs their attributes or secret (when that leaves none,
        // errSecInteractionNotAllowed), or returned unconfirmed, from the index alone, to one that asks only
        // for references.
        let unindexed = query.attributes.filter { !$0.key.isIndexed }
        let unlocked = self.key != nil
        let confirming = unlocked || !classKeys.isEmpty
        let needsOpening = returning.contains(.attributes) || !unindexed.isEmpty || returning.contains(.data)
        let wantsAttributes = needsOpening || confirming
        let wantsSecret = returning.contains(.data)
        if unlocked {
            _ = try unlockedKey()
        } else if needsOpening && classKeys.isEmpty {
            throw KeychainError(.interactionNotAllowed, "the keychain is locked")
        }
        // The class column exists once the file is in format 3 (an unlocked keychain's always is).
        let classColumn: SQL = formatVersion >= 3 ? "i.pclass" : "''"

        // The first tag drives the search through the (tag, item) primary key;
        // the others are point lookups. Put the likely most selective first and
        // the synchronizable flag, which nearly every item shares, last.
        let ranked: [Data] = query.attributes.filter { $0.key.isIndexed }.sorted {
            $0.key.searchRank < $1.key.searchRank
        }
        .map {
            (name, value) in
            if query.caseInsensitive, let folded = indexer.foldedTag(query.itemClass, name, value) {
                return folded
            }
            return indexer.tag(query.itemClass, name, value)
        }
        let tags = try db.fewestRowsFirst(ranked)
        let references = query.references?.filter { $0.itemClass == query.itemClass }
        if let references, references.isEmpty { return [] }

        let itemClass = query.itemClass.rawValue
        let attributesColumn: SQL = wantsAttributes ? "i.attributes" : "NULL"
        let secretColumn: SQL = wantsSecret ? "i.secret" : "NULL"
        // The version column exists once the file is in format 2, which an unlocked keychain's always is.
        let checkColumns: SQL = formatVersion >= 2 ? "i.version, i.sync, i.pk" : "0, 0, NULL"
        var sql: SQL = "SELECT i.id, i.uuid, \(attributesColumn), \(secretColumn), \(checkColumns), \(classColumn)"
        if let first = tags.first {
            sql += " FROM attribute_index a0 JOIN items i ON i.id = a0.item"
            sql += " WHERE a0.tag = \(first) AND +i.class = \(itemClass)"
            for tag in tags.dropFirst() {
                sql += " AND EXISTS (SELECT 1 FROM attribute_index WHERE tag = \(tag) AND item = i.id)"
            }
        } else {
            sql += " FROM items i WHERE +i.class = \(itemClass)"
        }
        switch query.synchronizable {
        case .no: sql += " AND i.sync = 0"
        case .yes: sql += " AND i.sync = 1"
        case .any: break
        }
        if let references { sql += " AND i.uuid IN (\(list: references.map(\.identifier)))" }
        // Rows the decrypted attributes may still turn down are all read; the limit is counted below.
        let rowLimit = unindexed.isEmpty && !confirming ? Int64(limit ?? -1) : -1
        // In the driving index's own order when there is one (the same as the items' ids): rows stream without a
        // sort, so a query that wants one item stops at the first that confirms.
        sql += tags.isEmpty ? " ORDER BY i.id" : " ORDER BY a0.item"
        sql += " LIMIT \(rowLimit)"

        return try db.withStatement(sql) { (statement) throws(KeychainError) -> [Match] in
            var matches: [Match] = []
            var lockedOut = 0
            var lockedOutClass: Accessibility?
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
                let className = statement.string(7) ?? ""
                let accessibility = Accessibility(rawValue: className)
                let key = accessibility.flatMap { classKeys[$0] }
                if key == nil {
                    // Unlocked, every class key the file gives is in memory, but those of the ThisDeviceOnly
                    // classes of a file copied from another machine (their TPM is not this one): those items
                    // are left out as a locked keychain leaves out what it cannot open.
                    let otherDevice = accessibility.map { !$0.mayLeaveThisDevice && deviceFailure != nil } ?? false
                    // Unlocked, the file is in format 3: a row with no class is one the upgrade could not open
                    // (damaged before it), left out as format 2 left out a row it could not open, not an error
                    // for every query reaching it. (Locked, a format-2 file's rows have no class yet.)
                    if unlocked, className.isEmpty { continue }
                    if unlocked, !otherDevice {
                        guard let accessibility else { throw ClassKeys.unknownClass(className) }
                        throw ClassKeys.missing(accessibility)
                    }
                    if needsOpening {
                        lockedOut += 1
                        lockedOutClass = accessibility
                        continue
                    }
                }
                if let key, wantsAttributes {
                    let sealed = statement.data(2) ?? Data()
                    let context = ItemSealing.itemField(
                        keychain: keychain.identifier, item: reference, .attributes, version: version)
                    let opened = try AttributeCodec.decode(try ItemSealing.open(sealed, key, context))
                    guard unindexed.allSatisfy({ opened[$0.key] == $0.value }), Self.confirms(opened, query) else {
                        continue
                    }
                    if confirming {
                        guard Accessibility(of: opened).rawValue == className else { continue }
                        let entries = IndexEntries(
                            synchronizable: statement.int64(5) != 0, primaryKeyHash: statement.data(6),
                            tags: try Self.storedTags(of: row, db))
                        guard entries == IndexEntries(reference.itemClass, opened, indexer) else { continue }
                    }
                    attributes = returning.contains(.attributes) ? opened : nil
                }
                if let key, wantsSecret, let sealed = statement.data(3) {
                    let context = ItemSealing.itemField(
                        keychain: keychain.identifier, item: reference, .secret, version: version)
                    if secretInSecretMemory {
                        protectedSecret = SharedSecret(try ItemSealing.openSecret(sealed, key, context))
                    } else {
                        secret = try ItemSealing.open(sealed, key, context)
                    }
                }
                matches.append(
                    Match(
                        row: row, version: version,
                        item: KeychainItem(reference: reference, attributes: attributes, secret: secret),
                        secretInSecretMemory: protectedSecret))
                if let limit, matches.count >= limit { break }
            }
            if matches.isEmpty, lockedOut > 0 {
                if unlocked, let deviceFailure {
                    throw ClassKeys.otherDevice(lockedOutClass ?? .whenUnlockedThisDeviceOnly, deviceFailure)
                }
                throw KeychainError(
                    .interactionNotAllowed,
                    "the keychain is locked: the items that match are of classes readable only while it is unlocked")
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
    /// The tags the attribute index holds for the item in `row`.
    fileprivate static func storedTags(of row: Int64, _ db: SQLiteDatabase) throws(KeychainError) -> Set<Data> {
        try db.withStatement("SELECT tag FROM attribute_index WHERE item = \(row)") { (select) throws(KeychainError) in
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
