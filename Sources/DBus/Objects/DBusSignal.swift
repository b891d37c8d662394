/// A signal, declared once: its interface, its name and its typed arguments. Its ``declaration`` goes in the
/// interface's `signals` (introspection is written from it), and ``message(path:_:)`` makes the signal from
/// arguments of exactly those types: a misspelt signal or an argument of the wrong type does not compile.
package struct DBusSignal<each Argument: DBusType>: Sendable {
    /// The name, arguments and interface, as introspection shows them.
    package let declaration: DBusSignalDeclaration

    /// The signal `name` of `interface`, carrying `arguments` in order.
    package init(_ interface: String, _ name: String, _ arguments: repeat DBusInput<each Argument>) {
        var described: [DBusArgumentDescription] = []
        for argument in repeat each arguments {
            described.append(DBusArgumentDescription(argument.name, Self.signature(of: argument)))
        }
        declaration = DBusSignalDeclaration(interface: interface, name, described)
    }

    private static func signature<Value: DBusType>(of argument: DBusInput<Value>) -> String {
        Value.dbusSignature
    }

    /// The interface that sends it.
    package var interface: String { declaration.interface }
    /// The signal name.
    package var name: String { declaration.name }

    /// The signal from the object at `path`, carrying `arguments`.
    package func message(path: String, _ arguments: repeat each Argument) throws(DBusError) -> DBusMessage {
        var values: [DBusValue] = []
        for argument in repeat each arguments { values.append(argument.dbusValue) }
        return try DBusMessage.signal(path: path, interface: interface, member: name, arguments: values)
    }
}
