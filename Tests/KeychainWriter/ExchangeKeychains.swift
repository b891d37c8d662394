import Foundation
import KeychainCore
import KeychainStore

/// The keychains of the export and import tests (Tests/Integration/test_exchange.py).
enum ExchangeKeychains {
    /// A value of `kind` for `key`, different per key.
    static func value(_ kind: AttributeKind, for key: AttributeKey) -> AttributeValue {
        switch kind {
        case .string: .string("\(key.rawValue) value ✓")
        case .data: .data(Data("\(key.rawValue)".utf8) + Data([0, 255, 10]))
        case .number: .number(Int64(key.rawValue.unicodeScalars.reduce(0) { $0 + Int($1.value) }))
        case .date: .date(Date(timeIntervalSinceReferenceDate: 700_000_000.5))
        case .bool: .bool(true)
        }
    }

    /// Every attribute `itemClass` takes that an item is given (not the store's own, nor those with rules of
    /// their own: the accessibility class, access control, synchronizable).
    static func everyAttribute(of itemClass: ItemClass) -> ItemAttributes {
        let skipped: Set<AttributeKey> = [
            .accessible, .accessControl, .synchronizable, .creationDate, .modificationDate,
        ]
        var attributes: ItemAttributes = [:]
        for key in ItemSchema.of(itemClass).attributes where !skipped.contains(key) {
            guard let kind = key.kind else { continue }
            attributes[key] = value(kind, for: key)
        }
        return attributes
    }

    static func addEveryKind(to keychain: Keychain) throws {
        var items: [NewItem] = ItemClass.allCases.map { itemClass in
            NewItem(
                itemClass, attributes: everyAttribute(of: itemClass),
                secret: Data("secret of \(itemClass.rawValue)\u{0}\u{ff}".utf8),
                creationDate: Date(timeIntervalSinceReferenceDate: 600_000_000),
                modificationDate: Date(timeIntervalSinceReferenceDate: 650_000_000))
        }
        // A Secret Service item (text attributes under ss:, a content type), an item trusting an application,
        // one with no secret, and one that may sync.
        items.append(
            NewItem(
                .genericPassword,
                attributes: [
                    .label: .string("Secret Service item"), .secretServiceItem: .string("1"),
                    AttributeKey(rawValue: "ss:xdg:schema"): .string("org.example.Password"),
                    AttributeKey(rawValue: "ss:user"): .string("alice"), .contentType: .string("text/plain"),
                ], secret: Data("ss secret".utf8)))
        items.append(
            NewItem(
                .genericPassword,
                attributes: [
                    .label: .string("trusting"), .account: .string("trusting"), .service: .string("svc"),
                    ItemAccess.trustedApplicationsKey: .string("/usr/bin/true"),
                    ItemAccess.anyApplicationKey: .string("0"),
                ], secret: Data("trusted".utf8)))
        items.append(
            NewItem(
                .genericPassword, attributes: [.account: .string("no secret"), .service: .string("svc")], secret: nil))
        items.append(
            NewItem(
                .internetPassword,
                attributes: [
                    .server: .string("sync.example.org"), .account: .string("bob"), .synchronizable: .bool(true),
                    .accessible: .string("ak"),
                ], secret: Data("synced".utf8)))
        try keychain.add(items)
        // Never exported: its class does not leave the machine.
        try keychain.add(
            .genericPassword,
            attributes: [.account: .string("device only"), .service: .string("svc"), .accessible: .string("aku")],
            secret: Data("stays here".utf8))
    }

    static func dump(_ keychain: Keychain) throws {
        var lines: [String] = []
        for itemClass in ItemClass.allCases {
            let query = ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: [.attributes, .data])
            for item in try keychain.items(matching: query) {
                var attributes: [String: String] = [:]
                for (key, value) in item.attributes ?? [:] {
                    switch value {
                    case .string(let text): attributes[key.rawValue] = "s:" + text
                    case .data(let bytes):
                        attributes[key.rawValue] = "d:" + bytes.map { String(format: "%02x", $0) }.joined()
                    case .number(let number): attributes[key.rawValue] = "n:\(number)"
                    case .date(let date): attributes[key.rawValue] = "t:\(date.timeIntervalSinceReferenceDate)"
                    case .bool(let flag): attributes[key.rawValue] = "b:\(flag)"
                    }
                }
                let object: [String: Any] = [
                    "class": itemClass.rawValue, "attributes": attributes,
                    "secret": item.secret.map { $0.map { String(format: "%02x", $0) }.joined() } ?? NSNull(),
                ]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                lines.append(String(decoding: data, as: UTF8.self))
            }
        }
        for line in lines.sorted() { print(line) }
    }
}
