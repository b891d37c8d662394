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
        #expect(try Keychain(opening: path).accessPolicy() == .allowAll)
        try RawFile(path).run("UPDATE meta SET value = X'6576657279626f6479' WHERE name = 'x-access-policy'")
        #expect(throws: KeychainError.self) { try Keychain(opening: path).accessPolicy() }
    }
}
