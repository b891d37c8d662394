import Foundation
import Security
import Testing

private let genp = kSecClassGenericPassword as String
private let inet = kSecClassInternetPassword as String

/// A generic password add dictionary with a secret.
private func genericPassword(
    _ account: String, service: String = "svc", secret: String = "pw", _ extra: [String: Any] = [:]
)
    -> [String: Any]
{
    var item: [String: Any] = [
        kSecClass: genp, kSecAttrAccount: account, kSecAttrService: service,
        kSecValueData: Data(secret.utf8),
    ]
    item.merge(extra) { $1 }
    return item
}

/// A dictionary value that can be a test argument (`Any` is not `Sendable`).
enum Value: Sendable {
    case text(String), int(Int), bytes([UInt8]), flag(Bool)

    var any: Any {
        switch self {
        case .text(let text): text
        case .int(let number): number
        case .bytes(let bytes): Data(bytes)
        case .flag(let flag): flag
        }
    }
}

extension SecuritySuite {
    /// SecItem.h section 2 of the issue, one behaviour per test, each asserting the exact status and shape.
    @Suite struct ItemSemantics {
        // MARK: Validation

        @Test func missingClassIsParam() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecAttrAccount: "a", kSecValueData: Data("x".utf8)]) == errSecParam)
            #expect(copyMatching([kSecAttrAccount: "a"]).0 == errSecParam)
            #expect(SecItemDelete([kSecAttrAccount: "a"] as CFDictionary) == errSecParam)
        }

        @Test func unknownClassIsNoSuchClass() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass: "wxyz", kSecAttrAccount: "a"]) == errSecNoSuchClass)
        }

        @Test(arguments: [
            (kSecClassGenericPassword, kSecAttrServer, Value.text("example.com")),
            (kSecClassGenericPassword, kSecAttrPort, .int(443)),
            (kSecClassInternetPassword, kSecAttrService, .text("svc")),
            (kSecClassInternetPassword, kSecAttrGeneric, .bytes([1])),
            (kSecClassCertificate, kSecAttrAccount, .text("a")),
            (kSecClassKey, kSecAttrServer, .text("s")),
            (kSecClassGenericPassword, "zzzz", .text("x")),
            (kSecClassGenericPassword, kSecAttrSyncViewHint, .text("v")),
        ])
        func attributeOfAnotherClassIsNoSuchAttr(itemClass: String, key: String, argument: Value) throws {
            let value = argument.any
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass: itemClass, key: value]) == errSecNoSuchAttr)
            #expect(copyMatching([kSecClass: itemClass, key: value]).0 == errSecNoSuchAttr)
        }

        @Test(arguments: [
            (kSecAttrAccount, Value.int(42)),
            (kSecAttrService, .bytes([1, 2])),
            (kSecAttrCreator, .text("not a number")),
            (kSecAttrIsInvisible, .text("yes")),
            (kSecAttrGeneric, .int(7)),
            (kSecAttrAccessible, .text("nonsense")),
            (kSecAttrCreationDate, .text("yesterday")),
            (kSecAttrPort, .flag(true)),
        ])
        func wrongValueTypeIsParam(key: String, argument: Value) throws {
            let value = argument.any
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass: genp, kSecAttrDescription: "d", key: value]) == errSecParam)
            #expect(copyMatching([kSecClass: genp, key: value]).0 == errSecParam)
        }

        @Test func valueDataMustBeData() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass: genp, kSecAttrAccount: "a", kSecValueData: "text"]) == errSecParam)
        }

        @Test func everyAccessibleConstantIsAccepted() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let levels = [
                kSecAttrAccessibleWhenUnlocked, kSecAttrAccessibleAfterFirstUnlock, kSecAttrAccessibleAlways,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, kSecAttrAccessibleAlwaysThisDeviceOnly,
            ]
            for (index, level) in levels.enumerated() {
                #expect(add(genericPassword("a\(index)", [kSecAttrAccessible: level])) == errSecSuccess)
            }
            let (status, result) = copyMatching([
                kSecClass: genp, kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
                kSecReturnAttributes: true,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccount] as? String == "a1")
        }

        @Test func unsupportedCertificateMatchingIsUnimplemented() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(
                copyMatching([kSecClass: kSecClassCertificate, kSecMatchSubjectContains: "x"]).0 == errSecUnimplemented)
        }

        @Test(arguments: [Value.text("sometimes"), .int(0), .int(-3), .flag(true)])
        func badMatchLimitIsParam(argument: Value) throws {
            let limit = argument.any
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            #expect(copyMatching([kSecClass: genp, kSecMatchLimit: limit]).0 == errSecParam)
        }

        // MARK: Primary keys

        @Test func genericPasswordPrimaryKeyIsAccountServiceGroupSync() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("alice")) == errSecSuccess)
            #expect(add(genericPassword("alice", secret: "other")) == errSecDuplicateItem)
            // Non-key attributes do not make an item distinct.
            #expect(
                add(genericPassword("alice", [kSecAttrLabel: "another label", kSecAttrComment: "c"]))
                    == errSecDuplicateItem)
            // Each key attribute does.
            #expect(add(genericPassword("bob")) == errSecSuccess)
            #expect(add(genericPassword("alice", service: "svc2")) == errSecSuccess)
            #expect(add(genericPassword("alice", [kSecAttrAccessGroup: "team.group"])) == errSecSuccess)
            #expect(add(genericPassword("alice", [kSecAttrSynchronizable: true])) == errSecSuccess)
            #expect(add(genericPassword("alice", [kSecAttrSynchronizable: true])) == errSecDuplicateItem)
            // An absent key attribute counts as empty: two items with no account collide.
            #expect(add([kSecClass: genp, kSecAttrService: "lonely"]) == errSecSuccess)
            #expect(add([kSecClass: genp, kSecAttrService: "lonely", kSecAttrAccount: ""]) == errSecDuplicateItem)
        }

        @Test func internetPasswordPrimaryKeyCoversServerProtocolPortPathDomainAuthType() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let base: [String: Any] = [
                kSecClass: inet, kSecAttrAccount: "u", kSecAttrServer: "example.com",
                kSecValueData: Data("p".utf8),
            ]
            #expect(add(base) == errSecSuccess)
            #expect(add(base.merging([kSecAttrLabel: "x"]) { $1 }) == errSecDuplicateItem)
            let variants: [[String: Any]] = [
                [kSecAttrProtocol: kSecAttrProtocolHTTPS],
                [kSecAttrPort: 8443],
                [kSecAttrPath: "/login"],
                [kSecAttrSecurityDomain: "realm"],
                [kSecAttrAuthenticationType: kSecAttrAuthenticationTypeHTMLForm],
                [kSecAttrServer: "example.org"],
                [kSecAttrAccount: "v"],
            ]
            for variant in variants {
                #expect(add(base.merging(variant) { $1 }) == errSecSuccess, "variant \(variant)")
                #expect(add(base.merging(variant) { $1 }) == errSecDuplicateItem, "variant \(variant)")
            }
        }

        @Test func certificateKeyAndIdentityAreStoredAndMatchedByAttributes() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let cert: [String: Any] = [
                kSecClass: kSecClassCertificate, kSecAttrCertificateType: 3, kSecAttrIssuer: Data([1, 2, 3]),
                kSecAttrSerialNumber: Data([9]), kSecAttrLabel: "my cert", kSecValueData: Data([0x30, 0x82]),
            ]
            #expect(add(cert) == errSecSuccess)
            #expect(add(cert.merging([kSecAttrLabel: "other"]) { $1 }) == errSecDuplicateItem)
            #expect(add(cert.merging([kSecAttrSerialNumber: Data([10])]) { $1 }) == errSecSuccess)

            let key: [String: Any] = [
                kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048,
                kSecAttrApplicationTag: Data("com.example.key".utf8), kSecAttrCanSign: true,
                kSecValueData: Data([1, 2, 3, 4]),
            ]
            #expect(add(key) == errSecSuccess)
            #expect(add(key) == errSecDuplicateItem)
            #expect(add(key.merging([kSecAttrKeySizeInBits: 4096]) { $1 }) == errSecSuccess)

            let identity: [String: Any] = [
                kSecClass: kSecClassIdentity, kSecAttrIssuer: Data([7]), kSecAttrSerialNumber: Data([8]),
                kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrLabel: "me",
            ]
            #expect(add(identity) == errSecSuccess)

            let (certStatus, certs) = copyMatching([
                kSecClass: kSecClassCertificate, kSecAttrIssuer: Data([1, 2, 3]), kSecMatchLimit: kSecMatchLimitAll,
                kSecReturnAttributes: true,
            ])
            #expect(certStatus == errSecSuccess)
            #expect((certs as? [[String: Any]])?.count == 2)

            let (keyStatus, keyAttributes) = copyMatching([
                kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("com.example.key".utf8),
                kSecAttrKeySizeInBits: 4096, kSecReturnAttributes: true,
            ])
            #expect(keyStatus == errSecSuccess)
            let attributes = keyAttributes as? [String: Any]
            #expect(attributes?[kSecAttrKeyClass] as? Int == 1)
            #expect(attributes?[kSecAttrKeyType] as? Int == 42)
            #expect(attributes?[kSecAttrCanSign] as? Bool == true)

            let (idStatus, idLabel) = copyMatching([
                kSecClass: kSecClassIdentity, kSecAttrSerialNumber: Data([8]), kSecReturnAttributes: true,
            ])
            #expect(idStatus == errSecSuccess)
            #expect((idLabel as? [String: Any])?[kSecAttrLabel] as? String == "me")
        }

        // MARK: Result shapes

        @Test func noReturnKeyGivesSuccessAndNoResult() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            let (status, result) = copyMatching([kSecClass: genp, kSecAttrAccount: "a"])
            #expect(status == errSecSuccess)
            #expect(result == nil)
            #expect(copyMatching([kSecClass: genp, kSecAttrAccount: "b"]).0 == errSecItemNotFound)
        }

        @Test func singleReturnTypeGivesABareValue() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "hunter2", [kSecAttrLabel: "Label A"])) == errSecSuccess)
            let query: [String: Any] = [kSecClass: genp, kSecAttrAccount: "a"]

            let (s1, data) = copyMatching(query.merging([kSecReturnData: true]) { $1 })
            #expect(s1 == errSecSuccess)
            #expect((data as? Data).map { String(decoding: $0, as: UTF8.self) } == "hunter2")

            let (s2, attributes) = copyMatching(query.merging([kSecReturnAttributes: true]) { $1 })
            #expect(s2 == errSecSuccess)
            let dictionary = try #require(attributes as? [String: Any])
            #expect(dictionary[kSecAttrAccount] as? String == "a")
            #expect(dictionary[kSecAttrService] as? String == "svc")
            #expect(dictionary[kSecAttrLabel] as? String == "Label A")
            #expect(dictionary[kSecClass] as? String == genp)
            #expect(dictionary[kSecAttrCreationDate] is Date)
            #expect(dictionary[kSecAttrModificationDate] is Date)
            #expect(dictionary[kSecValueData] == nil, "attributes alone carry no secret")

            let (s3, reference) = copyMatching(query.merging([kSecReturnRef: true]) { $1 })
            #expect(s3 == errSecSuccess)
            #expect(reference is SecKeychainItem)

            let (s4, persistent) = copyMatching(query.merging([kSecReturnPersistentRef: true]) { $1 })
            #expect(s4 == errSecSuccess)
            #expect((persistent as? Data)?.count == 20)
        }

        @Test func severalReturnTypesGiveADictionary() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "hunter2")) == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass: genp, kSecReturnData: true, kSecReturnAttributes: true, kSecReturnRef: true,
                kSecReturnPersistentRef: true,
            ])
            #expect(status == errSecSuccess)
            let dictionary = try #require(result as? [String: Any])
            #expect(dictionary[kSecAttrAccount] as? String == "a")
            #expect(dictionary[kSecValueData] as? Data == Data("hunter2".utf8))
            #expect(dictionary[kSecValueRef] is SecKeychainItem)
            #expect((dictionary[kSecValuePersistentRef] as? Data)?.count == 20)

            let (s2, refs) = copyMatching([kSecClass: genp, kSecReturnRef: true, kSecReturnPersistentRef: true])
            #expect(s2 == errSecSuccess)
            let pair = try #require(refs as? [String: Any])
            #expect(Set(pair.keys) == [kSecValueRef, kSecValuePersistentRef])
        }

        @Test func matchLimitShapesTheResult() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for name in ["a", "b", "c"] { #expect(add(genericPassword(name)) == errSecSuccess) }
            let query: [String: Any] = [kSecClass: genp, kSecReturnAttributes: true]

            let (s1, one) = copyMatching(query)
            #expect(s1 == errSecSuccess)
            #expect(
                (one as? [String: Any])?[kSecAttrAccount] as? String == "a", "default limit is one: the first added")

            let (s2, all) = copyMatching(query.merging([kSecMatchLimit: kSecMatchLimitAll]) { $1 })
            #expect(s2 == errSecSuccess)
            #expect((all as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } == ["a", "b", "c"])

            let (s3, two) = copyMatching(query.merging([kSecMatchLimit: 2]) { $1 })
            #expect(s3 == errSecSuccess)
            #expect((two as? [[String: Any]])?.count == 2)

            let (s4, bareOne) = copyMatching(query.merging([kSecMatchLimit: 1]) { $1 })
            #expect(s4 == errSecSuccess)
            #expect(bareOne is NSDictionary, "a numeric limit of 1 is kSecMatchLimitOne")

            let (s5, refs) = copyMatching([
                kSecClass: genp, kSecReturnPersistentRef: true, kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect(s5 == errSecSuccess)
            #expect((refs as? [Data])?.count == 3)
        }

        @Test func returnDataWithLimitAllIsRefusedForPasswordsOnly() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            #expect(
                copyMatching([kSecClass: genp, kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll]).0
                    == errSecParam)
            #expect(
                copyMatching([kSecClass: inet, kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll]).0
                    == errSecParam)
            #expect(
                add([kSecClass: kSecClassCertificate, kSecAttrSerialNumber: Data([1]), kSecValueData: Data([0x30])])
                    == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass: kSecClassCertificate, kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [Data]) == [Data([0x30])])
        }

        @Test func addReturnsWhatItIsAskedFor() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            var result: CFTypeRef?
            let status = SecItemAdd(
                genericPassword("a", secret: "s", [kSecReturnAttributes: true, kSecReturnPersistentRef: true])
                    as CFDictionary, &result)
            #expect(status == errSecSuccess)
            let dictionary = try #require(result as? [String: Any])
            #expect(dictionary[kSecAttrAccount] as? String == "a")
            let persistent = try #require(dictionary[kSecValuePersistentRef] as? Data)
            let (s2, data) = copyMatching([kSecClass: genp, kSecValuePersistentRef: persistent, kSecReturnData: true])
            #expect(s2 == errSecSuccess)
            #expect(data as? Data == Data("s".utf8))
        }

        // MARK: Matching

        @Test func caseInsensitiveMatching() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("Alice@Example.com", service: "Mail")) == errSecSuccess)
            #expect(copyMatching([kSecClass: genp, kSecAttrAccount: "alice@example.com"]).0 == errSecItemNotFound)
            #expect(
                copyMatching([kSecClass: genp, kSecAttrAccount: "alice@example.com", kSecMatchCaseInsensitive: false]).0
                    == errSecItemNotFound)
            let (status, result) = copyMatching([
                kSecClass: genp, kSecAttrAccount: "ALICE@example.COM", kSecAttrService: "mail",
                kSecMatchCaseInsensitive: true, kSecReturnAttributes: true,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccount] as? String == "Alice@Example.com")
        }

        @Test func matchItemListAndPersistentRefLimitTheSearch() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for name in ["a", "b", "c"] { #expect(add(genericPassword(name)) == errSecSuccess) }
            let (_, refs) = copyMatching([kSecClass: genp, kSecReturnRef: true, kSecMatchLimit: kSecMatchLimitAll])
            let items = try #require(refs as? [SecKeychainItem])
            #expect(items.count == 3)

            let (s1, limited) = copyMatching([
                kSecClass: genp, kSecMatchItemList: [items[0], items[2]], kSecReturnAttributes: true,
                kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect(s1 == errSecSuccess)
            #expect((limited as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } == ["a", "c"])

            let (_, persistent) = copyMatching([kSecClass: genp, kSecAttrAccount: "b", kSecReturnPersistentRef: true])
            let (s2, viaPersistent) = copyMatching([
                kSecClass: genp, kSecMatchItemList: [try #require(persistent as? Data)], kSecReturnAttributes: true,
            ])
            #expect(s2 == errSecSuccess)
            #expect((viaPersistent as? [String: Any])?[kSecAttrAccount] as? String == "b")

            // The list narrows the attribute search, it does not replace it.
            #expect(
                copyMatching([kSecClass: genp, kSecMatchItemList: [items[0]], kSecAttrAccount: "b"]).0
                    == errSecItemNotFound)
            #expect(
                copyMatching([kSecClass: genp, kSecValuePersistentRef: Data([1, 2, 3])]).0 == errSecInvalidItemRef)
            #expect(copyMatching([kSecClass: genp, kSecMatchItemList: ["not a ref"]]).0 == errSecInvalidItemRef)
        }

        @Test func accessGroupNarrowsTheSearch() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", [kSecAttrAccessGroup: "group.one"])) == errSecSuccess)
            #expect(add(genericPassword("b", [kSecAttrAccessGroup: "group.two"])) == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass: genp, kSecAttrAccessGroup: "group.two", kSecReturnAttributes: true,
                kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            let rows = try #require(result as? [[String: Any]])
            #expect(rows.map { $0[kSecAttrAccount] as? String } == ["b"])
            #expect(rows.first?[kSecAttrAccessGroup] as? String == "group.two")
            #expect(copyMatching([kSecClass: genp, kSecAttrAccessGroup: "group.three"]).0 == errSecItemNotFound)
        }

        @Test func synchronizableFiltersAndAnyMatchesBoth() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("local")) == errSecSuccess)
            #expect(add(genericPassword("synced", [kSecAttrSynchronizable: true])) == errSecSuccess)
            func accounts(_ extra: [String: Any]) -> [String] {
                let (_, result) = copyMatching(
                    [kSecClass: genp, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll].merging(extra) {
                        $1
                    })
                return (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } ?? []
            }
            #expect(accounts([:]) == ["local"])
            #expect(accounts([kSecAttrSynchronizable: false]) == ["local"])
            #expect(accounts([kSecAttrSynchronizable: true]) == ["synced"])
            #expect(accounts([kSecAttrSynchronizable: kSecAttrSynchronizableAny]) == ["local", "synced"])
            #expect(add(genericPassword("x", [kSecAttrSynchronizable: kSecAttrSynchronizableAny])) == errSecParam)
        }

        // MARK: Dates

        @Test func datesAreSetByTheStoreNotTheCaller() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let before = Date()
            #expect(add(genericPassword("a", [kSecAttrCreationDate: Date(timeIntervalSince1970: 0)])) == errSecSuccess)
            let (_, result) = copyMatching([kSecClass: genp, kSecReturnAttributes: true])
            let created = try #require((result as? [String: Any])?[kSecAttrCreationDate] as? Date)
            #expect(created >= before.addingTimeInterval(-1))
        }

        @Test func datesCanBeMatchedExactly() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("first")) == errSecSuccess)
            Thread.sleep(forTimeInterval: 0.01)
            #expect(add(genericPassword("second")) == errSecSuccess)
            let (_, result) = copyMatching([kSecClass: genp, kSecAttrAccount: "second", kSecReturnAttributes: true])
            let created = try #require((result as? [String: Any])?[kSecAttrCreationDate] as? Date)
            let (status, match) = copyMatching([
                kSecClass: genp, kSecAttrCreationDate: created, kSecReturnAttributes: true,
                kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            #expect((match as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } == ["second"])
            #expect(
                copyMatching([kSecClass: genp, kSecAttrModificationDate: Date.distantPast]).0 == errSecItemNotFound)
        }

        // MARK: Update

        @Test func updateChangesEveryMatchAndBumpsModificationDate() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", service: "shared")) == errSecSuccess)
            #expect(add(genericPassword("b", service: "shared")) == errSecSuccess)
            #expect(add(genericPassword("c", service: "other")) == errSecSuccess)
            let (_, before) = copyMatching([kSecClass: genp, kSecAttrAccount: "a", kSecReturnAttributes: true])
            let old = try #require(before as? [String: Any])
            Thread.sleep(forTimeInterval: 0.01)

            let status = SecItemUpdate(
                [kSecClass: genp, kSecAttrService: "shared", kSecMatchLimit: kSecMatchLimitOne] as CFDictionary,
                [kSecAttrComment: "rotated", kSecValueData: Data("new".utf8)] as CFDictionary)
            #expect(status == errSecSuccess)

            let (_, after) = copyMatching([
                kSecClass: genp, kSecAttrComment: "rotated", kSecReturnAttributes: true,
                kSecMatchLimit: kSecMatchLimitAll,
            ])
            let rows = try #require(after as? [[String: Any]])
            #expect(
                rows.compactMap { $0[kSecAttrAccount] as? String } == ["a", "b"], "match limit is ignored by update")
            let updated = try #require(rows.first)
            #expect(updated[kSecAttrCreationDate] as? Date == old[kSecAttrCreationDate] as? Date)
            #expect(
                try #require(updated[kSecAttrModificationDate] as? Date)
                    > (try #require(old[kSecAttrModificationDate] as? Date)))
            let (_, data) = copyMatching([kSecClass: genp, kSecAttrAccount: "b", kSecReturnData: true])
            #expect(data as? Data == Data("new".utf8))
            let (_, untouched) = copyMatching([kSecClass: genp, kSecAttrAccount: "c", kSecReturnData: true])
            #expect(untouched as? Data == Data("pw".utf8))
        }

        @Test(arguments: [
            [kSecReturnData: Value.flag(true)],
            [kSecMatchLimit: .text(kSecMatchLimitAll)],
            [kSecClass: .text(genp)],
            [kSecMatchCaseInsensitive: .flag(true)],
            [kSecValuePersistentRef: .bytes(Array(repeating: 0, count: 20))],
            [kSecAttrSynchronizable: .text(kSecAttrSynchronizableAny)],
            [:],
        ])
        func updateRefusesSearchKeysAmongTheChanges(argument: [String: Value]) throws {
            let changes = argument.mapValues(\.any)
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            #expect(SecItemUpdate([kSecClass: genp] as CFDictionary, changes as CFDictionary) == errSecParam)
        }

        @Test func updateThatWouldCollideIsDuplicateAndChangesNothing() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "A")) == errSecSuccess)
            #expect(add(genericPassword("b", secret: "B")) == errSecSuccess)
            #expect(add(genericPassword("c", secret: "C")) == errSecSuccess)
            // Renaming b and c both to "a": the first rename already collides.
            let status = SecItemUpdate(
                [kSecClass: genp, kSecAttrService: "svc", kSecMatchItemList: []] as CFDictionary,
                [kSecAttrAccount: "a"] as CFDictionary)
            #expect(status == errSecItemNotFound, "an empty item list matches nothing")
            let collide = SecItemUpdate(
                [kSecClass: genp, kSecAttrAccount: "c"] as CFDictionary,
                [kSecAttrAccount: "b", kSecValueData: Data("changed".utf8)] as CFDictionary)
            #expect(collide == errSecDuplicateItem)
            let (_, result) = copyMatching([kSecClass: genp, kSecAttrAccount: "c", kSecReturnData: true])
            #expect(result as? Data == Data("C".utf8), "nothing changed")
            let many = SecItemUpdate([kSecClass: genp] as CFDictionary, [kSecAttrAccount: "z"] as CFDictionary)
            #expect(many == errSecDuplicateItem)
            let (_, all) = copyMatching([
                kSecClass: genp, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect((all as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } == ["a", "b", "c"])
        }

        @Test func updateOfNothingIsItemNotFound() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(
                SecItemUpdate(
                    [kSecClass: genp, kSecAttrAccount: "nobody"] as CFDictionary, [kSecAttrLabel: "x"] as CFDictionary)
                    == errSecItemNotFound)
            #expect(
                SecItemUpdate([kSecClass: genp] as CFDictionary, [kSecAttrServer: "x"] as CFDictionary)
                    == errSecNoSuchAttr)
        }

        // MARK: Delete

        @Test func deleteRemovesEveryMatchOrOnlyTheReferencedItems() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for name in ["a", "b", "c", "d"] {
                #expect(add(genericPassword(name, service: name < "c" ? "x" : "y")) == errSecSuccess)
            }
            #expect(SecItemDelete([kSecClass: genp, kSecAttrService: "x"] as CFDictionary) == errSecSuccess)
            #expect(copyMatching([kSecClass: genp, kSecAttrService: "x"]).0 == errSecItemNotFound)
            #expect(SecItemDelete([kSecClass: genp, kSecAttrService: "x"] as CFDictionary) == errSecItemNotFound)

            let (_, ref) = copyMatching([kSecClass: genp, kSecAttrAccount: "c", kSecReturnRef: true])
            #expect(
                SecItemDelete([kSecClass: genp, kSecValueRef: try #require(ref as? SecKeychainItem)] as CFDictionary)
                    == errSecSuccess)
            let (_, left) = copyMatching([
                kSecClass: genp, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect((left as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } == ["d"])

            let (_, persistent) = copyMatching([kSecClass: genp, kSecReturnPersistentRef: true])
            #expect(
                SecItemDelete(
                    [kSecClass: genp, kSecValuePersistentRef: try #require(persistent as? Data)] as CFDictionary)
                    == errSecSuccess)
            #expect(copyMatching([kSecClass: genp]).0 == errSecItemNotFound)
            #expect(SecItemDelete([kSecClass: genp, kSecReturnData: true] as CFDictionary) == errSecParam)
        }

        // MARK: Lock state and keychains

        @Test func lockedKeychainFindsReferencesButNotContents() throws {
            let kc = try TestKeychain()
            #expect(add(genericPassword("a", secret: "s")) == errSecSuccess)
            #expect(SecKeychainLock(kc.keychain) == errSecSuccess)

            let (refStatus, refs) = copyMatching([kSecClass: genp, kSecAttrAccount: "a", kSecReturnPersistentRef: true])
            #expect(refStatus == errSecSuccess)
            #expect((refs as? Data)?.count == 20)
            #expect(copyMatching([kSecClass: genp, kSecAttrAccount: "zz"]).0 == errSecItemNotFound)
            #expect(copyMatching([kSecClass: genp, kSecReturnData: true]).0 == errSecInteractionNotAllowed)
            #expect(copyMatching([kSecClass: genp, kSecReturnAttributes: true]).0 == errSecInteractionNotAllowed)
            #expect(
                copyMatching([
                    kSecClass: genp, kSecReturnData: true, kSecUseAuthenticationUI: kSecUseAuthenticationUISkip,
                ]).0 == errSecItemNotFound)
            #expect(add(genericPassword("b")) == errSecInteractionNotAllowed)
            #expect(SecItemDelete([kSecClass: genp] as CFDictionary) == errSecInteractionNotAllowed)
            #expect(
                SecItemUpdate([kSecClass: genp] as CFDictionary, [kSecAttrLabel: "l"] as CFDictionary)
                    == errSecInteractionNotAllowed)

            let wrong = "wrong"
            #expect(SecKeychainUnlock(kc.keychain, UInt32(wrong.utf8.count), wrong, true) == errSecAuthFailed)
            #expect(copyMatching([kSecClass: genp, kSecReturnData: true]).0 == errSecInteractionNotAllowed)
            let right = "correct horse"
            #expect(SecKeychainUnlock(kc.keychain, UInt32(right.utf8.count), right, true) == errSecSuccess)
            let (status, data) = copyMatching([kSecClass: genp, kSecReturnData: true])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("s".utf8))
        }

        @Test func keychainsSideBySideAreAddressedBySearchListAndUseKeychain() throws {
            let first = try TestKeychain(name: "first")
            let second = try SecKeychain.create(
                atPath: first.directory + "/second.keychain-db", password: "pw2", kdf: .insecureForTesting)
            #expect(add(genericPassword("in-first")) == errSecSuccess)
            #expect(add(genericPassword("in-second", [kSecUseKeychain: second])) == errSecSuccess)
            #expect(copyMatching([kSecClass: genp, kSecAttrAccount: "in-second"]).0 == errSecItemNotFound)
            let (status, result) = copyMatching([
                kSecClass: genp, kSecMatchSearchList: [first.keychain, second], kSecReturnAttributes: true,
                kSecMatchLimit: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            #expect(
                (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String } == [
                    "in-first", "in-second",
                ])
            let reopened = UnsafeMutablePointer<SecKeychain?>.allocate(capacity: 1)
            defer { reopened.deallocate() }
            reopened.initialize(to: nil)
            #expect(SecKeychainOpen(first.directory + "/second.keychain-db", reopened) == errSecSuccess)
            let (lockedStatus, _) = copyMatching([
                kSecClass: genp, kSecMatchSearchList: [try #require(reopened.pointee)], kSecReturnData: true,
            ])
            #expect(lockedStatus == errSecInteractionNotAllowed, "a freshly opened keychain is locked")
        }

        // MARK: Status codes

        @Test func statusCodesAreApplesAndHaveMessages() {
            let expected: [(OSStatus, OSStatus)] = [
                (errSecSuccess, 0), (errSecUnimplemented, -4), (errSecParam, -50), (errSecAllocate, -108),
                (errSecAuthFailed, -25293), (errSecDuplicateItem, -25299), (errSecItemNotFound, -25300),
                (errSecNoSuchAttr, -25303), (errSecInteractionNotAllowed, -25308), (errSecDecode, -26275),
                (errSecNoSuchClass, -25306), (errSecNoSuchKeychain, -25294), (errSecDuplicateKeychain, -25296),
            ]
            for (constant, value) in expected { #expect(constant == value) }
            #expect(SecCopyErrorMessageString(errSecItemNotFound, nil)?.contains("No item") == true)
            #expect(SecCopyErrorMessageString(errSecDuplicateItem, nil)?.contains("already exists") == true)
            #expect(SecCopyErrorMessageString(12345, nil)?.contains("12345") == true)
        }
    }
}
