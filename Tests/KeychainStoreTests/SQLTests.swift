import Foundation
import KeychainCore
import Testing

@testable import KeychainStore

/// The store's SQL statements (`SQL`): interpolated values become numbered placeholders carried as arguments,
/// never SQL text.
@Suite struct SQLTests {
    @Test func interpolatedValuesBecomeNumberedPlaceholders() {
        let tag = Data([1, 2, 3])
        let sql: SQL = "SELECT id FROM items WHERE class = \("genp") AND tag = \(tag) LIMIT \(Int64(5))"
        #expect(sql.text == "SELECT id FROM items WHERE class = ?1 AND tag = ?2 LIMIT ?3")
        #expect(sql.arguments == [.text("genp"), .blob(tag), .integer(5)])
    }

    @Test func partsJoinedAreNumberedAsOneStatement() {
        let column: SQL = "i.attributes"
        var sql: SQL = "SELECT \(column), \(Data([9])) FROM items i WHERE i.class = \("genp")"
        sql += " AND i.sync = \(true)"
        sql += " AND i.uuid IN (\(list: [Data([1]), Data([2])]))"
        let part: SQL = " AND i.id > \(7) AND i.pk IS \(nil as Data?)"
        sql += " ORDER BY i.id\(part)"
        #expect(
            sql.text
                == "SELECT i.attributes, ?1 FROM items i WHERE i.class = ?2 AND i.sync = ?3 AND i.uuid IN (?4, ?5)"
                + " ORDER BY i.id AND i.id > ?6 AND i.pk IS ?7")
        #expect(
            sql.arguments == [
                .blob(Data([9])), .text("genp"), .integer(1), .blob(Data([1])), .blob(Data([2])), .integer(7), .null,
            ])
        let literal: SQL = "SELECT 1"
        #expect(literal.text == "SELECT 1")
        #expect(literal.arguments.isEmpty)
    }

    /// The arguments reach SQLite bound to their placeholders, in order.
    @Test func argumentsAreBoundInOrder() throws {
        let db = try SQLiteDatabase(path: ":memory:", create: true)
        let blob = Data([0, 0xff, 0x27])
        let row = try db.withStatement("SELECT \(Int64(-3)), \("two"), \(blob), \(nil as Data?), \(false)") {
            (select) throws(KeychainError) in
            #expect(try select.step())
            return (
                select.int64(0), select.string(1), select.data(2), select.isNull(3), select.int64(4)
            )
        }
        #expect(row.0 == -3)
        #expect(row.1 == "two")
        #expect(row.2 == blob)
        #expect(row.3)
        #expect(row.4 == 0)
    }

    /// A value written to look like SQL stays a value: stored and found as the text it is, the statement text
    /// never holds it, and the table it names is still there.
    @Test func aValueThatLooksLikeSQLStaysAValue() throws {
        let db = try SQLiteDatabase(path: ":memory:", create: true)
        try db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB)")
        let name = "x'); DROP TABLE meta; --"
        let insert: SQL = "INSERT INTO meta (name, value) VALUES (\(name), \(Data("v".utf8)))"
        #expect(!insert.text.contains("DROP"))
        try db.run(insert)
        try db.run("INSERT INTO meta (name, value) VALUES (\("' OR 1=1 --"), \(Data("w".utf8)))")
        let found = try db.withStatement("SELECT value FROM meta WHERE name = \(name)") {
            (select) throws(KeychainError) -> [Data] in
            var values: [Data] = []
            while try select.step() { values.append(select.data(0) ?? Data()) }
            return values
        }
        #expect(found == [Data("v".utf8)])
        let none = try db.withStatement("SELECT count(*) FROM meta WHERE name = \("anything' OR '1'='1")") {
            (select) throws(KeychainError) in try select.step() ? select.int64(0) : -1
        }
        #expect(none == 0)
        let count = try db.withStatement("SELECT count(*) FROM meta") { (select) throws(KeychainError) in
            try select.step() ? select.int64(0) : -1
        }
        #expect(count == 2)
    }
}

/// Which index tag drives a query with several: the one with the fewest rows, so that a query naming a shared
/// attribute (a KWallet folder) and a rare one (the entry's key) reads the rare one's rows.
@Suite struct DrivingTagTests {
    private func index(_ rows: [(tag: UInt8, items: Int)]) throws -> SQLiteDatabase {
        let db = try SQLiteDatabase(path: ":memory:", create: true)
        try db.execute(
            "CREATE TABLE attribute_index (tag BLOB NOT NULL, item INTEGER NOT NULL, PRIMARY KEY (tag, item))")
        for (tag, items) in rows {
            for item in 0..<items { try db.run("INSERT INTO attribute_index VALUES (\(Data([tag])), \(Int64(item)))") }
        }
        return db
    }

    @Test func theTagWithTheFewestRowsComesFirst() throws {
        let db = try index([(1, 100), (2, 3), (3, 40)])
        #expect(try db.fewestRowsFirst([Data([1]), Data([3]), Data([2])]) == [Data([2]), Data([1]), Data([3])])
        // A tag no item has drives: the query ends at once.
        #expect(try db.fewestRowsFirst([Data([1]), Data([9])]) == [Data([9]), Data([1])])
    }

    @Test func tiesBeyondTheProbeKeepTheRankedOrder() throws {
        let many = SQLiteDatabase.tagProbeRows + 5
        let db = try index([(1, many), (2, many + 10)])
        #expect(try db.fewestRowsFirst([Data([2]), Data([1])]) == [Data([2]), Data([1])])
        #expect(try db.fewestRowsFirst([Data([1])]) == [Data([1])])
    }
}
