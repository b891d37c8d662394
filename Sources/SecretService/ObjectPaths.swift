import DBus
import FoundationEssentials
import KeychainCore

/// The object paths of the Secret Service and how item paths encode store references.
enum ObjectPaths {
    static let service = "/org/freedesktop/secrets"
    static let collectionPrefix = "/org/freedesktop/secrets/collection/"
    static let aliasPrefix = "/org/freedesktop/secrets/aliases/"
    static let sessionPrefix = "/org/freedesktop/secrets/session/"
    static let promptPrefix = "/org/freedesktop/secrets/prompt/"
    /// The "no object" path.
    static let none = "/"

    static func collection(_ id: String) -> String { collectionPrefix + id }

    /// An item's path: its collection's path, then the class code and the hex identifier.
    static func item(_ reference: ItemReference, in collectionID: String) -> String {
        collection(collectionID) + "/" + reference.itemClass.rawValue + reference.hexIdentifier
    }

    /// The store reference an item path element names, if it is one.
    static func reference(fromElement element: Substring) -> ItemReference? {
        guard element.count == 36, let itemClass = ItemClass(rawValue: String(element.prefix(4))) else { return nil }
        var bytes: [UInt8] = []
        var hex = element.dropFirst(4)
        while !hex.isEmpty {
            guard let byte = UInt8(hex.prefix(2), radix: 16) else { return nil }
            bytes.append(byte)
            hex = hex.dropFirst(2)
        }
        return ItemReference(itemClass: itemClass, identifier: Data(bytes))
    }
}
