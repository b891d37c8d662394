import FoundationEssentials

/// The value of one item attribute.
public enum AttributeValue: Hashable, Sendable {
    /// Text.
    case string(String)
    /// Bytes.
    case data(Data)
    /// An integer.
    case number(Int64)
    /// A date.
    case date(Date)
    /// A flag.
    case bool(Bool)

    /// The kind of this value.
    public var kind: AttributeKind {
        switch self {
        case .string: .string
        case .data: .data
        case .number: .number
        case .date: .date
        case .bool: .bool
        }
    }
}

/// The attributes of one item, by name.
public typealias ItemAttributes = [AttributeKey: AttributeValue]
