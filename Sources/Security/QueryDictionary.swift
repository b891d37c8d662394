import Foundation
import KeychainCore

/// What a dictionary passed to a `SecItem*` function is for; it decides which keys are allowed.
enum DictionaryRole {
    case add, search, update, delete, changes
}

/// A `SecItem*` dictionary read into typed values and checked against the
/// rules of its role. Unknown keys give `errSecNoSuchAttr`, keys of the
/// wrong role `errSecParam`, values of the wrong type `errSecParam`.
///
/// Keys and values may be `String`s or `CFString`s (`NSString`s) alike.
struct QueryDictionary {
    var itemClass: ItemClass?
    /// The class of the item `kSecValuePersistentRef` or `kSecValueRef`
    /// names, which stands for `kSecClass` when that is absent.
    var referencedClass: ItemClass?
    /// The `kSecAttrAccessControl` object given, if any.
    var accessControl: SecAccessControl?
    /// The `kSecAttrAccess` object given, if any (`SecItemAdd` only).
    var access: SecAccess?
    var attributes: ItemAttributes = [:]
    var synchronizable: SynchronizableMatch = .no
    /// Whether `kSecAttrSynchronizable` was given (else `synchronizable` is the default, `.no`).
    private var synchronizableGiven = false
    var caseInsensitive = false
    var limit: MatchLimit = .one
    var items: [AnyObject]?
    var persistentReference: ItemReference?
    var returning: ReturnOptions = []
    var data: Data?
    var keychains: [SecKeychain]?
    /// `kSecUseAuthenticationUI` (and the older `kSecUseNoAuthenticationUI`) and `kSecUseOperationPrompt`.
    var authentication = AuthenticationOptions()
    /// Whether items that would need the person are left out (`kSecUseAuthenticationUISkip`).
    var skipsItemsNeedingAuthentication: Bool { authentication.interaction == .skip }

    init(_ dictionary: NSDictionary, role: DictionaryRole) throws(KeychainError) {
        var entries: [(String, Any)] = []
        for (key, value) in dictionary {
            guard let name = key as? String else { throw .param("a dictionary key is not a string") }
            entries.append((name, value))
        }
        for (name, value) in entries {
            try read(name, value, role: role)
        }
        if role != .changes, role != .add, itemClass == nil { itemClass = referencedClass }
        // A reference names its item: without kSecAttrSynchronizable, a query by reference (a persistent
        // reference, an item reference or an item list) finds the item whether it is synchronizable or not,
        // as Apple's keychain does (attributes and persistent references read from a synchronizable item,
        // then its data read by the reference alone: Valet's migration between services).
        if role != .changes, role != .add, !synchronizableGiven, persistentReference != nil || items != nil {
            synchronizable = .any
        }
        if role != .changes, itemClass == nil {
            throw .param("kSecClass is missing")
        }
        if let accessControl, role == .add || role == .changes {
            // The protection of an access control is the item's accessibility.
            let protection = AttributeValue.string(accessControl.protection)
            if let given = attributes[.accessible], given != protection {
                throw .param("kSecAttrAccessible differs from the protection of kSecAttrAccessControl")
            }
            attributes[.accessible] = protection
        }
        if let access {
            // The list is kept among the item's attributes (sealed with them), under Latchkey's own keys.
            guard accessControl == nil else {
                throw .param("kSecAttrAccess and kSecAttrAccessControl cannot be given together")
            }
            guard synchronizable != .yes else {
                throw .param("a synchronizable item cannot have a kSecAttrAccess access object")
            }
            guard !attributes.keys.contains(where: ItemAccess.keys.contains) else {
                throw .param("kSecAttrAccess and the lk: access attributes cannot be given together")
            }
            attributes.merge(access.itemAccess.attributes) { $1 }
        }
        if role == .changes, attributes.isEmpty, data == nil {
            throw .param("the attributes to update are empty")
        }
    }

    /// The typed query this dictionary describes.
    func query(_ itemClass: ItemClass, references: [ItemReference]?) -> ItemQuery {
        var query = ItemQuery(
            itemClass, attributes: attributes, synchronizable: synchronizable,
            caseInsensitive: caseInsensitive, limit: limit, references: references, returning: returning)
        query.authentication = authentication
        return query
    }

    private mutating func read(_ name: String, _ value: Any, role: DictionaryRole) throws(KeychainError) {
        let searching = role == .search || role == .update || role == .delete
        switch name {
        case kSecClass:
            guard role != .changes else { throw .param("kSecClass cannot be updated") }
            guard let code = value as? String else { throw .param("kSecClass takes a string") }
            guard let itemClass = ItemClass(rawValue: code) else {
                throw KeychainError(.noSuchClass, "'\(code)' is not a keychain item class")
            }
            self.itemClass = itemClass
        case kSecAttrSynchronizable:
            synchronizableGiven = true
            if let text = value as? String, kSecAttrSynchronizableAny.isEqual(to: text) {
                guard searching else { throw .param("kSecAttrSynchronizableAny is for searches only") }
                synchronizable = .any
            } else {
                let flag = try Self.bool(value, name)
                synchronizable = flag ? .yes : .no
                if role == .changes { attributes[.synchronizable] = .bool(flag) }
            }
        case kSecMatchLimit:
            try require(role == .search || role == .update || role == .delete, name)
            limit = try Self.limit(value)
        case kSecMatchCaseInsensitive:
            try require(searching, name)
            caseInsensitive = try Self.bool(value, name)
        case kSecMatchItemList, kSecUseItemList:
            try require(searching, name)
            guard let list = value as? [AnyObject] ?? (value as? NSArray).map({ $0.map { $0 as AnyObject } })
            else { throw .param("\(name) takes an array of item references") }
            items = (items ?? []) + list
        case kSecMatchSearchList:
            try require(searching, name)
            guard let list = value as? [SecKeychain] else {
                throw .param("kSecMatchSearchList takes an array of SecKeychain")
            }
            keychains = list
        case kSecUseKeychain:
            try require(role == .add, name)
            guard let keychain = value as? SecKeychain else { throw .param("kSecUseKeychain takes a SecKeychain") }
            keychains = [keychain]
        case kSecMatchPolicy, kSecMatchIssuers, kSecMatchEmailAddressIfPresent, kSecMatchSubjectContains,
            kSecMatchTrustedOnly, kSecMatchValidOnDate:
            throw KeychainError(.unimplemented, "\(name): certificate trust matching is not supported")
        case kSecReturnData, kSecReturnAttributes, kSecReturnRef, kSecReturnPersistentRef:
            try require(role == .search || role == .add, name)
            if try Self.bool(value, name) {
                returning.insert(Self.returnOptions[name] ?? [])
            }
        case kSecValueData:
            try require(role == .add || role == .changes, name)
            guard let bytes = value as? Data else { throw .param("kSecValueData takes Data") }
            data = bytes
        case kSecValueRef:
            try require(searching, name)
            let object = value as AnyObject
            if let item = object as? SecKeychainItem { referencedClass = item.reference.itemClass }
            items = (items ?? []) + [object]
        case kSecValuePersistentRef:
            try require(searching, name)
            guard let bytes = value as? Data, let reference = ItemReference(persistentData: bytes) else {
                throw KeychainError(.invalidItemReference, "kSecValuePersistentRef is not a persistent reference")
            }
            persistentReference = reference
            referencedClass = reference.itemClass
        case kSecUseAuthenticationUI:
            try require(role != .changes, name)
            guard let choice = value as? String,
                [kSecUseAuthenticationUIAllow, kSecUseAuthenticationUIFail, kSecUseAuthenticationUISkip]
                    .contains(where: { $0.isEqual(to: choice) })
            else { throw .param("kSecUseAuthenticationUI takes Allow, Fail or Skip") }
            authentication.interaction =
                kSecUseAuthenticationUISkip.isEqual(to: choice)
                ? .skip : kSecUseAuthenticationUIFail.isEqual(to: choice) ? .fail : .allow
        case kSecUseNoAuthenticationUI:
            try require(role != .changes, name)
            // The older key: true is kSecUseAuthenticationUIFail.
            if try Self.bool(value, name) { authentication.interaction = .fail }
        case kSecUseDataProtectionKeychain:
            try require(role != .changes, name)
            _ = try Self.bool(value, name)
        case kSecUseOperationPrompt:
            try require(role != .changes, name)
            guard let reason = value as? String else { throw .param("kSecUseOperationPrompt takes a string") }
            authentication.operationPrompt = reason
        case kSecUseAuthenticationContext:
            try require(role != .changes, name)
        case kSecAttrAccess:
            guard role == .add else {
                throw .param(
                    "kSecAttrAccess is given when an item is added; lists are narrowed with latchkey remove-access")
            }
            guard let object = value as? SecAccess else {
                throw .param("kSecAttrAccess takes a SecAccess (from SecAccessCreate)")
            }
            access = object
        case kSecAttrAccessControl:
            let control: SecAccessControl
            if let object = value as? SecAccessControl {
                control = object
            } else if let bytes = value as? Data, let stored = SecAccessControl(storedForm: bytes) {
                control = stored
            } else {
                throw .param("kSecAttrAccessControl takes a SecAccessControl (from SecAccessControlCreateWithFlags)")
            }
            accessControl = control
            attributes[.accessControl] = .data(control.storedForm)
        default:
            let key = AttributeKey(rawValue: name)
            guard let kind = key.kind else {
                throw KeychainError(.noSuchAttribute, "'\(name)' is not a keychain attribute")
            }
            attributes[key] = try Self.value(value, kind: kind, bytesAllowed: key.storesTextAsBytes, name)
        }
    }

    private func require(_ allowed: Bool, _ name: String) throws(KeychainError) {
        if !allowed { throw .param("\(name) is not allowed in this dictionary") }
    }

    private static let returnOptions: [String: ReturnOptions] = [
        kSecReturnData as String: .data, kSecReturnAttributes as String: .attributes,
        kSecReturnRef as String: .reference, kSecReturnPersistentRef as String: .persistentReference,
    ]

    static func limit(_ value: Any) throws(KeychainError) -> MatchLimit {
        if let text = value as? String {
            switch text {
            case kSecMatchLimitOne: return .one
            case kSecMatchLimitAll: return .all
            default: throw .param("kSecMatchLimit '\(text)' is not kSecMatchLimitOne or kSecMatchLimitAll")
            }
        }
        guard type(of: value) != Bool.self, let number = integer(value) else {
            throw .param("kSecMatchLimit takes kSecMatchLimitOne, kSecMatchLimitAll or a number")
        }
        guard number > 0 else { throw .param("kSecMatchLimit must be greater than zero") }
        return number == 1 ? .one : .count(Int(clamping: number))
    }

    static func bool(_ value: Any, _ name: String) throws(KeychainError) -> Bool {
        if let flag = value as? Bool { return flag }
        if let number = value as? NSNumber { return number.boolValue }
        throw .param("\(name) takes a boolean")
    }

    static func integer(_ value: Any) -> Int64? {
        switch value {
        case let n as Int: Int64(n)
        case let n as Int64: n
        case let n as Int32: Int64(n)
        case let n as Int16: Int64(n)
        case let n as Int8: Int64(n)
        case let n as UInt: Int64(exactly: n)
        case let n as UInt64: Int64(exactly: n)
        case let n as UInt32: Int64(n)
        case let n as UInt16: Int64(n)
        case let n as UInt8: Int64(n)
        case let n as NSNumber: n.int64Value
        default: nil
        }
    }

    /// Reads a value of an attribute of the given kind. Text is also taken
    /// for data attributes (as UTF-8) and decimal text for numbers, as Apple
    /// does; bytes are taken, and kept as bytes, for the text attributes Apple
    /// stores as bytes (`bytesAllowed`).
    static func value(
        _ value: Any, kind: AttributeKind, bytesAllowed: Bool = false, _ name: String
    ) throws(KeychainError) -> AttributeValue {
        switch kind {
        case .string:
            if let text = value as? String { return .string(text) }
            if bytesAllowed, let bytes = value as? Data { return .data(bytes) }
        case .data:
            if let bytes = value as? Data { return .data(bytes) }
            if let text = value as? String { return .data(Data(text.utf8)) }
        case .number:
            if type(of: value) != Bool.self, let number = integer(value) { return .number(number) }
            if let text = value as? String, let number = Int64(text) { return .number(number) }
        case .date:
            if let date = value as? Date { return .date(date) }
        case .bool:
            if let flag = value as? Bool { return .bool(flag) }
            if let number = value as? NSNumber { return .bool(number.boolValue) }
        }
        throw .param("attribute '\(name)' takes a \(kind) value, not \(type(of: value))")
    }
}
