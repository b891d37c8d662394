// Fuzzes the keychain file's key-slot table as the real open path reads it: a template keychain with a password
// (derived once, at start) and two slots beside it is copied, the input rewrites its slot rows (`slot-N`), the
// authenticated list (`slots`) and header rows, and the copy's slots are listed, opened with the right slot key,
// and added and removed. Slot rows are written either as the input's raw bytes or as a well-formed row whose
// kind, date and parameters come from the input, sealed under the real slot key, so the checks behind the
// authentication (the authenticated list, the key opening an item) are reached too.
//
// Input: a sequence of edits, each `op`, `target`, then a field (2-byte length and bytes):
//   op % 3 == 0: set the meta row `metaNames[target]` to the field;
//   op % 3 == 1: delete the meta row `metaNames[target]`;
//   op % 3 == 2: set row `slot-(target % 4)` to a row of kind `target / 4 % 4` (0: fido2) with the field as its
//                parameters (each slot's parameters are then decoded as its kind's reader does), its key sealed under the slot key (the keychain key, or the field's first 32
//                bytes as a key when `target` ≥ 128).
import FoundationEssentials
import FuzzSupport
import Glibc
import KeychainCore

@testable import KeySlots
@testable import KeychainStore
@testable import Posix

let metaNames = ["slots", "slot-1", "slot-2", "slot-3", "format", "uuid", "wrapped_key", "kdf"]

/// What every input starts from.
struct Fixture {
    let directory: String
    let template: String
    /// The slot key of slots 1 and 2 (the same for both, so either opens with it).
    let slotKey: [UInt8] = [UInt8](repeating: 0x5A, count: 32)
    let keychainKey: SecretKey
    let identifier: Data

    init() throws {
        directory = scratchDirectory("key-slots")
        template = directory + "/template.keychain-db"
        let password = Array("password".utf8)
        let keychain = try Keychain.create(at: template, password: password)
        try keychain.add(
            .genericPassword, attributes: [.service: .string("svc"), .account: .string("alice")],
            secret: Data("s3cret".utf8))
        let key = try SecretBytes(copying: slotKey)
        _ = try keychain.addKeySlot(.recovery, parameters: Data(repeating: 7, count: 16), slotKey: key)
        _ = try keychain.addKeySlot(.tpm2, parameters: Data("sealed".utf8), slotKey: key)
        identifier = keychain.identifier
        let db = try SQLiteDatabase(path: template, create: false)
        keychainKey = try KeychainHeader.load(from: db).unwrap(password: password)
    }
}

nonisolated(unsafe) var fixture: Fixture?

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        var planted = SeedBuilder()
        planted.byte(2)
        planted.byte(3 + 4 * 3 + 128)
        planted.field([UInt8](repeating: 0x11, count: 40))
        var dropped = SeedBuilder()
        dropped.byte(1)
        dropped.byte(0)
        dropped.field([])
        var listed = SeedBuilder()
        listed.byte(0)
        listed.byte(1)
        listed.field([1, 2, 3])
        // Slot 3 as a well-formed fido2 slot (kind 0 in the harness's numbering), sealed under the slot key.
        var fido2 = SeedBuilder()
        fido2.byte(2)
        fido2.byte(3)
        fido2.field(
            Fido2SlotParameters(
                relyingParty: "latchkey:00", credentialID: [UInt8](repeating: 0xC1, count: 64),
                salt: [UInt8](repeating: 0x5A, count: 32), usesPIN: true, aaguid: [UInt8](repeating: 1, count: 16),
                product: "soft-fido2"
            ).encoded())
        return [
            ("unchanged", []), ("planted-slot", planted.bytes), ("no-list", dropped.bytes), ("raw-row", listed.bytes),
            ("fido2-slot", fido2.bytes),
        ]
    }
    do {
        fixture = try Fixture()
    } catch {
        fatalError("fuzz-key-slots: cannot make the template keychain: \(error)")
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
        let field = input.field()
        let name: String
        let value: Data
        switch op % 3 {
        case 0:
            (name, value) = (metaNames[target % metaNames.count], Data(field))
        case 1:
            try? db.withStatement("DELETE FROM meta WHERE name = ?1") { (statement) throws(KeychainError) in
                statement.bind(1, metaNames[target % metaNames.count])
                try statement.run()
            }
            continue
        default:
            guard let row = wellFormedRow(target, field, fixture) else { continue }
            (name, value) = ("slot-\(target % 4)", row)
        }
        try? db.withStatement("INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)") {
            (statement) throws(KeychainError) in
            statement.bind(1, name)
            statement.bind(2, value)
            try statement.run()
        }
    }
}

/// The key a well-formed row is sealed under: the fixture's slot key, or (from `target` 128 on) the field's
/// first 32 bytes, as a slot planted with a key of its own.
func rowKey(_ target: Int, _ field: [UInt8], _ fixture: Fixture) -> [UInt8]? {
    guard target >= 128 else { return fixture.slotKey }
    return field.count >= 32 ? Array(field.prefix(32)) : nil
}

/// A slot row as Latchkey writes it, with the input's kind, parameters and key.
func wellFormedRow(_ target: Int, _ field: [UInt8], _ fixture: Fixture) -> Data? {
    guard let kind = KeySlotKind(rawValue: target / 4 % 4 == 0 ? KeySlotKind.fido2.rawValue : UInt8(target / 4 % 4)),
        let slotKeyBytes = rowKey(target, field, fixture),
        let slotKey = try? SecretKey.filled({ $0.copyBytes(from: slotKeyBytes) })
    else { return nil }
    let slot = KeySlot(id: UInt8(target % 4), kind: kind, created: Int64(target), parameters: Data(field))
    guard
        let wrapped = try? AuthenticatedCipher.seal(
            fixture.keychainKey.unownedData, key: slotKey,
            context: KeySlotRecord.wrapContext(slot, keychain: fixture.identifier))
    else { return nil }
    return KeySlotRecord.head(slot) + wrapped
}

/// Lists the slots, opens each with the slot key, and, once one opened, reads the items and adds and removes a
/// slot: any error is fine, a crash is not.
func exercise(_ path: String, fixture: Fixture) {
    guard let keychain = try? Keychain(opening: path) else { return }
    // Each slot's parameters as the slot kinds read them (a fido2 slot's are bounded and versioned).
    for slot in (try? keychain.keySlots().slots) ?? [] {
        _ = Fido2Slot.parameters(of: slot).map { ($0.encoded(), $0.aaguidText) }
        _ = TPMSlot.sealedKey(of: slot)
    }
    guard let slotKey = try? SecretBytes(copying: fixture.slotKey) else { return }
    for id in UInt8(0)...3 {
        guard let unwrapped = try? keychain.unwrapKey(slot: id, slotKey: slotKey) else { continue }
        keychain.unlock(with: unwrapped)
        _ = try? keychain.keySlots()
        _ = try? keychain.items(matching: ItemQuery(.genericPassword, limit: .all, returning: [.attributes, .data]))
        _ = try? keychain.addKeySlot(.recovery, parameters: Data([1, 2, 3]), slotKey: slotKey)
        _ = try? keychain.removeKeySlot(id: id)
        keychain.lock()
    }
}
