/// Reads gnome-keyring's binary fields from a byte array: big-endian 32-bit numbers, times as two
/// of them, and length-prefixed strings and byte arrays where 0xffffffff stands for "none".
///
/// Every length is checked against the bytes that are left before anything is copied, so a
/// damaged or hostile length can never make the reader allocate more than the file holds.
struct ByteReader {
    private let bytes: [UInt8]
    private let path: String
    /// Where the next field starts.
    private(set) var offset: Int

    /// A reader over `bytes` (from the file at `path`, for errors), starting at `offset`.
    init(_ bytes: [UInt8], path: String, offset: Int = 0) {
        self.bytes = bytes
        self.path = path
        self.offset = offset
    }

    /// How many bytes are left.
    var remaining: Int { bytes.count - offset }

    /// The next `count` bytes.
    mutating func bytes(_ count: Int, _ what: String) throws(GnomeKeyringError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw GnomeKeyringError(path, .truncated(what)) }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// One byte.
    mutating func byte(_ what: String) throws(GnomeKeyringError) -> UInt8 {
        let slice = try bytes(1, what)
        return slice[slice.startIndex]
    }

    /// A big-endian 32-bit number.
    mutating func uint32(_ what: String) throws(GnomeKeyringError) -> UInt32 {
        try bytes(4, what).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// A time: two 32-bit numbers, the high half first; Unix seconds.
    mutating func time(_ what: String) throws(GnomeKeyringError) -> UInt64 {
        let high = UInt64(try uint32(what))
        return high << 32 | UInt64(try uint32(what))
    }

    /// A length-prefixed byte array; nil for the "none" length 0xffffffff.
    mutating func byteArray(_ what: String) throws(GnomeKeyringError) -> ArraySlice<UInt8>? {
        let length = try uint32(what)
        if length == 0xffff_ffff { return nil }
        guard length < 0x7fff_ffff else { throw GnomeKeyringError(path, .corrupt("\(what) has length \(length)")) }
        return try bytes(Int(length), what)
    }

    /// A length-prefixed UTF-8 string without NUL bytes; nil for "none".
    mutating func string(_ what: String) throws(GnomeKeyringError) -> String? {
        guard let raw = try byteArray(what) else { return nil }
        guard !raw.contains(0), let text = String(validating: raw, as: UTF8.self) else {
            throw GnomeKeyringError(path, .corrupt("\(what) is not UTF-8 text"))
        }
        return text
    }
}
