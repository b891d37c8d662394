import FoundationEssentials

/// A lasting reference to one stored item: its class and a random 128-bit
/// identifier given when it was added.
///
/// Its ``persistentData`` is what `kSecReturnPersistentRef` returns and
/// `kSecValuePersistentRef` takes: 4 ASCII bytes of class code then the 16
/// identifier bytes.
public struct ItemReference: Hashable, Sendable, CustomStringConvertible {
    /// The item's class.
    public let itemClass: ItemClass
    /// The item's 16-byte identifier.
    public let identifier: Data

    /// A reference to an item of a class with a 16-byte identifier.
    public init(itemClass: ItemClass, identifier: Data) {
        precondition(identifier.count == 16, "an item identifier has 16 bytes")
        self.itemClass = itemClass
        self.identifier = identifier
    }

    /// Reads a persistent reference; nil if the bytes are not one.
    public init?(persistentData data: Data) {
        guard data.count == 20,
            let code = String(bytes: data.prefix(4), encoding: .ascii),
            let itemClass = ItemClass(rawValue: code)
        else { return nil }
        self.itemClass = itemClass
        self.identifier = Data(data.suffix(16))
    }

    /// The bytes of the persistent reference.
    public var persistentData: Data {
        Data(itemClass.rawValue.utf8) + identifier
    }

    /// The class code and identifier in hexadecimal.
    public var description: String {
        itemClass.rawValue + ":" + hexIdentifier
    }

    /// The identifier as 32 lowercase hexadecimal digits.
    public var hexIdentifier: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(identifier.count * 2)
        for byte in identifier {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
