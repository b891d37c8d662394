import Foundation
import Security
import Testing

// Issue 27, "The Apple code people use": what popular keychain wrappers rely on
// in results and queries (docs/secitem-semantics.md, "Five wrappers, tried unchanged").

/// The four `kSecReturn*` keys.
private let returnKeys = [kSecReturnData, kSecReturnAttributes, kSecReturnRef, kSecReturnPersistentRef].map {
    $0 as String
}

/// Adds a generic password and returns its persistent reference.
private func addReturningReference(account: Any, service: String, secret: String, synchronizable: Bool) -> Data? {
    var reference: CFTypeRef?
    let status = SecItemAdd(
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
            kSecAttrAccount as String: account, kSecValueData as String: Data(secret.utf8),
            kSecAttrSynchronizable as String: synchronizable, kSecReturnPersistentRef as String: true,
        ] as CFDictionary, &reference)
    return status == errSecSuccess ? reference as? Data : nil
}

extension SecuritySuite {
    @Suite struct WrapperSemantics {
        // MARK: Persistent references

        @Test func aPersistentReferenceFindsItsItemWithEveryReturnKindAndLimit() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for synchronizable in [false, true] {
                let reference = try #require(
                    addReturningReference(
                        account: "a\(synchronizable)", service: "refs", secret: "s\(synchronizable)",
                        synchronizable: synchronizable))
                let limits: [Any?] = [nil, kSecMatchLimitOne, kSecMatchLimitAll, 2]
                for mask in 0..<16 {
                    let asked = returnKeys.indices.filter { mask & (1 << $0) != 0 }.map { returnKeys[$0] }
                    for limit in limits {
                        for withClass in [false, true] {
                            var query: [String: Any] = [kSecValuePersistentRef as String: reference]
                            for key in asked { query[key] = true }
                            if let limit { query[kSecMatchLimit as String] = limit }
                            if withClass { query[kSecClass as String] = kSecClassGenericPassword }
                            let (status, result) = copyMatching(query)
                            let context = "sync \(synchronizable), \(asked), limit \(String(describing: limit))"
                            #expect(status == errSecSuccess, "\(context)")
                            guard !asked.isEmpty else {
                                #expect(result == nil, "\(context)")
                                continue
                            }
                            let single = limit == nil || (limit as? String) == (kSecMatchLimitOne as String)
                            let object: Any? = single ? result : (result as? [Any])?.first
                            if !single { #expect((result as? [Any])?.count == 1, "\(context)") }
                            if asked.count > 1 {
                                let dictionary = try #require(object as? [String: Any], "\(context)")
                                if asked.contains(kSecReturnPersistentRef as String) {
                                    #expect(dictionary[kSecValuePersistentRef as String] as? Data == reference)
                                }
                                if asked.contains(kSecReturnData as String) {
                                    #expect(
                                        dictionary[kSecValueData as String] as? Data
                                            == Data("s\(synchronizable)".utf8))
                                }
                            } else if asked == [kSecReturnData as String] {
                                #expect(object as? Data == Data("s\(synchronizable)".utf8), "\(context)")
                            } else if asked == [kSecReturnPersistentRef as String] {
                                #expect(object as? Data == reference, "\(context)")
                            } else if asked == [kSecReturnAttributes as String] {
                                #expect(
                                    (object as? [String: Any])?[kSecAttrAccount as String] as? String
                                        == "a\(synchronizable)")
                            } else {
                                #expect(object is SecKeychainItem, "\(context)")
                            }
                        }
                    }
                }
            }
        }

        @Test func aGivenSynchronizableValueStillNarrowsAQueryByReference() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let reference = try #require(
                addReturningReference(account: "a", service: "refs", secret: "s", synchronizable: true))
            let query: [String: Any] = [kSecValuePersistentRef as String: reference, kSecReturnData as String: true]
            #expect(
                copyMatching(query.merging([kSecAttrSynchronizable as String: false]) { $1 }).0 == errSecItemNotFound)
            #expect(copyMatching(query.merging([kSecAttrSynchronizable as String: true]) { $1 }).0 == errSecSuccess)
            let any = [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]
            #expect(copyMatching(query.merging(any) { $1 }).0 == errSecSuccess)
            // Without kSecAttrSynchronizable an attribute search still sees non-synchronizable items only.
            #expect(
                copyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "refs"]).0
                    == errSecItemNotFound)
        }

        @Test func aSynchronizableItemIsUpdatedAndDeletedByItsReferenceAlone() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let reference = try #require(
                addReturningReference(account: "a", service: "refs", secret: "old", synchronizable: true))
            let named = [kSecValuePersistentRef as String: reference] as CFDictionary
            #expect(SecItemUpdate(named, [kSecValueData as String: Data("new".utf8)] as CFDictionary) == errSecSuccess)
            let (status, data) = copyMatching([
                kSecValuePersistentRef as String: reference, kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("new".utf8))
            let (_, item) = copyMatching([kSecValuePersistentRef as String: reference, kSecReturnRef as String: true])
            let itemReference = try #require(item as? SecKeychainItem)
            let list: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecMatchItemList as String: [itemReference],
            ]
            #expect(copyMatching(list).0 == errSecSuccess)
            #expect(SecItemDelete(named) == errSecSuccess)
            #expect(copyMatching([kSecValuePersistentRef as String: reference]).0 == errSecItemNotFound)
        }

        @Test func aMigrationReadsEachMatchsDataByItsPersistentReference() throws {
            // Attributes and persistent references of every match at once, then each item's data by its
            // reference alone, in [String: AnyHashable] dictionaries: the steps of a migration between services.
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for synchronizable in [false, true] {
                let service = "from-\(synchronizable)"
                for account in ["one", "two", "three"] {
                    #expect(
                        addReturningReference(
                            account: account, service: service, secret: "secret of \(account)",
                            synchronizable: synchronizable) != nil)
                }
                let query: [String: AnyHashable] = [
                    kSecClass as String: kSecClassGenericPassword as String, kSecAttrService as String: service,
                    kSecAttrSynchronizable as String: synchronizable,
                    kSecMatchLimit as String: kSecMatchLimitAll as String,
                    kSecReturnAttributes as String: true, kSecReturnData as String: false,
                    kSecReturnRef as String: false, kSecReturnPersistentRef as String: true,
                ]
                var result: CFTypeRef?
                #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
                let matches = try #require(result as? [[String: AnyHashable]])
                #expect(matches.count == 3)
                for match in matches {
                    let account = try #require(match[kSecAttrAccount as String] as? String)
                    let reference = try #require(match[kSecValuePersistentRef as String])
                    let read: [String: AnyHashable] = [
                        kSecValuePersistentRef as String: reference, kSecReturnData as String: true,
                    ]
                    var data: CFTypeRef?
                    #expect(SecItemCopyMatching(read as CFDictionary, &data) == errSecSuccess)
                    #expect(data as? Data == Data("secret of \(account)".utf8))
                }
            }
        }

        // MARK: CFString and String as one key

        @Test func aCFStringAndItsStringAreOneAnyHashable() throws {
            let constants: [CFString] = [
                kSecClass, kSecAttrAccount, kSecAttrService, kSecClassGenericPassword, kSecMatchLimitAll,
                kSecValuePersistentRef, kSecAttrAccessibleAfterFirstUnlock,
            ]
            for constant in constants {
                let text = constant as String
                #expect(AnyHashable(constant) == AnyHashable(text))
                #expect(AnyHashable(constant).hashValue == AnyHashable(text).hashValue)
                #expect(AnyHashable(NSMutableString(string: text)) == AnyHashable(text))
                #expect(Set<AnyHashable>([text]).contains(constant))
                let byString: [AnyHashable: Int] = [text: 1]
                let byObject: [AnyHashable: Int] = [constant: 2]
                #expect(byString[constant] == 1)
                #expect(byObject[text] == 2)
            }
            #expect(AnyHashable(kSecAttrAccount) != AnyHashable(kSecAttrService as String))
        }

        @Test func theOtherBridgedTypesAreOneAnyHashableWithTheirSwiftTypes() throws {
            // CFData/NSData and Data, CFNumber/NSNumber and the integers, CFBoolean and Bool: equal, with equal
            // hashes, so each finds the other's key.
            let bytes = Data("acct".utf8)
            let pairs: [(AnyHashable, AnyHashable)] = [
                (AnyHashable(NSData(data: bytes)), AnyHashable(bytes)),
                (AnyHashable(NSNumber(value: 443)), AnyHashable(443)),
                (AnyHashable(NSNumber(value: -1)), AnyHashable(-1)),
                (AnyHashable(NSNumber(value: UInt64.max)), AnyHashable(UInt64.max)),
                (AnyHashable(NSNumber(value: 2.5)), AnyHashable(2.5)),
                (AnyHashable(kCFBooleanTrue!), AnyHashable(true)), (AnyHashable(kCFBooleanFalse!), AnyHashable(false)),
                (AnyHashable(true as NSNumber), AnyHashable(true)),
            ]
            for (object, value) in pairs {
                #expect(object == value)
                #expect(object.hashValue == value.hashValue)
                #expect([value: "found"][object] == "found")
                #expect([object: "found"][value] == "found")
            }
            // As on Apple systems, the number 1 is not the boolean true.
            #expect(AnyHashable(NSNumber(value: 1)) != AnyHashable(true))
            #expect(AnyHashable(kCFBooleanTrue!) != AnyHashable(1))
        }

        @Test func queriesWithCFBooleansAndWithBoolsCompareEqual() throws {
            // A query with kCFBooleanTrue compared for containment with one written with true.
            let written: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: kCFBooleanTrue!,
                kSecAttrSynchronizable as String: kCFBooleanFalse!, kSecAttrPort as String: NSNumber(value: 8443),
            ]
            let plain: [String: Any] = ["class": "genp", "r_Attributes": true, "sync": false, "port": 8443]
            #expect(NSDictionary(dictionary: written).isEqual(to: written))
            #expect(NSDictionary(dictionary: written).isEqual(to: plain))
            #expect(NSDictionary(dictionary: plain).isEqual(to: written))
            #expect(!NSDictionary(dictionary: written).isEqual(to: plain.merging(["r_Attributes": false]) { $1 }))
            #expect(!NSDictionary(dictionary: written).isEqual(to: plain.merging(["r_Attributes": 1]) { $1 }))
        }

        @Test func anAccountStoredAsBytesIsReadFromAResultByEitherKey() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            for account in ["first", "second"] {
                let status = add([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "listed",
                    kSecAttrAccount as String: Data(account.utf8), kSecAttrGeneric as String: Data(account.utf8),
                    kSecValueData as String: Data("v".utf8),
                ])
                #expect(status == errSecSuccess)
            }
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "listed",
                kSecReturnAttributes as String: kCFBooleanTrue!, kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            let listed = try #require(result as? [[AnyHashable: Any]])
            let byObject = listed.compactMap {
                ($0[kSecAttrAccount] as? Data).flatMap { String(data: $0, encoding: .utf8) }
            }
            let byString = listed.compactMap {
                ($0[kSecAttrAccount as String] as? Data).flatMap { String(data: $0, encoding: .utf8) }
            }
            #expect(Set(byObject) == ["first", "second"])
            #expect(Set(byString) == ["first", "second"])
            #expect(listed.allSatisfy { $0[kSecAttrService] as? String == "listed" })
            #expect(listed.allSatisfy { $0[kSecClass] as? String == kSecClassGenericPassword as String })
        }

        @Test func queriesOfCFStringsAndOfStringsCompareEqual() throws {
            // A query as code writes it (CFString constants as values) and the same query in plain
            // strings: NSDictionary's comparison boxes the values in AnyHashable.
            let written: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                kSecMatchLimit as String: kSecMatchLimitAll,
                kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked,
            ]
            let plain: [String: Any] = [
                "class": "genp", "svce": "svc", "m_Limit": "m_LimitAll", "pdmn": "ak",
            ]
            #expect(NSDictionary(dictionary: written).isEqual(to: plain))
            #expect(NSDictionary(dictionary: plain).isEqual(to: written))
            #expect(NSDictionary(dictionary: written).isEqual(to: written))
            let other = written.merging([kSecAttrService as String: "other"]) { $1 }
            #expect(!NSDictionary(dictionary: written).isEqual(to: other))
            // A returned attributes dictionary compares with one written from the constants.
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(
                add([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                    kSecAttrAccount as String: "acc", kSecValueData as String: Data("v".utf8),
                ]) == errSecSuccess)
            let (_, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                kSecReturnAttributes as String: true,
            ])
            let attributes = try #require(result as? [String: Any])
            let wanted: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                kSecAttrAccount as String: "acc",
            ]
            let shared = attributes.filter { wanted.keys.contains($0.key) }
            #expect(NSDictionary(dictionary: shared).isEqual(to: wanted))
        }
    }
}
