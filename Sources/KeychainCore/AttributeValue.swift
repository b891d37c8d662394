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

/// The dates an item may hold: from year 1 to year 9999 (what every face can show: D-Bus's unsigned seconds
/// since 1970 clamp what came before, and an integer of seconds holds the rest). A date outside them comes only
/// from a file (an import) or a damaged row, and is refused at the add (`errSecParam`).
public enum StorableDates {
    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, in seconds since 1970.
    public static let range: ClosedRange<Double> = -62_135_596_800...253_402_300_799

    /// Whether `date` is within ``range``.
    public static func contains(_ date: Date) -> Bool { range.contains(date.timeIntervalSince1970) }

    /// `date`'s whole seconds since 1970, clamped to `0...` for D-Bus's unsigned properties (nothing traps on a
    /// date that is not a number or is out of range).
    public static func unsignedSeconds(_ date: Date) -> UInt64 {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return UInt64(exactly: min(seconds, range.upperBound)) ?? 0
    }

    /// `date`'s whole seconds since 1970, clamped to ``range``.
    public static func seconds(_ date: Date) -> Int64 {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite else { return 0 }
        return Int64(exactly: min(max(seconds, range.lowerBound), range.upperBound)) ?? 0
    }
}
