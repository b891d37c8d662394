import Posix

/// Bech32 (BIP 173) as age uses it: no length limit, all lowercase or all uppercase, the checksum computed
/// over the lowercase string. Works on bytes lent from secret memory, since an identity is a secret: the
/// 5-bit groups and the decoded bytes of a key are written only to ``SecretBytes``.
enum Bech32 {
    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]

    /// The 5-bit value of the lowercase Bech32 character `character`, nil for any other.
    private static func value(of character: UInt8) -> UInt8? {
        charset.firstIndex(of: character).map { UInt8($0) }
    }

    /// One step of the checksum's polynomial.
    private static func step(_ checksum: UInt32, _ value: UInt8) -> UInt32 {
        let top = checksum >> 25
        var next = (checksum & 0x1FF_FFFF) << 5 ^ UInt32(value)
        for index in 0..<5 where top >> UInt32(index) & 1 == 1 { next ^= generator[index] }
        return next
    }

    /// The checksum state after the human-readable part (lowercase).
    private static func start(_ humanReadablePart: some Collection<UInt8>) -> UInt32 {
        var checksum: UInt32 = 1
        for character in humanReadablePart { checksum = step(checksum, character >> 5) }
        checksum = step(checksum, 0)
        for character in humanReadablePart { checksum = step(checksum, character & 31) }
        return checksum
    }

    /// Why a string is no Bech32 of the expected part and length.
    enum Failure: Error, Equatable {
        /// Upper and lower case mixed, a character outside the charset, no separator, too short.
        case malformed
        /// The checksum does not match: a character was mistyped.
        case checksum
        /// Another human-readable part than the one expected (it is given, lowercased).
        case otherPrefix([UInt8])
        /// Not a whole number of bytes, or not the expected number.
        case length
    }

    /// Decodes `text`, whose human-readable part must be `expected` (lowercase, compared without case), into
    /// exactly `length` bytes of secret memory.
    static func decode(_ text: UnsafeRawBufferPointer, expected: String, length: Int) throws(Failure) -> SecretBytes {
        let hasLower = text.contains { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }
        let hasUpper = text.contains { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        guard !(hasLower && hasUpper), text.allSatisfy({ (33...126).contains($0) }),
            let separator = text.lastIndex(of: UInt8(ascii: "1")), separator >= 1, text.count - separator - 1 >= 6
        else { throw .malformed }
        let lower = { (byte: UInt8) in (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte }
        let prefix = text[..<separator].map(lower)
        guard prefix.elementsEqual(expected.utf8) else {
            // The prefix of a key is no secret: it names the kind of key.
            throw .otherPrefix(prefix)
        }
        let dataCount = text.count - separator - 1 - 6
        guard dataCount * 5 / 8 == length, dataCount * 5 - length * 8 < 5 else { throw .length }
        var checksum = start(prefix)
        var output: SecretBytes
        do throws(SecretMemoryError) {
            output = try SecretBytes(zeros: length)
        } catch {
            throw .malformed
        }
        var accumulator: UInt32 = 0
        var bits = 0
        var written = 0
        var malformed = false
        output.withUnsafeMutableBytes { out in
            for position in (separator + 1)..<text.count {
                guard let value = value(of: lower(text[position])) else {
                    malformed = true
                    break
                }
                checksum = step(checksum, value)
                guard position < text.count - 6 else { continue }
                accumulator = (accumulator << 5 | UInt32(value)) & 0xFFF
                bits += 5
                if bits >= 8 {
                    bits -= 8
                    out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                    written += 1
                }
            }
        }
        let padding = accumulator & ((1 << UInt32(bits)) - 1)
        accumulator = 0
        guard !malformed else { throw .malformed }
        guard checksum == 1 else { throw .checksum }
        // The bits left over must be zero: one encoding per key.
        guard written == length, padding == 0 else { throw .length }
        return output
    }

    /// `data` in Bech32 with the human-readable part `prefix` (lowercase), in upper case when `uppercase`, into
    /// secret memory.
    static func encode(_ data: UnsafeRawBufferPointer, prefix: String, uppercase: Bool) throws(SecretMemoryError)
        -> SecretBytes
    {
        let prefixBytes = Array(prefix.utf8)
        let groups = (data.count * 8 + 4) / 5
        var output = try SecretBytes(capacity: prefixBytes.count + 1 + groups + 6)
        let caseOf = { (byte: UInt8) in
            uppercase && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) ? byte & ~0x20 : byte
        }
        for byte in prefixBytes { output.append(caseOf(byte)) }
        output.append(UInt8(ascii: "1"))
        var checksum = start(prefixBytes)
        var accumulator: UInt32 = 0
        var bits = 0
        // 5-bit groups, most significant first, the last padded with zero bits.
        for byte in data {
            accumulator = (accumulator << 8 | UInt32(byte)) & 0xFFF
            bits += 8
            while bits >= 5 {
                bits -= 5
                let value = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits) & 31)
                checksum = step(checksum, value)
                output.append(caseOf(charset[Int(value)]))
            }
        }
        if bits > 0 {
            let value = UInt8(truncatingIfNeeded: accumulator << UInt32(5 - bits) & 31)
            checksum = step(checksum, value)
            output.append(caseOf(charset[Int(value)]))
        }
        accumulator = 0
        for _ in 0..<6 { checksum = step(checksum, 0) }
        checksum ^= 1
        for index in 0..<6 {
            output.append(caseOf(charset[Int(checksum >> UInt32(5 * (5 - index)) & 31)]))
        }
        return output
    }
}
