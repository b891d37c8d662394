import CSQLite
import FoundationEssentials
import KeychainCore

/// One SQLite connection with a cache of prepared statements. Not thread-safe:
/// ``Keychain`` serialises every use behind its lock.
final class SQLiteDatabase {
    private let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]

    /// Opens (or creates, with `create`) the file at `path`.
    init(path: String, create: Bool) throws(KeychainError) {
        var db: OpaquePointer?
        let flags =
            SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
            | (create ? SQLITE_OPEN_CREATE : 0)
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw KeychainError(
                rc & 0xff == SQLITE_CANTOPEN ? .noSuchKeychain : .io,
                "cannot open keychain file \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
        // The file may come from anyone (the command opens files it is given): no SQL through the file's
        // schema (triggers, views, functions in it) runs with this connection's trust, and the schema
        // cannot be written through SQL.
        guard latchkey_sqlite_defensive(db) == SQLITE_OK else {
            sqlite3_close_v2(db)
            throw KeychainError(.io, "cannot open keychain file \(path) defensively")
        }
        do {
            try execute("PRAGMA trusted_schema = OFF")
        } catch {
            sqlite3_close_v2(db)
            throw error
        }
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs a `TRUNCATE` checkpoint, waiting at most `waitMilliseconds` for other connections; true when
    /// the whole log was copied into the file and emptied.
    func checkpoint(waitMilliseconds: Int32) throws(KeychainError) -> Bool {
        // A connection that has read nothing yet does not know the file is in WAL mode, and its
        // checkpoint would do nothing (and report -1 frames as if it had succeeded).
        try execute("PRAGMA journal_mode = WAL")
        sqlite3_busy_timeout(handle, waitMilliseconds)
        defer { sqlite3_busy_timeout(handle, 5000) }
        var logFrames: Int32 = 0
        var copiedFrames: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, &logFrames, &copiedFrames)
        if rc & 0xff == SQLITE_BUSY || rc & 0xff == SQLITE_LOCKED { return false }
        guard rc == SQLITE_OK else { throw Self.error(rc, String(cString: sqlite3_errmsg(handle))) }
        return logFrames == 0 && copiedFrames == 0
    }

    /// Runs SQL text with no parameters and no rows wanted.
    func execute(_ sql: String) throws(KeychainError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "error \(rc)"
            sqlite3_free(message)
            throw Self.error(rc, text)
        }
    }

    /// Runs `body` with the prepared statement for `sql` (prepared once per
    /// connection), its arguments bound in order, and resets it afterwards, so
    /// that no statement keeps a read transaction open between calls.
    func withStatement<T>(_ sql: SQL, _ body: (SQLiteStatement) throws(KeychainError) -> T)
        throws(KeychainError) -> T
    {
        let statement = try prepared(sql.text)
        defer { statement.reset() }
        for (offset, argument) in sql.arguments.enumerated() { statement.bind(Int32(offset + 1), argument) }
        return try body(statement)
    }

    /// Runs `sql`, a statement that returns no rows, with its arguments.
    func run(_ sql: SQL) throws(KeychainError) {
        try withStatement(sql) { (statement) throws(KeychainError) in try statement.run() }
    }

    private func prepared(_ sql: String) throws(KeychainError) -> SQLiteStatement {
        if let cached = statements[sql] { return cached }
        // Queries with item lists vary in shape; keep the cache bounded.
        if statements.count >= 64 { statements.removeAll() }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(
            handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw Self.error(rc, String(cString: sqlite3_errmsg(handle)))
        }
        let statement = SQLiteStatement(stmt, database: handle)
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in one write transaction: committed if it returns, rolled back if it throws.
    func transaction<T>(_ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Maps an SQLite result code to a keychain error.
    static func error(_ rc: Int32, _ message: String) -> KeychainError {
        switch rc & 0xff {
        case SQLITE_FULL: KeychainError(.diskFull, "keychain file: \(message)")
        case SQLITE_READONLY, SQLITE_PERM: KeychainError(.writePermission, "keychain file: \(message)")
        case SQLITE_CORRUPT, SQLITE_NOTADB: KeychainError(.invalidKeychain, "keychain file: \(message)")
        case SQLITE_CONSTRAINT: KeychainError(.duplicateItem, "an item with these primary attributes exists")
        case SQLITE_TOOBIG: KeychainError(.dataTooLarge, "keychain file: \(message)")
        default: KeychainError(.io, "keychain file: \(message) (SQLite \(rc))")
        }
    }
}

/// A prepared statement: bind values by position (1-based), step through rows.
final class SQLiteStatement {
    private let handle: OpaquePointer
    private let database: OpaquePointer

    init(_ handle: OpaquePointer, database: OpaquePointer) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func bind(_ index: Int32, _ value: Data?) {
        guard let value else {
            sqlite3_bind_null(handle, index)
            return
        }
        value.withUnsafeBytes { raw in
            // SQLITE_TRANSIENT: SQLite copies the bytes before this returns.
            _ = sqlite3_bind_blob64(
                handle, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(raw.count),
                unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
    }

    func bind(_ index: Int32, _ value: String) {
        sqlite3_bind_text(handle, index, value, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    /// Advances to the next row; false when there is none.
    func step() throws(KeychainError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteDatabase.error(rc, String(cString: sqlite3_errmsg(database)))
        }
    }

    /// Runs a statement that returns no rows.
    func run() throws(KeychainError) {
        while try step() {}
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    func data(_ column: Int32) -> Data? {
        guard !isNull(column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    func string(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: text)
    }
}

extension SQLiteDatabase {
    /// The number of rows the last INSERT, UPDATE or DELETE changed.
    var changes: Int { Int(sqlite3_changes(handle)) }
    /// The rows this connection changed since it opened (every INSERT, UPDATE and DELETE, any table).
    var totalChanges: Int64 { sqlite3_total_changes64(handle) }
    /// The rowid of the last INSERT.
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
}
