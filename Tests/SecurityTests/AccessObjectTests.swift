import CallerIdentity
import Foundation
import KeychainCore
import KeychainStore
import Security
import Testing

extension SecuritySuite {
    /// `kSecAttrAccess` with `SecAccessCreate` / `SecTrustedApplicationCreateFromPath`, macOS's shape: the access
    /// object given to `SecItemAdd` becomes the item's stored access list (the one the daemon checks), and
    /// `kSecReturnAttributes` gives it back.
    @Suite struct AccessObjects {
        let directory: String

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-acl-\(UUID())").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }

        /// A program file with `bytes`, and a symbolic link to it.
        private func program(_ name: String, _ bytes: String) throws -> (path: String, link: String) {
            let path = directory + "/" + name
            try Data(bytes.utf8).write(to: URL(fileURLWithPath: path))
            let link = directory + "/link-to-" + name
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
            return (path, link)
        }

        private func trusted(_ path: String?) -> (OSStatus, SecTrustedApplication?) {
            var application: SecTrustedApplication?
            let status = SecTrustedApplicationCreateFromPath(path, &application)
            return (status, application)
        }

        private func access(_ applications: [SecTrustedApplication]?) throws -> SecAccess {
            var access: SecAccess?
            #expect(SecAccessCreate("item" as CFString, applications.map { NSArray(array: $0) }, &access) == 0)
            return try #require(access)
        }

        /// The item's access list as the store holds it, read from the file with its password.
        private func storedAccess(_ kc: TestKeychain, account: String) throws -> ItemAccess {
            let file = try Keychain(opening: kc.directory + "/test.keychain-db")
            try file.unlock(password: "correct horse")
            var query = ItemQuery(.genericPassword, attributes: [.account: .string(account)])
            query.returning = .attributes
            let item = try #require(try file.items(matching: query).first)
            return ItemAccess(attributes: item.attributes ?? [:])
        }

        @Test func aTrustedApplicationIsTheResolvedPathAndTheFilesDigest() throws {
            let one = try program("one", "program one")
            let (status, application) = trusted(one.link)
            #expect(status == errSecSuccess)
            #expect(application?.name == one.path, "links resolved, as the daemon sees a running program")
            let expected = try FileDigester().digest(ofFileAt: one.path).description
            #expect(application?.digest == expected)
            let two = try program("two", "program two")
            #expect(trusted(two.path).1?.digest != expected, "other bytes, another fingerprint")

            let me = trusted(nil)
            #expect(me.0 == errSecSuccess)
            #expect(me.1?.name == URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path)
            #expect(trusted("flatpak:org.example.App").1 == flatpakApplication("flatpak:org.example.App"))

            #expect(trusted(directory + "/missing").0 == errSecParam)
            #expect(trusted(directory).0 == errSecParam, "a directory is not a program")
            #expect(trusted("flatpak:").0 == errSecParam)
        }

        @Test func anItemAddedWithAnAccessObjectTrustsThoseApplicationsAndReturnsIt() throws {
            let kc = try TestKeychain()
            let one = try #require(trusted(try program("one", "1").path).1)
            let two = try #require(trusted(try program("two", "2").path).1)
            let given = try access([one, two])
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                kSecAttrLabel as String: "the label", kSecValueData as String: Data("pw".utf8),
                kSecAttrAccess as String: given,
            ]
            #expect(add(item) == errSecSuccess)

            let stored = try storedAccess(kc, account: "a")
            #expect(!stored.anyApplication)
            #expect(stored.trustedApplications.map(\.name) == [one.name, two.name])
            #expect(stored.trustedApplications.map(\.digest) == [one.digest, two.digest])

            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            let attributes = try #require(result as? NSDictionary)
            let returned = try #require(attributes[kSecAttrAccess as String] as? SecAccess)
            #expect(returned == given)
            #expect(returned.descriptor == "the label")
            #expect(attributes[ItemAccess.trustedApplicationsKey.rawValue] == nil, "one object, not the raw rows")
            var list: CFArray?
            #expect(SecAccessCopyTrustedApplications(returned, &list) == errSecSuccess)
            #expect((list as? [SecTrustedApplication]) == [one, two])
        }

        @Test func anyApplicationAndNoApplication() throws {
            let kc = try TestKeychain()
            var anyone: SecAccess?
            #expect(SecAccessCreateForAnyApplication("shared" as CFString, &anyone) == errSecSuccess)
            let base: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecValueData as String: Data("pw".utf8),
            ]
            #expect(
                add(base.merging([kSecAttrAccount as String: "any", kSecAttrAccess as String: anyone as Any]) { $1 })
                    == 0)
            #expect(try storedAccess(kc, account: "any").anyApplication)
            let nobody = try access([])
            #expect(
                add(base.merging([kSecAttrAccount as String: "none", kSecAttrAccess as String: nobody]) { $1 }) == 0)
            let none = try storedAccess(kc, account: "none")
            #expect(none.isEmpty)
            #expect(add(base.merging([kSecAttrAccount as String: "plain"]) { $1 }) == 0)

            func returned(_ account: String) -> SecAccess? {
                let result = copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                    kSecReturnAttributes as String: true,
                ]).1
                return (result as? NSDictionary)?[kSecAttrAccess as String] as? SecAccess
            }
            #expect(returned("any")?.allowsAnyApplication == true)
            var list: CFArray? = NSArray()
            #expect(SecAccessCopyTrustedApplications(try #require(returned("any")), &list) == errSecSuccess)
            #expect(list == nil, "nil: any application")
            #expect(returned("none") == nobody, "an explicitly empty list asks for every application")
            #expect(returned("plain") == nil, "an item given no access object has none to return")
        }

        /// Keys, certificates and identities carry an access list as passwords do (every macOS keychain item has a
        /// `SecAccess`): given to `SecItemAdd`, stored in the item's attributes, returned under `kSecAttrAccess`.
        @Test func everyClassTakesAnAccessObject() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let one = try #require(trusted(try program("one", "1").path).1)
            let given = try access([one])
            let items: [(CFString, [String: Any])] = [
                (kSecClassKey, [kSecAttrApplicationTag as String: Data([1])]),
                (kSecClassCertificate, [kSecAttrSerialNumber as String: Data([1])]),
                (kSecClassIdentity, [kSecAttrApplicationTag as String: Data([2])]),
            ]
            for (itemClass, attributes) in items {
                let item = attributes.merging([kSecClass as String: itemClass]) { $1 }
                let added = add(
                    item.merging([kSecValueData as String: Data([2]), kSecAttrAccess as String: given]) { $1 })
                #expect(added == errSecSuccess, "\(itemClass)")
                let result = copyMatching(item.merging([kSecReturnAttributes as String: true]) { $1 }).1
                let returned = (result as? NSDictionary)?[kSecAttrAccess as String] as? SecAccess
                #expect(returned?.trustedApplications == [one], "\(itemClass)")
                let file = try Keychain(opening: kc.directory + "/test.keychain-db")
                try file.unlock(password: "correct horse")
                var query = ItemQuery(try #require(ItemClass(rawValue: itemClass as String)), synchronizable: .any)
                query.returning = .attributes
                let stored = try #require(try file.items(matching: query).first)
                #expect(
                    ItemAccess(attributes: stored.attributes ?? [:]).trustedApplications.map(\.name) == [one.name])
            }
        }

        @Test func badAccessInputIsParam() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let one = try #require(trusted(try program("one", "1").path).1)
            let given = try access([one])
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                kSecValueData as String: Data("pw".utf8),
            ]
            func with(_ extra: [String: Any]) -> [String: Any] { item.merging(extra) { $1 } }
            #expect(add(with([kSecAttrAccess as String: "everyone"])) == errSecParam)
            var control: SecAccessControl?
            control = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil)
            #expect(
                add(with([kSecAttrAccess as String: given, kSecAttrAccessControl as String: control as Any]))
                    == errSecParam)
            #expect(
                add(with([kSecAttrAccess as String: given, kSecAttrSynchronizable as String: true])) == errSecParam)
            #expect(add(with([kSecAttrAccess as String: given, "lk:any-app": "1"])) == errSecParam)
            var bad: SecAccess?
            #expect(SecAccessCreate("x" as CFString, NSArray(array: ["/usr/bin/git"]), &bad) == errSecParam)
            #expect(bad == nil)

            #expect(add(item) == errSecSuccess)
            #expect(
                copyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccess as String: given]).0
                    == errSecParam, "not a search key")
            #expect(
                SecItemUpdate(
                    [kSecClass as String: kSecClassGenericPassword] as CFDictionary,
                    [kSecAttrAccess as String: given] as CFDictionary) == errSecParam,
                "set when the item is made, as on macOS")
        }
    }
}

/// A trusted Flatpak application as `SecTrustedApplicationCreateFromPath` makes one.
private func flatpakApplication(_ name: String) -> SecTrustedApplication? {
    var application: SecTrustedApplication?
    _ = SecTrustedApplicationCreateFromPath(name, &application)
    return application.flatMap { $0.digest == nil && $0.name == name ? $0 : nil }
}
