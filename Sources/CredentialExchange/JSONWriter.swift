import Posix

/// Writes compact JSON (RFC 8259) straight into secret memory, for documents that hold secrets as a whole: the
/// bytes never pass through a `String` or a growable array. Commas are placed by the writer.
struct JSONWriter: ~Copyable {
    /// The document so far.
    private(set) var output: SecretBytes
    /// For each open object or array, whether a member was written in it yet.
    private var hasMembers: [Bool] = []
    /// Whether the next value follows a key (and needs no comma).
    private var afterKey = false

    /// An empty document with room for `capacity` bytes to start with (it grows as needed).
    init(capacity: Int) throws(ExchangeError) {
        output = try secretBuffer(capacity: capacity)
    }

    /// The document, once every object and array is closed.
    consuming func finish() -> SecretBytes {
        precondition(hasMembers.isEmpty, "an unclosed JSON object or array")
        return output
    }

    private mutating func reserve(_ count: Int) throws(ExchangeError) {
        do { try output.reserveCapacity(forAppending: count) } catch {
            throw ExchangeError(.outOfMemory, "no secret memory to grow the document past \(output.count) bytes")
        }
    }

    private mutating func raw(_ bytes: some Collection<UInt8>) throws(ExchangeError) {
        try reserve(bytes.count)
        for byte in bytes { output.append(byte) }
    }

    /// Writes the comma a new value needs.
    private mutating func beginValue() throws(ExchangeError) {
        if afterKey {
            afterKey = false
            return
        }
        if let last = hasMembers.indices.last {
            if hasMembers[last] { try raw([UInt8(ascii: ",")]) }
            hasMembers[last] = true
        }
    }

    mutating func beginObject() throws(ExchangeError) {
        try beginValue()
        try raw([UInt8(ascii: "{")])
        hasMembers.append(false)
    }

    mutating func endObject() throws(ExchangeError) {
        hasMembers.removeLast()
        try raw([UInt8(ascii: "}")])
    }

    mutating func beginArray() throws(ExchangeError) {
        try beginValue()
        try raw([UInt8(ascii: "[")])
        hasMembers.append(false)
    }

    mutating func endArray() throws(ExchangeError) {
        hasMembers.removeLast()
        try raw([UInt8(ascii: "]")])
    }

    /// Writes a member's name; its value follows.
    mutating func key(_ name: String) throws(ExchangeError) {
        try beginValue()
        try quoted(Array(name.utf8))
        try raw([UInt8(ascii: ":")])
        afterKey = true
    }

    mutating func string(_ text: String) throws(ExchangeError) {
        try beginValue()
        try quoted(Array(text.utf8))
    }

    /// A string value of UTF-8 `bytes` (a secret lent from secret memory).
    mutating func string(bytes: UnsafeRawBufferPointer) throws(ExchangeError) {
        try beginValue()
        try quoted(bytes)
    }

    /// A string value of the base64url text (no padding) of `bytes`.
    mutating func base64url(_ bytes: UnsafeRawBufferPointer) throws(ExchangeError) {
        try beginValue()
        try reserve(Base64URL.encodedCount(bytes.count) + 2)
        output.append(UInt8(ascii: "\""))
        Base64URL.encode(bytes) { output.append($0) }
        output.append(UInt8(ascii: "\""))
    }

    mutating func number(_ value: Int64) throws(ExchangeError) {
        try beginValue()
        try raw(Array(String(value).utf8))
    }

    mutating func bool(_ value: Bool) throws(ExchangeError) {
        try beginValue()
        try raw(Array((value ? "true" : "false").utf8))
    }

    /// `"name": "text"`.
    mutating func member(_ name: String, _ text: String) throws(ExchangeError) {
        try key(name)
        try string(text)
    }

    /// `"name": number`.
    mutating func member(_ name: String, _ value: Int64) throws(ExchangeError) {
        try key(name)
        try number(value)
    }

    /// Writes `text` quoted, escaping what RFC 8259 requires: the quote, the backslash and the control
    /// characters. Bytes of 0x80 and above pass as they are (the text is UTF-8).
    private mutating func quoted(_ text: some Collection<UInt8>) throws(ExchangeError) {
        var needed = 2
        for byte in text { needed += byte < 0x20 ? 6 : (byte == 0x22 || byte == 0x5C ? 2 : 1) }
        try reserve(needed)
        let hex = Array("0123456789abcdef".utf8)
        output.append(UInt8(ascii: "\""))
        for byte in text {
            switch byte {
            case 0x22, 0x5C:
                output.append(UInt8(ascii: "\\"))
                output.append(byte)
            case 0x0A:
                output.append(UInt8(ascii: "\\"))
                output.append(UInt8(ascii: "n"))
            case 0x0D:
                output.append(UInt8(ascii: "\\"))
                output.append(UInt8(ascii: "r"))
            case 0x09:
                output.append(UInt8(ascii: "\\"))
                output.append(UInt8(ascii: "t"))
            case 0..<0x20:
                for escape in [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")] {
                    output.append(escape)
                }
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

/// Base64url (RFC 4648 section 5) without padding, as CXF writes identifiers and byte strings; the decoder
/// also takes the padded form and the standard alphabet, as other exporters write them.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// How many characters `count` bytes encode to.
    static func encodedCount(_ count: Int) -> Int { (count * 4 + 2) / 3 }

    /// Calls `emit` with each character of the encoding of `bytes`.
    static func encode(_ bytes: some Collection<UInt8>, _ emit: (UInt8) -> Void) {
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                emit(alphabet[Int(accumulator >> UInt32(bits) & 0x3F)])
            }
        }
        if bits > 0 { emit(alphabet[Int(accumulator << UInt32(6 - bits) & 0x3F)]) }
    }

    /// The encoding of `bytes` as text (for what is not secret: identifiers, attribute bytes).
    static func text(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(encodedCount(bytes.count))
        encode(bytes) { out.append($0) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The value of one character, or nil.
    private static func value(_ character: UInt8) -> UInt32? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(character - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(character - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(character - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "-"), UInt8(ascii: "+"): 62
        case UInt8(ascii: "_"), UInt8(ascii: "/"): 63
        default: nil
        }
    }

    /// Calls `emit` with each byte `text` encodes; false when `text` is not base64url (or base64), with or
    /// without padding.
    static func decode(_ text: some Collection<UInt8>, _ emit: (UInt8) -> Void) -> Bool {
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        var length = 0
        for character in text {
            length += 1
            if character == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            guard padding == 0, let value = value(character) else { return false }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                emit(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // One leftover character (6 bits) is never a whole encoding; padding only completes a quantum.
        let dataCharacters = length - padding
        return dataCharacters % 4 != 1 && (padding == 0 || length % 4 == 0) && padding <= 2
    }

    /// The bytes of `text`, or nil when it is not base64url.
    static func bytes(_ text: some Collection<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        return decode(text) { out.append($0) } ? out : nil
    }
}
