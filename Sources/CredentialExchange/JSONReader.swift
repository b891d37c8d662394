import FoundationEssentials
import Posix

/// One value of a JSON document read by ``JSONReader``: strings and numbers are ranges of the document's bytes,
/// unescaped only when a value is taken (``JSONDocument/text(_:)``, ``JSONDocument/secret(_:)``), so a
/// password is copied out of the document's secret memory once, where it is wanted.
struct JSONValue {
    /// What the value is.
    enum Content {
        /// Members in the document's order (names are the format's, taken as text).
        case object([(name: String, value: JSONValue)])
        case array([JSONValue])
        /// The bytes between the quotes, still escaped when `escaped`.
        case string(start: Int, end: Int, escaped: Bool)
        /// The number's text.
        case number(start: Int, end: Int)
        case bool(Bool)
        case null
    }

    /// Where the value starts in the document (for messages).
    var offset: Int
    var content: Content

    /// The member `name` of an object (the first one of that name); nil when absent or not an object.
    subscript(_ name: String) -> JSONValue? {
        guard case .object(let members) = content else { return nil }
        return members.first { $0.name == name }?.value
    }

    /// The elements of an array, nil for anything else.
    var elements: [JSONValue]? {
        if case .array(let elements) = content { elements } else { nil }
    }

    /// Whether it is `null`.
    var isNull: Bool {
        if case .null = content { true } else { false }
    }

    /// The flag, nil for anything else.
    var bool: Bool? {
        if case .bool(let flag) = content { flag } else { nil }
    }
}

/// A JSON document (RFC 8259) read from secret memory with bounds on its size, depth and number of values: a
/// hostile file gets a one-line error naming the byte where it goes wrong, never a crash or a stall.
struct JSONReader {
    /// The largest document read.
    static let maxBytes = 256 << 20
    /// The deepest nesting of objects and arrays (CXF needs about ten).
    static let maxDepth = 64
    /// The most values in one document.
    static let maxValues = 4_000_000
    /// The longest member name.
    static let maxNameBytes = 1024

    private let bytes: UnsafeRawBufferPointer
    private var position = 0
    private var values = 0
    /// What the messages call the document ("CXF document").
    private let what: String

    /// The most values this reader takes (``maxValues`` but in tests).
    private let valueLimit: Int

    private init(_ bytes: UnsafeRawBufferPointer, what: String, valueLimit: Int) {
        self.bytes = bytes
        self.what = what
        self.valueLimit = valueLimit
    }

    /// The value `bytes` holds (one value, blanks around it, a UTF-8 BOM before it allowed), of at most
    /// `valueLimit` values.
    static func parse(_ bytes: UnsafeRawBufferPointer, what: String, valueLimit: Int = maxValues)
        throws(ExchangeError) -> JSONValue
    {
        guard bytes.count <= maxBytes else {
            throw ExchangeError(.tooLarge, "\(what): larger than \(maxBytes >> 20) MiB")
        }
        var reader = JSONReader(bytes, what: what, valueLimit: valueLimit)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { reader.position = 3 }
        let value = try reader.value(depth: 0)
        reader.skipBlanks()
        guard reader.position == bytes.count else { throw reader.fault("data after the JSON value") }
        return value
    }

    private func fault(_ problem: String, at offset: Int? = nil) -> ExchangeError {
        let offset = offset ?? position
        if offset >= bytes.count {
            return ExchangeError(.malformed, "\(what): ends early (truncated?) at byte \(offset)")
        }
        return ExchangeError(.malformed, "\(what): \(problem) at byte \(offset)")
    }

    private mutating func skipBlanks() {
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func expect(_ literal: String) throws(ExchangeError) {
        for byte in literal.utf8 {
            guard current == byte else { throw fault("expected \(literal)") }
            position += 1
        }
    }

    private mutating func value(depth: Int) throws(ExchangeError) -> JSONValue {
        skipBlanks()
        values += 1
        guard values <= valueLimit else {
            throw ExchangeError(.tooLarge, "\(what): more than \(valueLimit) values")
        }
        let start = position
        guard let byte = current else { throw fault("expected a value") }
        switch byte {
        case UInt8(ascii: "{"):
            guard depth < Self.maxDepth else {
                throw ExchangeError(.tooLarge, "\(what): nested deeper than \(Self.maxDepth) at byte \(start)")
            }
            return JSONValue(offset: start, content: .object(try members(depth: depth + 1)))
        case UInt8(ascii: "["):
            guard depth < Self.maxDepth else {
                throw ExchangeError(.tooLarge, "\(what): nested deeper than \(Self.maxDepth) at byte \(start)")
            }
            return JSONValue(offset: start, content: .array(try elements(depth: depth + 1)))
        case UInt8(ascii: "\""):
            let (from, to, escaped) = try string()
            return JSONValue(offset: start, content: .string(start: from, end: to, escaped: escaped))
        case UInt8(ascii: "t"):
            try expect("true")
            return JSONValue(offset: start, content: .bool(true))
        case UInt8(ascii: "f"):
            try expect("false")
            return JSONValue(offset: start, content: .bool(false))
        case UInt8(ascii: "n"):
            try expect("null")
            return JSONValue(offset: start, content: .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            return JSONValue(offset: start, content: .number(start: start, end: position))
        default:
            throw fault("unexpected character")
        }
    }

    private mutating func members(depth: Int) throws(ExchangeError) -> [(name: String, value: JSONValue)] {
        position += 1
        var members: [(name: String, value: JSONValue)] = []
        skipBlanks()
        if current == UInt8(ascii: "}") {
            position += 1
            return members
        }
        while true {
            skipBlanks()
            guard current == UInt8(ascii: "\"") else { throw fault("expected a member name") }
            let nameOffset = position
            let (from, to, escaped) = try string()
            guard to - from <= Self.maxNameBytes else { throw fault("member name too long", at: nameOffset) }
            let name = try JSONDocument(bytes: bytes, what: what).decodedText(from, to, escaped, at: nameOffset)
            skipBlanks()
            guard current == UInt8(ascii: ":") else { throw fault("expected ':'") }
            position += 1
            members.append((name, try value(depth: depth)))
            skipBlanks()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                return members
            default: throw fault("expected ',' or '}'")
            }
        }
    }

    private mutating func elements(depth: Int) throws(ExchangeError) -> [JSONValue] {
        position += 1
        var elements: [JSONValue] = []
        skipBlanks()
        if current == UInt8(ascii: "]") {
            position += 1
            return elements
        }
        while true {
            elements.append(try value(depth: depth))
            skipBlanks()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"):
                position += 1
                return elements
            default: throw fault("expected ',' or ']'")
            }
        }
    }

    /// Skips a string, checking its escapes; returns the range between the quotes.
    private mutating func string() throws(ExchangeError) -> (Int, Int, Bool) {
        position += 1
        let start = position
        var escaped = false
        while true {
            guard let byte = current else { throw fault("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return (start, position - 1, escaped)
            case UInt8(ascii: "\\"):
                escaped = true
                position += 1
                guard let next = current else { throw fault("unterminated string") }
                if next == UInt8(ascii: "u") {
                    for _ in 0..<4 {
                        position += 1
                        guard let digit = current, JSONDocument.hexValue(digit) != nil else {
                            throw fault("bad \\u escape")
                        }
                    }
                } else if !Array("\"\\/bfnrt".utf8).contains(next) {
                    throw fault("bad escape")
                }
                position += 1
            case 0..<0x20:
                throw fault("control character in a string")
            default:
                position += 1
            }
        }
    }

    private mutating func digits() -> Int {
        let start = position
        while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { position += 1 }
        return position - start
    }

    private mutating func number() throws(ExchangeError) {
        if current == UInt8(ascii: "-") { position += 1 }
        if current == UInt8(ascii: "0") {
            position += 1
        } else if digits() == 0 {
            throw fault("bad number")
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { throw fault("bad number") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { throw fault("bad number") }
        }
    }
}

/// Takes values out of a parsed document's bytes: text for what is not secret, secret memory for secrets.
struct JSONDocument {
    let bytes: UnsafeRawBufferPointer
    /// What the messages call the document.
    let what: String

    static func hexValue(_ digit: UInt8) -> UInt32? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(digit - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(digit - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(digit - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    func invalid(_ problem: String, at value: JSONValue) -> ExchangeError {
        ExchangeError(.invalid, "\(what): \(problem) at byte \(value.offset)")
    }

    /// Calls `emit` with the unescaped UTF-8 bytes of the string `from..<to`; throws at a lone surrogate.
    func unescape(_ from: Int, _ to: Int, _ escaped: Bool, at offset: Int, _ emit: (UInt8) -> Void)
        throws(ExchangeError)
    {
        guard escaped else {
            for index in from..<to { emit(bytes[index]) }
            return
        }
        var index = from
        func hex4(_ at: Int) -> UInt32 {
            (at..<at + 4).reduce(0) { $0 << 4 | (JSONDocument.hexValue(bytes[$1]) ?? 0) }
        }
        while index < to {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\\") else {
                emit(byte)
                index += 1
                continue
            }
            let kind = bytes[index + 1]
            index += 2
            switch kind {
            case UInt8(ascii: "b"): emit(0x08)
            case UInt8(ascii: "f"): emit(0x0C)
            case UInt8(ascii: "n"): emit(0x0A)
            case UInt8(ascii: "r"): emit(0x0D)
            case UInt8(ascii: "t"): emit(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(index)
                index += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 6 <= to, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    else { throw ExchangeError(.malformed, "\(what): lone surrogate in a string at byte \(offset)") }
                    let low = hex4(index + 2)
                    guard (0xDC00..<0xE000).contains(low) else {
                        throw ExchangeError(.malformed, "\(what): lone surrogate in a string at byte \(offset)")
                    }
                    index += 6
                    scalar = 0x10000 + (scalar - 0xD800) << 10 + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw ExchangeError(.malformed, "\(what): lone surrogate in a string at byte \(offset)")
                }
                guard let unicode = Unicode.Scalar(scalar) else {
                    throw ExchangeError(.malformed, "\(what): bad \\u escape at byte \(offset)")
                }
                if let encoded = UTF8.encode(unicode) { for unit in encoded { emit(unit) } }
            default: emit(kind)  // the quote, the backslash and the solidus stand for themselves
            }
        }
    }

    func decodedText(_ from: Int, _ to: Int, _ escaped: Bool, at offset: Int) throws(ExchangeError) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(to - from)
        try unescape(from, to, escaped, at: offset) { out.append($0) }
        guard let text = String(validating: out, as: UTF8.self) else {
            throw ExchangeError(.malformed, "\(what): a string that is not UTF-8 at byte \(offset)")
        }
        return text
    }

    /// The text of a string value (not for secrets); throws when `value` is not a string.
    func text(_ value: JSONValue, _ name: String = "a value") throws(ExchangeError) -> String {
        guard case .string(let from, let to, let escaped) = value.content else {
            throw invalid("\(name) is not a string", at: value)
        }
        return try decodedText(from, to, escaped, at: value.offset)
    }

    /// The text of an optional member: nil when absent or null.
    func text(_ value: JSONValue?, _ name: String) throws(ExchangeError) -> String? {
        guard let value, !value.isNull else { return nil }
        return try required(value, name)
    }

    private func required(_ value: JSONValue, _ name: String) throws(ExchangeError) -> String {
        try text(value, name)
    }

    /// The unescaped bytes of a string value, in secret memory (for secrets).
    func secret(_ value: JSONValue, _ name: String) throws(ExchangeError) -> SecretBytes {
        guard case .string(let from, let to, let escaped) = value.content else {
            throw invalid("\(name) is not a string", at: value)
        }
        var out = try secretBuffer(capacity: to - from)
        try unescape(from, to, escaped, at: value.offset) { out.append($0) }
        let valid = out.withUnsafeBytes { UTF8Check.isValid($0) }
        guard valid else {
            throw ExchangeError(.malformed, "\(what): a string that is not UTF-8 at byte \(value.offset)")
        }
        return out
    }

    /// The raw bytes of a string value whose text needs no unescaping to be checked (base64url), or nil.
    func unescapedBytes(_ value: JSONValue) -> UnsafeRawBufferPointer? {
        guard case .string(let from, let to, false) = value.content else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[from..<to])
    }

    /// An integer value (a JSON number with no fraction, or one whose fraction is zero, in Int64's range).
    func integer(_ value: JSONValue, _ name: String) throws(ExchangeError) -> Int64 {
        guard case .number(let from, let to) = value.content else {
            throw invalid("\(name) is not a number", at: value)
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[from..<to]), as: UTF8.self)
        if let integer = Int64(text) { return integer }
        guard let real = Double(text), real.rounded() == real, abs(real) < 9.2e18 else {
            throw invalid("\(name) is not an integer", at: value)
        }
        return Int64(real)
    }
}

/// Whether bytes are well-formed UTF-8, checked without making a `String` of them (they may be a secret).
enum UTF8Check {
    static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
