import Foundation
import KeychainCore
import Testing

@Suite struct KeychainCoreTests {
    /// What the daemon asks the person to confirm (issue 31): any lock turned off or a timeout lengthened or
    /// removed loosens, even with something else made stricter; the reverse, or no change, does not.
    @Test func settingsLoosenWhenAnyLockIsWeakened() {
        let strict = KeychainSettings(lockTimeout: 300, lockOnSleep: true, lockOnScreenLock: true)
        #expect(!strict.loosens(strict))
        #expect(!strict.loosens(KeychainSettings()))
        #expect(!KeychainSettings(lockTimeout: 60, lockOnSleep: true, lockOnScreenLock: true).loosens(strict))
        #expect(KeychainSettings(lockTimeout: 600, lockOnSleep: true, lockOnScreenLock: true).loosens(strict))
        #expect(KeychainSettings(lockTimeout: nil, lockOnSleep: true, lockOnScreenLock: true).loosens(strict))
        #expect(KeychainSettings(lockTimeout: 60, lockOnSleep: false, lockOnScreenLock: true).loosens(strict))
        #expect(KeychainSettings(lockTimeout: 60, lockOnSleep: true, lockOnScreenLock: false).loosens(strict))
        #expect(KeychainSettings().loosens(strict))
        #expect(!KeychainSettings(lockTimeout: 1).loosens(KeychainSettings()))
    }

    @Test func persistentReferenceRoundTripsAndRejectsGarbage() throws {
        let identifier = Data((0..<16).map { UInt8($0) })
        let reference = ItemReference(itemClass: .internetPassword, identifier: identifier)
        #expect(reference.persistentData.count == 20)
        #expect(reference.persistentData.prefix(4) == Data("inet".utf8))
        #expect(ItemReference(persistentData: reference.persistentData) == reference)
        #expect(ItemReference(persistentData: Data("genp".utf8) + Data(count: 15)) == nil)
        #expect(ItemReference(persistentData: Data("nope".utf8) + identifier) == nil)
        #expect(ItemReference(persistentData: Data()) == nil)
    }

    @Test func everyClassHasItsPrimaryKeyAmongItsAttributes() {
        for itemClass in ItemClass.allCases {
            let schema = ItemSchema.of(itemClass)
            #expect(Set(schema.primaryKey).isSubset(of: schema.attributes), "\(itemClass)")
            #expect(schema.primaryKey.contains(.accessGroup))
            #expect(schema.primaryKey.contains(.synchronizable))
            for key in schema.attributes { #expect(key.kind != nil, "\(key) has no kind") }
        }
        #expect(ItemSchema.of(.genericPassword).primaryKey == [.account, .service, .accessGroup, .synchronizable])
        #expect(ItemSchema.of(.internetPassword).primaryKey.count == 9)
    }

    @Test func identityHasTheAttributesOfCertificatesAndKeys() {
        let identity = ItemSchema.of(.identity).attributes
        #expect(ItemSchema.of(.certificate).attributes.isSubset(of: identity))
        #expect(ItemSchema.of(.key).attributes.isSubset(of: identity))
    }

    @Test func validationNamesTheStatusAppleGives() {
        let schema = ItemSchema.of(.genericPassword)
        #expect(throws: KeychainError(.noSuchAttribute, "attribute 'srvr' does not exist for class 'genp'")) {
            try schema.validate([.server: .string("x")])
        }
        #expect(throws: KeychainError.param("attribute 'acct' takes a string value, not a number")) {
            try schema.validate([.account: .number(1)])
        }
        #expect(throws: KeychainError.self) { try schema.validate([.accessible: .string("zz")]) }
        #expect(throws: Never.self) { try schema.validate([.accessible: .string("aku"), .account: .string("a")]) }
    }

    /// Every class holds the access list (a macOS keychain item of any class has a `SecAccess`); Latchkey's other
    /// extension attributes stay on the password classes.
    @Test func everyClassHoldsTheAccessListAndOnlyPasswordsOtherExtensions() {
        let access = ItemAccess(trustedApplications: [TrustedApplication(name: "/usr/bin/ssh", digest: "ab")])
        for itemClass in ItemClass.allCases {
            let schema = ItemSchema.of(itemClass)
            #expect(throws: Never.self, "\(itemClass)") { try schema.validate(access.attributes) }
            #expect(throws: KeychainError.self, "\(itemClass)") {
                try schema.validate([ItemAccess.anyApplicationKey: .number(1)])
            }
            let other: ItemAttributes = [.contentType: .string("text/plain")]
            if itemClass.isPassword {
                #expect(throws: Never.self) { try schema.validate(other) }
            } else {
                #expect(
                    throws: KeychainError(
                        .noSuchAttribute, "attribute 'lk:content-type' does not exist for class '\(itemClass.rawValue)'"
                    )
                ) {
                    try schema.validate(other)
                }
            }
        }
    }

    @Test func textAttributesAppleKeepsAsBytesAcceptBytes() {
        let schema = ItemSchema.of(.internetPassword)
        for key: AttributeKey in [.account, .server, .securityDomain, .path, .label, .comment, .itemDescription] {
            #expect(key.storesTextAsBytes)
            #expect(throws: Never.self) { try schema.validate([key: .data(Data([0xff, 0x00]))]) }
        }
        #expect(!AttributeKey.accessGroup.storesTextAsBytes)
        #expect(throws: KeychainError.self) { try schema.validate([.accessGroup: .data(Data("g".utf8))]) }
        #expect(throws: KeychainError.self) { try schema.validate([.protocol: .data(Data("htps".utf8))]) }
    }

    @Test func queryValidationFollowsTheDataProtectionKeychain() {
        // Every match's data may be asked for at once, password classes included.
        #expect(throws: Never.self) {
            try ItemQuery(.genericPassword, limit: .all, returning: .data).validate()
        }
        #expect(throws: Never.self) {
            try ItemQuery(.internetPassword, limit: .all, returning: .data).validate()
        }
        #expect(throws: Never.self) {
            try ItemQuery(.genericPassword, limit: .all, returning: [.persistentReference, .attributes]).validate()
        }
        #expect(throws: Never.self) { try ItemQuery(.key, limit: .all, returning: .data).validate() }
        #expect(throws: KeychainError.self) { try ItemQuery(.genericPassword, limit: .count(0)).validate() }
        #expect(throws: KeychainError.self) {
            try ItemQuery(.genericPassword, attributes: [.synchronizable: .bool(true)]).validate()
        }
        #expect(MatchLimit.count(5).maximum == 5)
        #expect(MatchLimit.all.maximum == nil)
    }

    @Test func statusesCarryApplesNumbersNamesAndMessages() {
        #expect(KeychainStatus.duplicateItem.rawValue == -25299)
        #expect(KeychainStatus.decode.rawValue == -26275)
        #expect(KeychainStatus.interactionNotAllowed.description == "errSecInteractionNotAllowed (-25308)")
        #expect(KeychainStatus(rawValue: 7).description == "OSStatus (7)")
        #expect(KeychainStatus.param.message.isEmpty == false)
        #expect(KeychainError.param("bad").description == "bad [errSecParam (-50)]")
    }
}
