import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// The Credential Exchange Format (FIDO Alliance CXF 1.0) as JSON: a keychain's items written as a document, and
/// documents (ours and other exporters') read back into items. No I/O: bytes in, bytes out, all in secret
/// memory. The mapping is docs/export-format.md, "CXF content".
package enum CXFDocument {
    /// The CXF version written, and the only major version read.
    static let major: Int64 = 1
    static let minor: Int64 = 0
    /// The name of Latchkey's item extension, which keeps an item's class, every attribute and its keychain.
    static let extensionName = "latchkey"
    /// The version of the extension's own layout; an extension of another version is ignored (the item is then
    /// read from its CXF credentials, as another exporter's).
    static let extensionVersion: Int64 = 1
    /// The most items read from one document.
    static let maxItems = 1_000_000

    /// The CXF document of `keychains`' items, exported by `exporter` (its display name) at `date`, and how many
    /// items were left out because they may not leave this device (a `…ThisDeviceOnly` class, or attributes not
    /// read so the class is unknown).
    package static func encode(_ keychains: [ExportedKeychain], exporter: String, at date: Date)
        throws(ExchangeError) -> CXFExport
    {
        var leftOut = 0
        var writer = try JSONWriter(capacity: 4096)
        try writer.beginObject()
        try writer.key("version")
        try writer.beginObject()
        try writer.member("major", major)
        try writer.member("minor", minor)
        try writer.endObject()
        try writer.member("exporterRpId", "latchkey.org")
        try writer.member("exporterDisplayName", exporter)
        try writer.member("timestamp", StorableDates.seconds(date))
        try writer.key("accounts")
        try writer.beginArray()
        try writer.beginObject()
        try writer.member("id", Base64URL.text(Array("latchkey-account".utf8)))
        try writer.member("username", "")
        try writer.member("email", "")
        var collections: [(name: String, items: [Data])] = []
        try writer.key("items")
        try writer.beginArray()
        for keychain in keychains {
            var listed: [Data] = []
            for (item, secret) in keychain.items {
                guard let attributes = item.attributes, mayLeaveThisDevice(item, attributes) else {
                    leftOut += 1
                    continue
                }
                try writeItem(item, attributes, secret, keychain: keychain.name, into: &writer)
                listed.append(item.reference.identifier)
            }
            collections.append((keychain.name, listed))
        }
        try writer.endArray()
        try writer.key("collections")
        try writer.beginArray()
        for (index, collection) in collections.enumerated() {
            try writer.beginObject()
            try writer.member("id", Base64URL.text(Array("keychain-\(index)".utf8)))
            try writer.member("title", collection.name)
            try writer.key("items")
            try writer.beginArray()
            for identifier in collection.items {
                try writer.beginObject()
                try writer.member("item", Base64URL.text(identifier))
                try writer.endObject()
            }
            try writer.endArray()
            try writer.endObject()
        }
        try writer.endArray()
        try writer.endObject()
        try writer.endArray()
        try writer.endObject()
        return CXFExport(document: writer.finish(), leftOut: leftOut)
    }

    /// Whether `item` may be exported: its class is not `…ThisDeviceOnly`, nor is the protection its
    /// `kSecAttrAccessControl` names (were the two ever to differ); an access control that cannot be read keeps
    /// the item home.
    ///
    /// An item whose access control asks for the person at each read (a password, a finger, a watch) or has a
    /// password of its own (`applicationPassword`: its stored secret is an envelope bound to this item, which
    /// opens nowhere else) stays home too: one confirmation of the export cannot stand for its checks at each
    /// read (docs/export-format.md, "Left out").
    static func mayLeaveThisDevice(_ item: KeychainItem, _ attributes: ItemAttributes) -> Bool {
        guard item.mayLeaveThisDevice == true else { return false }
        guard attributes[.accessControl] != nil else { return true }
        guard let constraints = try? AccessConstraints.of(attributes),
            let protection = Accessibility(rawValue: constraints.protection)
        else { return false }
        guard !constraints.needsAuthentication, constraints.flags & AccessConstraints.applicationPassword == 0 else {
            return false
        }
        return protection.mayLeaveThisDevice
    }

    /// The text of a text attribute (given as text, or as bytes that are UTF-8).
    static func text(_ value: AttributeValue?) -> String? {
        switch value {
        case .string(let text): text
        case .data(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }

    /// The URL of an Internet password's protocol, server, port and path, nil without a server.
    static func url(of attributes: ItemAttributes) -> String? {
        guard let server = text(attributes[.server]), !server.isEmpty else { return nil }
        let scheme = text(attributes[.protocol]).map { URLParts.scheme(forProtocol: $0) } ?? "https"
        var url = scheme + "://" + server
        if case .number(let port) = attributes[.port], port > 0 { url += ":\(port)" }
        if let path = text(attributes[.path]), !path.isEmpty { url += path.hasPrefix("/") ? path : "/" + path }
        return url
    }

    private static func writeItem(
        _ item: KeychainItem, _ attributes: ItemAttributes, _ secret: SharedSecret?, keychain: String,
        into writer: inout JSONWriter
    ) throws(ExchangeError) {
        let title =
            text(attributes[.label]) ?? text(attributes[.service]) ?? text(attributes[.server]) ?? ""
        // A password whose secret is UTF-8 goes in its basic-auth credential; any other secret (bytes, a key, a
        // certificate) only in the extension, as base64url.
        let secretIsText =
            item.itemClass.isPassword && (secret?.withUnsafeBytes { UTF8Check.isValid($0) } ?? false)
        try writer.beginObject()
        try writer.member("id", Base64URL.text(item.reference.identifier))
        if case .date(let created) = attributes[.creationDate] {
            try writer.member("creationAt", StorableDates.seconds(created))
        }
        if case .date(let modified) = attributes[.modificationDate] {
            try writer.member("modifiedAt", StorableDates.seconds(modified))
        }
        try writer.member("title", title)
        if let description = text(attributes[.itemDescription]) { try writer.member("subtitle", description) }
        if item.itemClass == .internetPassword, let url = url(of: attributes) {
            try writer.key("scope")
            try writer.beginObject()
            try writer.key("urls")
            try writer.beginArray()
            try writer.string(url)
            // The other URLs a CXF item of another exporter had (CXFDocument.otherURLs), after it, in order.
            if let others = text(attributes[.secretService(otherURLs)]) {
                for other in others.split(separator: "\n") where !other.isEmpty { try writer.string(String(other)) }
            }
            try writer.endArray()
            try writer.key("androidApps")
            try writer.beginArray()
            try writer.endArray()
            try writer.endObject()
        }
        try writer.key("credentials")
        try writer.beginArray()
        if item.itemClass.isPassword {
            try writer.beginObject()
            try writer.member("type", "basic-auth")
            if let account = text(attributes[.account]) {
                try writer.key("username")
                try editableField(type: "string", into: &writer) { (writer) throws(ExchangeError) in
                    try writer.string(account)
                }
            }
            if secretIsText, let secret {
                try writer.key("password")
                try editableField(type: "concealed-string", into: &writer) { (writer) throws(ExchangeError) in
                    try secret.withUnsafeBytes { (bytes) throws(ExchangeError) in try writer.string(bytes: bytes) }
                }
            }
            try writer.endObject()
        }
        if let comment = text(attributes[.comment]), !comment.isEmpty {
            try writer.beginObject()
            try writer.member("type", "note")
            try writer.key("content")
            try editableField(type: "string", into: &writer) { (writer) throws(ExchangeError) in
                try writer.string(comment)
            }
            try writer.endObject()
        }
        try writer.endArray()
        try writer.key("extensions")
        try writer.beginArray()
        try writer.beginObject()
        try writer.member("name", extensionName)
        try writer.member("version", extensionVersion)
        try writer.member("class", item.itemClass.rawValue)
        try writer.member("keychain", keychain)
        if let secret {
            if secretIsText {
                try writer.member("secretIn", "basic-auth")
            } else {
                try writer.key("secret")
                try secret.withUnsafeBytes { (bytes) throws(ExchangeError) in try writer.base64url(bytes) }
            }
        }
        try writer.key("attributes")
        try writer.beginArray()
        for key in attributes.keys.sorted() {
            guard let value = attributes[key] else { continue }
            try writer.beginObject()
            try writer.member("key", key.rawValue)
            try writer.member("kind", AttributeText.kindName(value.kind))
            try writer.key("value")
            switch value {
            case .data(let bytes): try writer.string(Base64URL.text(bytes))
            case .bool(let flag): try writer.bool(flag)
            default: try writer.string(AttributeText.text(of: value))
            }
            try writer.endObject()
        }
        try writer.endArray()
        try writer.endObject()
        try writer.endArray()
        try writer.endObject()
    }

    /// An EditableField object: `{"fieldType": type, "value": …}`, the value written by `value`.
    private static func editableField(
        type: String, into writer: inout JSONWriter, value: (inout JSONWriter) throws(ExchangeError) -> Void
    ) throws(ExchangeError) {
        try writer.beginObject()
        try writer.member("fieldType", type)
        try writer.key("value")
        try value(&writer)
        try writer.endObject()
    }
}

/// What ``CXFDocument/encode(_:exporter:at:)`` gives: the document, in secret memory, and how many items were
/// left out because they may not leave this device.
package struct CXFExport: ~Copyable {
    /// The CXF JSON document.
    package var document: SecretBytes
    /// How many items were left out (`…ThisDeviceOnly`, or found without attributes).
    package var leftOut: Int
}

/// How the extension writes attribute values that are not bytes or flags: text as it is, numbers in decimal,
/// dates as the decimal seconds since 2001-01-01 UTC (Apple's reference date) in the shortest form that reads
/// back to the same `Double`.
enum AttributeText {
    static func kindName(_ kind: AttributeKind) -> String {
        switch kind {
        case .string: "string"
        case .data: "data"
        case .number: "number"
        case .date: "date"
        case .bool: "bool"
        }
    }

    static func kind(named name: String) -> AttributeKind? {
        switch name {
        case "string": .string
        case "data": .data
        case "number": .number
        case "date": .date
        case "bool": .bool
        default: nil
        }
    }

    static func text(of value: AttributeValue) -> String {
        switch value {
        case .string(let text): text
        case .number(let number): String(number)
        case .date(let date): "\(date.timeIntervalSinceReferenceDate)"
        case .bool(let flag): flag ? "true" : "false"
        case .data(let bytes): Base64URL.text(bytes)
        }
    }
}
