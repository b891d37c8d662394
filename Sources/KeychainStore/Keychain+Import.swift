import FoundationEssentials
import KeychainCore
import Posix

extension Keychain {
    /// Adds `items` in one transaction, as ``add(_:metadata:)`` does, with the items whose primary key is
    /// taken (as `SecItemAdd`'s `errSecDuplicateItem` decides: by the class's primary key; a Secret Service item,
    /// which has none, by its attributes, as `CreateItem` with `replace` finds the item it replaces) reported and
    /// left out, or, with `replacing`, put in place of the items they collide with
    /// (deleted and added in the same transaction). A second item of `items` with the primary key of an
    /// earlier one is a duplicate either way. With `dryRun` nothing is written: the outcome says what would be.
    /// With `expecting` (the counts a person approved, from a dry run), nothing is written unless the import adds
    /// and replaces exactly as many items, decided under the same lock as the write.
    ///
    /// - Throws: as ``add(_:metadata:)``; `errSecInteractionRequired` when the counts are not `expecting`'s; when
    ///   it throws, nothing changed.
    package func importItems(
        _ items: [NewItem], replacing: Bool, dryRun: Bool, expecting: (added: Int, replaced: Int)? = nil
    ) throws(KeychainError) -> ImportOutcome {
        let prepared = try prepare(items)
        let (outcome, checkpointNow) = try state.withLock { (state) throws(KeychainError) -> (ImportOutcome, Bool) in
            _ = try state.unlockedKey()
            let db = state.db
            let indexer = state.indexer
            var outcome = ImportOutcome(dispositions: [])
            var seen = Set<Data>()
            var written: [PreparedItem] = []
            var replacedRows: [Int64] = []
            for item in prepared {
                let itemClass = item.reference.itemClass
                let existing: Int64?
                if let primaryKey = indexer.primaryKeyHash(itemClass, item.attributes) {
                    guard seen.insert(Data(itemClass.rawValue.utf8) + [0] + primaryKey).inserted else {
                        outcome.dispositions.append(.duplicate)
                        continue
                    }
                    existing = try db.withStatement(
                        "SELECT id FROM items WHERE class = \(itemClass.rawValue) AND pk = \(primaryKey)"
                    ) { (select) throws(KeychainError) -> Int64? in try select.step() ? select.int64(0) : nil }
                } else {
                    let attributes = Self.secretServiceAttributes(item.attributes)
                    guard seen.insert(Self.secretServiceTag(itemClass, attributes)).inserted else {
                        outcome.dispositions.append(.duplicate)
                        continue
                    }
                    var query = ItemQuery(itemClass, attributes: attributes, synchronizable: .any, limit: .all)
                    query.attributes[.secretServiceItem] = item.attributes[.secretServiceItem]
                    let found = try state.find(query, in: self, limit: nil, returning: [.attributes]).first {
                        Self.secretServiceAttributes($0.item.attributes ?? [:]) == attributes
                    }
                    // A Flatpak application's Secret portal key (the daemon's, marked so) is never replaced by a
                    // file's item with its attributes: the application's own keyring would become unreadable.
                    if found?.item.attributes?[.portalKey] != nil {
                        outcome.dispositions.append(.duplicate)
                        continue
                    }
                    existing = found?.row
                }
                switch (existing, replacing) {
                case (nil, _):
                    outcome.dispositions.append(.added)
                    written.append(item)
                case (let row?, true):
                    outcome.dispositions.append(.replaced)
                    replacedRows.append(row)
                    written.append(item)
                case (_?, false):
                    outcome.dispositions.append(.duplicate)
                }
            }
            if let expecting, expecting.added != outcome.added || expecting.replaced != outcome.replaced {
                throw KeychainError(
                    .interactionRequired,
                    "the keychain changed since the import was allowed (it would add \(outcome.added) and replace "
                        + "\(outcome.replaced), not \(expecting.added) and \(expecting.replaced)): nothing imported")
            }
            // Sealed also in a dry run: an item whose class cannot be written here fails the same way.
            let sealed = try seal(written, state: &state)
            guard !dryRun else { return (outcome, false) }
            try db.transaction { () throws(KeychainError) in
                for row in replacedRows { try db.run("DELETE FROM items WHERE id = \(row)") }
                try Self.insert(written, sealed, indexer: indexer, db)
            }
            state.usage = nil
            // Replaced rows leave earlier copies of their pages in the write-ahead log, as a delete does.
            if !replacedRows.isEmpty { state.checkpointWanted = state.defersCheckpoints }
            return (outcome, !replacedRows.isEmpty && !state.defersCheckpoints)
        }
        if checkpointNow { _ = Self.checkpoint(at: path, waitMilliseconds: 1_000) }
        return outcome
    }
}

extension Keychain {
    /// A Secret Service item's own attributes (`ss:`…): what makes two of them the same item.
    static func secretServiceAttributes(_ attributes: ItemAttributes) -> ItemAttributes {
        attributes.filter { $0.key.rawValue.hasPrefix(AttributeKey.secretServicePrefix) }
    }

    /// The attributes of a Secret Service item as one value, for telling duplicates apart within a batch.
    static func secretServiceTag(_ itemClass: ItemClass, _ attributes: ItemAttributes) -> Data {
        var tag = Data(itemClass.rawValue.utf8) + [1]
        for (key, value) in attributes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            var text = ""
            if case .string(let string) = value { text = string }
            for part in [key.rawValue, text] {
                withUnsafeBytes(of: UInt32(part.utf8.count).bigEndian) { tag += $0 }
                tag += Data(part.utf8)
            }
        }
        return tag
    }
}

/// What ``Keychain/importItems(_:replacing:dryRun:)`` did (or would do) with each item, in the order given.
package struct ImportOutcome: Sendable, Equatable {
    /// What became of one item.
    package enum Disposition: Sendable, Equatable {
        /// Added.
        case added
        /// Put in place of the item with its primary key.
        case replaced
        /// Left out: an item with its primary key is there (or came earlier in the batch).
        case duplicate
    }

    /// One per item given.
    package var dispositions: [Disposition]

    /// How many items were (or would be) added.
    package var added: Int { dispositions.count { $0 == .added } }
    /// How many replaced an item.
    package var replaced: Int { dispositions.count { $0 == .replaced } }
    /// How many were left out as duplicates.
    package var duplicates: Int { dispositions.count { $0 == .duplicate } }
}
