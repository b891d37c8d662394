import FoundationEssentials

/// An SQL statement with its arguments, written as one interpolated string: every interpolated value becomes
/// a numbered placeholder (`?1`, `?2`, … in the order they appear) and is carried in ``arguments``, to be bound
/// when the statement runs. A value never becomes SQL text, whatever it holds (a text that looks like SQL stays
/// a text); only another `SQL` (``StringInterpolation/appendInterpolation(_:)-(SQL)``) and string literals add
/// text, so the statement reads as what it selects:
///
///     var sql: SQL = "SELECT id FROM items WHERE class = \(itemClass.rawValue)"
///     if let tag { sql += " AND tag = \(tag)" }
///
/// Parts joined with `+=` are numbered as one statement.
struct SQL: ExpressibleByStringInterpolation, Sendable {
    /// One argument, as SQLite stores it.
    enum Value: Equatable, Sendable {
        case null
        case integer(Int64)
        case text(String)
        case blob(Data)
    }

    fileprivate enum Piece: Sendable {
        case text(String)
        case value(Value)
    }

    private var pieces: [Piece]

    /// A statement of fixed text, with no arguments.
    init(stringLiteral text: String) {
        pieces = [.text(text)]
    }

    init(stringInterpolation: StringInterpolation) {
        pieces = stringInterpolation.pieces
    }

    /// The statement's text, each argument a numbered placeholder (`?1` for the first).
    var text: String {
        var text = ""
        var number = 0
        for piece in pieces {
            switch piece {
            case .text(let part): text += part
            case .value:
                number += 1
                text += "?\(number)"
            }
        }
        return text
    }

    /// The arguments, in the order of their placeholders.
    var arguments: [Value] {
        pieces.compactMap {
            if case .value(let value) = $0 { return value }
            return nil
        }
    }

    /// Appends `other`, its arguments numbered after this statement's.
    static func += (statement: inout SQL, other: SQL) {
        statement.pieces += other.pieces
    }

    /// Builds an ``SQL``: literals are text, interpolated values are arguments.
    struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var pieces: [Piece] = []

        init(literalCapacity: Int, interpolationCount: Int) {
            pieces.reserveCapacity(2 * interpolationCount + 1)
        }

        mutating func appendLiteral(_ literal: String) {
            guard !literal.isEmpty else { return }
            pieces.append(.text(literal))
        }

        /// A blob argument (NULL when nil).
        mutating func appendInterpolation(_ value: Data?) {
            pieces.append(.value(value.map(Value.blob) ?? .null))
        }

        /// A text argument.
        mutating func appendInterpolation(_ value: String) {
            pieces.append(.value(.text(value)))
        }

        /// An integer argument.
        mutating func appendInterpolation(_ value: Int64) {
            pieces.append(.value(.integer(value)))
        }

        /// An integer argument.
        mutating func appendInterpolation(_ value: Int) {
            pieces.append(.value(.integer(Int64(value))))
        }

        /// 1 or 0, as the store keeps flags.
        mutating func appendInterpolation(_ value: Bool) {
            pieces.append(.value(.integer(value ? 1 : 0)))
        }

        /// Blob arguments separated by commas, for `IN (…)`.
        mutating func appendInterpolation(list values: [Data]) {
            for (index, value) in values.enumerated() {
                if index > 0 { pieces.append(.text(", ")) }
                pieces.append(.value(.blob(value)))
            }
        }

        /// Text arguments separated by commas, for `IN (…)`.
        mutating func appendInterpolation(list values: [String]) {
            for (index, value) in values.enumerated() {
                if index > 0 { pieces.append(.text(", ")) }
                pieces.append(.value(.text(value)))
            }
        }

        /// Another statement part: its text as text, its arguments as arguments (numbered in place).
        mutating func appendInterpolation(_ part: SQL) {
            pieces += part.pieces
        }
    }
}

extension SQLiteStatement {
    /// Binds `value` to placeholder `index` (1-based).
    func bind(_ index: Int32, _ value: SQL.Value) {
        switch value {
        case .null: bind(index, nil as Data?)
        case .integer(let integer): bind(index, integer)
        case .text(let text): bind(index, text)
        case .blob(let blob): bind(index, blob)
        }
    }
}
