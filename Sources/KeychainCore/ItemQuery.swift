import FoundationEssentials

/// How many matches a search returns (`kSecMatchLimit`).
public enum MatchLimit: Hashable, Sendable {
    /// The first match only (`kSecMatchLimitOne`, the default).
    case one
    /// Every match (`kSecMatchLimitAll`).
    case all
    /// At most this many (a number greater than zero).
    case count(Int)

    /// The number of rows to fetch at most, nil for no limit.
    public var maximum: Int? {
        switch self {
        case .one: 1
        case .all: nil
        case .count(let n): n
        }
    }
}

/// Which items a query sees with respect to `kSecAttrSynchronizable`.
public enum SynchronizableMatch: Hashable, Sendable {
    /// Non-synchronizable items only (the key absent or false).
    case no
    /// Synchronizable items only (true).
    case yes
    /// Both (`kSecAttrSynchronizableAny`).
    case any
}

/// What a search or an add returns for each item (`kSecReturn*`).
public struct ReturnOptions: OptionSet, Hashable, Sendable {
    /// The raw bits.
    public let rawValue: UInt8
    /// Wraps raw bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The secret (`kSecReturnData`).
    public static let data = ReturnOptions(rawValue: 1)
    /// The attributes (`kSecReturnAttributes`).
    public static let attributes = ReturnOptions(rawValue: 2)
    /// A reference (`kSecReturnRef`).
    public static let reference = ReturnOptions(rawValue: 4)
    /// A persistent reference (`kSecReturnPersistentRef`).
    public static let persistentReference = ReturnOptions(rawValue: 8)
}

/// How a read of items whose access control asks for the person may go
/// (`kSecUseAuthenticationUI`, `kSecUseOperationPrompt`): docs/secitem-semantics.md, "Enforced access control".
public struct AuthenticationOptions: Hashable, Sendable {
    /// Whether the person may be asked.
    public enum Interaction: String, Hashable, Sendable {
        /// Ask (`kSecUseAuthenticationUIAllow`, the default).
        case allow
        /// Do not ask: such an item fails the read with `errSecInteractionNotAllowed` (`…UIFail`).
        case fail
        /// Do not ask: such items are left out of the results (`…UISkip`).
        case skip
    }

    /// Whether the person may be asked.
    public var interaction: Interaction
    /// The caller's reason, shown in the prompt as the caller's words (`kSecUseOperationPrompt`).
    public var operationPrompt: String?

    /// Options: ask, with no reason of the caller's.
    public init(interaction: Interaction = .allow, operationPrompt: String? = nil) {
        self.interaction = interaction
        self.operationPrompt = operationPrompt
    }
}

/// A search over one item class: the attribute values items must have and
/// what to return for each match.
public struct ItemQuery: Hashable, Sendable {
    /// The class searched.
    public var itemClass: ItemClass
    /// Attribute values a matching item holds (all of them).
    public var attributes: ItemAttributes
    /// Which items count with respect to synchronizability.
    public var synchronizable: SynchronizableMatch
    /// Whether string attributes compare ignoring case (`kSecMatchCaseInsensitive`).
    public var caseInsensitive: Bool
    /// How many matches to return.
    public var limit: MatchLimit
    /// When set, only these items can match (`kSecMatchItemList`, `kSecValuePersistentRef`).
    public var references: [ItemReference]?
    /// What to return for each match.
    public var returning: ReturnOptions
    /// Whether the person may be asked for items whose access control needs it, and why.
    public var authentication = AuthenticationOptions()

    /// A query for every item of a class that holds the given attribute values.
    public init(
        _ itemClass: ItemClass, attributes: ItemAttributes = [:],
        synchronizable: SynchronizableMatch = .no, caseInsensitive: Bool = false,
        limit: MatchLimit = .one, references: [ItemReference]? = nil,
        returning: ReturnOptions = []
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.synchronizable = synchronizable
        self.caseInsensitive = caseInsensitive
        self.limit = limit
        self.references = references
        self.returning = returning
    }

    /// Checks the query against the class schema and Apple's rules for a search.
    ///
    /// - Throws: `errSecNoSuchAttr` or `errSecParam` as ``ItemSchema/validate(_:)``
    ///   does; `errSecParam` for a zero match limit and for
    ///   `kSecAttrSynchronizable` among the attributes (it is the
    ///   ``synchronizable`` field). Asking for the data of every match
    ///   (`kSecReturnData` with `kSecMatchLimitAll`) is allowed for every
    ///   class, as in Apple's data-protection keychain.
    public func validate() throws(KeychainError) {
        try ItemSchema.of(itemClass).validate(attributes)
        if attributes[.synchronizable] != nil {
            throw .param("kSecAttrSynchronizable belongs in the synchronizable field of a query")
        }
        if case .count(let n) = limit, n < 1 {
            throw .param("kSecMatchLimit must be kSecMatchLimitOne, kSecMatchLimitAll or a number above 0")
        }
    }
}

/// The changes `SecItemUpdate` makes to every matching item.
public struct ItemChanges: Hashable, Sendable {
    /// Attribute values to set (others are kept).
    public var attributes: ItemAttributes
    /// A new secret, if it changes.
    public var secret: Data?
    /// Attributes to remove (applied before ``attributes`` are set).
    public var removedAttributes: Set<AttributeKey>

    /// Changes of attributes and, optionally, the secret.
    public init(attributes: ItemAttributes = [:], secret: Data? = nil, removing removed: Set<AttributeKey> = []) {
        self.attributes = attributes
        self.secret = secret
        self.removedAttributes = removed
    }
}
