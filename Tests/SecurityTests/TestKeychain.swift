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
        keychain = try SecKeychain.create(
            atPath: directory + "/\(name).keychain-db", password: "correct horse", kdf: .insecureForTesting)
        #expect(SecKeychainSetDefault(keychain) == errSecSuccess)
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
