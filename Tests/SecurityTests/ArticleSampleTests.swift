// swift-format-ignore-file
// (The article samples below are kept verbatim, in Apple's formatting.)

// The Swift samples of Apple's four keychain articles (shared/reference),
// compiled verbatim inside functions and run against a fresh keychain.
// Two lines differ from the scraped text, as the issue directs: the
// `password` line of the adding article is taken from the updating article
// (the scrape dropped `credentials.password.data(using:`), and `server` gets
// the article's value "www.example.com" (the scrape left it empty).
import Foundation
import Security
import Testing

enum KeychainArticles {
    struct Credentials {
        var username: String
        var password: String
    }

    enum KeychainError: Error {
        case noPassword
        case unexpectedPasswordData
        case unhandledError(status: OSStatus)
    }

    static let server = "www.example.com"

    /// "Adding a password to the keychain".
    static func addPassword(_ credentials: Credentials) throws {
        let account = credentials.username
        let password = credentials.password.data(using: String.Encoding.utf8)!
        var query: [String: Any] = [kSecClass as String: kSecClassInternetPassword,
                                    kSecAttrAccount as String: account,
                                    kSecAttrServer as String: server,
                                    kSecValueData as String: password]
        let status = SecItemAdd(query as CFDictionary, nil)
        guard status == errSecSuccess else { throw KeychainError.unhandledError(status: status) }
    }

    /// "Searching for keychain items".
    static func searchPassword() throws -> Credentials {
        let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword,
                                    kSecAttrServer as String: server,
                                    kSecMatchLimit as String: kSecMatchLimitOne,
                                    kSecReturnAttributes as String: true,
                                    kSecReturnData as String: true]
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        guard status != errSecItemNotFound else { throw KeychainError.noPassword }
        guard status == errSecSuccess else { throw KeychainError.unhandledError(status: status) }
        guard let existingItem = item as? [String : Any],
            let passwordData = existingItem[kSecValueData as String] as? Data,
            let password = String(data: passwordData, encoding: String.Encoding.utf8),
            let account = existingItem[kSecAttrAccount as String] as? String
        else {
            throw KeychainError.unexpectedPasswordData
        }
        let credentials = Credentials(username: account, password: password)
        return credentials
    }

    /// "Updating and deleting keychain items": the update.
    static func updatePassword(_ credentials: Credentials) throws {
        let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword,
                                    kSecAttrServer as String: server]
        let account = credentials.username
        let password = credentials.password.data(using: String.Encoding.utf8)!
        let attributes: [String: Any] = [kSecAttrAccount as String: account,
                                         kSecValueData as String: password]
        let status = SecItemUpdate(query as CFDictionary, attributes as CFDictionary)
        guard status != errSecItemNotFound else { throw KeychainError.noPassword }
        guard status == errSecSuccess else { throw KeychainError.unhandledError(status: status) }
    }

    /// "Updating and deleting keychain items": the delete.
    static func deletePassword() throws {
        let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword,
                                    kSecAttrServer as String: server]
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError.unhandledError(status: status) }
    }
}

extension SecuritySuite {
    @Suite struct ArticleSamples {
        typealias Articles = KeychainArticles

        @Test func searchBeforeAddingThrowsNoPassword() throws {
            let keychain = try TestKeychain()
            defer { withExtendedLifetime(keychain) {} }
            #expect {
                try Articles.searchPassword()
            } throws: { error in
                if case Articles.KeychainError.noPassword = error { return true }
                return false
            }
        }

        @Test func addThenSearchReturnsTheCredentials() throws {
            let keychain = try TestKeychain()
            defer { withExtendedLifetime(keychain) {} }
            try Articles.addPassword(.init(username: "appleseed", password: "s3cret!"))
            let found = try Articles.searchPassword()
            #expect(found.username == "appleseed")
            #expect(found.password == "s3cret!")
        }

        @Test func addingTheSameCredentialsTwiceFailsWithDuplicateItem() throws {
            let keychain = try TestKeychain()
            defer { withExtendedLifetime(keychain) {} }
            try Articles.addPassword(.init(username: "appleseed", password: "one"))
            #expect {
                try Articles.addPassword(.init(username: "appleseed", password: "two"))
            } throws: { error in
                if case Articles.KeychainError.unhandledError(let status) = error {
                    return status == errSecDuplicateItem
                }
                return false
            }
        }

        @Test func updateChangesAccountAndPassword() throws {
            let keychain = try TestKeychain()
            defer { withExtendedLifetime(keychain) {} }
            try Articles.addPassword(.init(username: "appleseed", password: "old"))
            try Articles.updatePassword(.init(username: "j.appleseed", password: "new"))
            let found = try Articles.searchPassword()
            #expect(found.username == "j.appleseed")
            #expect(found.password == "new")
        }

        @Test func updateWithNothingStoredThrowsNoPassword() throws {
            let keychain = try TestKeychain()
            defer { withExtendedLifetime(keychain) {} }
            #expect {
                try Articles.updatePassword(.init(username: "a", password: "b"))
            } throws: { error in
                if case Articles.KeychainError.noPassword = error { return true }
                return false
            }
        }

        @Test func deleteRemovesThePasswordAndIsIdempotent() throws {
            let keychain = try TestKeychain()
            defer { withExtendedLifetime(keychain) {} }
            try Articles.addPassword(.init(username: "appleseed", password: "s3cret!"))
            try Articles.deletePassword()
            #expect(throws: Articles.KeychainError.self) { try Articles.searchPassword() }
            try Articles.deletePassword()  // errSecItemNotFound is accepted by the sample
        }
    }
}

/// Every Security test runs one at a time: they share the process-wide default keychain.
@Suite(.serialized) struct SecuritySuite {}
