import Foundation
import KeychainCore
import KeychainStore
import Testing

/// `Keychain.add(_:metadata:)`: several items and metadata rows in one transaction, dates kept.
@Suite struct BatchTests {
    let directory: TemporaryDirectory
    let keychain: Keychain

    init() throws {
        directory = try TemporaryDirectory()
        keychain = try Keychain.create(
            at: directory.file("batch.keychain-db"), password: "pw")
    }

    private func password(_ account: String, created: Date? = nil, modified: Date? = nil) -> NewItem {
        NewItem(
            .genericPassword, attributes: [.service: .string("batch"), .account: .string(account)],
            secret: Data(account.utf8), creationDate: created, modificationDate: modified)
    }

    @Test func batchAddsEveryItemKeepsDatesAndSetsMetadata() throws {
        let created = Date(timeIntervalSince1970: 1_500_000_000)
        let modified = Date(timeIntervalSince1970: 1_600_000_000)
        let before = Date()
        let added = try keychain.add(
            [password("a", created: created, modified: modified), password("b", created: created), password("c")],
            metadata: ["note": Data("one".utf8)])
        #expect(added.count == 3)
        let found = try keychain.items(
            matching: ItemQuery(.genericPassword, attributes: [.account: .string("a")], returning: .attributes))
        #expect(found.first?.attributes?[.creationDate] == .date(created))
        #expect(found.first?.attributes?[.modificationDate] == .date(modified))
        // Without a modification date it is the creation date; without either, now.
        #expect(added[1].attributes?[.modificationDate] == .date(created))
        guard case .date(let now)? = added[2].attributes?[.creationDate] else {
            throw KeychainError(.decode, "no creation date")
        }
        #expect(now >= before.addingTimeInterval(-1))
        #expect(try keychain.count() == 3)
        #expect(try keychain.metadata("note") == Data("one".utf8))
        // The single add still sets both dates to now.
        let single = try keychain.add(
            .genericPassword,
            attributes: [.account: .string("d"), .creationDate: .date(created)], secret: nil)
        #expect(single.attributes?[.creationDate] != .date(created))
    }

    @Test func aDateNoFaceCanShowIsRefusedAndNothingAdded() throws {
        // An import's file decides these dates: one far outside years 1 to 9999 once trapped the daemon when it
        // turned the item's dates into D-Bus's unsigned seconds.
        for date in [Date(timeIntervalSince1970: 1e300), Date(timeIntervalSince1970: -1e300)] {
            let error = try #require(throws: KeychainError.self) {
                try keychain.add([password("a"), password("b", created: date)])
            }
            #expect(error.status == .param)
        }
        #expect(try keychain.count() == 0)
        #expect(StorableDates.unsignedSeconds(Date(timeIntervalSince1970: 1e300)) == 253_402_300_799)
        #expect(StorableDates.unsignedSeconds(Date(timeIntervalSince1970: -5)) == 0)
        #expect(StorableDates.seconds(Date(timeIntervalSince1970: -1e300)) == -62_135_596_800)
    }

    @Test func aBatchThatFailsHalfWayChangesNothing() throws {
        try keychain.setMetadata("note", Data("before".utf8))
        // The third item has the primary key of the first: the whole batch is refused.
        let error = try #require(throws: KeychainError.self) {
            try keychain.add([password("a"), password("b"), password("a")], metadata: ["note": Data("after".utf8)])
        }
        #expect(error.status == .duplicateItem)
        #expect(try keychain.count() == 0)
        #expect(try keychain.metadata("note") == Data("before".utf8))
        // A locked keychain refuses it before anything is written.
        keychain.lock()
        #expect(throws: KeychainError.self) { try keychain.add([password("x")]) }
        try keychain.unlock(password: "pw")
        #expect(try keychain.count() == 0)
    }
}
