import FoundationEssentials

/// How Secret Service attributes (text names and values) and store attributes map onto each other.
///
/// A few names stand for the `SecItem` attributes they mean, so both faces see
/// one item the same way: `service` and `account` on generic passwords;
/// `server`, `account`, `protocol`, `port`, `path`, `domain` and `authtype` on
/// Internet passwords. Every other name is kept as an extension attribute
/// (`ss:` + name). See docs/dbus-mapping.md.
///
/// It lives here, below the daemon, so that the Secret Service face and the
/// gnome-keyring importer store items the same way.
package enum AttributeMapping {
    private static let genericNames: [String: AttributeKey] = ["service": .service, "account": .account]
    private static let internetNames: [String: AttributeKey] = [
        "server": .server, "account": .account, "protocol": .protocol, "port": .port, "path": .path,
        "domain": .securityDomain, "authtype": .authenticationType,
    ]

    private static func names(_ itemClass: ItemClass) -> [String: AttributeKey] {
        itemClass == .internetPassword ? internetNames : genericNames
    }

    /// The store attributes for Secret Service attributes on an item of
    /// `itemClass`; nil when a value cannot be held there (a port that is not a
    /// number), so no item of that class can match.
    package static func storeAttributes(_ attributes: [String: String], for itemClass: ItemClass) -> ItemAttributes? {
        let mapped = names(itemClass)
        var result: ItemAttributes = [:]
        for (name, value) in attributes {
            if let key = mapped[name] {
                if key.kind == .number {
                    guard let number = Int64(value) else { return nil }
                    result[key] = .number(number)
                } else {
                    result[key] = .string(value)
                }
            } else {
                result[.secretService(name)] = .string(value)
            }
        }
        return result
    }

    /// The Secret Service attributes of a stored item.
    package static func secretServiceAttributes(
        _ attributes: ItemAttributes, of itemClass: ItemClass
    ) -> [String: String] {
        var result: [String: String] = [:]
        for (name, key) in names(itemClass) {
            switch attributes[key] {
            case .string(let text): result[name] = text
            case .number(let number): result[name] = String(number)
            // Text given to SecItem as bytes (an account as Data): shown when it is UTF-8.
            case .data(let bytes): if let text = String(validating: bytes, as: UTF8.self) { result[name] = text }
            default: break
            }
        }
        for (key, value) in attributes where key.rawValue.hasPrefix(AttributeKey.secretServicePrefix) {
            if case .string(let text) = value {
                result[String(key.rawValue.dropFirst(AttributeKey.secretServicePrefix.count))] = text
            }
        }
        return result
    }

    /// The store attributes an item's Secret Service attributes replace when
    /// they are set: the mapped names and every extension attribute.
    package static func isSecretServiceAttribute(_ key: AttributeKey, of itemClass: ItemClass) -> Bool {
        key.rawValue.hasPrefix(AttributeKey.secretServicePrefix) || names(itemClass).values.contains(key)
    }

    /// The store attributes of an item made through the Secret Service (`CreateItem`), a generic
    /// password: its attributes as ``storeAttributes(_:for:)`` maps them, its label, its
    /// secret's content type and the `lk:ss-item` mark (such items have no primary key, so two
    /// with equal attributes stay apart).
    package static func secretServiceItem(label: String, attributes: [String: String], contentType: String)
        -> ItemAttributes
    {
        var stored = storeAttributes(attributes, for: .genericPassword) ?? [:]
        stored[.label] = .string(label)
        stored[.contentType] = .string(contentType)
        stored[.secretServiceItem] = .string("1")
        return stored
    }
}
