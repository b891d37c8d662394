import FoundationEssentials

/// One item as a search or an add returns it: always its reference, and its
/// attributes and secret when they were asked for.
public struct KeychainItem: Hashable, Sendable {
    /// The lasting reference to the item.
    public let reference: ItemReference
    /// The attributes, including the store-set dates, when asked for.
    public let attributes: ItemAttributes?
    /// The secret, when asked for (nil also for an item stored without one).
    public let secret: Data?

    /// An item as found or added.
    public init(reference: ItemReference, attributes: ItemAttributes?, secret: Data?) {
        self.reference = reference
        self.attributes = attributes
        self.secret = secret
    }

    /// The item's class.
    public var itemClass: ItemClass { reference.itemClass }
}
