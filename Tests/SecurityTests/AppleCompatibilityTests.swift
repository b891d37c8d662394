import Foundation
import KeychainCore
import Security
import Testing

// Issue 16: the names real keychain code uses, written the way such code
// writes them, and the four places where Latchkey used to refuse what Apple's
// data-protection keychain accepts.

/// Takes what Apple's API types as `CFTypeRef` (`AnyObject`), as such code does.
private func identity(_ object: CFTypeRef) -> CFTypeRef { object }

/// Adds a generic password written with `CFString` keys, as `[CFString: Any]`.
private func addGeneric(account: Any, service: String = "svc", secret: String, _ extra: [String: Any] = [:])
    -> OSStatus
{
    var item: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
        kSecAttrService as String: service, kSecValueData as String: Data(secret.utf8),
    ]
    item.merge(extra) { $1 }
    return SecItemAdd(item as CFDictionary, nil)
}

extension SecuritySuite {
    @Suite struct AppleCompatibility {
        // MARK: Result codes

        @Test func resultCodesHaveApplesValues() throws {
            #expect(noErr == 0)
            #expect(noErr == errSecSuccess)
            #expect(errSecMissingEntitlement == -34018)
            #expect(errSecRestrictedAPI == -34020)
            #expect(errSecDuplicateCallback == -25297)
            #expect(errSecBufferTooSmall == -25301)
            #expect(errSecInvalidEncoding == -67853)
            #expect(errSecCertificateDuplicateExtension == -67903)
            #expect(errSecDskFull == errSecDiskFull)
            #expect(errSecInvaldCRLAuthority == errSecInvalidCRLAuthority)
            // The codes the keychain returns are the ones KeychainCore returns.
            let pairs: [(OSStatus, KeychainStatus)] = [
                (errSecSuccess, .success), (errSecParam, .param), (errSecDuplicateItem, .duplicateItem),
                (errSecItemNotFound, .itemNotFound), (errSecNoSuchAttr, .noSuchAttribute),
                (errSecInteractionNotAllowed, .interactionNotAllowed), (errSecDecode, .decode),
                (errSecAuthFailed, .authFailed), (errSecNoSuchClass, .noSuchClass),
            ]
            for (code, status) in pairs { #expect(code == status.rawValue) }
        }

        @Test func aSearchThatFindsNothingComparesEqualToErrSecItemNotFound() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let status = SecItemCopyMatching([kSecClass: kSecClassGenericPassword] as CFDictionary, nil)
            #expect(status == errSecItemNotFound)
            #expect(SecItemDelete([kSecClass: kSecClassGenericPassword] as CFDictionary) != noErr)
            #expect(addGeneric(account: "a", secret: "s") == noErr)
        }

        @Test func everyCodeHasAMessage() throws {
            let entitlement = try #require(SecCopyErrorMessageString(errSecMissingEntitlement, nil) as String?)
            #expect(entitlement.contains("entitlement"))
            let notFound = try #require(SecCopyErrorMessageString(errSecItemNotFound, nil) as String?)
            #expect(notFound == KeychainStatus.itemNotFound.message)
            let crl = try #require(SecCopyErrorMessageString(errSecCRLExpired, nil) as String?)
            #expect(crl.hasPrefix("CRL expired"))
        }

        // MARK: CFString and the CF names

        @Test func kSecConstantsAreCFStringObjectsThatBridgeToString() throws {
            // (Comparisons of CFStrings are made outside #expect: the macro
            // cannot capture NSString, which corelibs Foundation leaves non-Sendable.)
            let object: AnyObject = kSecClassGenericPassword
            let passedThrough = identity(kSecAttrAccessibleWhenUnlocked) === kSecAttrAccessibleWhenUnlocked
            #expect(passedThrough)
            #expect(object as? String == "genp")
            #expect(kSecClass as String == "class")
            #expect(String(kSecAttrAccount) == "acct")
            let equal = kSecAttrAccessibleWhenUnlocked == kSecAttrAccessibleWhenUnlocked
            let different = kSecAttrAccessibleWhenUnlocked != kSecAttrAccessibleAfterFirstUnlock
            let equalToACopy = kSecClassGenericPassword == NSString(string: "genp")
            #expect(equal && different && equalToACopy)
            #expect((kSecMatchLimitAll as String) < (kSecMatchLimitOne as String))
            let keyed: [String: AnyHashable] = [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]
            let hashedEqual = keyed["pdmn"] == AnyHashable(kSecAttrAccessibleAfterFirstUnlock)
            #expect(hashedEqual)
            let fromAny: Any = kSecAttrSynchronizableAny
            #expect(fromAny as? String == "syna")
        }

        @Test func cfStringKeysAndValuesWorkInEveryCall() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            // Keys as CFString (no `as String`), values as CFString objects.
            let item: [CFString: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecAttrService: "svc",
                kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock, kSecValueData: Data("pw".utf8),
            ]
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
            var result: CFTypeRef?
            let query: [CFString: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "svc", kSecMatchLimit: kSecMatchLimitOne,
                kSecReturnAttributes: kCFBooleanTrue!, kSecReturnData: kCFBooleanTrue as Any,
                kSecAttrSynchronizable: kSecAttrSynchronizableAny,
                kSecUseAuthenticationUI: kSecUseAuthenticationUIFail,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let found = try #require(result as? [String: Any])
            #expect(found[kSecAttrAccessible as String] as? String == kSecAttrAccessibleAfterFirstUnlock as String)
            #expect(found[kSecValueData as String] as? Data == Data("pw".utf8))
            #expect(
                SecItemUpdate(
                    [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"] as CFDictionary,
                    [kSecAttrLabel: "L"] as CFDictionary) == errSecSuccess)
            #expect(
                SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrLabel: "L"] as CFDictionary)
                    == errSecSuccess)
        }

        @Test func cfBooleansAreImplicitlyUnwrappedNumbers() throws {
            let yes: CFBoolean = kCFBooleanTrue!
            let no: CFBoolean = kCFBooleanFalse!
            #expect(yes.boolValue)
            #expect(!no.boolValue)
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(addGeneric(account: "a", secret: "s", [kSecAttrSynchronizable as String: kCFBooleanFalse!]) == 0)
            var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
            query[kSecReturnData as String] = kCFBooleanTrue
            var result: AnyObject?
            let status = withUnsafeMutablePointer(to: &result) {
                SecItemCopyMatching(query as CFDictionary, UnsafeMutablePointer($0))
            }
            #expect(status == noErr)
            #expect(result as? Data == Data("s".utf8))
        }

        @Test func cfErrorFunctionsReadAnErrorOutParameter() throws {
            var error: Unmanaged<CFError>?
            let control = SecAccessControlCreateWithFlags(
                kCFAllocatorDefault, "not a protection" as CFTypeRef, [], &error)
            #expect(control == nil)
            let cfError = try #require(error?.takeRetainedValue())
            let domain: CFErrorDomain = try #require(CFErrorGetDomain(cfError))
            #expect(domain as String == "NSOSStatusErrorDomain")
            let code: CFIndex = CFErrorGetCode(cfError)
            #expect(code == CFIndex(errSecParam))
            let userInfo = try #require(CFErrorCopyUserInfo(cfError) as? [String: Any])
            #expect(userInfo[NSLocalizedDescriptionKey] as? String != nil)
            let asError: Error = cfError
            #expect((asError as NSError).code == -50)
            // No out parameter: still nil, nothing to release.
            #expect(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.init(rawValue: 1 << 9)], nil)
                    == nil)
        }

        @Test func allocatorAndRandomDefaultsAreNilAsOnApplesSystems() {
            let allocator: CFAllocator? = kCFAllocatorDefault
            #expect(allocator == nil)
            let random: SecRandomRef? = kSecRandomDefault
            #expect(random == nil)
            let flags: CFOptionFlags = 1 << 31
            #expect(SecAccessControlCreateFlags(rawValue: flags) == .applicationPassword)
        }

        @Test func secRandomCopyBytesFillsTheBuffer() throws {
            var first = [UInt8](repeating: 0, count: 67)
            var second = [UInt8](repeating: 0, count: 67)
            #expect(SecRandomCopyBytes(kSecRandomDefault, first.count, &first) == errSecSuccess)
            #expect(SecRandomCopyBytes(kSecRandomDefault, second.count, &second) == errSecSuccess)
            #expect(first != second)
            // 67 random bytes: the last three (a partial word) are filled too.
            #expect(Array(first.suffix(8)) != [UInt8](repeating: 0, count: 8))
            // The way KeychainAccess's tests call it.
            let data = try #require(NSMutableData(length: 32))
            let bytes = data.mutableBytes.bindMemory(to: UInt8.self, capacity: 32)
            #expect(SecRandomCopyBytes(kSecRandomDefault, 32, bytes) == 0)
            #expect(data as Data != Data(count: 32))
            var none: [UInt8] = []
            #expect(SecRandomCopyBytes(nil, 0, &none) == errSecSuccess)
            var one: UInt8 = 0
            #expect(SecRandomCopyBytes(nil, -1, &one) == errSecParam)
        }

        // MARK: SecAccessControl

        @Test func accessControlFlagsHaveApplesRawValues() {
            let expected: [(SecAccessControlCreateFlags, CFOptionFlags)] = [
                (.userPresence, 1), (.biometryAny, 2), (.touchIDAny, 2), (.biometryCurrentSet, 8),
                (.touchIDCurrentSet, 8), (.devicePasscode, 16), (.watch, 32), (.companion, 32), (.or, 1 << 14),
                (.and, 1 << 15), (.privateKeyUsage, 1 << 30), (.applicationPassword, 1 << 31),
            ]
            for (flag, raw) in expected { #expect(flag.rawValue == raw) }
        }

        @Test func accessControlIsAHashableClassUsableAsAValue() throws {
            var error: Unmanaged<CFError>?
            let a = try #require(
                SecAccessControlCreateWithFlags(
                    kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, &error))
            #expect(error == nil)
            let b = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, nil))
            let c = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlock, [], nil))
            #expect(a == b)
            #expect(a !== b)
            #expect(a != c)
            #expect(Set([a, b, c]).count == 2)
            let dictionary: [String: AnyHashable] = [kSecAttrAccessControl as String: a]
            #expect(dictionary[kSecAttrAccessControl as String] == AnyHashable(b))
            let object: CFTypeRef = a
            #expect(object is SecAccessControl)
            // Made from a protection given as String too (KeychainAccess passes `rawValue as CFTypeRef`).
            #expect(SecAccessControlCreateWithFlags(nil, "aku" as CFTypeRef, .userPresence, nil) == a)
        }

        @Test func flagsLinuxCannotHonourAreRecordedAndReportedAsNotEnforced() throws {
            let control = try #require(
                SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, [.biometryCurrentSet, .or, .devicePasscode],
                    nil))
            #expect(control.flags == [.biometryCurrentSet, .or, .devicePasscode])
            // Enforced by latchkeyd: the fingerprint reader, the keychain password.
            #expect(control.unenforcedFlags.isEmpty)
            #expect(!control.description.contains("not enforced"))
            let watch = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.watch, .or, .userPresence], nil))
            #expect(watch.unenforcedFlags == .watch)
            #expect(watch.description.contains("not enforced"))
            let enclave = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .privateKeyUsage, nil))
            #expect(enclave.unenforcedFlags == .privateKeyUsage)
            let plain = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil))
            #expect(plain.unenforcedFlags.isEmpty)
            #expect(!plain.description.contains("not enforced"))
        }

        // MARK: Semantics 1: every match's data

        @Test func returnDataAndAttributesWithLimitAllGiveEveryMatch() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(addGeneric(account: "one", secret: "1") == errSecSuccess)
            #expect(addGeneric(account: "two", secret: "2") == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true,
                kSecReturnAttributes as String: true, kSecReturnPersistentRef as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
            ])
            #expect(status == errSecSuccess)
            let items = try #require(result as? [[String: Any]])
            #expect(items.compactMap { $0[kSecAttrAccount as String] as? String } == ["one", "two"])
            #expect(items.compactMap { $0[kSecValueData as String] as? Data } == [Data("1".utf8), Data("2".utf8)])
        }

        // MARK: Semantics 2: the class from the reference

        @Test func aPersistentReferenceAloneIdentifiesTheItemAndItsClass() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            var added: CFTypeRef?
            let attributes: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "me", kSecValueData as String: Data("pw".utf8),
                kSecReturnPersistentRef as String: true,
            ]
            #expect(SecItemAdd(attributes as CFDictionary, &added) == errSecSuccess)
            let reference = try #require(added as? Data)
            #expect(addGeneric(account: "me", secret: "other") == errSecSuccess)

            let (status, data) = copyMatching([
                kSecValuePersistentRef as String: reference, kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("pw".utf8))
            let (_, found) = copyMatching([
                kSecValuePersistentRef as String: reference, kSecReturnAttributes as String: true,
            ])
            #expect((found as? [String: Any])?[kSecClass as String] as? String == "inet")
            // An explicit class that is not the reference's finds nothing.
            #expect(
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: reference,
                ]).0 == errSecItemNotFound)

            let changes: [String: Any] = [kSecValueData as String: Data("new".utf8)]
            #expect(
                SecItemUpdate([kSecValuePersistentRef as String: reference] as CFDictionary, changes as CFDictionary)
                    == errSecSuccess)
            #expect(
                copyMatching([kSecValuePersistentRef as String: reference, kSecReturnData as String: true]).1 as? Data
                    == Data("new".utf8))
            #expect(SecItemDelete([kSecValuePersistentRef as String: reference] as CFDictionary) == errSecSuccess)
            #expect(copyMatching([kSecValuePersistentRef as String: reference]).0 == errSecItemNotFound)
            // The generic password with the same account is untouched.
            #expect(copyMatching([kSecClass as String: kSecClassGenericPassword]).0 == errSecSuccess)
            // Neither a class nor a reference: still errSecParam.
            #expect(copyMatching([kSecAttrAccount as String: "me"]).0 == errSecParam)
        }

        @Test func anItemReferenceAloneIdentifiesTheItemAndItsClass() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(addGeneric(account: "a", secret: "s") == errSecSuccess)
            let (_, object) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecReturnRef as String: true,
            ])
            let item = try #require(object as? SecKeychainItem)
            let (status, data) = copyMatching([kSecValueRef as String: item, kSecReturnData as String: true])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("s".utf8))
            #expect(SecItemDelete([kSecValueRef as String: item] as CFDictionary) == errSecSuccess)
            #expect(copyMatching([kSecClass as String: kSecClassGenericPassword]).0 == errSecItemNotFound)
        }

        // MARK: Semantics 3: text attributes given as bytes

        @Test func bytesForTextAttributesAreStoredMatchedAndReturnedAsGiven() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let binary = Data([0xff, 0x00, 0x41])  // not UTF-8
            #expect(addGeneric(account: binary, service: "bin", secret: "b") == errSecSuccess)
            #expect(
                addGeneric(account: "text", service: "bin", secret: "t", [kSecAttrLabel as String: Data("label".utf8)])
                    == errSecSuccess)

            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: binary,
                kSecReturnAttributes as String: true, kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            let item = try #require(result as? [String: Any])
            #expect(item[kSecAttrAccount as String] as? Data == binary)
            #expect(item[kSecValueData as String] as? Data == Data("b".utf8))
            #expect(
                copyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: Data([0xff])]).0
                    == errSecItemNotFound)

            // Text given as text comes back as text; the label given as bytes comes back as bytes.
            let (_, textItem) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "text",
                kSecReturnAttributes as String: true,
            ])
            let text = try #require(textItem as? [String: Any])
            #expect(text[kSecAttrAccount as String] as? String == "text")
            #expect(text[kSecAttrLabel as String] as? Data == Data("label".utf8))
        }

        @Test func textAndItsBytesAreTheSameValue() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            #expect(addGeneric(account: Data("alice".utf8), secret: "s") == errSecSuccess)
            // The same bytes as text: the same primary key.
            #expect(addGeneric(account: "alice", secret: "t") == errSecDuplicateItem)
            // Found by the text, and by the text in another case when asked to ignore case.
            #expect(
                copyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice"]).0
                    == errSecSuccess)
            #expect(
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "ALICE",
                    kSecMatchCaseInsensitive as String: true,
                ]).0 == errSecSuccess)
            // Internet passwords: server and path as bytes.
            let internet: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: Data("h.example".utf8),
                kSecAttrPath as String: Data("/p".utf8), kSecAttrAccount as String: "u",
            ]
            #expect(SecItemAdd(internet as CFDictionary, nil) == errSecSuccess)
            #expect(
                copyMatching([
                    kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h.example",
                    kSecAttrPath as String: "/p",
                ]).0 == errSecSuccess)
            // Attributes Apple keeps as text take no bytes.
            #expect(
                addGeneric(account: "b", secret: "s", [kSecAttrAccessGroup as String: Data("g".utf8)]) == errSecParam)
        }

        // MARK: Semantics 4: kSecAttrAccessControl

        @Test func accessControlIsStoredAndReturnedAsGivenAndSetsTheAccessibility() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let control = try #require(
                SecAccessControlCreateWithFlags(
                    kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                    [.biometryAny, .or, .devicePasscode],
                    nil))
            #expect(addGeneric(account: "a", secret: "s", [kSecAttrAccessControl as String: control]) == errSecSuccess)

            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            let item = try #require(result as? [String: Any])
            let returned = try #require(item[kSecAttrAccessControl as String] as? SecAccessControl)
            #expect(returned == control)
            #expect(returned.unenforcedFlags.isEmpty)
            #expect(item[kSecAttrAccessible as String] as? String == "cku")
            // The file is open in this process, where nobody can be asked: its data is not handed over unasked
            // (docs/secitem-semantics.md, "Enforced access control"); Skip leaves it out.
            let data: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true]
            #expect(copyMatching(data).0 == errSecInteractionNotAllowed)
            #expect(
                copyMatching(data.merging([kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip]) { $1 }).0
                    == errSecItemNotFound)
            // Found by its accessibility, and by the access control itself.
            #expect(
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                ]).0 == errSecSuccess)
            #expect(
                copyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccessControl as String: control])
                    .0
                    == errSecSuccess)

            // An update may change it; the accessibility follows.
            let other = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil))
            #expect(
                SecItemUpdate(
                    [kSecClass as String: kSecClassGenericPassword] as CFDictionary,
                    [kSecAttrAccessControl as String: other] as CFDictionary) == errSecSuccess)
            let (_, updated) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true,
            ])
            let after = try #require(updated as? [String: Any])
            #expect(after[kSecAttrAccessControl as String] as? SecAccessControl == other)
            #expect(after[kSecAttrAccessible as String] as? String == "ak")
        }

        @Test func accessControlRefusesWhatItCannotMean() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil))
            // A different kSecAttrAccessible beside it.
            #expect(
                addGeneric(
                    account: "a", secret: "s",
                    [
                        kSecAttrAccessControl as String: control,
                        kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                    ]) == errSecParam)
            // The same one is fine.
            #expect(
                addGeneric(
                    account: "a", secret: "s",
                    [
                        kSecAttrAccessControl as String: control,
                        kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked,
                    ])
                    == errSecSuccess)
            // Anything but an access control object.
            #expect(
                addGeneric(account: "b", secret: "s", [kSecAttrAccessControl as String: Data([1, 2, 3])]) == errSecParam
            )
            #expect(addGeneric(account: "b", secret: "s", [kSecAttrAccessControl as String: "ak"]) == errSecParam)
        }

        @Test func anItemPasswordIsLatchkeydsToAskAndAFileOpenInThisProcessRefusesIt() throws {
            let kc = try TestKeychain()
            defer { withExtendedLifetime(kc) {} }
            let own = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil))
            // Enforced (by latchkeyd): not among the flags recorded only.
            #expect(own.unenforcedFlags.isEmpty)
            #expect(!own.description.contains("not enforced"))
            // Nobody here can choose the item's password: nothing is added.
            #expect(
                addGeneric(account: "a", secret: "s", [kSecAttrAccessControl as String: own])
                    == errSecInteractionNotAllowed)
            #expect(copyMatching([kSecClass as String: kSecClassGenericPassword]).0 == errSecItemNotFound)
            // Nor given to an item by an update, which keeps its access control and secret.
            #expect(addGeneric(account: "a", secret: "s", [:]) == errSecSuccess)
            #expect(
                SecItemUpdate(
                    [kSecClass as String: kSecClassGenericPassword] as CFDictionary,
                    [kSecAttrAccessControl as String: own] as CFDictionary) == errSecInteractionNotAllowed)
            let (status, data) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(data as? Data == Data("s".utf8))
        }
    }
}
