import Foundation
import KeychainStore
import Security
import Testing

/// A fresh keychain in its own temporary directory, made the default for
/// `SecItem*` calls while the test runs; removed afterwards.
final class TestKeychain {
    let directory: String
    let keychain: SecKeychain

    init(name: String = "test") throws {
        directory =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("latchkey-tests-\(UUID().uuidString)").path
        // A copy of one keychain made at the production cost, unlocked with the key derived for it once:
        // a file of its own per test without a scrypt run per test.
        let template = try Template.shared.get()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/\(name).keychain-db"
        try FileManager.default.copyItem(atPath: template.path, toPath: path)
        let file = try Keychain(opening: path)
        file.unlock(with: template.key)
        keychain = SecKeychain(file)
        #expect(SecKeychainSetDefault(keychain) == errSecSuccess)
    }

    /// The keychain every test copies (password "correct horse"), and its key.
    private struct Template: Sendable {
        let path: String
        let key: UnwrappedKeychainKey

        static let shared = Result { () throws -> Template in
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("latchkey-template-\(UUID().uuidString)").path
            let path = directory + "/template.keychain-db"
            let keychain = try Keychain.create(at: path, password: "correct horse")
            let key = try keychain.unwrapKey(password: Array("correct horse".utf8))
            keychain.lock()
            return Template(path: path, key: key)
        }
    }

    deinit {
        _ = SecKeychainSetDefault(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `SecItemCopyMatching` and returns the status and the result object.
func copyMatching(_ query: [String: Any]) -> (OSStatus, CFTypeRef?) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result)
}

/// Runs `SecItemAdd` with no result wanted.
func add(_ attributes: [String: Any]) -> OSStatus {
    SecItemAdd(attributes as CFDictionary, nil)
}
