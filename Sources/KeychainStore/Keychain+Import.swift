import FoundationEssentials
import KeychainCore
import Posix

extension Keychain {
    /// Adds `items` in one transaction, as ``add(_:metadata:)`` does, with the items whose primary key is
    /// taken (as `SecItemAdd`'s `errSecDuplicateItem` decides: by the class's primary key; Secret Service items
    /// have none) reported and left out, or, with `replacing`, put in place of the items they collide with
    /// (deleted and added in the same transaction). A second item of `items` with the primary key of an
    /// earlier one is a duplicate either way. With `dryRun` nothing is written: the outcome says what would be.
    ///
    /// - Throws: as ``add(_:metadata:)``; when it throws, nothing changed.
    package func importItems(_ items: [NewItem], replacing: Bool, dryRun: Bool) throws(KeychainError)
        -> ImportOutcome
    {
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
                guard let primaryKey = indexer.primaryKeyHash(itemClass, item.attributes) else {
                    outcome.dispositions.append(.added)
                    written.append(item)
                    continue
                }
                let tag = Data(itemClass.rawValue.utf8) + primaryKey
                guard seen.insert(tag).inserted else {
                    outcome.dispositions.append(.duplicate)
                    continue
                }
                let existing = try db.withStatement(
                    "SELECT id FROM items WHERE class = \(itemClass.rawValue) AND pk = \(primaryKey)"
                ) { (select) throws(KeychainError) -> Int64? in try select.step() ? select.int64(0) : nil }
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
