import FoundationEssentials
import KeychainCore

/// The plaintext layout of an item's attributes before sealing: a version
/// byte, then for each attribute in name order its name length (1 byte), the
/// name, the kind (1 byte) and the value (text and bytes with a 4-byte
/// big-endian length, numbers as 8 bytes, dates as the 8-byte IEEE bits of
/// seconds since 2001, flags as 1 byte). See docs/file-format.md.
enum AttributeCodec {
    static let version: UInt8 = 1

    static func encode(_ attributes: ItemAttributes) -> Data {
        var out: [UInt8] = [version]
        out.reserveCapacity(64 * attributes.count)
        for key in attributes.keys.sorted() {
            guard let value = attributes[key] else { continue }
            let name = Array(key.rawValue.utf8.prefix(255))
            out.append(UInt8(name.count))
            out.append(contentsOf: name)
            out.append(value.kind.rawValue)
            switch value {
            case .string(let text): appendBlob(Array(text.utf8), to: &out)
            case .data(let data): appendBlob(Array(data), to: &out)
            case .number, .date, .bool: value.appendCanonicalBytes(to: &out)
            }
        }
        return Data(out)
    }

    static func decode(_ data: Data) throws(KeychainError) -> ItemAttributes {
        var reader = ByteReader(bytes: [UInt8](data))
        guard try reader.byte() == version else {
            throw KeychainError(.decode, "unknown attribute encoding version")
        }
        var attributes: ItemAttributes = [:]
        while !reader.isAtEnd {
            let nameLength = Int(try reader.byte())
            guard let name = String(bytes: try reader.take(nameLength), encoding: .utf8) else {
                throw KeychainError(.decode, "attribute name is not UTF-8")
            }
            guard let kind = AttributeKind(rawValue: try reader.byte()) else {
                throw KeychainError(.decode, "unknown attribute kind")
            }
            let value: AttributeValue
            switch kind {
            case .string:
                guard let text = String(bytes: try reader.blob(), encoding: .utf8) else {
                    throw KeychainError(.decode, "attribute text is not UTF-8")
                }
                value = .string(text)
            case .data: value = .data(Data(try reader.blob()))
            case .number: value = .number(Int64(bitPattern: try reader.uint64()))
            case .date:
                value = .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.uint64())))
            case .bool: value = .bool(try reader.byte() != 0)
            }
            attributes[AttributeKey(rawValue: name)] = value
        }
        return attributes
    }

    private static func appendBlob(_ bytes: [UInt8], to out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { out.append(contentsOf: $0) }
        out.append(contentsOf: bytes)
    }
}

/// Reads bytes front to back, failing with `errSecDecode` past the end.
private struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    mutating func take(_ count: Int) throws(KeychainError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= bytes.count - offset else {
            throw KeychainError(.decode, "attribute data ends early")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func byte() throws(KeychainError) -> UInt8 {
        try take(1).first ?? 0
    }

    mutating func uint64() throws(KeychainError) -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func blob() throws(KeychainError) -> ArraySlice<UInt8> {
        let length = try take(4).reduce(0) { $0 << 8 | Int($1) }
        return try take(length)
    }
}
