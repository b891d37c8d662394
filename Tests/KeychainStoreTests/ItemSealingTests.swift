import Foundation
import KeychainCore
import Testing

@testable import KeychainStore

/// The associated data of every sealed value, byte for byte as docs/file-format.md gives it: these bytes are
/// the file format, so a change here leaves existing files unreadable (`aFormat1FileOpensAndIsUpgradedAtUnlock`
/// opens a file written before).
@Suite struct ItemSealingTests {
    let keychain = Data(repeating: 0xaa, count: 16)
    let item = ItemReference(itemClass: .genericPassword, identifier: Data(repeating: 0xbb, count: 16))

    @Test func anItemFieldNamesKeychainItemClassFieldAndVersion() {
        let prefix = keychain + item.identifier + Data("genp".utf8)
        #expect(
            ItemSealing.itemField(keychain: keychain, item: item, .attributes, version: 1)
                == prefix + Data([0x61, 0x76, 0, 0, 0, 0, 0, 0, 0, 1]))
        #expect(
            ItemSealing.itemField(keychain: keychain, item: item, .secret, version: 0x0102_0304_0506_0708)
                == prefix + Data([0x73, 0x76, 1, 2, 3, 4, 5, 6, 7, 8]))
        // Version 0, an item written in format 1: no version.
        #expect(ItemSealing.itemField(keychain: keychain, item: item, .secret, version: 0) == prefix + Data([0x73]))
        let internet = ItemReference(itemClass: .internetPassword, identifier: item.identifier)
        #expect(
            ItemSealing.itemField(keychain: keychain, item: internet, .secret, version: 0)
                == keychain + item.identifier + Data("inet".utf8) + Data([0x73]))
    }

    @Test func keyWrapsAndListsBeginWithTheirPurpose() {
        #expect(ItemSealing.headerKeyWrap(keychain: keychain) == Data("latchkey wrap v1".utf8) + keychain)
        let slot = KeySlot(id: 3, kind: .recovery, created: 0x1122, parameters: Data([9, 8]))
        let head = KeySlotRecord.head(slot)
        #expect(head == Data([1, slot.kind.rawValue, 0, 0, 0, 0, 0, 0, 0x11, 0x22, 0, 0, 0, 2, 9, 8]))
        #expect(
            KeySlotRecord.wrapContext(slot, keychain: keychain)
                == Data("latchkey slot v1".utf8) + keychain + Data([3]) + head)
        let listing = Data([1, 0])
        #expect(
            ItemSealing.slotList(keychain: keychain, listing: listing)
                == Data("latchkey slots v1".utf8) + keychain + listing)
        #expect(
            ItemSealing.metaRecord(purpose: "latchkey settings v2", keychain: keychain, value: Data([5]))
                == Data("latchkey settings v2".utf8) + keychain + Data([5]))
        #expect(SettingsRecord.record.purpose == "latchkey settings v2")
        #expect(AccessPolicyRecord.record.purpose == "latchkey access policy v1")
        #expect(
            ItemSealing.classKeyWrap(keychain: keychain, accessibility: .afterFirstUnlockThisDeviceOnly)
                == Data("latchkey class key v1".utf8) + keychain + Data("cku".utf8))
        #expect(ClassKeys.rowName(.whenPasscodeSetThisDeviceOnly) == "class-key-akpu")
    }
}
