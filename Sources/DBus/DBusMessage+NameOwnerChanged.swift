/// A change of owner of a bus name, as the bus itself announces it.
package struct NameOwnerChange: Equatable, Sendable {
    /// The name (well-known, or a unique name when a connection comes or goes).
    package let name: String
    /// Its owner before; empty when nobody owned it.
    package let oldOwner: String
    /// Its owner now; empty when nobody owns it.
    package let newOwner: String
}

extension DBusMessage {
    /// The bus's `NameOwnerChanged` this message is; nil for any other message, and for the same signal sent
    /// by anyone but the bus (a client may send a signal straight to a connection, and match rules do not
    /// filter those).
    package var nameOwnerChange: NameOwnerChange? {
        guard kind == .signal, sender == "org.freedesktop.DBus", interface == "org.freedesktop.DBus",
            member == "NameOwnerChanged", let arguments = try? arguments(), arguments.count == 3,
            case .string(let name) = arguments[0], case .string(let oldOwner) = arguments[1],
            case .string(let newOwner) = arguments[2]
        else { return nil }
        return NameOwnerChange(name: name, oldOwner: oldOwner, newOwner: newOwner)
    }
}
