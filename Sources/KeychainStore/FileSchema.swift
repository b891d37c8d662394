import KeychainCore

/// The SQL schema of a keychain file and the steps that bring an older file
/// up to date. `PRAGMA user_version` holds the version.
enum FileSchema {
    /// The version this build writes.
    static let currentVersion: Int64 = 1

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

    /// Applies every migration the file lacks, each in its own transaction.
    static func migrate(_ db: SQLiteDatabase) throws(KeychainError) {
        let version = try userVersion(db)
        guard version <= currentVersion else {
            throw KeychainError(
                .invalidKeychain,
                "keychain file has schema version \(version); this build reads up to \(currentVersion)")
        }
        for step in Int(version)..<Int(currentVersion) {
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
