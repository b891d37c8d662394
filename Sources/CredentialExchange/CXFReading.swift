import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

extension CXFDocument {
    /// The Secret Service attribute that keeps a CXF item's `scope.urls` other than the one its server, protocol,
    /// port and path stand for (all of them for an item with no URL naming a host), one a line, in order.
    package static let otherURLs = "other-urls"

    /// The items of a CXF document: Latchkey's own items from their `latchkey` extension, as they were; other
    /// exporters' items from their credentials (docs/export-format.md, "CXF content"). Credentials no item can
    /// hold are listed in ``ExchangeReading/skipped``. A document of another major version is refused; unknown
    /// members and a newer minor version are ignored.
    package static func decode(_ document: borrowing SecretBytes) throws(ExchangeError) -> ExchangeReading {
        try document.withUnsafeBytes { (bytes) throws(ExchangeError) in
            let what = "CXF document"
            let root = try JSONReader.parse(bytes, what: what)
            var reader = CXFReader(document: JSONDocument(bytes: bytes, what: what))
            return try reader.read(root)
        }
    }
}

/// Reads one parsed CXF document into items.
private struct CXFReader {
    let document: JSONDocument
    var items: [NewItem] = []
    var keychainNames: [String?] = []
    var skipped: [SkippedCredential] = []

    init(document: JSONDocument) {
        self.document = document
    }

    private func required(_ value: JSONValue, _ name: String) throws(ExchangeError) -> JSONValue {
        guard let member = value[name] else { throw document.invalid("\(name) is missing", at: value) }
        return member
    }

    private func array(_ value: JSONValue?, _ name: String) throws(ExchangeError) -> [JSONValue] {
        guard let value, !value.isNull else { return [] }
        guard let elements = value.elements else { throw document.invalid("\(name) is not an array", at: value) }
        return elements
    }

    mutating func read(_ root: JSONValue) throws(ExchangeError) -> ExchangeReading {
        guard case .object = root.content else { throw document.invalid("the document is not an object", at: root) }
        let version = try required(root, "version")
        let major = try document.integer(try required(version, "major"), "version.major")
        let minor = try document.integer(try required(version, "minor"), "version.minor")
        guard major == CXFDocument.major else {
            throw ExchangeError(
                .unsupportedVersion, "CXF document: version \(major).\(minor) is not supported (this reads 1.x)")
        }
        for account in try array(try required(root, "accounts"), "accounts") {
            guard case .object = account.content else {
                throw document.invalid("an account is not an object", at: account)
            }
            let accountItems = try array(account["items"], "items")
            guard items.count + accountItems.count <= CXFDocument.maxItems else {
                throw ExchangeError(.tooLarge, "CXF document: more than \(CXFDocument.maxItems) items")
            }
            for item in accountItems { try readItem(item) }
        }
        return ExchangeReading(
            items: items, skipped: skipped, format: "cxf-1.\(minor)", keychainNames: keychainNames)
    }

    /// The value of an EditableField (`{"fieldType": …, "value": "…"}`) as text; nil when absent.
    private func fieldText(_ field: JSONValue?, _ name: String) throws(ExchangeError) -> String? {
        guard let field, !field.isNull else { return nil }
        let value: JSONValue = try required(field, "value")
        return try document.text(value, name + ".value") as String
    }

    /// The value of an EditableField in secret memory, as the `Data` a new item takes.
    private func fieldSecret(_ field: JSONValue, _ name: String) throws(ExchangeError) -> Data {
        let secret = try document.secret(try required(field, "value"), name + ".value")
        return secret.withUnsafeBytes { Data($0) }
    }

    private func date(_ value: JSONValue?, _ name: String) throws(ExchangeError) -> Date? {
        guard let value, !value.isNull else { return nil }
        let date = Date(timeIntervalSince1970: TimeInterval(try document.integer(value, name)))
        guard StorableDates.contains(date) else {
            throw document.invalid("\(name) is not a date of years 1 to 9999", at: value)
        }
        return date
    }

    private mutating func readItem(_ item: JSONValue) throws(ExchangeError) {
        guard case .object = item.content else { throw document.invalid("an item is not an object", at: item) }
        let title = try document.text(item["title"], "title") ?? ""
        for candidate in try array(item["extensions"], "extensions") {
            if try document.text(candidate["name"], "extensions.name") == CXFDocument.extensionName,
                let version = candidate["version"],
                try document.integer(version, "latchkey.version") == CXFDocument.extensionVersion
            {
                try readOwnItem(item, extension: candidate)
                return
            }
        }
        try readForeignItem(item, title: title)
    }

    // MARK: Latchkey's items

    private mutating func readOwnItem(_ item: JSONValue, extension ext: JSONValue) throws(ExchangeError) {
        let classCode = try document.text(try required(ext, "class"), "latchkey.class")
        guard let itemClass = ItemClass(rawValue: classCode) else {
            throw document.invalid("latchkey.class is not an item class", at: ext)
        }
        var attributes: ItemAttributes = [:]
        for entry in try array(try required(ext, "attributes"), "latchkey.attributes") {
            let name = try document.text(try required(entry, "key"), "attribute key")
            let kindName = try document.text(try required(entry, "kind"), "attribute kind")
            guard let kind = AttributeText.kind(named: kindName) else {
                throw document.invalid("unknown attribute kind", at: entry)
            }
            let key = AttributeKey(rawValue: name)
            guard name.utf8.count <= 255, !name.isEmpty else { throw document.invalid("bad attribute key", at: entry) }
            if let expected = key.kind, expected != kind, !(key.storesTextAsBytes && kind == .data) {
                throw document.invalid("attribute \(name) has the wrong kind", at: entry)
            }
            attributes[key] = try attributeValue(kind, try required(entry, "value"), name)
        }
        // A file never makes a Secret portal key: another program could plant one for a Flatpak application.
        attributes[.portalKey] = nil
        var secret: Data? = nil
        if let encoded = ext["secret"], !encoded.isNull {
            secret = try base64Secret(encoded)
        } else if try document.text(ext["secretIn"], "latchkey.secretIn") == "basic-auth" {
            let credential = try array(try required(item, "credentials"), "credentials").first {
                (try? document.text($0["type"], "type")) == "basic-auth"
            }
            guard let credential, let password = credential["password"] else {
                throw document.invalid("the basic-auth password the latchkey extension names is missing", at: item)
            }
            secret = try fieldSecret(password, "password")
        }
        var creation: Date? = nil
        var modification: Date? = nil
        if case .date(let date) = attributes.removeValue(forKey: .creationDate) { creation = date }
        if case .date(let date) = attributes.removeValue(forKey: .modificationDate) { modification = date }
        if creation == nil { creation = try date(item["creationAt"], "creationAt") }
        if modification == nil { modification = try date(item["modifiedAt"], "modifiedAt") }
        items.append(
            NewItem(
                itemClass, attributes: attributes, secret: secret, creationDate: creation,
                modificationDate: modification))
        keychainNames.append(try document.text(ext["keychain"], "latchkey.keychain"))
    }

    private func attributeValue(_ kind: AttributeKind, _ value: JSONValue, _ name: String) throws(ExchangeError)
        -> AttributeValue
    {
        switch kind {
        case .bool:
            guard let flag = value.bool else { throw document.invalid("attribute \(name) is not a boolean", at: value) }
            return .bool(flag)
        case .string:
            return .string(try document.text(value, name))
        case .data:
            guard let bytes = Base64URL.bytes(Array(try document.text(value, name).utf8)) else {
                throw document.invalid("attribute \(name) is not base64url", at: value)
            }
            return .data(Data(bytes))
        case .number:
            guard let number = Int64(try document.text(value, name)) else {
                throw document.invalid("attribute \(name) is not an integer", at: value)
            }
            return .number(number)
        case .date:
            guard let seconds = Double(try document.text(value, name)), seconds.isFinite,
                StorableDates.contains(Date(timeIntervalSinceReferenceDate: seconds))
            else {
                throw document.invalid("attribute \(name) is not a date of years 1 to 9999", at: value)
            }
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        }
    }

    /// A base64url secret of the extension, decoded into secret memory first.
    private func base64Secret(_ value: JSONValue) throws(ExchangeError) -> Data {
        guard let text = document.unescapedBytes(value) else {
            throw document.invalid("latchkey.secret is not a base64url string", at: value)
        }
        var secret = try secretBuffer(capacity: text.count)
        guard Base64URL.decode(text, { secret.append($0) }) else {
            throw document.invalid("latchkey.secret is not base64url", at: value)
        }
        return secret.withUnsafeBytes { Data($0) }
    }

    // MARK: Other exporters' items

    /// Why each credential type no Latchkey item holds is left out.
    static let unheld: [String: String] = [
        "passkey": "a passkey needs a WebAuthn authenticator; Latchkey holds no passkeys",
        "ssh-key": "SSH private keys are not imported into a keychain",
        "credit-card": "Latchkey has no item for payment cards",
        "address": "Latchkey has no item for addresses",
        "drivers-license": "Latchkey has no item for identity documents",
        "identity-document": "Latchkey has no item for identity documents",
        "passport": "Latchkey has no item for identity documents",
        "person-name": "Latchkey has no item for personal details",
        "wifi": "Wi-Fi networks are not imported",
        "file": "files are not imported (a CXF file credential refers to data outside the document)",
        "item-reference": "a link between items has no keychain form",
    ]

    private mutating func readForeignItem(_ item: JSONValue, title: String) throws(ExchangeError) {
        let created = try date(item["creationAt"], "creationAt")
        let modified = try date(item["modifiedAt"], "modifiedAt")
        var urls: [String] = []
        if let scope = item["scope"], !scope.isNull {
            for url in try array(scope["urls"], "scope.urls") { urls.append(try document.text(url, "scope.urls")) }
        }
        // The first URL that names a host is the item's server; the others are kept, in order, one a line.
        let located = urls.firstIndex { URLParts($0) != nil }
        let location = located.flatMap { URLParts(urls[$0]) }
        let otherURLs = urls.indices.filter { $0 != located }.map { urls[$0] }
        let credentials = try array(item["credentials"], "credentials")
        var notes: [String] = []
        var fields: ItemAttributes = [:]
        var made: [NewItem] = []

        func passwordItem(username: String?, secret: Data?, extra: ItemAttributes = [:]) -> NewItem {
            var attributes = extra
            attributes[.label] = .string(title)
            if !otherURLs.isEmpty {
                attributes[.secretService(CXFDocument.otherURLs)] = .string(otherURLs.joined(separator: "\n"))
            }
            if let username { attributes[.account] = .string(username) }
            if let location {
                attributes[.server] = .string(location.server)
                if let code = location.protocolCode { attributes[.protocol] = .string(code) }
                if let port = location.port { attributes[.port] = .number(port) }
                if let path = location.path { attributes[.path] = .string(path) }
                return NewItem(
                    .internetPassword, attributes: attributes, secret: secret, creationDate: created,
                    modificationDate: modified)
            }
            attributes[.service] = attributes[.service] ?? .string(title)
            return NewItem(
                .genericPassword, attributes: attributes, secret: secret, creationDate: created,
                modificationDate: modified)
        }

        for credential in credentials {
            let type = try document.text(try required(credential, "type"), "credential type")
            switch type {
            case "basic-auth":
                let username = try fieldText(credential["username"], "username")
                let password = try credential["password"].map { (field) throws(ExchangeError) in
                    try fieldSecret(field, "password")
                }
                made.append(passwordItem(username: username, secret: password))
            case "generated-password":
                let password = try document.secret(try required(credential, "password"), "password")
                made.append(passwordItem(username: nil, secret: password.withUnsafeBytes { Data($0) }))
            case "note":
                if let content = credential["content"] { notes.append(try fieldText(content, "content") ?? "") }
            case "api-key":
                var extra: ItemAttributes = [.itemDescription: .string("API key")]
                if let keyType = try fieldText(credential["keyType"], "keyType") {
                    extra[.secretService("key-type")] = .string(keyType)
                }
                if let url = try fieldText(credential["url"], "url") { extra[.secretService("url")] = .string(url) }
                let key = try credential["key"].map { (field) throws(ExchangeError) in try fieldSecret(field, "key") }
                var item = passwordItem(
                    username: try fieldText(credential["username"], "username"), secret: key, extra: extra)
                if item.itemClass == .internetPassword {
                    // An API key is a generic password: its URL is kept as an attribute, not as a server.
                    item = NewItem(
                        .genericPassword,
                        attributes: item.attributes.filter { ![.server, .protocol, .port, .path].contains($0.key) }
                            .merging([.service: .string(title)]) { _, new in new },
                        secret: key, creationDate: created, modificationDate: modified)
                }
                made.append(item)
            case "totp":
                if let totp = try totpItem(credential, title: title, created: created, modified: modified) {
                    made.append(totp)
                }
            case "custom-fields":
                for (index, field) in try array(credential["fields"], "fields").enumerated() {
                    let label = try document.text(field["label"], "label") ?? "field \(index + 1)"
                    let fieldType = try document.text(field["fieldType"], "fieldType") ?? "string"
                    if fieldType == "concealed-string" {
                        var item = passwordItem(username: nil, secret: try fieldSecret(field, "custom field"))
                        item.itemClass = .genericPassword
                        item.attributes = [
                            .label: .string(title), .service: .string(title), .account: .string(label),
                        ]
                        made.append(item)
                    } else {
                        fields[.secretService(label)] = .string(try fieldText(field, "custom field") ?? "")
                    }
                }
            default:
                skipped.append(
                    SkippedCredential(
                        title: title, credentialType: type,
                        reason: Self.unheld[type] ?? "a credential type this version does not know"))
            }
        }
        if made.isEmpty, !notes.isEmpty {
            // A secure note alone: its text is the item's secret.
            var note = passwordItem(username: nil, secret: Data(notes.joined(separator: "\n\n").utf8))
            note.attributes[.itemDescription] = .string("secure note")
            notes = []
            made.append(note)
        }
        if made.isEmpty, !fields.isEmpty { made.append(passwordItem(username: nil, secret: nil)) }
        for var new in made {
            for (key, value) in fields where new.attributes[key] == nil { new.attributes[key] = value }
            if !notes.isEmpty { new.attributes[.comment] = .string(notes.joined(separator: "\n\n")) }
            items.append(new)
            keychainNames.append(nil)
        }
        if made.isEmpty, credentials.isEmpty {
            skipped.append(SkippedCredential(title: title, credentialType: "", reason: "the item has no credentials"))
        }
    }

    /// A TOTP credential as a generic password whose secret is its `otpauth://` URI (Key Uri Format), nil (and
    /// listed as skipped) for an algorithm the URI cannot name.
    private mutating func totpItem(_ credential: JSONValue, title: String, created: Date?, modified: Date?)
        throws(ExchangeError) -> NewItem?
    {
        let algorithm = try document.text(credential["algorithm"], "algorithm") ?? "sha1"
        guard ["sha1", "sha256", "sha512"].contains(algorithm.lowercased()) else {
            skipped.append(
                SkippedCredential(title: title, credentialType: "totp", reason: "an unknown TOTP algorithm"))
            return nil
        }
        let digits =
            try credential["digits"].map { (value) throws(ExchangeError) in
                try document.integer(value, "digits")
            } ?? 6
        let period =
            try credential["period"].map { (value) throws(ExchangeError) in
                try document.integer(value, "period")
            } ?? 30
        let username = try document.text(credential["username"], "username")
        let issuer = try document.text(credential["issuer"], "issuer")
        let secret = try document.secret(try required(credential, "secret"), "secret")
        let uri = try OTPAuthURI.make(
            secret: secret, account: username, issuer: issuer,
            algorithm: algorithm.uppercased(), digits: digits, period: period)
        return TOTPItem.make(uri: uri, title: title, username: username, created: created, modified: modified)
    }
}

/// An `otpauth://totp/` URI (Google Authenticator's Key Uri Format) around a base32 secret, built in secret
/// memory.
enum OTPAuthURI {
    /// Percent-encodes what is not unreserved (RFC 3986).
    static func escape(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            let unreserved =
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || [UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~")].contains(byte)
            if unreserved {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return out
    }

    /// The URI of `secret` for `account` at `issuer` (the label is `issuer:account`, each part escaped).
    static func make(
        secret: borrowing SecretBytes, account: String?, issuer: String?, algorithm: String, digits: Int64,
        period: Int64
    ) throws(ExchangeError) -> SecretBytes {
        let label = [issuer, account].compactMap { $0.map(escape) }.joined(separator: [UInt8(ascii: ":")])
        let head = Array("otpauth://totp/".utf8) + label + Array("?secret=".utf8)
        var tail = Array("&algorithm=\(algorithm)&digits=\(digits)&period=\(period)".utf8)
        if let issuer { tail += Array("&issuer=".utf8) + escape(issuer) }
        var uri = try secretBuffer(capacity: head.count + secret.count + tail.count)
        head.withUnsafeBytes { uri.append($0) }
        // A base32 secret: its letters (in upper case) and digits; blanks, dashes and padding dropped.
        let isBase32 = secret.withUnsafeBytes { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "2")...UInt8(ascii: "7"): uri.append(byte)
                case UInt8(ascii: "a")...UInt8(ascii: "z"): uri.append(byte - 0x20)
                case UInt8(ascii: " "), UInt8(ascii: "-"), UInt8(ascii: "="): continue
                default: return false
                }
            }
            return true
        }
        guard isBase32 else { throw ExchangeError(.invalid, "a TOTP secret is not base32") }
        tail.withUnsafeBytes { uri.append($0) }
        return uri
    }
}
