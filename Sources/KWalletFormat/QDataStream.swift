import Posix

/// Reads Qt's `QDataStream` encoding (version 5 and later, big-endian), as kwalletd and its clients write it:
/// integers, `QByteArray` (a uint32 length, `0xFFFFFFFF` for the null array, then the bytes), `QString` (a
/// uint32 length in bytes, `0xFFFFFFFF` for the null string, then UTF-16BE) and `QMap<QString,QString>` (a
/// uint32 count, then key/value pairs). Every length is checked against what is left before it is used.
/// It reads bytes it does not own: use it within the scope of the buffer (a ``SecretBytes``'
/// `withUnsafeBytes`).
package struct QDataStreamReader {
    private let bytes: UnsafeRawBufferPointer
    /// Where the next value starts.
    package private(set) var offset = 0

    /// A reader at the start of `bytes`.
    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Whether every byte has been read.
    package var isAtEnd: Bool { offset == bytes.count }
    /// How many bytes are left.
    package var remaining: Int { bytes.count - offset }

    /// The next `count` bytes.
    package mutating func bytes(_ count: Int, _ what: String) throws(KWalletFormatError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw .truncated(what) }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    /// A big-endian uint32.
    package mutating func uint32(_ what: String) throws(KWalletFormatError) -> UInt32 {
        try bytes(4, what).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// A big-endian int32.
    package mutating func int32(_ what: String) throws(KWalletFormatError) -> Int32 {
        Int32(bitPattern: try uint32(what))
    }

    /// A `QByteArray`'s bytes; nil for the null array.
    package mutating func byteArray(_ what: String) throws(KWalletFormatError) -> UnsafeRawBufferPointer? {
        let length = try uint32(what)
        if length == QDataStreamWriter.nullLength { return nil }
        guard Int(length) <= remaining else { throw .tooLarge(what) }
        return try bytes(Int(length), what)
    }

    /// A `QString`'s UTF-16BE bytes; nil for the null string.
    package mutating func stringUTF16(_ what: String) throws(KWalletFormatError) -> UnsafeRawBufferPointer? {
        guard let utf16 = try byteArray(what) else { return nil }
        guard utf16.count % 2 == 0 else { throw .badText(what) }
        return utf16
    }

    /// A `QString` that names something (a folder, a key): not a secret. The null string reads as nil.
    package mutating func string(_ what: String) throws(KWalletFormatError) -> String? {
        guard let utf16 = try stringUTF16(what) else { return nil }
        guard let text = String(validating: QText.units(ofUTF16BE: utf16), as: UTF16.self) else {
            throw .badText(what)
        }
        return text
    }

    /// A `QString` that may be a secret (a password, a map's value), as UTF-8 appended to `output` (which
    /// grows as needed); the null string appends nothing and answers false.
    package mutating func appendString(_ what: String, asUTF8 output: inout SecretBytes) throws(KWalletFormatError)
        -> Bool
    {
        guard let utf16 = try stringUTF16(what) else { return false }
        try QText.appendUTF8(ofUTF16BE: utf16, to: &output, what)
        return true
    }
}

/// Writes Qt's `QDataStream` encoding into secure memory (the counterpart of ``QDataStreamReader``).
package struct QDataStreamWriter: ~Copyable {
    /// The length that stands for a null `QByteArray` or `QString`.
    package static let nullLength: UInt32 = 0xFFFF_FFFF
    /// What has been written.
    package private(set) var bytes: SecretBytes

    /// An empty stream with room for `capacity` bytes (it grows as needed).
    package init(capacity: Int = 64) throws(KWalletFormatError) {
        bytes = try secureBuffer(capacity: capacity)
    }

    /// The bytes written, taking them.
    package consuming func finish() -> SecretBytes { bytes }

    private mutating func reserve(_ count: Int) throws(KWalletFormatError) {
        do { try bytes.reserveCapacity(forAppending: count) } catch { throw .outOfMemory }
    }

    /// A big-endian uint32.
    package mutating func uint32(_ value: UInt32) throws(KWalletFormatError) {
        try reserve(4)
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    /// A big-endian int32.
    package mutating func int32(_ value: Int32) throws(KWalletFormatError) { try uint32(UInt32(bitPattern: value)) }

    /// A `QByteArray` of `value`; nil writes the null array.
    package mutating func byteArray(_ value: UnsafeRawBufferPointer?) throws(KWalletFormatError) {
        guard let value else { return try uint32(Self.nullLength) }
        guard value.count < Int(Self.nullLength) else { throw .tooLarge("byte array") }
        try uint32(UInt32(value.count))
        try reserve(value.count)
        bytes.append(value)
    }

    /// A `QString` of UTF-8 `text` (checked); nil writes the null string.
    package mutating func string(utf8 text: UnsafeRawBufferPointer?, _ what: String) throws(KWalletFormatError) {
        guard let text else { return try uint32(Self.nullLength) }
        var utf16 = try QText.utf16BE(ofUTF8: text, what)
        try utf16.withUnsafeBytes { (encoded) throws(KWalletFormatError) in try byteArray(encoded) }
        utf16.truncate(to: 0)
    }

    /// A `QString` of a name (not a secret).
    package mutating func string(_ text: String) throws(KWalletFormatError) {
        var copy = text
        var failure: KWalletFormatError?
        copy.withUTF8 { utf8 in
            do throws(KWalletFormatError) {
                try string(utf8: UnsafeRawBufferPointer(utf8), "name")
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }
}

/// Converting text between UTF-8 and Qt's UTF-16BE without a `String` in between (the text may be a secret).
package enum QText {
    /// The UTF-16 code units of big-endian bytes (an even count).
    static func units(ofUTF16BE bytes: UnsafeRawBufferPointer) -> some Sequence<UInt16> {
        stride(from: 0, to: bytes.count - 1, by: 2).lazy.map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
    }

    /// Appends the UTF-8 of UTF-16BE `bytes` to `output`, growing it; ill-formed UTF-16 (a lone surrogate)
    /// throws `badText(what)`.
    package static func appendUTF8(
        ofUTF16BE bytes: UnsafeRawBufferPointer, to output: inout SecretBytes, _ what: String
    ) throws(KWalletFormatError) {
        // A UTF-16 unit becomes at most three UTF-8 bytes (a surrogate pair, two units, four).
        do { try output.reserveCapacity(forAppending: bytes.count / 2 * 3) } catch { throw .outOfMemory }
        let failed = transcode(
            units(ofUTF16BE: bytes).makeIterator(), from: UTF16.self, to: UTF8.self, stoppingOnError: true
        ) { output.append($0) }
        if failed { throw .badText(what) }
    }

    /// The UTF-16BE of UTF-8 `text`; ill-formed UTF-8 throws `badText(what)`.
    package static func utf16BE(ofUTF8 text: UnsafeRawBufferPointer, _ what: String) throws(KWalletFormatError)
        -> SecretBytes
    {
        // A UTF-8 byte becomes at most two UTF-16 bytes.
        var output = try secureBuffer(capacity: 2 * text.count)
        let failed = transcode(text.makeIterator(), from: UTF8.self, to: UTF16.self, stoppingOnError: true) {
            output.append(UInt8(truncatingIfNeeded: $0 >> 8))
            output.append(UInt8(truncatingIfNeeded: $0))
        }
        if failed {
            output.truncate(to: 0)
            throw .badText(what)
        }
        return output
    }
}
