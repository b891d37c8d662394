import DBus
import FoundationEssentials
import KeychainCore

/// Latchkey's own typed keychain interface on the session bus,
/// `org.latchkey.Keychain1`, which the `Security` module uses: unlike the
/// Secret Service (text attributes only) it carries every `SecItem` attribute
/// with its type. This enum holds its names and how ``KeychainCore`` values
/// travel as D-Bus values. See docs/dbus-mapping.md.
package enum Keychain1Interface {
    /// The bus name (the daemon's).
    package static let busName = "org.freedesktop.secrets"
    /// The interface name.
    package static let interface = "org.latchkey.Keychain1"
    /// The error name that carries an `OSStatus`: the message starts with the number.
    package static let statusError = "org.latchkey.Keychain1.Error.Status"
    /// The error name of a password refused without being tried, after too many wrong ones.
    package static let tooManyAttemptsError = "org.latchkey.Keychain1.Error.TooManyAttempts"
    /// The session algorithm clients open with `OpenSession` (also the Secret Service's): secrets in `Keychain1`
    /// arguments and replies then travel as a 16-byte IV followed by AES-128-CBC ciphertext.
    package static let sessionAlgorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    /// Object paths of keychains start with this; the collection id follows.
    package static let pathPrefix = "/org/latchkey/keychain/"

    /// The path of a collection's keychain.
    package static func path(collection id: String) -> String { pathPrefix + id }

    // MARK: Values

    /// An attribute value as the content of a variant: `s`, `ay`, `x`, `d` (seconds since 2001) or `b`.
    package static func encode(_ value: AttributeValue) -> DBusValue {
        switch value {
        case .string(let text): .string(text)
        case .data(let data): .bytes([UInt8](data))
        case .number(let number): .int64(number)
        case .date(let date): .double(date.timeIntervalSinceReferenceDate)
        case .bool(let flag): .bool(flag)
        }
    }

    /// Reads an attribute value.
    package static func decodeValue(_ value: DBusValue) throws(KeychainError) -> AttributeValue {
        switch value.unwrapped {
        case .string(let text): .string(text)
        case .bytes(let bytes): .data(Data(bytes))
        case .int64(let number): .number(number)
        case .double(let seconds): .date(Date(timeIntervalSinceReferenceDate: seconds))
        case .bool(let flag): .bool(flag)
        default: throw KeychainError.param("an attribute value has an unsupported D-Bus type")
        }
    }

    /// Attributes as `a{sv}`.
    package static func encode(_ attributes: ItemAttributes) -> DBusValue {
        .variantDictionary(Dictionary(uniqueKeysWithValues: attributes.map { ($0.key.rawValue, encode($0.value)) }))
    }

    /// Reads `a{sv}` attributes.
    package static func decodeAttributes(_ value: DBusValue) throws(KeychainError) -> ItemAttributes {
        guard let pairs = value.unwrapped.variantPairs else { throw KeychainError.param("attributes are a{sv}") }
        var attributes: ItemAttributes = [:]
        for (name, value) in pairs { attributes[AttributeKey(rawValue: name)] = try decodeValue(value) }
        return attributes
    }

    // MARK: Queries and items

    /// A query as `a{sv}`: `class` s, `attributes` a{sv}, `synchronizable` s
    /// (`no`, `yes`, `any`), `caseInsensitive` b, `limit` x (0 for all),
    /// `references` aay (persistent references), `returning` u (bits of ``ReturnOptions``), and, when not the
    /// default, `authenticationUI` s (`allow`, `fail`, `skip`) and `operationPrompt` s (``AuthenticationOptions``).
    package static func encode(_ query: ItemQuery) -> DBusValue {
        var pairs: [String: DBusValue] = [
            "class": .string(query.itemClass.rawValue), "attributes": encode(query.attributes),
            "synchronizable": .string(
                query.synchronizable == .any ? "any" : query.synchronizable == .yes ? "yes" : "no"),
            "caseInsensitive": .bool(query.caseInsensitive),
            "limit": .int64(Int64(query.limit.maximum ?? 0)),
            "returning": .uint32(UInt32(query.returning.rawValue)),
        ]
        if let references = query.references {
            pairs["references"] = .array(
                elementSignature: "ay", references.map { .bytes([UInt8]($0.persistentData)) })
        }
        if query.authentication.interaction != .allow {
            pairs["authenticationUI"] = .string(query.authentication.interaction.rawValue)
        }
        if let reason = query.authentication.operationPrompt { pairs["operationPrompt"] = .string(reason) }
        return .variantDictionary(pairs)
    }

    /// Reads a query.
    package static func decodeQuery(_ value: DBusValue) throws(KeychainError) -> ItemQuery {
        guard let pairs = value.unwrapped.variantPairs, case .string(let code)? = pairs["class"] else {
            throw KeychainError.param("a query is a{sv} with a class")
        }
        guard let itemClass = ItemClass(rawValue: code) else {
            throw KeychainError(.noSuchClass, "'\(code)' is not a keychain item class")
        }
        var query = ItemQuery(itemClass)
        if let attributes = pairs["attributes"] { query.attributes = try decodeAttributes(attributes) }
        switch pairs["synchronizable"] {
        case .string("yes")?: query.synchronizable = .yes
        case .string("any")?: query.synchronizable = .any
        default: query.synchronizable = .no
        }
        if case .bool(let flag)? = pairs["caseInsensitive"] { query.caseInsensitive = flag }
        if case .int64(let limit)? = pairs["limit"] {
            query.limit = limit == 0 ? .all : limit == 1 ? .one : .count(Int(clamping: limit))
        }
        if case .uint32(let bits)? = pairs["returning"] {
            query.returning = ReturnOptions(rawValue: UInt8(truncatingIfNeeded: bits))
        }
        if case .array("ay", let list)? = pairs["references"] {
            query.references = try list.map { (entry) throws(KeychainError) -> ItemReference in
                guard case .bytes(let bytes) = entry, let reference = ItemReference(persistentData: Data(bytes)) else {
                    throw KeychainError(.invalidItemReference, "a reference is not a persistent reference")
                }
                return reference
            }
        }
        if case .string(let text)? = pairs["authenticationUI"] {
            guard let interaction = AuthenticationOptions.Interaction(rawValue: text) else {
                throw KeychainError.param("authenticationUI is allow, fail or skip")
            }
            query.authentication.interaction = interaction
        }
        if case .string(let reason)? = pairs["operationPrompt"] {
            // Shown cut to a line of its own (PromptText.field); a longer one is no reason to keep.
            guard reason.utf8.count <= maxOperationPromptBytes else {
                throw KeychainError.param("operationPrompt is longer than \(maxOperationPromptBytes) bytes")
            }
            query.authentication.operationPrompt = reason
        }
        return query
    }

    /// The longest `operationPrompt` taken (the prompt shows at most 160 bytes of it).
    package static let maxOperationPromptBytes = 1024

    /// An item as `a{sv}`: `reference` ay, and `attributes` a{sv} and `secret` ay when present.
    package static func encode(_ item: KeychainItem) -> DBusValue {
        encode(item, secretBytes: item.secret.map { [UInt8]($0) })
    }

    /// An item as ``encode(_:)`` writes it, with `secretBytes` as its secret (one held apart from the item,
    /// in secret memory, copied only into the reply's array).
    package static func encode(_ item: KeychainItem, secretBytes: [UInt8]?) -> DBusValue {
        var pairs: [String: DBusValue] = ["reference": .bytes([UInt8](item.reference.persistentData))]
        if let attributes = item.attributes { pairs["attributes"] = encode(attributes) }
        if let secretBytes { pairs["secret"] = .bytes(secretBytes) }
        return .variantDictionary(pairs)
    }

    /// Reads an item, its secret as `unsealing` reads the bytes that carry it (as they are by default).
    package static func decodeItem(
        _ value: DBusValue, unsealing: ([UInt8]) throws(KeychainError) -> Data = { Data($0) }
    ) throws(KeychainError) -> KeychainItem {
        guard let pairs = value.unwrapped.variantPairs, case .bytes(let bytes)? = pairs["reference"],
            let reference = ItemReference(persistentData: Data(bytes))
        else { throw KeychainError(.decode, "an item from the daemon has no reference") }
        var secret: Data?
        if case .bytes(let secretBytes)? = pairs["secret"] { secret = try unsealing(secretBytes) }
        return KeychainItem(
            reference: reference,
            attributes: try pairs["attributes"].map { (v) throws(KeychainError) in
                try decodeAttributes(v)
            }, secret: secret)
    }

    // MARK: Errors

    /// The D-Bus error for a keychain error: ``statusError`` with "STATUS reason", or for a password refused
    /// after too many wrong ones ``tooManyAttemptsError`` with "SECONDS reason".
    package static func dbusError(_ error: KeychainError) -> DBusError {
        if let wait = error.retryAfterSeconds {
            return DBusError(name: tooManyAttemptsError, message: "\(wait) \(error.reason)")
        }
        return DBusError(name: statusError, message: "\(error.status.rawValue) \(error.reason)")
    }

    /// The keychain error a D-Bus error stands for (a refused argument is `errSecParam`, a failure to reach the
    /// daemon `errSecNotAvailable`).
    package static func keychainError(_ error: DBusError) -> KeychainError {
        if error.name == tooManyAttemptsError {
            let wait = error.message.split(separator: " ", maxSplits: 1).first.flatMap { Int64($0) } ?? 0
            return .tooManyAttempts(waitSeconds: wait)
        }
        if error.name == statusError {
            let parts = error.message.split(separator: " ", maxSplits: 1).map(String.init)
            if let number = parts.first.flatMap({ Int32($0) }) {
                return KeychainError(KeychainStatus(rawValue: number), parts.count > 1 ? parts[1] : "")
            }
        }
        if error.name == DBusError.Name.invalidArgs.rawValue {
            return KeychainError(.param, error.message)
        }
        if error.name == "org.freedesktop.DBus.Error.NotSupported" {
            return KeychainError(.unimplemented, "the keychain daemon refused: \(error.message)")
        }
        return KeychainError(.notAvailable, "the keychain daemon did not answer: \(error.message)")
    }
}
