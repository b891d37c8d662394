/// Which attributes each item class has and which of them form its primary
/// key, as `SecItem.h` lists them.
///
/// Two items of a class with equal primary-key attributes cannot coexist
/// (`errSecDuplicateItem`); a primary-key attribute the item lacks counts as
/// its empty value.
public struct ItemSchema: Sendable {
    /// The class described.
    public let itemClass: ItemClass
    /// Every attribute the class may carry.
    public let attributes: Set<AttributeKey>
    /// The attributes that identify an item of the class, in a fixed order.
    public let primaryKey: [AttributeKey]

    /// The schema of a class.
    public static func of(_ itemClass: ItemClass) -> ItemSchema {
        switch itemClass {
        case .genericPassword: genericPassword
        case .internetPassword: internetPassword
        case .certificate: certificate
        case .key: key
        case .identity: identity
        }
    }

    private static let common: Set<AttributeKey> = [
        .accessible, .accessControl, .accessGroup, .label, .synchronizable,
    ]
    private static let password: Set<AttributeKey> = common.union([
        .creationDate, .modificationDate, .itemDescription, .comment, .creator, .type,
        .isInvisible, .isNegative, .account,
    ])

    private static let genericPassword = ItemSchema(
        itemClass: .genericPassword,
        attributes: password.union([.service, .generic]),
        primaryKey: [.account, .service, .accessGroup, .synchronizable])

    private static let internetPassword = ItemSchema(
        itemClass: .internetPassword,
        attributes: password.union([
            .securityDomain, .server, .protocol, .authenticationType, .port, .path,
        ]),
        primaryKey: [
            .account, .securityDomain, .server, .protocol, .authenticationType, .port, .path,
            .accessGroup, .synchronizable,
        ])

    private static let certificateOnly: Set<AttributeKey> = [
        .certificateType, .certificateEncoding, .subject, .issuer, .serialNumber,
        .subjectKeyID, .publicKeyHash,
    ]
    private static let keyOnly: Set<AttributeKey> = [
        .keyClass, .applicationLabel, .isPermanent, .applicationTag, .type, .keySizeInBits,
        .effectiveKeySize, .canEncrypt, .canDecrypt, .canDerive, .canSign, .canVerify,
        .canWrap, .canUnwrap,
    ]

    private static let certificate = ItemSchema(
        itemClass: .certificate,
        attributes: common.union(certificateOnly),
        primaryKey: [.certificateType, .issuer, .serialNumber, .accessGroup, .synchronizable])

    private static let key = ItemSchema(
        itemClass: .key,
        attributes: common.union(keyOnly),
        primaryKey: [
            .keyClass, .applicationLabel, .applicationTag, .type, .keySizeInBits,
            .effectiveKeySize, .accessGroup, .synchronizable,
        ])

    private static let identity = ItemSchema(
        itemClass: .identity,
        attributes: common.union(certificateOnly).union(keyOnly),
        primaryKey: [
            .certificateType, .issuer, .serialNumber, .keyClass, .applicationLabel,
            .applicationTag, .type, .keySizeInBits, .effectiveKeySize, .accessGroup,
            .synchronizable,
        ])

    /// Checks that every attribute belongs to the class and holds a value of
    /// its kind (or bytes, for the text attributes Apple keeps as bytes:
    /// ``AttributeKey/storesTextAsBytes``). Password items also take any
    /// extension attribute (``AttributeKey/isExtension``); every class takes
    /// the access list's (``ItemAccess/keys``), as every macOS keychain item
    /// has a `SecAccess`.
    ///
    /// - Throws: `errSecNoSuchAttr` for an attribute of another class,
    ///   `errSecParam` for a value of the wrong kind or an `kSecAttrAccessible`
    ///   value Apple does not define.
    public func validate(_ values: ItemAttributes) throws(KeychainError) {
        for (key, value) in values {
            let allowed =
                attributes.contains(key) || (key.isExtension && itemClass.isPassword) || ItemAccess.keys.contains(key)
            guard allowed, let kind = key.kind else {
                throw KeychainError(
                    .noSuchAttribute,
                    "attribute '\(key)' does not exist for class '\(itemClass.rawValue)'")
            }
            guard value.kind == kind || (value.kind == .data && key.storesTextAsBytes) else {
                throw .param("attribute '\(key)' takes a \(kind) value, not a \(value.kind)")
            }
            if key == .accessible, case .string(let level) = value,
                !Self.accessibilityLevels.contains(level)
            {
                throw .param("'\(level)' is not a kSecAttrAccessible value")
            }
        }
    }

    /// The values of `kSecAttrAccessible` Apple defines.
    public static let accessibilityLevels: Set<String> = [
        "ak", "ck", "dk", "akpu", "aku", "cku", "dku",
    ]
}
