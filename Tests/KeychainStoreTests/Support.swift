import CSQLite
import Foundation
import KeychainCore
import KeychainStore

/// A temporary directory removed when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A second, raw SQLite connection to a keychain file, for tampering with it
/// the way someone with the file could.
final class RawFile {
    private var db: OpaquePointer?

    init(_ path: String) throws {
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw KeychainError(.io, "open \(path)") }
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { sqlite3_close(db) }

    /// The first column of every row of `sql`, as bytes.
    func blobs(_ sql: String) throws -> [Data] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw KeychainError(.io, String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(statement) }
        var rows: [Data] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            let count = Int(sqlite3_column_bytes(statement, 0))
            if let bytes = sqlite3_column_blob(statement, 0) {
                rows.append(Data(bytes: bytes, count: count))
            } else if let text = sqlite3_column_text(statement, 0) {
                rows.append(Data(String(cString: text).utf8))
            } else {
                rows.append(Data())
            }
        }
        return rows
    }

    /// Runs `sql` with one blob parameter per element of `parameters`.
    func run(_ sql: String, _ parameters: [Data] = []) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw KeychainError(.io, String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(statement) }
        for (index, parameter) in parameters.enumerated() {
            _ = parameter.withUnsafeBytes {
                sqlite3_bind_blob(
                    statement, Int32(index + 1), $0.baseAddress, Int32($0.count),
                    unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            }
        }
        guard sqlite3_step(statement) == SQLITE_DONE else {
            throw KeychainError(.io, String(cString: sqlite3_errmsg(db)))
        }
    }
}

/// Every byte of a keychain file and its write-ahead log and shared-memory files.
func allBytes(of path: String) -> Data {
    ["", "-wal", "-shm"].reduce(into: Data()) { bytes, suffix in
        bytes += FileManager.default.contents(atPath: path + suffix) ?? Data()
    }
}

extension Data {
    func contains(_ text: String) -> Bool { range(of: Data(text.utf8)) != nil }
}

func genericQuery(_ account: String, returning: ReturnOptions = []) -> ItemQuery {
    ItemQuery(.genericPassword, attributes: [.account: .string(account)], returning: returning)
}

func statusOf(_ body: () throws -> Void) -> KeychainStatus? {
    do {
        try body()
        return nil
    } catch let error as KeychainError {
        return error.status
    } catch {
        return .internalComponent
    }
}
