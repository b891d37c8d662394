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

    /// Gives a message about to be sent its serial (libdbus keeps a serial set before sending), so that
    /// the sender can tell its reply among the messages it reads; within the connection's own serials'
    /// reach only if the caller chooses badly.
    package func assignSerial(_ serial: UInt32) {
        dbus_message_set_serial(pointer, serial)
    }

    /// Whether the bus may start the destination's service (its D-Bus activation file) when nobody owns the
    /// name: true by default; false for a call that only concerns a service already running.
    package var startsService: Bool {
        get { dbus_message_get_auto_start(pointer) != 0 }
        set { dbus_message_set_auto_start(pointer, newValue ? 1 : 0) }
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

extension DBusMessage {
    /// How many released messages libdbus keeps for reuse (`MAX_MESSAGE_CACHE_SIZE`), and the largest it keeps
    /// (`MAX_MESSAGE_SIZE_TO_CACHE`, 10 KiB).
    static let libdbusCacheCount = 5
    static let libdbusCacheLargestMessage = 10 * 1024

    /// Scrubs the messages libdbus keeps after their last reference went: up to five of at most 10 KiB, their
    /// header and body buffers left as they were, so what a client sent (a secret, a label, attribute values)
    /// or a reply carried stayed readable for as long as the message sat in the cache. Takes every cached
    /// message out, writes over its body with more than any cached body can hold, and releases it too large to
    /// be cached again, so libdbus frees its buffers (and glibc, with `perturb`, overwrites them). Call it after
    /// the messages that carried secrets were released and sent.
    package static func scrubReleasedMessages() {
        let filler = DBusValue.bytes([UInt8](repeating: 0, count: libdbusCacheLargestMessage + 1_024))
        var taken: [DBusMessage] = []
        for _ in 0...libdbusCacheCount {
            guard let raw = dbus_message_new(Kind.signal.rawValue) else { break }
            taken.append(DBusMessage(owning: raw))
        }
        for message in taken { try? message.append([filler]) }
    }
}

extension DBusConnection {
    static let scrubInterface = "org.latchkey.ScrubReadBuffer"

    /// Overwrites what libdbus keeps of the messages this connection read. libdbus reads into one buffer
    /// per connection, kept for the connection's life: after a message is taken out, its bytes stay past
    /// the buffer's end until later reads reach them (seen: the tail of a CreateItem, attribute values and
    /// all, after a Lock). A signal of 16 KiB of zeros, addressed to this connection itself, fills that
    /// buffer from its start past any size it keeps between messages (libdbus shrinks it back to within
    /// 2 KiB of what it holds, and glibc overwrites what is given back). Skip it when it arrives
    /// (``DBusMessage/isReadBufferScrub``).
    package func scrubReadBuffer() {
        guard !uniqueName.isEmpty,
            let message = try? DBusMessage.signal(
                path: "/org/latchkey/scrub", interface: Self.scrubInterface, member: "Scrub",
                arguments: [.bytes([UInt8](repeating: 0, count: 16 * 1024))])
        else { return }
        dbus_message_set_destination(message.pointer, uniqueName)
        send(message)
    }
}

extension DBusMessage {
    /// Whether this is the signal ``DBusConnection/scrubReadBuffer()`` sent.
    package var isReadBufferScrub: Bool {
        kind == .signal && interface == DBusConnection.scrubInterface
    }
}
