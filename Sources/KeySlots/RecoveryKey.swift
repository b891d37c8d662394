import COpenSSL
import Posix

/// A recovery key: 150 random bits shown once to the user as seven groups of five characters, the last group a
/// check on the first six, shaped like `7k2mq-c0xhv-r4t9w-bn3ze-gj8pd-y5as1-f6q2k`.
///
/// The alphabet is Crockford's base 32 in lower case (`0-9`, `a-z` without `i l o u`): no two characters look
/// alike, and reading back maps `o` to `0` and `i`/`l` to `1`. Parsing ignores case, spaces and dashes; the check
/// group (25 bits of a SHA-256 over the key) catches a mistyped, missing or swapped character before any slot is
/// tried. 150 bits is beyond any offline search, and short enough to type from paper.
///
/// The key is a secret: `secret` and `formatted()` are byte arrays the caller wipes (`wipe()`, `wipeBytes`).
/// When the project's noncopyable secret-bytes type exists (in KeychainCore), `secret` should become one.
package struct RecoveryKey {
    /// Random bits in a key.
    package static let randomBits = 150
    /// Characters per group.
    package static let groupLength = 5
    /// Groups of key characters (the check group comes after them).
    package static let keyGroups = 6
    /// The 32 characters, each standing for 5 bits.
    static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    /// The key's 150 bits as 19 bytes, big-endian, the last 2 bits zero. What a slot derives its wrapping key from.
    package private(set) var secret: [UInt8]

    /// A new key from OpenSSL's random generator.
    package static func generate() throws(RecoveryKeyError) -> RecoveryKey {
        var secret = [UInt8](repeating: 0, count: 19)
        guard RAND_bytes(&secret, Int32(secret.count)) == 1 else { throw .noRandomness }
        secret[18] &= 0xFC
        return RecoveryKey(secret: secret)
    }

    /// A key from its 19 bytes (the last 2 bits must be zero).
    package init(secret: [UInt8]) {
        precondition(secret.count == 19 && secret[18] & 0x03 == 0, "a recovery key is 150 bits")
        self.secret = secret
    }

    /// Reads a key as the user typed it: case, spaces, tabs and dashes ignored, `o`→`0`, `i`/`l`→`1`.
    package init(parsing text: [UInt8]) throws(RecoveryKeyError) {
        var symbols: [UInt8] = []
        defer { wipeBytes(&symbols) }
        symbols.reserveCapacity(text.count)
        for (position, character) in text.enumerated() {
            if character == UInt8(ascii: " ") || character == UInt8(ascii: "-") || character == UInt8(ascii: "\t") {
                continue
            }
            guard let value = Self.symbolValue(character) else { throw .invalidCharacter(position: position) }
            symbols.append(value)
        }
        let expected = Self.groupLength * (Self.keyGroups + 1)
        guard symbols.count == expected else { throw .wrongLength(characters: symbols.count, expected: expected) }
        var secret = Self.pack(symbols.prefix(Self.groupLength * Self.keyGroups))
        guard secret[18] & 0x03 == 0, Self.checkSymbols(secret) == Array(symbols.suffix(Self.groupLength)) else {
            wipeBytes(&secret)
            throw .checkFailed
        }
        self.secret = secret
    }

    /// The key as shown to the user: seven dash-separated groups of five lower-case characters (ASCII bytes).
    package func formatted() -> [UInt8] {
        var symbols = Self.unpack(secret) + Self.checkSymbols(secret)
        defer { wipeBytes(&symbols) }
        var text: [UInt8] = []
        text.reserveCapacity(symbols.count + Self.keyGroups)
        for (index, symbol) in symbols.enumerated() {
            if index > 0 && index % Self.groupLength == 0 { text.append(UInt8(ascii: "-")) }
            text.append(Self.alphabet[Int(symbol)])
        }
        return text
    }

    /// Overwrites the key's bytes with zeros.
    package mutating func wipe() {
        wipeBytes(&secret)
    }

    /// The 5-bit value of a typed character, nil for one outside the alphabet and its aliases.
    static func symbolValue(_ character: UInt8) -> UInt8? {
        var lower = character
        if lower >= UInt8(ascii: "A") && lower <= UInt8(ascii: "Z") { lower += 32 }
        switch lower {
        case UInt8(ascii: "o"): lower = UInt8(ascii: "0")
        case UInt8(ascii: "i"), UInt8(ascii: "l"): lower = UInt8(ascii: "1")
        default: break
        }
        return alphabet.firstIndex(of: lower).map(UInt8.init)
    }

    /// 30 five-bit symbols as 19 bytes (the last 2 bits zero).
    static func pack(_ symbols: ArraySlice<UInt8>) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 19)
        for (index, symbol) in symbols.enumerated() {
            for bit in 0..<5 where symbol & (0x10 >> bit) != 0 {
                let position = index * 5 + bit
                bytes[position / 8] |= 0x80 >> UInt8(position % 8)
            }
        }
        return bytes
    }

    /// 19 bytes as 30 five-bit symbols.
    static func unpack(_ bytes: [UInt8]) -> [UInt8] {
        (0..<randomBits / 5).map { index in
            (0..<5).reduce(UInt8(0)) { symbol, bit in
                let position = index * 5 + bit
                let set = bytes[position / 8] & (0x80 >> UInt8(position % 8)) != 0
                return symbol << 1 | (set ? 1 : 0)
            }
        }
    }

    /// The check group: the first 25 bits of SHA-256 over a label and the key, as five symbols.
    static func checkSymbols(_ secret: [UInt8]) -> [UInt8] {
        var input = Array("latchkey recovery key v1\0".utf8) + secret
        defer { wipeBytes(&input) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &length, EVP_sha256(), nil)
        let bits = UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])
        return (0..<5).map { UInt8((bits >> (27 - 5 * UInt32($0))) & 0x1F) }
    }
}

/// Why a typed recovery key was not accepted.
package enum RecoveryKeyError: Error, Equatable, CustomStringConvertible {
    /// A character that is not in the alphabet (0-based position in what was typed).
    case invalidCharacter(position: Int)
    /// Too few or too many characters (separators not counted).
    case wrongLength(characters: Int, expected: Int)
    /// The check group does not match: a character is mistyped or two are swapped.
    case checkFailed
    /// The random generator failed.
    case noRandomness

    /// One line for the user.
    package var description: String {
        switch self {
        case .invalidCharacter(let position): "character \(position + 1) is not part of a recovery key"
        case .wrongLength(let characters, let expected):
            "a recovery key has \(expected) characters, this has \(characters)"
        case .checkFailed: "this recovery key has a typo (its check group does not match)"
        case .noRandomness: "no randomness for a recovery key"
        }
    }
}
