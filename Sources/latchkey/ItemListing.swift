import FoundationEssentials
import Glibc
import KeychainCore

/// How items are shown: the layout of macOS `security(1)` (keychain, class,
/// then each attribute with its four-character name and type), and JSON.
enum ItemListing {
    /// The attributes `security(1)` lists for a class, in its order; the
    /// label comes first as `0x00000007`, the number Apple's file format gives it.
    private static func shownAttributes(_ itemClass: ItemClass) -> [AttributeKey] {
        switch itemClass {
        case .genericPassword:
            [
                .label, .account, .creationDate, .creator, .itemDescription, .generic, .comment, .isInvisible,
                .modificationDate, .isNegative, .service, .type,
            ]
        case .internetPassword:
            [
                .label, .account, .authenticationType, .creationDate, .creator, .itemDescription, .comment,
                .isInvisible, .modificationDate, .isNegative, .path, .port, .protocol, .securityDomain, .server, .type,
            ]
        default:
            [.label]
        }
    }

    /// The type `security(1)` prints for an attribute.
    private static func typeName(_ key: AttributeKey) -> String {
        switch key {
        case .creator, .type, .port, .protocol: "uint32"
        default:
            switch key.kind {
            case .number?, .bool?: "sint32"
            case .date?: "timedate"
            default: "blob"
            }
        }
    }

    /// An item in `security(1)`'s layout, without the password line.
    static func text(_ item: KeychainItem, keychain: String) -> String {
        let attributes = item.attributes ?? [:]
        var keys = shownAttributes(item.itemClass)
        keys += attributes.keys.filter { !keys.contains($0) && $0 != .synchronizable }.sorted()
        var lines = [
            "keychain: \(quoted(Array(keychain.utf8)))", "version: 512", "class: \"\(item.itemClass.rawValue)\"",
            "accessible: \(Accessibility(of: attributes).name)", "attributes:",
        ]
        for key in keys {
            let name = key == .label ? "0x00000007 " : quoted(Array(key.rawValue.utf8))
            lines.append("    \(name)<\(typeName(key))>=\(attributes[key].map { value($0, of: key) } ?? "<NULL>")")
        }
        return lines.joined(separator: "\n")
    }

    /// `password: "…"`, or the bytes in hex and escaped when they are not text.
    static func passwordLine(_ secret: Data) -> String {
        "password: " + bytes(Array(secret))
    }

    /// A secret as `dump-keychain -d` prints it: quoted text, or hex and escaped.
    static func dataText(_ secret: Data) -> String { bytes(Array(secret)) }

    /// The password alone, as `-w` prints it: the text, or hex when it is not text.
    static func passwordOnly(_ secret: Data) -> String {
        let bytes = Array(secret)
        return isText(bytes) ? String(decoding: bytes, as: UTF8.self) : hex(bytes)
    }

    private static func value(_ value: AttributeValue, of key: AttributeKey) -> String {
        switch value {
        case .string(let text): quoted(Array(text.utf8))
        case .data(let data): bytes(Array(data))
        case .number(let number):
            key == .creator || key == .type ? fourCharacterCode(number) : String(format32: number)
        case .bool(let flag): String(format32: flag ? 1 : 0)
        case .date(let date):
            timestamp(date).map { stamp in
                let raw = Array(stamp.utf8) + [0]
                return hex(raw) + "  " + quoted(raw)
            } ?? "<NULL>"
        }
    }

    /// Printable text in quotes; other bytes in hex, then escaped in quotes.
    private static func bytes(_ bytes: [UInt8]) -> String {
        isText(bytes) ? quoted(bytes) : hex(bytes) + "  " + quoted(bytes)
    }

    private static func isText(_ bytes: [UInt8]) -> Bool {
        String(validating: bytes, as: UTF8.self) != nil && !bytes.contains { $0 < 0x20 || $0 == 0x7F }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        "0x" + bytes.map { String($0, radix: 16, uppercase: true).leftPadded(to: 2) }.joined()
    }

    /// Quoted, with `"` and `\` escaped and control bytes as `\ooo` octal (valid UTF-8 text is kept).
    private static func quoted(_ bytes: [UInt8]) -> String {
        let keepsHighBytes = String(validating: bytes, as: UTF8.self) != nil
        var escaped: [UInt8] = [UInt8(ascii: "\"")]
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): escaped += [UInt8(ascii: "\\"), byte]
            case 0x80... where !keepsHighBytes, 0..<0x20, 0x7F:
                escaped += Array(("\\" + String(byte, radix: 8).leftPadded(to: 3)).utf8)
            default: escaped.append(byte)
            }
        }
        escaped.append(UInt8(ascii: "\""))
        return String(decoding: escaped, as: UTF8.self)
    }

    /// A four-character code such as `"aapl"`, or the number in hex when it is not one.
    private static func fourCharacterCode(_ number: Int64) -> String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: number >> (24 - 8 * $0)) }
        guard number >> 32 == 0, bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            return String(format32: number)
        }
        return quoted(bytes)
    }

    /// `YYYYMMDDhhmmssZ` in UTC, the keychain's time format.
    static func timestamp(_ date: Date) -> String? {
        guard let parts = utcParts(date) else { return nil }
        return parts.map { String($0).leftPadded(to: $0 > 99 ? 4 : 2) }.joined() + "Z"
    }

    /// ISO 8601 in UTC, for JSON.
    static func isoTimestamp(_ date: Date) -> String? {
        guard let p = utcParts(date) else { return nil }
        let pad = { (n: Int) in String(n).leftPadded(to: 2) }
        return "\(String(p[0]).leftPadded(to: 4))-\(pad(p[1]))-\(pad(p[2]))T\(pad(p[3])):\(pad(p[4])):\(pad(p[5]))Z"
    }

    private static func utcParts(_ date: Date) -> [Int]? {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return nil }
        return [
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour),
            Int(parts.tm_min), Int(parts.tm_sec),
        ]
    }

    // MARK: JSON

    /// An item as JSON: keychain, class, attributes by their names, and the password when given.
    static func json(_ item: KeychainItem, keychain: String, password: Data?) -> JSONValue {
        var attributes: [String: JSONValue] = [:]
        for (key, value) in item.attributes ?? [:] { attributes[key.rawValue] = json(value) }
        var object: [String: JSONValue] = [
            "keychain": .string(keychain), "class": .string(item.itemClass.rawValue), "attributes": .object(attributes),
            "accessible": .string(Accessibility(of: item.attributes ?? [:]).name),
        ]
        if let password { object["password"] = json(.data(password)) }
        return .object(object)
    }

    private static func json(_ value: AttributeValue) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .data(let data):
            String(validating: Array(data), as: UTF8.self).map(JSONValue.string)
                ?? .object(["hex": .string(String(hex(Array(data)).dropFirst(2)))])
        case .number(let number): .number(number)
        case .bool(let flag): .bool(flag)
        case .date(let date): isoTimestamp(date).map(JSONValue.string) ?? .null
        }
    }
}

/// A JSON document, written with sorted keys.
enum JSONValue: Encodable, Equatable {
    case string(String)
    case number(Int64)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    /// Encodes the value as what it is.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let text): try container.encode(text)
        case .number(let number): try container.encode(number)
        case .bool(let flag): try container.encode(flag)
        case .array(let list): try container.encode(list)
        case .object(let pairs): try container.encode(pairs)
        case .null: try container.encodeNil()
        }
    }

    /// The document, pretty-printed with sorted keys.
    var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension String {
    /// A number as `0x` and eight hex digits, as `security(1)` prints 32-bit values.
    init(format32 number: Int64) {
        self = "0x" + String(UInt32(truncatingIfNeeded: number), radix: 16, uppercase: true).leftPadded(to: 8)
    }

    /// The text with zeros in front up to `width` characters.
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
