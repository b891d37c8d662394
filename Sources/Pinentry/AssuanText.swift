import Glibc
import Posix

/// Line-level encoding of the Assuan protocol: percent escapes, the line length limit, and zeroing secrets.
enum AssuanText {
    /// The longest line either side may send, newline included.
    static let maxLineLength = 1000

    /// `command text` with the text percent-escaped, newline included. `%`, backslash and control characters are
    /// escaped; text that would make the line longer than `maxLineLength` is cut off at a character boundary.
    static func commandLine(_ command: String, text: String) -> [UInt8] {
        var line = Array(command.utf8) + [UInt8(ascii: " ")]
        for character in text {
            var escaped: [UInt8] = []
            for byte in character.utf8 {
                if byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "\\") {
                    escaped += [UInt8(ascii: "%"), hexDigit(byte >> 4), hexDigit(byte & 0xF)]
                } else {
                    escaped.append(byte)
                }
            }
            guard line.count + escaped.count < maxLineLength else { break }
            line += escaped
        }
        return line + [UInt8(ascii: "\n")]
    }

    /// Decodes `%XX` escapes in `bytes`; a `%` not followed by two hex digits is kept as it is.
    static func unescape(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        forEachUnescaped(bytes) { result.append($0) }
        return result
    }

    /// Decodes `bytes` (percent escapes) and appends them to `secret`, which grows in secret memory when they
    /// do not fit (``SecretBytes/reserveCapacity(forAppending:)``): the decoded bytes exist nowhere else.
    static func unescape(_ bytes: ArraySlice<UInt8>, appendingTo secret: inout SecretBytes)
        throws(SecretMemoryError)
    {
        // Decoded, the bytes are never longer than encoded.
        try secret.reserveCapacity(forAppending: bytes.count)
        forEachUnescaped(bytes) { secret.append($0) }
    }

    /// Hands each byte `bytes` decodes to (`%XX` escapes decoded, a `%` not followed by two hex digits kept) to
    /// `emit`, in order.
    private static func forEachUnescaped(_ bytes: ArraySlice<UInt8>, _ emit: (UInt8) -> Void) {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.endIndex,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                emit(high << 4 | low)
                index += 3
            } else {
                emit(bytes[index])
                index += 1
            }
        }
    }

    /// Appends `bytes` to `buffer`, moving to a larger buffer by hand so the old storage is zeroed, not just freed.
    static func append(_ bytes: [UInt8], to buffer: inout [UInt8]) {
        if buffer.count + bytes.count > buffer.capacity {
            var larger: [UInt8] = []
            larger.reserveCapacity(max(64, 2 * (buffer.count + bytes.count)))
            larger += buffer
            wipe(&buffer)
            buffer = larger
        }
        buffer += bytes
    }

    /// Overwrites every byte of `buffer` with zero, in a way the optimizer keeps, and empties it.
    static func wipe(_ buffer: inout [UInt8]) {
        buffer.withUnsafeMutableBytes { bytes in
            if let base = bytes.baseAddress {
                explicit_bzero(base, bytes.count)
            }
        }
        buffer.removeAll(keepingCapacity: false)
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
