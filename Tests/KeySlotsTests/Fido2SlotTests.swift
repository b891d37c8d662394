import Foundation
import KeySlots
import KeychainCore
import Posix
import Testing

@testable import KeychainStore

/// The fido2 slot's keychain side: its parameters' encoding and the wrap under a security key's `hmac-secret`
/// output (the device itself is tested through libfido2 and the software authenticator, test_fido2_slots.py).
struct Fido2SlotTests {
    let password = Array("correct horse".utf8)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-fido2-\(UUID())")

    func newKeychain() throws -> Keychain {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keychain = try Keychain.create(
            at: directory.appendingPathComponent("test.keychain-db").path, password: password)
        try keychain.add(.genericPassword, attributes: [.service: .string("fido2")], secret: Data("touch".utf8))
        return keychain
    }

    func parameters(for keychain: Keychain, credential: [UInt8] = Array(repeating: 0xC1, count: 64))
        throws -> Fido2SlotParameters
    {
        Fido2SlotParameters(
            relyingParty: Fido2SlotParameters.relyingParty(of: keychain), credentialID: credential,
            salt: try Fido2Slot.newSalt(), usesPIN: true, aaguid: Array(0..<16), product: "Soft\u{1B}[2J key")
    }

    @Test func parametersRoundTripAndHostileOnesAreRefused() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let parameters = try parameters(for: keychain)
        #expect(parameters.product == "Soft [2J key")
        #expect(parameters.aaguidText == "00010203-0405-0607-0809-0a0b0c0d0e0f")
        let bytes = parameters.encoded()
        #expect(Fido2SlotParameters(encoded: bytes) == parameters)
        // Every truncation, a byte more, another version or flag, an empty or oversized credential.
        for length in 0..<bytes.count { #expect(Fido2SlotParameters(encoded: Array(bytes.prefix(length))) == nil) }
        #expect(Fido2SlotParameters(encoded: bytes + [0]) == nil)
        var other = bytes
        other[0] = 2
        #expect(Fido2SlotParameters(encoded: other) == nil)
        other = bytes
        other[1] = 3
        #expect(Fido2SlotParameters(encoded: other) == nil)
        var empty = parameters
        empty.credentialID = []
        #expect(Fido2SlotParameters(encoded: empty.encoded()) == nil)
        var long = parameters
        long.credentialID = Array(repeating: 1, count: Fido2SlotParameters.maximumCredentialLength + 1)
        #expect(Fido2SlotParameters(encoded: long.encoded()) == nil)
        var foreign = parameters
        foreign.relyingParty = "example.com"
        #expect(Fido2SlotParameters(encoded: foreign.encoded()) == nil)
    }

    @Test func theKeysOutputOpensTheSlotAndAnotherKeysDoesNot() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let parameters = try parameters(for: keychain)
        let output = try SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
        let slot = try Fido2Slot.add(to: keychain, parameters: parameters, secret: output)
        #expect(slot.kind == .fido2)
        #expect(!slot.kind.isPasswordLike)
        let locked = try Keychain(opening: keychain.path)
        #expect(Fido2Slot.slots(of: locked).map(\.parameters) == [parameters])
        let another = try SecretBytes(copying: [UInt8](repeating: 0x43, count: 32))
        #expect {
            try Fido2Slot.unwrapKey(locked, slot: slot, secret: another)
        } throws: { error in
            (error as? KeySlotError)?.keychainError.status == .authFailed
        }
        locked.unlock(with: try Fido2Slot.unwrapKey(locked, slot: slot, secret: output))
        #expect(!locked.isLocked)
        #expect(try locked.keySlots().check == .verified)
    }

    @Test func aCredentialOfAnotherKeychainIsRefused() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        var parameters = try parameters(for: keychain)
        parameters.relyingParty = Fido2SlotParameters.relyingPartyPrefix + "00"
        let output = try SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
        #expect(throws: KeySlotError.self) { try Fido2Slot.add(to: keychain, parameters: parameters, secret: output) }
    }

    @Test func aRowNamingAnotherRelyingPartyIsSkipped() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        var foreign = try parameters(for: keychain)
        foreign.relyingParty = Fido2SlotParameters.relyingPartyPrefix + "00"
        let slotKey = try SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
        let row = try keychain.addKeySlot(.fido2, parameters: Data(foreign.encoded()), slotKey: slotKey)
        #expect(Fido2Slot.parameters(of: row) == foreign)
        #expect(Fido2Slot.slots(of: keychain).isEmpty)
        #expect(Fido2Slot.foreignSlots(of: keychain) == [Int(row.id)])
        let search = Fido2Slot.search(keychain, remote: false, devices: { [] })
        #expect(search.reason == "fido2 slot \(row.id) names another keychain's relying party: skipped")
    }

    @Test func aLongMultibyteProductNameIsCutOnACharacterBoundary() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let base = try parameters(for: keychain)
        let parameters = Fido2SlotParameters(
            relyingParty: base.relyingParty, credentialID: base.credentialID, salt: base.salt, usesPIN: true,
            aaguid: base.aaguid, product: "K" + String(repeating: "é", count: 200))
        #expect(parameters.product == "K" + String(repeating: "é", count: 127))
        #expect(Fido2SlotParameters(encoded: parameters.encoded()) == parameters)
        let output = try SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
        _ = try Fido2Slot.add(to: keychain, parameters: parameters, secret: output)
    }

    @Test func bidiOverridesAndLineSeparatorsInAProductNameAreNotShown() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let base = try parameters(for: keychain)
        let parameters = Fido2SlotParameters(
            relyingParty: base.relyingParty, credentialID: base.credentialID, salt: base.salt, usesPIN: true,
            aaguid: base.aaguid, product: "Key\u{202E}yek\u{2028}Touch\u{2029}here\u{200B}")
        #expect(parameters.product == "Key yek Touch here ")
        // A row a file's writer made with them reads as nothing.
        var bytes = parameters.encoded()
        let name = Array("Key\u{202E}yek".utf8)
        bytes.replaceSubrange((bytes.count - parameters.product.utf8.count - 1)..., with: [UInt8(name.count)] + name)
        #expect(Fido2SlotParameters(encoded: bytes) == nil)
    }

    @Test func aFido2SlotIsNotTheLastPasswordLikeSlot() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let keychain = try newKeychain()
        let output = try SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
        _ = try Fido2Slot.add(to: keychain, parameters: try parameters(for: keychain), secret: output)
        #expect {
            try keychain.removeKeySlot(id: KeySlot.passwordID)
        } throws: { error in
            (error as? KeychainError)?.status == .param
        }
    }
}
