/// The kind of value an attribute holds.
public enum AttributeKind: UInt8, Hashable, Sendable {
    /// UTF-8 text.
    case string = 1
    /// Raw bytes.
    case data = 2
    /// A signed integer (four-character codes are stored as their integer value).
    case number = 3
    /// A point in time.
    case date = 4
    /// True or false.
    case bool = 5
}

/// The name of an item attribute, spelled as Apple's `kSecAttr*` constants are
/// (`acct`, `svce`, …).
public struct AttributeKey: RawRepresentable, Hashable, Comparable, Sendable,
    ExpressibleByStringLiteral, CustomStringConvertible
{
    /// The four-letter (or so) name.
    public let rawValue: String

    /// Wraps a name.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Wraps a name given as a literal.
    public init(stringLiteral value: String) {
        self.rawValue = value
    }

    /// Orders keys by name, so encodings are deterministic.
    public static func < (lhs: AttributeKey, rhs: AttributeKey) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// The name.
    public var description: String { rawValue }

    /// The kind of value Apple's API gives this attribute, or nil for a name it does not define.
    public var kind: AttributeKind? { Self.kinds[self] ?? (isExtension ? .string : nil) }

    /// Whether Apple's database keeps this text attribute as bytes, so that a
    /// value may be given as `Data` as well as text: the account, service,
    /// description, comment, label, security domain, server, authentication
    /// type and path. Such a value is stored as given, returned as given, and
    /// matched (and compared for `errSecDuplicateItem`) by its bytes, so the
    /// text `"a"` and the bytes `61` are the same value.
    public var storesTextAsBytes: Bool { Self.textAsBytes.contains(self) }

    private static let textAsBytes: Set<AttributeKey> = [
        .account, .service, .itemDescription, .comment, .label, .securityDomain, .server,
        .authenticationType, .path,
    ]

    /// Whether this is an extension attribute: a Secret Service attribute
    /// (`ss:` followed by its name) or one Latchkey keeps for itself (`lk:`).
    /// Password items accept any of them, with text values.
    public var isExtension: Bool {
        rawValue.hasPrefix(Self.secretServicePrefix) || rawValue.hasPrefix("lk:")
    }

    /// The prefix of Secret Service attribute names in the store.
    public static let secretServicePrefix = "ss:"

    /// The store name of the Secret Service attribute `name`.
    public static func secretService(_ name: String) -> AttributeKey {
        AttributeKey(rawValue: secretServicePrefix + name)
    }

    /// Marks an item made through the Secret Service, which has no primary
    /// key: items with equal attributes may coexist, as the Secret Service allows.
    public static let secretServiceItem: AttributeKey = "lk:ss-item"
    /// The MIME type of the item's secret, as a Secret Service client gave it.
    public static let contentType: AttributeKey = "lk:content-type"
    /// Marks the key the Secret portal's backend keeps for a Flatpak application: the application's id. Set
    /// only by the backend when it makes a key, and by the gnome-keyring import for the keys gnome-keyring's
    /// backend made; no client can set it (the Secret Service face refuses `lk:` names, `org.latchkey.Keychain1`
    /// refuses this one), so an item a client planted with the same Secret Service attributes is never taken
    /// for an application's key.
    public static let portalKey: AttributeKey = "lk:portal-key"

    /// Whether the attribute is set by the store and cannot be given by a caller.
    public var isSetByStore: Bool { self == .creationDate || self == .modificationDate }

    /// `kSecAttrAccessible`.
    public static let accessible: AttributeKey = "pdmn"
    /// `kSecAttrAccessControl`.
    public static let accessControl: AttributeKey = "accc"
    /// `kSecAttrAccessGroup`.
    public static let accessGroup: AttributeKey = "agrp"
    /// `kSecAttrSynchronizable`.
    public static let synchronizable: AttributeKey = "sync"
    /// `kSecAttrCreationDate`.
    public static let creationDate: AttributeKey = "cdat"
    /// `kSecAttrModificationDate`.
    public static let modificationDate: AttributeKey = "mdat"
    /// `kSecAttrDescription`.
    public static let itemDescription: AttributeKey = "desc"
    /// `kSecAttrComment`.
    public static let comment: AttributeKey = "icmt"
    /// `kSecAttrCreator`.
    public static let creator: AttributeKey = "crtr"
    /// `kSecAttrType` (and `kSecAttrKeyType`, which Apple spells the same).
    public static let type: AttributeKey = "type"
    /// `kSecAttrLabel`.
    public static let label: AttributeKey = "labl"
    /// `kSecAttrIsInvisible`.
    public static let isInvisible: AttributeKey = "invi"
    /// `kSecAttrIsNegative`.
    public static let isNegative: AttributeKey = "nega"
    /// `kSecAttrAccount`.
    public static let account: AttributeKey = "acct"
    /// `kSecAttrService`.
    public static let service: AttributeKey = "svce"
    /// `kSecAttrGeneric`.
    public static let generic: AttributeKey = "gena"
    /// `kSecAttrSecurityDomain`.
    public static let securityDomain: AttributeKey = "sdmn"
    /// `kSecAttrServer`.
    public static let server: AttributeKey = "srvr"
    /// `kSecAttrProtocol`.
    public static let `protocol`: AttributeKey = "ptcl"
    /// `kSecAttrAuthenticationType`.
    public static let authenticationType: AttributeKey = "atyp"
    /// `kSecAttrPort`.
    public static let port: AttributeKey = "port"
    /// `kSecAttrPath`.
    public static let path: AttributeKey = "path"
    /// `kSecAttrSubject`.
    public static let subject: AttributeKey = "subj"
    /// `kSecAttrIssuer`.
    public static let issuer: AttributeKey = "issr"
    /// `kSecAttrSerialNumber`.
    public static let serialNumber: AttributeKey = "slnr"
    /// `kSecAttrSubjectKeyID`.
    public static let subjectKeyID: AttributeKey = "skid"
    /// `kSecAttrPublicKeyHash`.
    public static let publicKeyHash: AttributeKey = "pkhh"
    /// `kSecAttrCertificateType`.
    public static let certificateType: AttributeKey = "ctyp"
    /// `kSecAttrCertificateEncoding`.
    public static let certificateEncoding: AttributeKey = "cenc"
    /// `kSecAttrKeyClass`.
    public static let keyClass: AttributeKey = "kcls"
    /// `kSecAttrApplicationLabel`.
    public static let applicationLabel: AttributeKey = "klbl"
    /// `kSecAttrIsPermanent`.
    public static let isPermanent: AttributeKey = "perm"
    /// `kSecAttrApplicationTag`.
    public static let applicationTag: AttributeKey = "atag"
    /// `kSecAttrKeySizeInBits`.
    public static let keySizeInBits: AttributeKey = "bsiz"
    /// `kSecAttrEffectiveKeySize`.
    public static let effectiveKeySize: AttributeKey = "esiz"
    /// `kSecAttrCanEncrypt`.
    public static let canEncrypt: AttributeKey = "encr"
    /// `kSecAttrCanDecrypt`.
    public static let canDecrypt: AttributeKey = "decr"
    /// `kSecAttrCanDerive`.
    public static let canDerive: AttributeKey = "drve"
    /// `kSecAttrCanSign`.
    public static let canSign: AttributeKey = "sign"
    /// `kSecAttrCanVerify`.
    public static let canVerify: AttributeKey = "vrfy"
    /// `kSecAttrCanWrap`.
    public static let canWrap: AttributeKey = "wrap"
    /// `kSecAttrCanUnwrap`.
    public static let canUnwrap: AttributeKey = "unwp"

    private static let kinds: [AttributeKey: AttributeKind] = [
        .accessible: .string, .accessControl: .data, .accessGroup: .string,
        .synchronizable: .bool, .creationDate: .date, .modificationDate: .date,
        .itemDescription: .string, .comment: .string, .creator: .number, .type: .number,
        .label: .string, .isInvisible: .bool, .isNegative: .bool, .account: .string,
        .service: .string, .generic: .data, .securityDomain: .string, .server: .string,
        .protocol: .string, .authenticationType: .string, .port: .number, .path: .string,
        .subject: .data, .issuer: .data, .serialNumber: .data, .subjectKeyID: .data,
        .publicKeyHash: .data, .certificateType: .number, .certificateEncoding: .number,
        .keyClass: .number, .applicationLabel: .data, .isPermanent: .bool,
        .applicationTag: .data, .keySizeInBits: .number, .effectiveKeySize: .number,
        .canEncrypt: .bool, .canDecrypt: .bool, .canDerive: .bool, .canSign: .bool,
        .canVerify: .bool, .canWrap: .bool, .canUnwrap: .bool,
    ]
}
