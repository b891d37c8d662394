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
        kSecClass as String: genp, kSecAttrAccount as String: account, kSecAttrService as String: service,
        kSecValueData as String: Data(secret.utf8),
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
            #expect(add([kSecAttrAccount as String: "a", kSecValueData as String: Data("x".utf8)]) == errSecParam)
            #expect(copyMatching([kSecAttrAccount as String: "a"]).0 == errSecParam)
            #expect(SecItemDelete([kSecAttrAccount as String: "a"] as CFDictionary) == errSecParam)
        }

        @Test func unknownClassIsNoSuchClass() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass as String: "wxyz", kSecAttrAccount as String: "a"]) == errSecNoSuchClass)
        }

        @Test(arguments: [
            (kSecClassGenericPassword as String, kSecAttrServer as String, Value.text("example.com")),
            (kSecClassGenericPassword as String, kSecAttrPort as String, .int(443)),
            (kSecClassInternetPassword as String, kSecAttrService as String, .text("svc")),
            (kSecClassInternetPassword as String, kSecAttrGeneric as String, .bytes([1])),
            (kSecClassCertificate as String, kSecAttrAccount as String, .text("a")),
            (kSecClassKey as String, kSecAttrServer as String, .text("s")),
            (kSecClassGenericPassword as String, "zzzz", .text("x")),
            (kSecClassGenericPassword as String, kSecAttrSyncViewHint as String, .text("v")),
        ])
        func attributeOfAnotherClassIsNoSuchAttr(itemClass: String, key: String, argument: Value) throws {
            let value = argument.any
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass as String: itemClass, key: value]) == errSecNoSuchAttr)
            #expect(copyMatching([kSecClass as String: itemClass, key: value]).0 == errSecNoSuchAttr)
        }

        @Test(arguments: [
            (kSecAttrAccount as String, Value.int(42)),
            (kSecAttrAccessGroup as String, .bytes([1, 2])),
            (kSecAttrCreator as String, .text("not a number")),
            (kSecAttrIsInvisible as String, .text("yes")),
            (kSecAttrGeneric as String, .int(7)),
            (kSecAttrAccessible as String, .text("nonsense")),
            (kSecAttrCreationDate as String, .text("yesterday")),
            (kSecAttrPort as String, .flag(true)),
        ])
        func wrongValueTypeIsParam(key: String, argument: Value) throws {
            let value = argument.any
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add([kSecClass as String: genp, kSecAttrDescription as String: "d", key: value]) == errSecParam)
            #expect(copyMatching([kSecClass as String: genp, key: value]).0 == errSecParam)
        }

        @Test func valueDataMustBeData() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(
                add([kSecClass as String: genp, kSecAttrAccount as String: "a", kSecValueData as String: "text"])
                    == errSecParam)
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
                #expect(add(genericPassword("a\(index)", [kSecAttrAccessible as String: level])) == errSecSuccess)
            }
            let (status, result) = copyMatching([
                kSecClass as String: genp, kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccount as String] as? String == "a1")
        }

        @Test func unsupportedCertificateMatchingIsUnimplemented() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(
                copyMatching([kSecClass as String: kSecClassCertificate, kSecMatchSubjectContains as String: "x"]).0
                    == errSecUnimplemented)
        }

        @Test(arguments: [Value.text("sometimes"), .int(0), .int(-3), .flag(true)])
        func badMatchLimitIsParam(argument: Value) throws {
            let limit = argument.any
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            #expect(copyMatching([kSecClass as String: genp, kSecMatchLimit as String: limit]).0 == errSecParam)
        }

        // MARK: Primary keys

        @Test func genericPasswordPrimaryKeyIsAccountServiceGroupSync() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("alice")) == errSecSuccess)
            #expect(add(genericPassword("alice", secret: "other")) == errSecDuplicateItem)
            // Non-key attributes do not make an item distinct.
            #expect(
                add(
                    genericPassword(
                        "alice", [kSecAttrLabel as String: "another label", kSecAttrComment as String: "c"]))
                    == errSecDuplicateItem)
            // Each key attribute does.
            #expect(add(genericPassword("bob")) == errSecSuccess)
            #expect(add(genericPassword("alice", service: "svc2")) == errSecSuccess)
            #expect(add(genericPassword("alice", [kSecAttrAccessGroup as String: "team.group"])) == errSecSuccess)
            #expect(add(genericPassword("alice", [kSecAttrSynchronizable as String: true])) == errSecSuccess)
            #expect(add(genericPassword("alice", [kSecAttrSynchronizable as String: true])) == errSecDuplicateItem)
            // An absent key attribute counts as empty: two items with no account collide.
            #expect(add([kSecClass as String: genp, kSecAttrService as String: "lonely"]) == errSecSuccess)
            #expect(
                add([kSecClass as String: genp, kSecAttrService as String: "lonely", kSecAttrAccount as String: ""])
                    == errSecDuplicateItem)
        }

        @Test func internetPasswordPrimaryKeyCoversServerProtocolPortPathDomainAuthType() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let base: [String: Any] = [
                kSecClass as String: inet, kSecAttrAccount as String: "u", kSecAttrServer as String: "example.com",
                kSecValueData as String: Data("p".utf8),
            ]
            #expect(add(base) == errSecSuccess)
            #expect(add(base.merging([kSecAttrLabel as String: "x"]) { $1 }) == errSecDuplicateItem)
            let variants: [[String: Any]] = [
                [kSecAttrProtocol as String: kSecAttrProtocolHTTPS],
                [kSecAttrPort as String: 8443],
                [kSecAttrPath as String: "/login"],
                [kSecAttrSecurityDomain as String: "realm"],
                [kSecAttrAuthenticationType as String: kSecAttrAuthenticationTypeHTMLForm],
                [kSecAttrServer as String: "example.org"],
                [kSecAttrAccount as String: "v"],
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
                kSecClass as String: kSecClassCertificate, kSecAttrCertificateType as String: 3,
                kSecAttrIssuer as String: Data([1, 2, 3]),
                kSecAttrSerialNumber as String: Data([9]), kSecAttrLabel as String: "my cert",
                kSecValueData as String: Data([0x30, 0x82]),
            ]
            #expect(add(cert) == errSecSuccess)
            #expect(add(cert.merging([kSecAttrLabel as String: "other"]) { $1 }) == errSecDuplicateItem)
            #expect(add(cert.merging([kSecAttrSerialNumber as String: Data([10])]) { $1 }) == errSecSuccess)

            let key: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048,
                kSecAttrApplicationTag as String: Data("com.example.key".utf8), kSecAttrCanSign as String: true,
                kSecValueData as String: Data([1, 2, 3, 4]),
            ]
            #expect(add(key) == errSecSuccess)
            #expect(add(key) == errSecDuplicateItem)
            #expect(add(key.merging([kSecAttrKeySizeInBits as String: 4096]) { $1 }) == errSecSuccess)

            let identity: [String: Any] = [
                kSecClass as String: kSecClassIdentity, kSecAttrIssuer as String: Data([7]),
                kSecAttrSerialNumber as String: Data([8]),
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrLabel as String: "me",
            ]
            #expect(add(identity) == errSecSuccess)

            let (certStatus, certs) = copyMatching([
                kSecClass as String: kSecClassCertificate, kSecAttrIssuer as String: Data([1, 2, 3]),
                kSecMatchLimit as String: kSecMatchLimitAll,
                kSecReturnAttributes as String: true,
            ])
            #expect(certStatus == errSecSuccess)
            #expect((certs as? [[String: Any]])?.count == 2)

            let (keyStatus, keyAttributes) = copyMatching([
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("com.example.key".utf8),
                kSecAttrKeySizeInBits as String: 4096, kSecReturnAttributes as String: true,
            ])
            #expect(keyStatus == errSecSuccess)
            let attributes = keyAttributes as? [String: Any]
            #expect(attributes?[kSecAttrKeyClass as String] as? Int == 1)
            #expect(attributes?[kSecAttrKeyType as String] as? Int == 42)
            #expect(attributes?[kSecAttrCanSign as String] as? Bool == true)

            let (idStatus, idLabel) = copyMatching([
                kSecClass as String: kSecClassIdentity, kSecAttrSerialNumber as String: Data([8]),
                kSecReturnAttributes as String: true,
            ])
            #expect(idStatus == errSecSuccess)
            #expect((idLabel as? [String: Any])?[kSecAttrLabel as String] as? String == "me")
        }

        // MARK: Result shapes

        @Test func noReturnKeyGivesSuccessAndNoResult() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            let (status, result) = copyMatching([kSecClass as String: genp, kSecAttrAccount as String: "a"])
            #expect(status == errSecSuccess)
            #expect(result == nil)
            #expect(copyMatching([kSecClass as String: genp, kSecAttrAccount as String: "b"]).0 == errSecItemNotFound)
        }

        @Test func singleReturnTypeGivesABareValue() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "hunter2", [kSecAttrLabel as String: "Label A"])) == errSecSuccess)
            let query: [String: Any] = [kSecClass as String: genp, kSecAttrAccount as String: "a"]

            let (s1, data) = copyMatching(query.merging([kSecReturnData as String: true]) { $1 })
            #expect(s1 == errSecSuccess)
            #expect((data as? Data).map { String(decoding: $0, as: UTF8.self) } == "hunter2")

            let (s2, attributes) = copyMatching(query.merging([kSecReturnAttributes as String: true]) { $1 })
            #expect(s2 == errSecSuccess)
            let dictionary = try #require(attributes as? [String: Any])
            #expect(dictionary[kSecAttrAccount as String] as? String == "a")
            #expect(dictionary[kSecAttrService as String] as? String == "svc")
            #expect(dictionary[kSecAttrLabel as String] as? String == "Label A")
            #expect(dictionary[kSecClass as String] as? String == genp)
            #expect(dictionary[kSecAttrCreationDate as String] is Date)
            #expect(dictionary[kSecAttrModificationDate as String] is Date)
            #expect(dictionary[kSecValueData as String] == nil, "attributes alone carry no secret")

            let (s3, reference) = copyMatching(query.merging([kSecReturnRef as String: true]) { $1 })
            #expect(s3 == errSecSuccess)
            #expect(reference is SecKeychainItem)

            let (s4, persistent) = copyMatching(query.merging([kSecReturnPersistentRef as String: true]) { $1 })
            #expect(s4 == errSecSuccess)
            #expect((persistent as? Data)?.count == 20)
        }

        @Test func severalReturnTypesGiveADictionary() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "hunter2")) == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass as String: genp, kSecReturnData as String: true, kSecReturnAttributes as String: true,
                kSecReturnRef as String: true,
                kSecReturnPersistentRef as String: true,
            ])
            #expect(status == errSecSuccess)
            let dictionary = try #require(result as? [String: Any])
            #expect(dictionary[kSecAttrAccount as String] as? String == "a")
            #expect(dictionary[kSecValueData as String] as? Data == Data("hunter2".utf8))
            #expect(dictionary[kSecValueRef as String] is SecKeychainItem)
            #expect((dictionary[kSecValuePersistentRef as String] as? Data)?.count == 20)

            let (s2, refs) = copyMatching([
                kSecClass as String: genp, kSecReturnRef as String: true, kSecReturnPersistentRef as String: true,
            ])
            #expect(s2 == errSecSuccess)
            let pair = try #require(refs as? [String: Any])
            #expect(Set(pair.keys) == [kSecValueRef as String, kSecValuePersistentRef as String])
        }

        @Test func matchLimitShapesTheResult() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for name in ["a", "b", "c"] { #expect(add(genericPassword(name)) == errSecSuccess) }
            let query: [String: Any] = [kSecClass as String: genp, kSecReturnAttributes as String: true]

            let (s1, one) = copyMatching(query)
            #expect(s1 == errSecSuccess)
            #expect(
                (one as? [String: Any])?[kSecAttrAccount as String] as? String == "a",
                "default limit is one: the first added")

            let (s2, all) = copyMatching(query.merging([kSecMatchLimit as String: kSecMatchLimitAll]) { $1 })
            #expect(s2 == errSecSuccess)
            #expect(
                (all as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } == ["a", "b", "c"])

            let (s3, two) = copyMatching(query.merging([kSecMatchLimit as String: 2]) { $1 })
            #expect(s3 == errSecSuccess)
            #expect((two as? [[String: Any]])?.count == 2)

            let (s4, bareOne) = copyMatching(query.merging([kSecMatchLimit as String: 1]) { $1 })
            #expect(s4 == errSecSuccess)
            #expect(bareOne is NSDictionary, "a numeric limit of 1 is kSecMatchLimitOne")

            let (s5, refs) = copyMatching([
                kSecClass as String: genp, kSecReturnPersistentRef as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(s5 == errSecSuccess)
            #expect((refs as? [Data])?.count == 3)
        }

        @Test func returnDataWithLimitAllReturnsEveryMatchOfEveryClass() throws {
            // The data-protection keychain's behaviour (macOS's file keychain refuses it for passwords).
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "one")) == errSecSuccess)
            #expect(add(genericPassword("b", secret: "two")) == errSecSuccess)
            let (genpStatus, secrets) = copyMatching([
                kSecClass as String: genp, kSecReturnData as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(genpStatus == errSecSuccess)
            #expect((secrets as? [Data]) == [Data("one".utf8), Data("two".utf8)])
            #expect(
                add([
                    kSecClass as String: inet, kSecAttrServer as String: "s",
                    kSecValueData as String: Data("three".utf8),
                ]) == errSecSuccess)
            let (inetStatus, inetSecrets) = copyMatching([
                kSecClass as String: inet, kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(inetStatus == errSecSuccess)
            #expect((inetSecrets as? [Data]) == [Data("three".utf8)])
            #expect(
                add([
                    kSecClass as String: kSecClassCertificate, kSecAttrSerialNumber as String: Data([1]),
                    kSecValueData as String: Data([0x30]),
                ])
                    == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassCertificate, kSecReturnData as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [Data]) == [Data([0x30])])
        }

        @Test func addReturnsWhatItIsAskedFor() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            var result: CFTypeRef?
            let status = SecItemAdd(
                genericPassword(
                    "a", secret: "s", [kSecReturnAttributes as String: true, kSecReturnPersistentRef as String: true])
                    as CFDictionary, &result)
            #expect(status == errSecSuccess)
            let dictionary = try #require(result as? [String: Any])
            #expect(dictionary[kSecAttrAccount as String] as? String == "a")
            let persistent = try #require(dictionary[kSecValuePersistentRef as String] as? Data)
            let (s2, data) = copyMatching([
                kSecClass as String: genp, kSecValuePersistentRef as String: persistent, kSecReturnData as String: true,
            ])
            #expect(s2 == errSecSuccess)
            #expect(data as? Data == Data("s".utf8))
        }

        // MARK: Matching

        @Test func caseInsensitiveMatching() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("Alice@Example.com", service: "Mail")) == errSecSuccess)
            #expect(
                copyMatching([kSecClass as String: genp, kSecAttrAccount as String: "alice@example.com"]).0
                    == errSecItemNotFound)
            #expect(
                copyMatching([
                    kSecClass as String: genp, kSecAttrAccount as String: "alice@example.com",
                    kSecMatchCaseInsensitive as String: false,
                ]).0
                    == errSecItemNotFound)
            let (status, result) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "ALICE@example.COM",
                kSecAttrService as String: "mail",
                kSecMatchCaseInsensitive as String: true, kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccount as String] as? String == "Alice@Example.com")
        }

        @Test func matchItemListAndPersistentRefLimitTheSearch() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for name in ["a", "b", "c"] { #expect(add(genericPassword(name)) == errSecSuccess) }
            let (_, refs) = copyMatching([
                kSecClass as String: genp, kSecReturnRef as String: true, kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            let items = try #require(refs as? [SecKeychainItem])
            #expect(items.count == 3)

            let (s1, limited) = copyMatching([
                kSecClass as String: genp, kSecMatchItemList as String: [items[0], items[2]],
                kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(s1 == errSecSuccess)
            #expect(
                (limited as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } == ["a", "c"])

            let (_, persistent) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "b", kSecReturnPersistentRef as String: true,
            ])
            let (s2, viaPersistent) = copyMatching([
                kSecClass as String: genp, kSecMatchItemList as String: [try #require(persistent as? Data)],
                kSecReturnAttributes as String: true,
            ])
            #expect(s2 == errSecSuccess)
            #expect((viaPersistent as? [String: Any])?[kSecAttrAccount as String] as? String == "b")

            // The list narrows the attribute search, it does not replace it.
            #expect(
                copyMatching([
                    kSecClass as String: genp, kSecMatchItemList as String: [items[0]], kSecAttrAccount as String: "b",
                ]).0
                    == errSecItemNotFound)
            #expect(
                copyMatching([kSecClass as String: genp, kSecValuePersistentRef as String: Data([1, 2, 3])]).0
                    == errSecInvalidItemRef)
            #expect(
                copyMatching([kSecClass as String: genp, kSecMatchItemList as String: ["not a ref"]]).0
                    == errSecInvalidItemRef)
        }

        @Test func accessGroupNarrowsTheSearch() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", [kSecAttrAccessGroup as String: "group.one"])) == errSecSuccess)
            #expect(add(genericPassword("b", [kSecAttrAccessGroup as String: "group.two"])) == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass as String: genp, kSecAttrAccessGroup as String: "group.two",
                kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            let rows = try #require(result as? [[String: Any]])
            #expect(rows.map { $0[kSecAttrAccount as String] as? String } == ["b"])
            #expect(rows.first?[kSecAttrAccessGroup as String] as? String == "group.two")
            #expect(
                copyMatching([kSecClass as String: genp, kSecAttrAccessGroup as String: "group.three"]).0
                    == errSecItemNotFound)
        }

        @Test func synchronizableFiltersAndAnyMatchesBoth() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("local")) == errSecSuccess)
            #expect(add(genericPassword("synced", [kSecAttrSynchronizable as String: true])) == errSecSuccess)
            func accounts(_ extra: [String: Any]) -> [String] {
                let (_, result) = copyMatching(
                    [
                        kSecClass as String: genp, kSecReturnAttributes as String: true,
                        kSecMatchLimit as String: kSecMatchLimitAll,
                    ].merging(extra) {
                        $1
                    })
                return (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } ?? []
            }
            #expect(accounts([:]) == ["local"])
            #expect(accounts([kSecAttrSynchronizable as String: false]) == ["local"])
            #expect(accounts([kSecAttrSynchronizable as String: true]) == ["synced"])
            #expect(accounts([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]) == ["local", "synced"])
            #expect(
                add(genericPassword("x", [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny])) == errSecParam)
        }

        // MARK: Dates

        @Test func datesAreSetByTheStoreNotTheCaller() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let before = Date()
            #expect(
                add(genericPassword("a", [kSecAttrCreationDate as String: Date(timeIntervalSince1970: 0)]))
                    == errSecSuccess)
            let (_, result) = copyMatching([kSecClass as String: genp, kSecReturnAttributes as String: true])
            let created = try #require((result as? [String: Any])?[kSecAttrCreationDate as String] as? Date)
            #expect(created >= before.addingTimeInterval(-1))
        }

        @Test func datesCanBeMatchedExactly() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("first")) == errSecSuccess)
            Thread.sleep(forTimeInterval: 0.01)
            #expect(add(genericPassword("second")) == errSecSuccess)
            let (_, result) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "second", kSecReturnAttributes as String: true,
            ])
            let created = try #require((result as? [String: Any])?[kSecAttrCreationDate as String] as? Date)
            let (status, match) = copyMatching([
                kSecClass as String: genp, kSecAttrCreationDate as String: created,
                kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            #expect((match as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } == ["second"])
            #expect(
                copyMatching([kSecClass as String: genp, kSecAttrModificationDate as String: Date.distantPast]).0
                    == errSecItemNotFound)
        }

        // MARK: Update

        @Test func updateChangesEveryMatchAndBumpsModificationDate() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", service: "shared")) == errSecSuccess)
            #expect(add(genericPassword("b", service: "shared")) == errSecSuccess)
            #expect(add(genericPassword("c", service: "other")) == errSecSuccess)
            let (_, before) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "a", kSecReturnAttributes as String: true,
            ])
            let old = try #require(before as? [String: Any])
            Thread.sleep(forTimeInterval: 0.01)

            let status = SecItemUpdate(
                [
                    kSecClass as String: genp, kSecAttrService as String: "shared",
                    kSecMatchLimit as String: kSecMatchLimitOne,
                ] as CFDictionary,
                [kSecAttrComment as String: "rotated", kSecValueData as String: Data("new".utf8)] as CFDictionary)
            #expect(status == errSecSuccess)

            let (_, after) = copyMatching([
                kSecClass as String: genp, kSecAttrComment as String: "rotated", kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            let rows = try #require(after as? [[String: Any]])
            #expect(
                rows.compactMap { $0[kSecAttrAccount as String] as? String } == ["a", "b"],
                "match limit is ignored by update")
            let updated = try #require(rows.first)
            #expect(updated[kSecAttrCreationDate as String] as? Date == old[kSecAttrCreationDate as String] as? Date)
            #expect(
                try #require(updated[kSecAttrModificationDate as String] as? Date)
                    > (try #require(old[kSecAttrModificationDate as String] as? Date)))
            let (_, data) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "b", kSecReturnData as String: true,
            ])
            #expect(data as? Data == Data("new".utf8))
            let (_, untouched) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "c", kSecReturnData as String: true,
            ])
            #expect(untouched as? Data == Data("pw".utf8))
        }

        @Test(arguments: [
            [kSecReturnData as String: Value.flag(true)],
            [kSecMatchLimit as String: .text(kSecMatchLimitAll as String)],
            [kSecClass as String: .text(genp)],
            [kSecMatchCaseInsensitive as String: .flag(true)],
            [kSecValuePersistentRef as String: .bytes(Array(repeating: 0, count: 20))],
            [kSecAttrSynchronizable as String: .text(kSecAttrSynchronizableAny as String)],
            [:],
        ])
        func updateRefusesSearchKeysAmongTheChanges(argument: [String: Value]) throws {
            let changes = argument.mapValues(\.any)
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a")) == errSecSuccess)
            #expect(SecItemUpdate([kSecClass as String: genp] as CFDictionary, changes as CFDictionary) == errSecParam)
        }

        @Test func updateThatWouldCollideIsDuplicateAndChangesNothing() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(add(genericPassword("a", secret: "A")) == errSecSuccess)
            #expect(add(genericPassword("b", secret: "B")) == errSecSuccess)
            #expect(add(genericPassword("c", secret: "C")) == errSecSuccess)
            // Renaming b and c both to "a": the first rename already collides.
            let status = SecItemUpdate(
                [kSecClass as String: genp, kSecAttrService as String: "svc", kSecMatchItemList as String: []]
                    as CFDictionary,
                [kSecAttrAccount as String: "a"] as CFDictionary)
            #expect(status == errSecItemNotFound, "an empty item list matches nothing")
            let collide = SecItemUpdate(
                [kSecClass as String: genp, kSecAttrAccount as String: "c"] as CFDictionary,
                [kSecAttrAccount as String: "b", kSecValueData as String: Data("changed".utf8)] as CFDictionary)
            #expect(collide == errSecDuplicateItem)
            let (_, result) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "c", kSecReturnData as String: true,
            ])
            #expect(result as? Data == Data("C".utf8), "nothing changed")
            let many = SecItemUpdate(
                [kSecClass as String: genp] as CFDictionary, [kSecAttrAccount as String: "z"] as CFDictionary)
            #expect(many == errSecDuplicateItem)
            let (_, all) = copyMatching([
                kSecClass as String: genp, kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(
                (all as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } == ["a", "b", "c"])
        }

        @Test func updateOfNothingIsItemNotFound() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(
                SecItemUpdate(
                    [kSecClass as String: genp, kSecAttrAccount as String: "nobody"] as CFDictionary,
                    [kSecAttrLabel as String: "x"] as CFDictionary)
                    == errSecItemNotFound)
            #expect(
                SecItemUpdate(
                    [kSecClass as String: genp] as CFDictionary, [kSecAttrServer as String: "x"] as CFDictionary)
                    == errSecNoSuchAttr)
        }

        // MARK: Delete

        @Test func deleteRemovesEveryMatchOrOnlyTheReferencedItems() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for name in ["a", "b", "c", "d"] {
                #expect(add(genericPassword(name, service: name < "c" ? "x" : "y")) == errSecSuccess)
            }
            #expect(
                SecItemDelete([kSecClass as String: genp, kSecAttrService as String: "x"] as CFDictionary)
                    == errSecSuccess)
            #expect(copyMatching([kSecClass as String: genp, kSecAttrService as String: "x"]).0 == errSecItemNotFound)
            #expect(
                SecItemDelete([kSecClass as String: genp, kSecAttrService as String: "x"] as CFDictionary)
                    == errSecItemNotFound)

            let (_, ref) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "c", kSecReturnRef as String: true,
            ])
            #expect(
                SecItemDelete(
                    [kSecClass as String: genp, kSecValueRef as String: try #require(ref as? SecKeychainItem)]
                        as CFDictionary)
                    == errSecSuccess)
            let (_, left) = copyMatching([
                kSecClass as String: genp, kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect((left as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } == ["d"])

            let (_, persistent) = copyMatching([kSecClass as String: genp, kSecReturnPersistentRef as String: true])
            #expect(
                SecItemDelete(
                    [kSecClass as String: genp, kSecValuePersistentRef as String: try #require(persistent as? Data)]
                        as CFDictionary)
                    == errSecSuccess)
            #expect(copyMatching([kSecClass as String: genp]).0 == errSecItemNotFound)
            #expect(
                SecItemDelete([kSecClass as String: genp, kSecReturnData as String: true] as CFDictionary)
                    == errSecParam)
        }

        // MARK: Lock state and keychains

        /// kSecAttrAccessibleAfterFirstUnlock in process: readable after SecKeychainLock (its class key stays),
        /// WhenUnlocked not; SecItemUpdate moves an item between classes.
        @Test func afterFirstUnlockItemsReadWhileLocked() throws {
            let kc = try TestKeychain()
            let afu = [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]
            #expect(add(genericPassword("afu", secret: "bg", afu)) == errSecSuccess)
            #expect(add(genericPassword("wu", secret: "fg")) == errSecSuccess)
            #expect(SecKeychainLock(kc.keychain) == errSecSuccess)

            let (status, data) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "afu", kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("bg".utf8))
            #expect(
                copyMatching([
                    kSecClass as String: genp, kSecAttrAccount as String: "wu", kSecReturnData as String: true,
                ])
                .0 == errSecInteractionNotAllowed)
            // Skip leaves out what cannot be read, and returns what can.
            let (skipStatus, skipped) = copyMatching([
                kSecClass as String: genp, kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
                kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
            ])
            #expect(skipStatus == errSecSuccess)
            let accounts = (skipped as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String }
            #expect(accounts == ["afu"])
            #expect(
                add(genericPassword("more", afu)) == errSecInteractionNotAllowed, "writes need the keychain unlocked")

            let right = "correct horse"
            #expect(SecKeychainUnlock(kc.keychain, UInt32(right.utf8.count), right, true) == errSecSuccess)
            #expect(
                SecItemUpdate(
                    [kSecClass as String: genp, kSecAttrAccount as String: "wu"] as CFDictionary,
                    [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock] as CFDictionary)
                    == errSecSuccess)
            #expect(SecKeychainLock(kc.keychain) == errSecSuccess)
            let moved = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "wu", kSecReturnData as String: true,
            ])
            #expect(moved.0 == errSecSuccess)
            #expect(moved.1 as? Data == Data("fg".utf8))
        }

        @Test func lockedKeychainFindsReferencesButNotContents() throws {
            let kc = try TestKeychain()
            #expect(add(genericPassword("a", secret: "s")) == errSecSuccess)
            #expect(SecKeychainLock(kc.keychain) == errSecSuccess)

            let (refStatus, refs) = copyMatching([
                kSecClass as String: genp, kSecAttrAccount as String: "a", kSecReturnPersistentRef as String: true,
            ])
            #expect(refStatus == errSecSuccess)
            #expect((refs as? Data)?.count == 20)
            #expect(copyMatching([kSecClass as String: genp, kSecAttrAccount as String: "zz"]).0 == errSecItemNotFound)
            #expect(
                copyMatching([kSecClass as String: genp, kSecReturnData as String: true]).0
                    == errSecInteractionNotAllowed)
            #expect(
                copyMatching([kSecClass as String: genp, kSecReturnAttributes as String: true]).0
                    == errSecInteractionNotAllowed)
            #expect(
                copyMatching([
                    kSecClass as String: genp, kSecReturnData as String: true,
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
                ]).0 == errSecItemNotFound)
            #expect(add(genericPassword("b")) == errSecInteractionNotAllowed)
            #expect(SecItemDelete([kSecClass as String: genp] as CFDictionary) == errSecInteractionNotAllowed)
            #expect(
                SecItemUpdate(
                    [kSecClass as String: genp] as CFDictionary, [kSecAttrLabel as String: "l"] as CFDictionary)
                    == errSecInteractionNotAllowed)

            let wrong = "wrong"
            #expect(SecKeychainUnlock(kc.keychain, UInt32(wrong.utf8.count), wrong, true) == errSecAuthFailed)
            #expect(
                copyMatching([kSecClass as String: genp, kSecReturnData as String: true]).0
                    == errSecInteractionNotAllowed)
            let right = "correct horse"
            #expect(SecKeychainUnlock(kc.keychain, UInt32(right.utf8.count), right, true) == errSecSuccess)
            let (status, data) = copyMatching([kSecClass as String: genp, kSecReturnData as String: true])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("s".utf8))
        }

        @Test func keychainsSideBySideAreAddressedBySearchListAndUseKeychain() throws {
            let first = try TestKeychain(name: "first")
            let second = try SecKeychain.create(
                atPath: first.directory + "/second.keychain-db", password: "pw2")
            #expect(add(genericPassword("in-first")) == errSecSuccess)
            #expect(add(genericPassword("in-second", [kSecUseKeychain as String: second])) == errSecSuccess)
            #expect(
                copyMatching([kSecClass as String: genp, kSecAttrAccount as String: "in-second"]).0
                    == errSecItemNotFound)
            let (status, result) = copyMatching([
                kSecClass as String: genp, kSecMatchSearchList as String: [first.keychain, second],
                kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            #expect(
                (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String } == [
                    "in-first", "in-second",
                ])
            let reopened = UnsafeMutablePointer<SecKeychain?>.allocate(capacity: 1)
            defer { reopened.deallocate() }
            reopened.initialize(to: nil)
            #expect(SecKeychainOpen(first.directory + "/second.keychain-db", reopened) == errSecSuccess)
            let (lockedStatus, _) = copyMatching([
                kSecClass as String: genp, kSecMatchSearchList as String: [try #require(reopened.pointee)],
                kSecReturnData as String: true,
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
