/// A Swift type with one D-Bus signature, read from and written to ``DBusValue``s. Method arguments and
/// properties are declared with these types, so their signatures, their decoding and their introspection
/// come from one place.
package protocol DBusType: SendableMetatype {
    /// The D-Bus type signature (`s`, `ao`, `a{ss}`, …).
    static var dbusSignature: String { get }
    /// Reads a value whose signature has already been checked to be ``dbusSignature``; throws
    /// `InvalidArgs` (or the owner's error) when its content is not acceptable.
    init(dbusValue: DBusValue) throws(DBusError)
    /// The value to send.
    var dbusValue: DBusValue { get }
}

extension DBusType {
    /// The `InvalidArgs` error for a value that does not have this type's shape.
    static func mismatch(_ value: DBusValue) -> DBusError {
        DBusError(.invalidArgs, "expected a \(dbusSignature) value, got \(value.signature)")
    }
}

/// An object path (`o`), as distinct from a string.
package struct ObjectPath: DBusType, Hashable, Sendable, CustomStringConvertible {
    /// The path text.
    package let text: String
    /// Wraps a path.
    package init(_ text: String) { self.text = text }
    /// The "no object" path, `/`.
    package static let root = ObjectPath("/")
    package static var dbusSignature: String { "o" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .objectPath(let text) = value else { throw Self.mismatch(value) }
        self.text = text
    }
    package var dbusValue: DBusValue { .objectPath(text) }
    package var description: String { text }
}

/// A variant (`v`): any value with its own signature.
package struct DBusVariant: DBusType, Sendable {
    /// The value inside.
    package let value: DBusValue
    /// Wraps a value.
    package init(_ value: DBusValue) { self.value = value }
    package static var dbusSignature: String { "v" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .variant(let inner) = value else { throw Self.mismatch(value) }
        self.value = inner
    }
    package var dbusValue: DBusValue { .variant(value) }
}

/// A property list (`a{sv}`): names to variants, as in `CreateCollection`'s properties.
package struct DBusPropertyList: DBusType, Sendable {
    /// The values, unwrapped from their variants.
    package let values: [String: DBusValue]
    /// Wraps values.
    package init(_ values: [String: DBusValue]) { self.values = values }
    package static var dbusSignature: String { "a{sv}" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard let pairs = value.variantPairs else { throw Self.mismatch(value) }
        values = pairs
    }
    package var dbusValue: DBusValue { .variantDictionary(values) }
}

extension String: DBusType {
    package static var dbusSignature: String { "s" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .string(let text) = value else { throw Self.mismatch(value) }
        self = text
    }
    package var dbusValue: DBusValue { .string(self) }
}

extension Bool: DBusType {
    package static var dbusSignature: String { "b" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .bool(let flag) = value else { throw Self.mismatch(value) }
        self = flag
    }
    package var dbusValue: DBusValue { .bool(self) }
}

extension UInt32: DBusType {
    package static var dbusSignature: String { "u" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .uint32(let number) = value else { throw Self.mismatch(value) }
        self = number
    }
    package var dbusValue: DBusValue { .uint32(self) }
}

extension UInt64: DBusType {
    package static var dbusSignature: String { "t" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .uint64(let number) = value else { throw Self.mismatch(value) }
        self = number
    }
    package var dbusValue: DBusValue { .uint64(self) }
}

extension UInt8: DBusType {
    package static var dbusSignature: String { "y" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .byte(let byte) = value else { throw Self.mismatch(value) }
        self = byte
    }
    package var dbusValue: DBusValue { .byte(self) }
}

/// Arrays (`a` and the element's signature); byte arrays travel as one ``DBusValue/bytes(_:)`` buffer.
extension Array: DBusType where Element: DBusType {
    package static var dbusSignature: String { "a" + Element.dbusSignature }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        switch value {
        case .bytes(let bytes):
            guard Element.self == UInt8.self, let typed = bytes as? [Element] else { throw Self.mismatch(value) }
            self = typed
        case .array(let element, let items) where element == Element.dbusSignature:
            var typed: [Element] = []
            typed.reserveCapacity(items.count)
            for item in items { typed.append(try Element(dbusValue: item)) }
            self = typed
        default:
            throw Self.mismatch(value)
        }
    }
    package var dbusValue: DBusValue {
        // An empty array casts to any array type: ask the element type.
        if Element.self == UInt8.self, let bytes = self as? [UInt8] { return .bytes(bytes) }
        return .array(elementSignature: Element.dbusSignature, map(\.dbusValue))
    }
}

/// String dictionaries (`a{ss}`), as Secret Service attributes.
extension [String: String]: DBusType {
    package static var dbusSignature: String { "a{ss}" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard let pairs = value.stringPairs else { throw Self.mismatch(value) }
        self = pairs
    }
    package var dbusValue: DBusValue { .stringDictionary(self) }
}
