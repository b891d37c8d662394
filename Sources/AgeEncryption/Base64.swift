/// The base64 of age (RFC 4648 §4, standard alphabet): unpadded and canonical in the header, padded and
/// canonical in the armor. Decoding refuses every other spelling of the same bytes (RFC 4648 §3.5: the
/// unused bits of the last character must be zero), so that a file has exactly one encoding.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The value of a base64 character, nil for any other byte.
    static func value(of character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }

    /// `bytes` in base64, padded with `=` when `padded`.
    static func encode(_ bytes: some Collection<UInt8>, padded: Bool = false) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = second == nil ? nil : iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            let characters = second == nil ? 2 : third == nil ? 3 : 4
            for index in 0..<characters { output.append(alphabet[Int(group >> UInt32(18 - 6 * index) & 0x3F)]) }
            if padded { output.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - characters)) }
        }
        return output
    }

    /// The bytes of canonical base64 `text`; nil for any other character, a length that no encoding has,
    /// padding where none is allowed (or missing where it is required), or non-zero unused bits.
    static func decode(_ text: some Collection<UInt8>, padded: Bool = false) -> [UInt8]? {
        var characters = Array(text)
        if padded {
            guard characters.count % 4 == 0 else { return nil }
            var padding = 0
            while padding < 2, characters.last == UInt8(ascii: "=") {
                characters.removeLast()
                padding += 1
            }
        }
        guard characters.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(characters.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in characters {
            guard let value = value(of: character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Canonical: the bits left over (2 or 4) are zero.
        guard accumulator == 0 else { return nil }
        return output
    }
}
