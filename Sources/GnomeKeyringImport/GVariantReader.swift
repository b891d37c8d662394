/// Reads the serialised GVariant values libsecret's file backend writes (GVariant specification,
/// "Serialisation"), with every offset checked against the container it lies in: little-endian
/// numbers, strings ending in one NUL, structures and arrays whose variable-size members are found
/// through framing offsets stored at the container's end (1, 2, 4 or 8 bytes each, by the container's
/// size). Only what the file needs is here: byte strings, strings, `u`, `t`, structures, arrays.
struct GVariantReader {
    /// One member of a structure: its alignment and, for a fixed-size type, its size.
    struct Member {
        var alignment: Int
        var fixedSize: Int?

        static let byte = Member(alignment: 1, fixedSize: 1)
        static let uint32 = Member(alignment: 4, fixedSize: 4)
        static let uint64 = Member(alignment: 8, fixedSize: 8)
        /// A string, an array or a structure holding one (alignment 1 in the file's types).
        static let variable = Member(alignment: 1, fixedSize: nil)
    }

    private let bytes: [UInt8]
    private let path: String
    private let what: String

    /// A reader over `bytes` (from the file at `path`; `what` names the value in errors).
    init(_ bytes: [UInt8], path: String, what: String) {
        self.bytes = bytes
        self.path = path
        self.what = what
    }

    private func damaged(_ detail: String) -> GnomeKeyringError {
        GnomeKeyringError(path, .corrupt("\(what): \(detail)"))
    }

    /// The size of a framing offset in a container of `size` bytes.
    private static func offsetSize(_ size: Int) -> Int {
        switch size {
        case 0: 0
        case ...0xff: 1
        case ...0xffff: 2
        case ...0xffff_ffff: 4
        default: 8
        }
    }

    /// The little-endian number of `width` bytes at `start`.
    private func number(at start: Int, width: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (start..<start + width).reversed() { value = value << 8 | UInt64(bytes[index]) }
        return value
    }

    /// The framing offset of `width` bytes at `start`, as a position in `range` (its start plus the offset).
    private func offset(at start: Int, width: Int, in range: Range<Int>) throws(GnomeKeyringError) -> Int {
        let value = number(at: start, width: width)
        guard value <= UInt64(range.count) else { throw damaged("a framing offset beyond its container") }
        return range.lowerBound + Int(value)
    }

    private static func align(_ position: Int, _ alignment: Int, from start: Int) -> Int {
        let relative = position - start
        return start + (relative + alignment - 1) / alignment * alignment
    }

    /// The ranges of the members of the structure in `range`.
    func structure(_ range: Range<Int>, _ members: [Member]) throws(GnomeKeyringError) -> [Range<Int>] {
        let width = Self.offsetSize(range.count)
        var frameEnd = range.upperBound
        var position = range.lowerBound
        var found: [Range<Int>] = []
        for (index, member) in members.enumerated() {
            position = Self.align(position, member.alignment, from: range.lowerBound)
            let end: Int
            if let size = member.fixedSize {
                end = position + size
            } else if index == members.count - 1 {
                end = frameEnd
            } else {
                frameEnd -= width
                guard width > 0, frameEnd >= position else { throw damaged("a structure's framing is cut") }
                end = try offset(at: frameEnd, width: width, in: range)
            }
            guard position <= end, end <= frameEnd else { throw damaged("a structure member lies outside it") }
            found.append(position..<end)
            position = end
        }
        return found
    }

    /// The ranges of the elements of the array of variable-size elements in `range`.
    func array(_ range: Range<Int>, alignment: Int = 1) throws(GnomeKeyringError) -> [Range<Int>] {
        guard !range.isEmpty else { return [] }
        let width = Self.offsetSize(range.count)
        guard range.count >= width else { throw damaged("an array's framing is cut") }
        let tableStart = try offset(at: range.upperBound - width, width: width, in: range)
        guard tableStart >= range.lowerBound, tableStart <= range.upperBound - width,
            (range.upperBound - tableStart) % width == 0
        else { throw damaged("an array's framing offsets are out of range") }
        var found: [Range<Int>] = []
        var position = range.lowerBound
        for entry in stride(from: tableStart, to: range.upperBound, by: width) {
            position = Self.align(position, alignment, from: range.lowerBound)
            let end = try offset(at: entry, width: width, in: range)
            guard position <= end, end <= tableStart else { throw damaged("an array element lies outside it") }
            found.append(position..<end)
            position = end
        }
        return found
    }

    /// The bytes in `range`.
    func byteString(_ range: Range<Int>) -> ArraySlice<UInt8> { bytes[range] }

    /// The UTF-8 string in `range` (its final NUL dropped; no other NUL allowed).
    func string(_ range: Range<Int>) throws(GnomeKeyringError) -> String {
        guard let last = range.last, bytes[last] == 0 else { throw damaged("a string without its final NUL") }
        let text = bytes[range.lowerBound..<last]
        guard !text.contains(0), let string = String(validating: text, as: UTF8.self) else {
            throw damaged("a string that is not UTF-8 text")
        }
        return string
    }

    /// The little-endian number in `range` (4 or 8 bytes).
    func unsigned(_ range: Range<Int>) throws(GnomeKeyringError) -> UInt64 {
        guard range.count == 4 || range.count == 8 else { throw damaged("a number of \(range.count) bytes") }
        return number(at: range.lowerBound, width: range.count)
    }

    /// The `a{sX}` dictionary in `range`: each entry's key and the range of its value (a variable-size
    /// value: `ay` or `s`).
    func dictionary(_ range: Range<Int>) throws(GnomeKeyringError) -> [(key: String, value: Range<Int>)] {
        var entries: [(key: String, value: Range<Int>)] = []
        for entry in try array(range) {
            let parts = try structure(entry, [.variable, .variable])
            entries.append((try string(parts[0]), parts[1]))
        }
        return entries
    }
}
