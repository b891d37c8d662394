import CSQLite
import Foundation
import KeySlots
import KeychainCore
import Posix
import TPMSealing
import Testing

@testable import KeychainStore

/// The slot table of a real keychain file, with tpm2 slots sealed by a real software TPM (swtpm).
@Suite(.enabled(if: SoftwareTPM.isAvailable, "swtpm is not installed"))
struct KeySlotTests {
    let password = Array("correct horse".utf8)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-slots-\(UUID())")

    func newKeychain() throws -> Keychain {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try Keychain.create(at: directory.appendingPathComponent("test.keychain-db").path, password: password)
    }

    func reopened(_ keychain: Keychain) throws -> Keychain {
        try Keychain(opening: keychain.path)
    }

    func secretOf(_ keychain: Keychain) throws -> Data? {
        try keychain.items(
            matching: ItemQuery(.genericPassword, attributes: [.service: .string("slots")], returning: .data)
        )
        .first?.secret
    }

    @Test func aTPM2SlotUnlocksWithoutAPassword() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("s3cret".utf8))
        let slot = try TPMSlot.add(
            to: keychain, pin: nil, pcrs: [], sealing: KeySealing(configuration: tpm.configuration))
        #expect(slot.kind == .tpm2 && slot.id == 1)

        let locked = try reopened(keychain)
        #expect(locked.isLocked)
        let listed = try locked.keySlots()
        #expect(listed.slots.map(\.kind) == [.password, .tpm2])
        #expect(listed.check == .unverified)
        locked.unlock(
            with: try TPMSlot.unwrapKey(locked, pin: nil, sealing: KeySealing(configuration: tpm.configuration)))
        #expect(!locked.isLocked)
        #expect(try secretOf(locked) == Data("s3cret".utf8))
        #expect(try locked.keySlots().check == .verified)
    }

    @Test func onlyASlotWithoutAPINWhosePCRsChangedIsSealedAgainAndTheOldOneGoesOnceTheNewOneOpened() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let sealing = KeySealing(configuration: tpm.configuration)
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("s3cret".utf8))
        let bound = try TPMSlot.add(to: keychain, pin: nil, pcrs: [16], sealing: sealing)
        let unbound = try TPMSlot.add(to: keychain, pin: nil, pcrs: [], sealing: sealing)
        let pin = try SharedSecret(copying: Array("4711".utf8))
        let withPIN = try TPMSlot.add(to: keychain, pin: pin, pcrs: [16], sealing: sealing)
        #expect(try TPMSlot.resealChanged(keychain, sealing: sealing).isEmpty, "nothing changed yet")
        #expect(try TPMSlot.removeOutdated(keychain, sealing: sealing).isEmpty)

        try tpm.tpm2Tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)])
        let added = try TPMSlot.resealChanged(keychain, sealing: sealing)
        #expect(added.count == 1)
        let resealed = try #require(added.first)
        #expect(TPMSlot.sealedKey(of: resealed)?.pcrs == [16] && TPMSlot.sealedKey(of: resealed)?.needsPIN == false)
        // Every slot is still there (the old one waits until the new one has opened at a login), and asking
        // again adds nothing: one slot for those PCRs opens now.
        let ids = Set(try keychain.keySlots().slots.map(\.id))
        #expect(ids.isSuperset(of: [bound.id, unbound.id, withPIN.id, resealed.id]))
        #expect(try TPMSlot.resealChanged(keychain, sealing: sealing).isEmpty)

        // The new slot opens with the PCR values the machine has now; the PIN slot still reports them changed.
        let locked = try reopened(keychain)
        let slotKey = try sealing.unseal(try #require(TPMSlot.sealedKey(of: resealed)))
        locked.unlock(with: try locked.unwrapKey(slot: resealed.id, slotKey: slotKey))
        #expect(try secretOf(locked) == Data("s3cret".utf8))
        #expect(throws: KeySlotError.self) { try TPMSlot.unwrapKey(reopened(keychain), pin: pin, sealing: sealing) }

        // Once it has: the outdated slot goes; the PIN slot and the one bound to no PCRs stay.
        #expect(try TPMSlot.removeOutdated(locked, sealing: sealing) == [bound.id])
        #expect(Set(try keychain.keySlots().slots.map(\.id)) == [0, unbound.id, withPIN.id, resealed.id])
    }

    /// PCRs that changed only for one boot: the slot added then does not open at the next boot, the old one
    /// does, and the added one is what goes.
    @Test func aChangeForOneBootCostsNotTheSlotThatOpensAtTheNext() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let sealing = KeySealing(configuration: tpm.configuration)
        let keychain = try newKeychain()
        let original = try TPMSlot.add(to: keychain, pin: nil, pcrs: [16], sealing: sealing)
        try tpm.tpm2Tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)])
        let added = try #require(try TPMSlot.resealChanged(keychain, sealing: sealing).first)
        // The next boot: PCR 16 (the debug PCR, which can be reset) is back to its value at boot.
        try tpm.tpm2Tool("tpm2_pcrreset", ["16"])
        #expect(try TPMSlot.removeOutdated(keychain, sealing: sealing) == [added.id])
        #expect(try keychain.keySlots().slots.map(\.id) == [0, original.id])
    }

    @Test func aPINIsNeededAndAWrongOneFails() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let sealing = KeySealing(configuration: tpm.configuration)
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("pin".utf8))
        _ = try TPMSlot.add(to: keychain, pin: SharedSecret(copying: Array("4711".utf8)), pcrs: [], sealing: sealing)

        let locked = try reopened(keychain)
        // No PIN-less slot: a login without a password cannot open it.
        #expect {
            try TPMSlot.unwrapKey(locked, pin: nil, sealing: sealing)
        } throws: { error in
            if case .noSlot = error as? KeySlotError { return true }
            return false
        }
        #expect {
            try TPMSlot.unwrapKey(locked, pin: SharedSecret(copying: Array("1234".utf8)), sealing: sealing)
        } throws: { error in
            if case .tpm(.wrongPIN)? = error as? KeySlotError { return true }
            return false
        }
        #expect(locked.isLocked)
        locked.unlock(
            with: try TPMSlot.unwrapKey(locked, pin: SharedSecret(copying: Array("4711".utf8)), sealing: sealing))
        #expect(try secretOf(locked) == Data("pin".utf8))
    }

    @Test func aKeychainCopiedToAnotherTPMDoesNotOpenFromItsTPM2Slot() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let other = try SoftwareTPM()
        defer { other.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        _ = try TPMSlot.add(to: keychain, pin: nil, pcrs: [], sealing: KeySealing(configuration: tpm.configuration))
        let copy = directory.appendingPathComponent("copy.keychain-db").path
        _ = Keychain.checkpoint(at: keychain.path, waitMilliseconds: 1_000)
        try FileManager.default.copyItem(atPath: keychain.path, toPath: copy)

        let copied = try Keychain(opening: copy)
        #expect {
            try TPMSlot.unwrapKey(copied, pin: nil, sealing: KeySealing(configuration: other.configuration))
        } throws: { error in
            if case .tpm(.notThisTPM)? = error as? KeySlotError { return true }
            return false
        }
        #expect(copied.isLocked)
        // On its own TPM the copy opens: the refusal above is the other TPM's.
        copied.unlock(
            with: try TPMSlot.unwrapKey(copied, pin: nil, sealing: KeySealing(configuration: tpm.configuration)))
        #expect(!copied.isLocked)
    }

    @Test func theRecoveryKeyUnlocksAndAnotherDoesNot() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("rec".utf8))
        var recoveryKey = try RecoveryKey.generate()
        let slot = try RecoverySlot.add(to: keychain, recoveryKey: recoveryKey)
        defer { recoveryKey.wipe() }
        #expect(slot.kind == .recovery)
        var text = recoveryKey.formatted()
        defer { wipeBytes(&text) }

        let locked = try reopened(keychain)
        var wrong = try RecoveryKey.generate()
        defer { wrong.wipe() }
        let wrongText = wrong.formatted()
        #expect {
            try RecoverySlot.unwrapKey(locked, recoveryText: wrongText)
        } throws: { error in
            (error as? KeySlotError)?.keychainError.status == .authFailed
        }
        var typo = text
        typo[3] = typo[3] == UInt8(ascii: "a") ? UInt8(ascii: "b") : UInt8(ascii: "a")
        #expect {
            try RecoverySlot.unwrapKey(locked, recoveryText: typo)
        } throws: { error in
            if case .recoveryKey(.checkFailed)? = error as? KeySlotError { return true }
            return false
        }
        #expect(locked.isLocked)
        locked.unlock(with: try RecoverySlot.unwrapKey(locked, recoveryText: text))
        #expect(try secretOf(locked) == Data("rec".utf8))
    }

    @Test func aPasswordChangeLeavesTheOtherSlotsWorking() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let sealing = KeySealing(configuration: tpm.configuration)
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("pw".utf8))
        _ = try TPMSlot.add(to: keychain, pin: nil, pcrs: [], sealing: sealing)
        var recoveryKey = try RecoveryKey.generate()
        _ = try RecoverySlot.add(to: keychain, recoveryKey: recoveryKey)
        defer { recoveryKey.wipe() }
        let text = recoveryKey.formatted()
        try keychain.changePassword(from: password, to: Array("new password".utf8))

        let first = try reopened(keychain)
        #expect(throws: KeychainError.self) { try first.unlock(password: password) }
        try first.unlock(password: Array("new password".utf8))
        #expect(try first.keySlots().check == .verified)
        let second = try reopened(keychain)
        second.unlock(with: try TPMSlot.unwrapKey(second, pin: nil, sealing: sealing))
        #expect(try secretOf(second) == Data("pw".utf8))
        let third = try reopened(keychain)
        third.unlock(with: try RecoverySlot.unwrapKey(third, recoveryText: text))
        #expect(try secretOf(third) == Data("pw".utf8))
    }

    @Test func theLastPasswordLikeSlotIsNotRemoved() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let tpmSlot = try TPMSlot.add(
            to: keychain, pin: nil, pcrs: [], sealing: KeySealing(configuration: tpm.configuration))
        // Password and tpm2: the password is the last password-like slot.
        #expect(throws: KeychainError.self) { try keychain.removeKeySlot(id: KeySlot.passwordID) }
        var recoveryKey = try RecoveryKey.generate()
        let recovery = try RecoverySlot.add(to: keychain, recoveryKey: recoveryKey)
        defer { recoveryKey.wipe() }
        // With a recovery slot the password may go, and then the recovery slot is the last.
        try keychain.removeKeySlot(id: KeySlot.passwordID)
        #expect(try keychain.keySlots().slots.map(\.kind) == [.tpm2, .recovery])
        #expect {
            try keychain.removeKeySlot(id: recovery.id)
        } throws: { error in
            (error as? KeychainError)?.status == .param
        }
        // The tpm2 slot may go.
        try keychain.removeKeySlot(id: tpmSlot.id)
        let locked = try reopened(keychain)
        #expect(throws: KeychainError.self) { try locked.unlock(password: password) }
        let text = recoveryKey.formatted()
        locked.unlock(with: try RecoverySlot.unwrapKey(locked, recoveryText: text))
        #expect(try locked.keySlots().slots.map(\.kind) == [.recovery])
        // Adding a slot or removing one needs the key.
        let lockedAgain = try reopened(keychain)
        #expect {
            _ = try RecoverySlot.add(to: lockedAgain, recoveryKey: recoveryKey)
        } throws: { error in
            (error as? KeySlotError)?.keychainError.status == .interactionNotAllowed
        }
    }

    @Test func aRemovedSlotPutBackOrAnEditedRowIsRefused() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        var recoveryKey = try RecoveryKey.generate()
        let slot = try RecoverySlot.add(to: keychain, recoveryKey: recoveryKey)
        defer { recoveryKey.wipe() }
        let text = recoveryKey.formatted()
        let row = try metaRow(keychain.path, "slot-\(slot.id)")
        try keychain.removeKeySlot(id: slot.id)
        // Someone who can write the file puts the removed slot's row back.
        try setMetaRow(keychain.path, "slot-\(slot.id)", row)
        let restored = try reopened(keychain)
        #expect(try restored.keySlots().slots.map(\.kind) == [.password, .recovery])
        #expect {
            try RecoverySlot.unwrapKey(restored, recoveryText: text)
        } throws: { error in
            (error as? KeySlotError)?.keychainError.status == .decode
        }
        try restored.unlock(password: password)
        guard case .altered = try restored.keySlots().check else {
            Issue.record("a slot put back is not reported")
            return
        }
        // And no slot can be added on top of it (that would authenticate the row put back).
        #expect {
            _ = try RecoverySlot.add(to: restored, recoveryKey: recoveryKey)
        } throws: { error in
            (error as? KeySlotError)?.keychainError.status == .decode
        }
    }

    @Test func aSlotPlantedWithAKeyOfItsOwnIsRefused() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("old".utf8))
        // Someone with the file (but not the keychain key) writes a slot wrapping a key of their own under a
        // slot key of their own, and a slot list authenticated under their key.
        let plantedKey = try SecretKey.random()
        let slotKey = try SecretKey.random()
        let slot = KeySlot(id: 1, kind: .recovery, created: 1, parameters: Data(repeating: 7, count: 16))
        let row =
            KeySlotRecord.head(slot)
            + (try AuthenticatedCipher.seal(
                plantedKey.unownedData, key: slotKey,
                context: KeySlotRecord.wrapContext(slot, keychain: keychain.identifier)))
        try setMetaRow(keychain.path, "slot-1", row)
        try setMetaRow(
            keychain.path, "slots", try KeySlotRecord.manifest([1: row], key: plantedKey, keychain: keychain.identifier)
        )
        let locked = try reopened(keychain)
        #expect {
            try locked.unwrapKey(slot: 1, slotKey: SecretBytes(copying: slotKey.data))
        } throws: { error in
            (error as? KeychainError)?.status == .decode
        }
        #expect(locked.isLocked)
    }

    @Test func aFormat1FileHasItsPasswordSlotAndTakesSlotsOnceUnlocked() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("format1.keychain-db").path
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("KeychainStoreTests/Fixtures/format1.keychain-db")
        try FileManager.default.copyItem(atPath: fixture.path, toPath: path)
        let keychain = try Keychain(opening: path)
        #expect(try keychain.keySlots().slots.map(\.kind) == [.password])
        try keychain.unlock(password: "fixture password")
        var recoveryKey = try RecoveryKey.generate()
        defer { recoveryKey.wipe() }
        _ = try RecoverySlot.add(to: keychain, recoveryKey: recoveryKey)
        let reopened = try Keychain(opening: path)
        reopened.unlock(with: try RecoverySlot.unwrapKey(reopened, recoveryText: recoveryKey.formatted()))
        #expect(
            try reopened.items(
                matching: ItemQuery(
                    .genericPassword, attributes: [.service: .string("one.example")], returning: .attributes)
            ).count == 1)
    }

    @Test func aKeychainWithoutSlotsHasItsPasswordSlot() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let locked = try reopened(keychain)
        #expect(try locked.keySlots().slots == [KeySlot(id: 0, kind: .password, created: 0, parameters: Data())])
        try locked.unlock(password: password)
        #expect(try locked.keySlots().check == .verified)
    }
}

/// A row of the file's `meta` table, read with SQLite directly (as someone with the file would).
func metaRow(_ path: String, _ name: String) throws -> Data {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { throw CocoaError(.fileReadUnknown) }
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE name = ?1", -1, &statement, nil)
    defer { sqlite3_finalize(statement) }
    sqlite3_bind_text(statement, 1, name, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    guard sqlite3_step(statement) == SQLITE_ROW, let bytes = sqlite3_column_blob(statement, 0) else {
        throw CocoaError(.fileReadUnknown)
    }
    return Data(bytes: bytes, count: Int(sqlite3_column_bytes(statement, 0)))
}

extension KeySlotTests {
    /// An item row whose identifier is not 16 bytes (a damaged or hostile file) stops nothing (found by
    /// fuzz-keychain-file: "an item identifier has 16 bytes"). Since format 3 a slot's key is checked against
    /// the class keys, not the first item, so the slot opens and the damaged item reads as errSecDecode.
    @Test func aDamagedItemIdentifierRefusesTheSlotInsteadOfStopping() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        try keychain.add(.genericPassword, attributes: [.service: .string("slots")], secret: Data("rec".utf8))
        var recoveryKey = try RecoveryKey.generate()
        defer { recoveryKey.wipe() }
        _ = try RecoverySlot.add(to: keychain, recoveryKey: recoveryKey)
        var text = recoveryKey.formatted()
        defer { wipeBytes(&text) }
        try runSQL(keychain.path, "UPDATE items SET uuid = x'0102'")
        let locked = try reopened(keychain)
        locked.unlock(with: try RecoverySlot.unwrapKey(locked, recoveryText: text))
        #expect(!locked.isLocked)
        #expect {
            try locked.items(matching: ItemQuery(.genericPassword, limit: .all, returning: .attributes))
        } throws: { error in
            (error as? KeychainError)?.status == .decode
        }
    }
}

/// Runs one statement with SQLite directly, outside Latchkey.
func runSQL(_ path: String, _ sql: String) throws {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { throw CocoaError(.fileWriteUnknown) }
    defer { sqlite3_close(db) }
    guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw CocoaError(.fileWriteUnknown) }
}

/// Writes a row of `meta` with SQLite directly, outside Latchkey.
func setMetaRow(_ path: String, _ name: String, _ value: Data) throws {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { throw CocoaError(.fileWriteUnknown) }
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)", -1, &statement, nil)
    defer { sqlite3_finalize(statement) }
    let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    sqlite3_bind_text(statement, 1, name, -1, transient)
    _ = value.withUnsafeBytes { sqlite3_bind_blob(statement, 2, $0.baseAddress, Int32($0.count), transient) }
    guard sqlite3_step(statement) == SQLITE_DONE else { throw CocoaError(.fileWriteUnknown) }
}
