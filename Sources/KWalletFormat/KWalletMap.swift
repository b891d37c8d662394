import Posix

/// A map entry's value in its two forms: on the KWallet wire, a `QDataStream` `QMap<QString,QString>`; in a
/// keychain item, a compact JSON object of strings (as KDE's bridge keeps it). Both are read into and written
/// from secure memory, never through a `String` (a map's values are often passwords), which is why the JSON
/// here is read and written by this file rather than by a JSON library: only an object of string members.
/// Null strings become empty ones, as the bridge makes them.
package enum KWalletMap {
    /// The most pairs one map may hold.
    package static let maximumPairs = 65_536

    /// The `QMap<QString,QString>` bytes of the JSON object `json`, keys in the order Debian 12's KF5 clients
    /// write a `QMap`: ascending by UTF-16 code units (Qt 5.15 built without its deprecated API writes the Qt 6
    /// way; docs/kwallet.md, "Checked against kwalletd5 5.103").
    package static func wire(ofJSON json: UnsafeRawBufferPointer) throws(KWalletFormatError) -> SecretBytes {
        var pairs = try MapPairs(json: json)
        defer { pairs.wipe() }
        let order = try pairs.orderByUTF16()
        var writer = try QDataStreamWriter(capacity: 4 + 2 * json.count)
        try writer.uint32(UInt32(order.count))
        for index in order {
            try pairs.withPair(index) { (key, value) throws(KWalletFormatError) in
                try writer.string(utf8: key, "map key")
                try writer.string(utf8: value, "map value")
            }
        }
        return writer.finish()
    }

    /// The compact JSON object of the `QMap<QString,QString>` bytes `wire`, keys in ascending order; a key
    /// given twice keeps its first value.
    package static func json(ofWire wire: UnsafeRawBufferPointer) throws(KWalletFormatError) -> SecretBytes {
        var pairs = try MapPairs(wire: wire)
        defer { pairs.wipe() }
        let order = try pairs.orderByUTF16()
        var json = try secureBuffer(capacity: 2 + 6 * pairs.storageCount + 6 * order.count)
        json.append(UInt8(ascii: "{"))
        for (position, index) in order.enumerated() {
            if position > 0 { json.append(UInt8(ascii: ",")) }
            pairs.withPair(index) { key, value in
                appendJSONString(key, to: &json)
                json.append(UInt8(ascii: ":"))
                appendJSONString(value, to: &json)
            }
        }
        json.append(UInt8(ascii: "}"))
        return json
    }

    /// Appends `text` as a JSON string; `json` has room (six bytes per byte of text at most, plus quotes).
    private static func appendJSONString(_ text: UnsafeRawBufferPointer, to json: inout SecretBytes) {
        json.append(UInt8(ascii: "\""))
        for byte in text {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                json.append(UInt8(ascii: "\\"))
                json.append(byte)
            case 0x08: appendEscape("b", to: &json)
            case 0x0C: appendEscape("f", to: &json)
            case 0x0A: appendEscape("n", to: &json)
            case 0x0D: appendEscape("r", to: &json)
            case 0x09: appendEscape("t", to: &json)
            case 0..<0x20:
                for character in "\\u00".utf8 { json.append(character) }
                json.append(hexDigit(byte >> 4))
                json.append(hexDigit(byte & 0xF))
            default: json.append(byte)
            }
        }
        json.append(UInt8(ascii: "\""))
    }

    private static func appendEscape(_ letter: Unicode.Scalar, to json: inout SecretBytes) {
        json.append(UInt8(ascii: "\\"))
        json.append(UInt8(ascii: letter))
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}

/// A map's pairs as UTF-8, in one secure buffer with the ranges of each key and value.
private struct MapPairs: ~Copyable {
    var storage: SecretBytes
    var ranges: [(key: Range<Int>, value: Range<Int>)]

    init(storage: consuming SecretBytes, ranges: [(key: Range<Int>, value: Range<Int>)]) {
        self.storage = storage
        self.ranges = ranges
    }

    var storageCount: Int { storage.count }

    /// The pairs of a `QMap<QString,QString>`.
    init(wire: UnsafeRawBufferPointer) throws(KWalletFormatError) {
        var ranges: [(key: Range<Int>, value: Range<Int>)] = []
        var storage = try secureBuffer(capacity: wire.count * 3 / 2 + 16)
        var reader = QDataStreamReader(wire)
        let count = try reader.uint32("map size")
        // Each pair takes at least eight bytes.
        guard count <= KWalletMap.maximumPairs, Int(count) * 8 <= reader.remaining else { throw .tooLarge("map") }
        var keys: Set<[UInt8]> = []
        for _ in 0..<count {
            let keyStart = storage.count
            _ = try reader.appendString("map key", asUTF8: &storage)
            let valueStart = storage.count
            _ = try reader.appendString("map value", asUTF8: &storage)
            let key = storage.withUnsafeBytes { Array($0[keyStart..<valueStart]) }
            if keys.insert(key).inserted {
                ranges.append((keyStart..<valueStart, valueStart..<storage.count))
            } else {
                storage.truncate(to: keyStart)
            }
        }
        guard reader.isAtEnd else { throw .trailingBytes("map") }
        self.init(storage: storage, ranges: ranges)
    }

    /// The pairs of a JSON object whose members are all strings.
    init(json: UnsafeRawBufferPointer) throws(KWalletFormatError) {
        var ranges: [(key: Range<Int>, value: Range<Int>)] = []
        var storage = try secureBuffer(capacity: json.count + 16)
        var reader = JSONObjectReader(json)
        var keys: Set<[UInt8]> = []
        try reader.expect(UInt8(ascii: "{"))
        if !reader.take(UInt8(ascii: "}")) {
            repeat {
                guard ranges.count < KWalletMap.maximumPairs else { throw .tooLarge("map") }
                let keyStart = storage.count
                try reader.string(into: &storage)
                try reader.expect(UInt8(ascii: ":"))
                let valueStart = storage.count
                try reader.string(into: &storage)
                let key = storage.withUnsafeBytes { Array($0[keyStart..<valueStart]) }
                if keys.insert(key).inserted {
                    ranges.append((keyStart..<valueStart, valueStart..<storage.count))
                } else {
                    storage.truncate(to: keyStart)
                }
            } while reader.take(UInt8(ascii: ","))
            try reader.expect(UInt8(ascii: "}"))
        }
        guard reader.isAtEnd else { throw .badJSON }
        self.init(storage: storage, ranges: ranges)
    }

    /// The pair at `index`, lent.
    func withPair<R, E: Error>(
        _ index: Int, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        let (key, value) = ranges[index]
        return try storage.withUnsafeBytes { (bytes) throws(E) in
            try body(UnsafeRawBufferPointer(rebasing: bytes[key]), UnsafeRawBufferPointer(rebasing: bytes[value]))
        }
    }

    /// The pair indices in ascending order of their keys' UTF-16 code units (QString's order).
    func orderByUTF16() throws(KWalletFormatError) -> [Int] {
        var keys: [[UInt16]] = []
        for index in ranges.indices {
            let key = withPair(index) { key, _ in key }
            guard let units = String(validating: key, as: UTF8.self) else { throw .badText("map key") }
            keys.append(Array(units.utf16))
        }
        return ranges.indices.sorted { keys[$0].lexicographicallyPrecedes(keys[$1]) }
    }

    mutating func wipe() { storage.truncate(to: 0) }
}

/// Reads a JSON object of string members from UTF-8 bytes, unescaping the strings into secure memory.
private struct JSONObjectReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool {
        mutating get {
            skipSpace()
            return offset == bytes.count
        }
    }

    mutating func skipSpace() {
        while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
    }

    /// Takes `byte` (after white space) if it comes next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard offset < bytes.count, bytes[offset] == byte else { return false }
        offset += 1
        return true
    }

    mutating func expect(_ byte: UInt8) throws(KWalletFormatError) {
        guard take(byte) else { throw .badJSON }
    }

    /// A JSON string, unescaped, appended as UTF-8 to `output` (which grows as needed).
    mutating func string(into output: inout SecretBytes) throws(KWalletFormatError) {
        try expect(UInt8(ascii: "\""))
        while true {
            guard offset < bytes.count else { throw .badJSON }
            let byte = bytes[offset]
            offset += 1
            do { try output.reserveCapacity(forAppending: 4) } catch { throw .outOfMemory }
            switch byte {
            case UInt8(ascii: "\""): return
            case 0..<0x20: throw .badJSON
            case UInt8(ascii: "\\"): try escape(into: &output)
            default: output.append(byte)
            }
        }
    }

    private mutating func escape(into output: inout SecretBytes) throws(KWalletFormatError) {
        guard offset < bytes.count else { throw .badJSON }
        let letter = bytes[offset]
        offset += 1
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(letter)
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hexUnit())
            if (0xD800..<0xDC00).contains(scalar) {
                guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")) else { throw .badJSON }
                let low = UInt32(try hexUnit())
                guard (0xDC00..<0xE000).contains(low) else { throw .badJSON }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let character = Unicode.Scalar(scalar) else { throw .badJSON }
            if let encoded = UTF8.encode(character) { for unit in encoded { output.append(unit) } }
        default: throw .badJSON
        }
    }

    private mutating func hexUnit() throws(KWalletFormatError) -> UInt16 {
        guard offset + 4 <= bytes.count else { throw .badJSON }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[offset]
            offset += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw .badJSON
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }
}
