import Foundation
import KeychainStore
import Testing

/// What the daemon, the importer and the command share when they make a keychain: its id and what it records.
@Suite struct NewKeychainTests {
    @Test func aNewKeychainsIDIsItsBaseOrTheFirstFreeNumberedOne() throws {
        let directory = try TemporaryDirectory()
        func newID(_ base: String, isTaken: (String) -> Bool = { _ in false }) -> String {
            KeychainLocation.newKeychainID(from: base, inDirectory: directory.path, isTaken: isTaken)
        }
        #expect(newID("work") == "work")
        // The login and session keychains' ids are never given, file or not.
        #expect(newID("login") == "login_2")
        #expect(newID("session") == "session_2")
        for id in ["work", "work_2"] {
            #expect(
                FileManager.default.createFile(
                    atPath: KeychainLocation.keychainPath(id: id, inDirectory: directory.path), contents: Data()))
        }
        #expect(newID("work") == "work_3")
        #expect(
            KeychainLocation.keychainPath(id: "work", inDirectory: directory.path) == directory.file("work.keychain-db")
        )
        // An id the caller holds (a keychain being made) is taken too.
        #expect(newID("home") { $0 == "home" || $0 == "home_2" } == "home_3")
    }

    @Test func aNewKeychainRecordsItsLabelAndWhenItWasMade() throws {
        let directory = try TemporaryDirectory()
        let keychain = try Keychain.create(at: directory.file("k.keychain-db"), password: "pw")
        let before = UInt64(Date().timeIntervalSince1970)
        try keychain.recordCreation(label: "Work")
        let after = UInt64(Date().timeIntervalSince1970)
        #expect(try keychain.metadata("label") == Data("Work".utf8))
        let created = try #require(try keychain.metadata("created"))
        let seconds = try #require(UInt64(String(decoding: created, as: UTF8.self)))
        #expect(seconds >= before && seconds <= after)

        let unlabelled = try Keychain.create(at: directory.file("u.keychain-db"), password: "pw")
        try unlabelled.recordCreation(label: nil)
        #expect(try unlabelled.metadata("label") == nil)
        #expect(try unlabelled.metadata("created") != nil)
    }
}
