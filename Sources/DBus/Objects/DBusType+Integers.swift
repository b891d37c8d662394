/// Signed integers (`i`, `x`), as KWallet's handles, results and window ids.
extension Int32: DBusType {
    package static var dbusSignature: String { "i" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .int32(let number) = value else { throw Self.mismatch(value) }
        self = number
    }
    package var dbusValue: DBusValue { .int32(self) }
}

extension Int64: DBusType {
    package static var dbusSignature: String { "x" }
    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .int64(let number) = value else { throw Self.mismatch(value) }
        self = number
    }
    package var dbusValue: DBusValue { .int64(self) }
}
