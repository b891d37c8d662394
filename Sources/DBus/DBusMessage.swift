import CDBus

/// A D-Bus message (a method call, reply, error or signal), reference-counted by libdbus.
package final class DBusMessage: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of one reference to `pointer`.
    init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { dbus_message_unref(pointer) }

    /// A method call to `destination` (nil on a peer-to-peer connection).
    package static func methodCall(
        destination: String?, path: String, interface: String?, member: String, arguments: [DBusValue] = []
    ) throws(DBusError) -> DBusMessage {
        guard DBusNames.isValidObjectPath(path) else { throw DBusError(.invalidArgs, "invalid object path \(path)") }
        guard let raw = dbus_message_new_method_call(destination, path, interface, member) else {
            throw DBusError(.noMemory, "cannot allocate a method call")
        }
        let message = DBusMessage(owning: raw)
        try message.append(arguments)
        return message
    }

    /// A signal from `path`.
    package static func signal(path: String, interface: String, member: String, arguments: [DBusValue] = [])
        throws(DBusError) -> DBusMessage
    {
        guard let raw = dbus_message_new_signal(path, interface, member) else {
            throw DBusError(.noMemory, "cannot allocate a signal")
        }
        let message = DBusMessage(owning: raw)
        try message.append(arguments)
        return message
    }

    /// The successful reply to this method call, carrying `arguments`.
    package func reply(_ arguments: [DBusValue] = []) throws(DBusError) -> DBusMessage {
        guard let raw = dbus_message_new_method_return(pointer) else {
            throw DBusError(.noMemory, "cannot allocate a reply")
        }
        let message = DBusMessage(owning: raw)
        try message.append(arguments)
        return message
    }

    /// The error reply to this method call.
    package func errorReply(_ error: DBusError) -> DBusMessage? {
        dbus_message_new_error(pointer, error.name, error.message).map { DBusMessage(owning: $0) }
    }

    /// Whether this is a method call, reply, error or signal.
    package var kind: Kind {
        Kind(rawValue: dbus_message_get_type(pointer)) ?? .invalid
    }

    /// The message types.
    package enum Kind: Int32, Sendable {
        /// Not a valid type.
        case invalid = 0
        /// A method call.
        case methodCall = 1
        /// A method reply.
        case methodReturn = 2
        /// An error reply.
        case error = 3
        /// A signal.
        case signal = 4
    }

    /// The object path the message is addressed to or sent from.
    package var path: String? { dbus_message_get_path(pointer).map { String(cString: $0) } }
    /// The interface, if given.
    package var interface: String? { dbus_message_get_interface(pointer).map { String(cString: $0) } }
    /// The method or signal name.
    package var member: String? { dbus_message_get_member(pointer).map { String(cString: $0) } }
    /// The unique bus name of the sender.
    package var sender: String? { dbus_message_get_sender(pointer).map { String(cString: $0) } }
    /// The error name of an error reply.
    package var errorName: String? { dbus_message_get_error_name(pointer).map { String(cString: $0) } }
    /// The signature of the arguments.
    package var signature: String { dbus_message_get_signature(pointer).map { String(cString: $0) } ?? "" }
    /// Whether the sender expects no reply.
    package var expectsNoReply: Bool { dbus_message_get_no_reply(pointer) != 0 }

    /// The serial the sender gave this message (0 before it is sent).
    package var serial: UInt32 { dbus_message_get_serial(pointer) }
    /// The serial of the call this message replies to (0 when it is not a reply).
    package var replySerial: UInt32 { dbus_message_get_reply_serial(pointer) }

    /// Stamps what a bus sets on a message it delivers (the sender's unique name and a serial), so that a
    /// handler can be driven in-process, without a bus.
    package func stampAsDelivered(from sender: String, serial: UInt32) {
        dbus_message_set_sender(pointer, sender)
        dbus_message_set_serial(pointer, serial)
    }

    /// Reads every argument.
    package func arguments() throws(DBusError) -> [DBusValue] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(pointer, &iterator) != 0 else { return [] }
        var values: [DBusValue] = []
        repeat {
            values.append(try DBusValueReader.read(&iterator))
        } while dbus_message_iter_next(&iterator) != 0
        return values
    }

    /// Appends arguments after those already in the message.
    package func append(_ arguments: [DBusValue]) throws(DBusError) {
        guard !arguments.isEmpty else { return }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(pointer, &iterator)
        for argument in arguments {
            try DBusValueWriter.write(argument, to: &iterator)
        }
    }
}
