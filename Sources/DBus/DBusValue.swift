/// One D-Bus value with its type, as read from or written to a message.
///
/// Byte arrays have a case of their own (`bytes`) so that secrets travel as
/// one buffer rather than one enum value per byte.
package indirect enum DBusValue: Hashable, Sendable {
    /// `y`
    case byte(UInt8)
    /// `b`
    case bool(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s`
    case string(String)
    /// `o`
    case objectPath(String)
    /// `g`
    case signature(String)
    /// `ay`
    case bytes([UInt8])
    /// `a` followed by the element signature (never `y`: that is ``bytes(_:)``).
    case array(elementSignature: String, [DBusValue])
    /// `a{kv}`: a dictionary with its key and value signatures.
    case dictionary(keySignature: String, valueSignature: String, [DBusDictEntry])
    /// `(...)`
    case structure([DBusValue])
    /// `v`
    case variant(DBusValue)
    /// `h`: a file descriptor passed with the message, owned (closed when the last reference goes).
    case unixFileDescriptor(DBusFileDescriptor)

    /// The value's type signature.
    package var signature: String {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let members): "(" + members.map(\.signature).joined() + ")"
        case .variant: "v"
        case .unixFileDescriptor: "h"
        }
    }
}

/// One key-value pair of a D-Bus dictionary.
package struct DBusDictEntry: Hashable, Sendable {
    /// The key (a basic type).
    package var key: DBusValue
    /// The value.
    package var value: DBusValue

    /// A pair.
    package init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}

extension DBusValue {
    /// An `ao` array.
    package static func objectPaths(_ paths: [String]) -> DBusValue {
        .array(elementSignature: "o", paths.map { .objectPath($0) })
    }

    /// An `a{ss}` dictionary.
    package static func stringDictionary(_ pairs: [String: String]) -> DBusValue {
        .dictionary(
            keySignature: "s", valueSignature: "s",
            pairs.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .string($0.value)) })
    }

    /// An `a{sv}` dictionary.
    package static func variantDictionary(_ pairs: [String: DBusValue]) -> DBusValue {
        .dictionary(
            keySignature: "s", valueSignature: "v",
            pairs.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .variant($0.value)) })
    }

    /// The text of a `s`, `o` or `g` value.
    package var text: String? {
        switch self {
        case .string(let text), .objectPath(let text), .signature(let text): text
        default: nil
        }
    }

    /// The paths of an `ao` value.
    package var objectPathList: [String]? {
        guard case .array("o", let items) = self else { return nil }
        return items.compactMap { if case .objectPath(let path) = $0 { path } else { nil } }
    }

    /// The pairs of an `a{ss}` value.
    package var stringPairs: [String: String]? {
        guard case .dictionary("s", "s", let entries) = self else { return nil }
        var pairs: [String: String] = [:]
        for entry in entries {
            guard case .string(let key) = entry.key, case .string(let value) = entry.value else { return nil }
            pairs[key] = value
        }
        return pairs
    }

    /// The pairs of an `a{sv}` value, unwrapped from their variants.
    package var variantPairs: [String: DBusValue]? {
        guard case .dictionary("s", "v", let entries) = self else { return nil }
        var pairs: [String: DBusValue] = [:]
        for entry in entries {
            guard case .string(let key) = entry.key, case .variant(let value) = entry.value else { return nil }
            pairs[key] = value
        }
        return pairs
    }

    /// The value inside a variant, or the value itself.
    package var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }
}
