import FoundationEssentials
import KeychainCore

/// The SQL schema of a keychain file and the steps that bring an older file
/// up to date. `PRAGMA user_version` holds the version.
///
/// Format 3 adds a key per accessibility class (`meta` rows `class-key-PDMN`, sealed under the keychain key) and
/// each item's class (`items.pclass`), whose key seals its attributes and secret; it too is reached at the first
/// unlock. Format 1 is the schema below. Format 2 adds each item's `version` (bound into the associated data of its
/// sealed values) and the settings' MAC; it needs the keychain key, so a format-1 file is brought to format 2
/// by ``Keychain`` at its first unlock (`upgradeToCurrent`), not when it is opened. A format-1 file opened
/// locked is searched as before.
enum FileSchema {
    /// The version this build writes.
    static let currentVersion: Int64 = 3

    /// The last version SQL alone reaches, when a file is opened; the steps above it need the keychain key.
    static let unkeyedVersion: Int64 = 1

    /// SQL of the step from format 1 to format 2 (run with the key, beside the settings' MAC): items
    /// written in format 1 keep version 0, whose associated data is format 1's.
    static let keyedMigration = "ALTER TABLE items ADD COLUMN version INTEGER NOT NULL DEFAULT 0"

    /// SQL of the step from format 2 to format 3 (run with the key, beside the class keys' rows and the items'
    /// resealing under them: ``ClassKeys``): each item's accessibility class, whose key seals it.
    static let classKeyMigration = "ALTER TABLE items ADD COLUMN pclass TEXT NOT NULL DEFAULT ''"

    /// SQL that takes a file from version `index` to `index + 1`.
    static let migrations: [String] = [
        """
        CREATE TABLE meta (
            name  TEXT PRIMARY KEY,
            value BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE items (
            id         INTEGER PRIMARY KEY,
            uuid       BLOB NOT NULL UNIQUE,
            class      TEXT NOT NULL,
            sync       INTEGER NOT NULL DEFAULT 0,
            pk         BLOB,
            attributes BLOB NOT NULL,
            secret     BLOB
        );
        CREATE UNIQUE INDEX items_primary_key ON items (class, pk);
        CREATE TABLE attribute_index (
            tag  BLOB NOT NULL,
            item INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,
            PRIMARY KEY (tag, item)
        ) WITHOUT ROWID;
        CREATE INDEX attribute_index_item ON attribute_index (item);
        """
    ]

    /// Applies every migration the file lacks that needs no key, each in its own transaction.
    static func migrate(_ db: SQLiteDatabase) throws(KeychainError) {
        let version = try userVersion(db)
        guard version <= currentVersion else {
            throw KeychainError(
                .invalidKeychain,
                "keychain file has schema version \(version); this build reads up to \(currentVersion)")
        }
        for step in Int(version)..<Int(max(version, unkeyedVersion)) {
            try db.transaction { () throws(KeychainError) in
                try db.execute(migrations[step])
                try db.execute("PRAGMA user_version = \(step + 1)")
            }
        }
    }

    static func userVersion(_ db: SQLiteDatabase) throws(KeychainError) -> Int64 {
        try db.withStatement("PRAGMA user_version") { (statement) throws(KeychainError) in
            try statement.step() ? statement.int64(0) : 0
        }
    }
}

extension SQLiteDatabase {
    /// Sets row `name` of the `meta` table to `value`, adding the row or replacing the one there.
    func setMetaRow(_ name: String, _ value: Data) throws(KeychainError) {
        try run("INSERT OR REPLACE INTO meta (name, value) VALUES (\(name), \(value))")
    }
}
