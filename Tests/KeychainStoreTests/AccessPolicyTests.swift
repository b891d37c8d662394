import Foundation
import KeychainCore
import KeychainStore
import Testing

@Suite struct AccessPolicyTests {
    @Test func aKeychainPromptsUntilSetOtherwiseAndKeepsItsChoice() throws {
        let storage = try StorageTests()
        let path = storage.path
        let keychain = try storage.makeKeychain()
        #expect(try keychain.accessPolicy() == .prompt)
        try keychain.setAccessPolicy(.allowAll)
        let reopened = try Keychain(opening: path)
        #expect(statusOf { _ = try reopened.accessPolicy() } == .interactionNotAllowed, "checked only with the key")
        #expect(try reopened.storedAccessPolicy() == (.allowAll, false))
        try reopened.unlock(password: "pw")
        #expect(try reopened.accessPolicy() == .allowAll)
        #expect(try reopened.storedAccessPolicy() == (.allowAll, true))
        try reopened.setAccessPolicy(.prompt)
        #expect(try keychain.accessPolicy() == .prompt)
        reopened.lock()
        #expect(statusOf { try reopened.setAccessPolicy(.allowAll) } == .interactionNotAllowed)
        #expect(
            statusOf { try keychain.setMetadata("access-policy", Data("allow-all".utf8)) } == .param,
            "the rows are not written unauthenticated")
    }

    /// A file-writer who turns `prompt` into `allow-all` (or writes the rows without a MAC) gets `errSecDecode`,
    /// never an open keychain.
    @Test func anAlteredPolicyIsAnErrorNotAllowAll() throws {
        let storage = try StorageTests()
        let keychain = try storage.makeKeychain()
        try keychain.setAccessPolicy(.prompt)
        let raw = try RawFile(storage.path)
        try raw.run("UPDATE meta SET value = ?1 WHERE name = 'x-access-policy'", [Data("allow-all".utf8)])
        #expect(statusOf { _ = try keychain.accessPolicy() } == .decode)
        #expect(statusOf { _ = try keychain.storedAccessPolicy() } == .decode)

        try raw.run("DELETE FROM meta WHERE name = 'access_policy_mac'")
        #expect(statusOf { _ = try keychain.accessPolicy() } == .decode, "a policy without its MAC")
        #expect(statusOf { _ = try Keychain(opening: storage.path).storedAccessPolicy() } == .decode)

        try raw.run("DELETE FROM meta WHERE name = 'x-access-policy'")
        #expect(try keychain.accessPolicy() == .prompt, "no rows at all: the default, which asks")
    }

    /// The rows of another keychain (whose policy is `allow-all`) copied into this one fail the check: the
    /// MAC is under the other keychain's key and names its identity.
    @Test func rowsSwappedInFromAnotherKeychainAreRefused() throws {
        let storage = try StorageTests()
        let keychain = try storage.makeKeychain()
        let otherPath = storage.directory.file("keychains/other.keychain-db")
        let other = try Keychain.create(at: otherPath, password: "pw")
        try other.setAccessPolicy(.allowAll)
        let rows = try RawFile(otherPath).blobs(
            "SELECT value FROM meta WHERE name IN ('x-access-policy', 'access_policy_mac') ORDER BY name")
        try #require(rows.count == 2)
        let raw = try RawFile(storage.path)
        try raw.run(
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('access_policy_mac', ?1), ('x-access-policy', ?2)",
            [rows[0], rows[1]])
        #expect(statusOf { _ = try keychain.accessPolicy() } == .decode)
        // The same bytes written by this keychain's own key pass, so the check is the MAC and not the copy.
        try keychain.setAccessPolicy(.allowAll)
        #expect(try keychain.accessPolicy() == .allowAll)
    }
}
