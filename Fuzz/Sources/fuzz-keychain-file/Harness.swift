// Fuzzes the keychain file as the real open path reads it: a template keychain (three items, its key wrapped by
// a parent keychain's so no scrypt runs per input) is copied, the input rewrites rows of its `meta` table (the
// header) and of its `items` table (the sealed rows), and the copy is opened, unlocked through its parent,
// searched and changed. Sealed values are written either as the input's raw bytes or sealed with the real
// key over the input's bytes, so the attribute decoder behind the authentication is reached too.
//
// Input: a sequence of edits, each `op`, `target`, then a field (2-byte length and bytes):
//   op % 4 == 0: set the meta row `metaNames[target]` to the field;
//   op % 4 == 1: delete the meta row `metaNames[target]`;
//   op % 4 == 2: set column `columns[target % 8]` of item row `target / 8 % 3 + 1` to the field;
//   op % 4 == 3: set column attributes (target even) or secret of item row `target / 2 % 3 + 1` to the field
//                sealed with the key of the class the row names (`pclass`; the keychain key when it names
//                none) and the row's version.
// The meta rows include the class keys (`class-key-ak`, `class-key-ck`: format 3); after the unlock the copy is
// also locked and read again (the AfterFirstUnlock item through the class key kept), then locked for every class.
import FoundationEssentials
import FuzzSupport
import Glibc
import KeychainCore

@testable import KeychainStore

let metaNames = [
    "format", "uuid", "kdf", "salt", "wrapped_key", "index_key", "attempts", "x-import", "class-key-ak", "class-key-ck",
]
let columns = ["uuid", "class", "pk", "attributes", "secret", "sync", "id", "pclass"]

/// What every input starts from.
struct Fixture {
    let directory: String
    let template: String
    let parent: Keychain
    let childKey: SecretKey
    let classKeys: [Accessibility: SecretKey]

    init() throws {
        directory = scratchDirectory("keychain-file")
        template = directory + "/template.keychain-db"
        parent = try Keychain.createInMemory(password: Array("parent".utf8))
        let parentKey = try parent.unwrapKey(password: Array("parent".utf8), limited: false).key
        do {
            let child = try Keychain.create(at: template, protectedBy: parent)
            try child.add(
                .genericPassword,
                attributes: [.service: .string("svc"), .account: .string("alice"), .label: .string("mail")],
                secret: Data("s3cret".utf8))
            try child.add(
                .internetPassword,
                attributes: [
                    .server: .string("example.org"), .account: .string("bob"), .port: .number(443),
                    .accessible: .string(Accessibility.afterFirstUnlock.rawValue),
                ],
                secret: Data([0, 1, 2, 255]))
            try child.add(.genericPassword, attributes: [.service: .string("empty")], secret: nil)
        }
        let db = try SQLiteDatabase(path: template, create: false)
        let header = try KeychainHeader.load(from: db)
        childKey = try header.unwrap(with: parentKey)
        classKeys = try ClassKeys.load(keychainKey: childKey, keychain: header.identifier, device: nil, db)
    }
}

nonisolated(unsafe) var fixture: Fixture?

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        var edit = SeedBuilder()
        edit.byte(0)
        edit.byte(6)
        edit.field([0, 0, 0, 5] + [0, 0, 0, 0, 0x65, 0x43, 0x21, 0x00])
        var sealed = SeedBuilder()
        sealed.byte(3)
        sealed.byte(0)
        sealed.field(Array(AttributeCodec.encode([.service: .string("svc"), .account: .string("alice")])))
        var raw = SeedBuilder()
        raw.byte(2)
        raw.byte(3)
        raw.field(Array("not sealed".utf8))
        return [
            ("unchanged", []), ("attempts", edit.bytes), ("sealed-attributes", sealed.bytes), ("raw-column", raw.bytes),
        ]
    }
    do {
        fixture = try Fixture()
    } catch {
        fatalError("fuzz-keychain-file: cannot make the template keychain: \(error)")
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    guard let fixture else { return 0 }
    var input = FuzzInput(start, count)
    let path = fixture.directory + "/input.keychain-db"
    Keychain.removeFiles(at: path)
    copyFile(fixture.template, path)
    defer { Keychain.removeFiles(at: path) }
    applyEdits(&input, to: path, fixture: fixture)
    exercise(path, fixture: fixture)
    return 0
}

/// Rewrites the copy's rows as the input says.
func applyEdits(_ input: inout FuzzInput, to path: String, fixture: Fixture) {
    guard let db = try? SQLiteDatabase(path: path, create: false) else { return }
    var edits = 0
    while !input.isAtEnd, edits < 16 {
        edits += 1
        let op = input.byte()
        let target = Int(input.byte())
        let value = Data(input.field())
        switch op % 4 {
        case 0:
            try? db.withStatement("INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)") {
                (statement) throws(KeychainError) in
                statement.bind(1, metaNames[target % metaNames.count])
                statement.bind(2, value)
                try statement.run()
            }
        case 1:
            try? db.withStatement("DELETE FROM meta WHERE name = ?1") { (statement) throws(KeychainError) in
                statement.bind(1, metaNames[target % metaNames.count])
                try statement.run()
            }
        case 2:
            let column = columns[target % columns.count]
            // The column is one of `columns`, a name, not a value: SQL text.
            try? db.withStatement(SQL(stringLiteral: "UPDATE items SET \(column) = ?1 WHERE id = ?2")) {
                (statement) throws(KeychainError) in
                if column == "id" || column == "sync" {
                    statement.bind(1, value.reduce(Int64(0)) { $0 << 8 | Int64($1) })
                } else if column == "class" || column == "pclass" {
                    statement.bind(1, String(decoding: value, as: UTF8.self))
                } else {
                    statement.bind(1, value)
                }
                statement.bind(2, Int64(target / 8 % 3 + 1))
                try statement.run()
            }
        default:
            let row = Int64(target / 2 % 3 + 1)
            let field: ItemSealing.Field = target % 2 == 0 ? .attributes : .secret
            guard
                let found = try? db.withStatement(
                    "SELECT uuid, class, pclass, version FROM items WHERE id = ?1",
                    { (statement) throws(KeychainError) -> (Data?, String?, String?, Int64) in
                        statement.bind(1, row)
                        return try statement.step()
                            ? (statement.data(0), statement.string(1), statement.string(2), statement.int64(3))
                            : (nil, nil, nil, 0)
                    }),
                let uuid = found.0, uuid.count == 16, let classCode = found.1,
                let itemClass = ItemClass(rawValue: classCode),
                let identifier = try? KeychainHeader.load(from: db).identifier
            else { continue }
            let context = ItemSealing.itemField(
                keychain: identifier, item: ItemReference(itemClass: itemClass, identifier: uuid), field,
                version: found.3)
            let key =
                found.2.flatMap(Accessibility.init(rawValue:)).flatMap { fixture.classKeys[$0] } ?? fixture.childKey
            guard let sealed = try? AuthenticatedCipher.seal(value, key: key, context: context) else {
                continue
            }
            let statement: SQL =
                field == .attributes
                ? "UPDATE items SET attributes = ?1 WHERE id = ?2" : "UPDATE items SET secret = ?1 WHERE id = ?2"
            try? db.withStatement(statement) { (statement) throws(KeychainError) in
                statement.bind(1, sealed)
                statement.bind(2, row)
                try statement.run()
            }
        }
    }
}

/// Opens the file, unlocks it through the parent, reads every item and changes some: any error is fine, a
/// crash is not.
func exercise(_ path: String, fixture: Fixture) {
    guard let keychain = try? Keychain(opening: path) else { return }
    _ = keychain.passwordRetryWait()
    _ = try? keychain.items(matching: ItemQuery(.genericPassword, limit: .all))
    guard (try? keychain.unlock(using: fixture.parent)) != nil else { return }
    for itemClass in [ItemClass.genericPassword, .internetPassword] {
        _ = try? keychain.items(
            matching: ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: [.attributes, .data]))
    }
    _ = try? keychain.items(
        matching: ItemQuery(
            .genericPassword, attributes: [.service: .string("svc")], caseInsensitive: true, limit: .all,
            returning: [.attributes, .data]))
    _ = try? keychain.update(
        matching: ItemQuery(.internetPassword, attributes: [.account: .string("bob")]),
        with: ItemChanges(attributes: [.label: .string("changed")], secret: Data("new".utf8)))
    _ = try? keychain.delete(matching: ItemQuery(.genericPassword, attributes: [.service: .string("empty")]))
    _ = try? keychain.count()
    // Locked, the AfterFirstUnlock class key stays: its items are read (and checked) without the keychain key.
    keychain.lock()
    for itemClass in [ItemClass.genericPassword, .internetPassword] {
        let query = ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: [.attributes, .data])
        _ = try? keychain.items(matching: query)
        if let references = try? keychain.items(matching: ItemQuery(itemClass, synchronizable: .any, limit: .all)) {
            _ = try? keychain.readable(among: references.map(\.reference))
        }
    }
    keychain.lock(allClasses: true)
    _ = try? keychain.items(matching: ItemQuery(.internetPassword, synchronizable: .any, returning: .data))
}
