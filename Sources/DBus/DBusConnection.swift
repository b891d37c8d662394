import CDBus
import FoundationEssentials
import Glibc

/// A private connection to a message bus.
///
/// The owner drives it: ``readWrite(timeoutMilliseconds:)`` moves bytes,
/// ``popMessage()`` hands over each incoming message, ``send(_:)`` queues
/// one. ``call(_:timeoutMilliseconds:)`` is a blocking method call for clients.
/// Use one connection from one thread at a time.
package final class DBusConnection: @unchecked Sendable {
    private let pointer: OpaquePointer

    /// The unique name the bus gave this connection (`:1.42`).
    package let uniqueName: String

    /// How long the bus may take to finish the authentication of a new connection and answer its `Hello`, in all.
    package static let authenticationTimeoutMilliseconds: Int64 = 10_000

    /// Connects to the bus at `address` and registers with it. The authentication and the `Hello` after it are
    /// bounded by one deadline (``authenticationTimeoutMilliseconds``; libdbus bounds neither the one nor, under
    /// 25 s, the other): a socket that accepts and never answers gives `NoReply`, not a hang. The `connect` before
    /// them is libdbus's, blocking: a listener whose backlog is full holds it (latchkeyd tries on a thread of
    /// its own for that). A caller with a deadline of its own gives a shorter `authenticationTimeoutMilliseconds`.
    package init(address: String, authenticationTimeoutMilliseconds: Int64 = authenticationTimeoutMilliseconds)
        throws(DBusError)
    {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let bound = max(1, authenticationTimeoutMilliseconds)
        let deadline = Self.monotonicMilliseconds() + bound
        guard let connection = dbus_connection_open_private(address, &error) else {
            throw DBusError.consume(&error, fallback: "cannot connect to \(address)")
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        let name: String
        do throws(DBusError) {
            if let failure = Self.authenticate(connection, address: address, deadline: deadline, bound: bound) {
                throw failure
            }
            name = try Self.hello(connection, address: address, deadline: deadline, bound: bound)
        } catch {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw error
        }
        pointer = connection
        uniqueName = name
    }

    /// Says `Hello` to the bus (what `dbus_bus_register` does, with its wait bounded by `deadline`) and records
    /// the unique name it gives; that name.
    private static func hello(_ connection: OpaquePointer, address: String, deadline: Int64, bound: Int64)
        throws(DBusError) -> String
    {
        let hello = try DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "Hello")
        let remaining = deadline - monotonicMilliseconds()
        let silence = DBusError(
            .noReply, "the bus at \(address) did not answer within \(Self.describe(milliseconds: bound))")
        guard remaining > 0 else { throw silence }
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        guard let raw = dbus_connection_send_with_reply_and_block(connection, hello.pointer, Int32(remaining), &error)
        else {
            let failure = DBusError.consume(&error, fallback: "cannot register with the bus at \(address)")
            throw failure.name == DBusError.Name.noReply.rawValue ? silence : failure
        }
        let reply = DBusMessage(owning: raw)
        guard case .string(let name)? = try? reply.arguments().first, dbus_bus_set_unique_name(connection, name) != 0
        else { throw DBusError(.failed, "the bus at \(address) gave no unique name") }
        return name
    }

    /// Moves the connection's bytes until the bus has authenticated it, for at most
    /// `bound` milliseconds; the error when it did not.
    private static func authenticate(_ connection: OpaquePointer, address: String, deadline: Int64, bound: Int64)
        -> DBusError?
    {
        while dbus_connection_get_is_authenticated(connection) == 0 {
            let remaining = deadline - monotonicMilliseconds()
            guard dbus_connection_get_is_connected(connection) != 0 else {
                return DBusError(.disconnected, "the bus at \(address) closed the connection while authenticating")
            }
            guard remaining > 0 else {
                return DBusError(
                    .noReply,
                    "the bus at \(address) did not answer within \(Self.describe(milliseconds: bound))")
            }
            _ = dbus_connection_read_write(connection, Int32(min(remaining, 100)))
        }
        return nil
    }

    /// `10 s`, or `250 ms` for a bound under a second or not in whole seconds.
    private static func describe(milliseconds: Int64) -> String {
        milliseconds % 1_000 == 0 ? "\(milliseconds / 1_000) s" : "\(milliseconds) ms"
    }

    private static func monotonicMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000 + Int64(now.tv_nsec) / 1_000_000
    }

    deinit {
        dbus_connection_close(pointer)
        dbus_connection_unref(pointer)
    }

    /// The session bus address: `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
    package static func sessionBusAddress(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String?
    {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            let socket = runtime + "/bus"
            if FileManager.default.fileExists(atPath: socket) { return "unix:path=" + socket }
        }
        return nil
    }

    /// Connects to the session bus.
    package static func session() throws(DBusError) -> DBusConnection {
        guard let address = sessionBusAddress() else {
            throw DBusError(
                .disconnected, "no session bus: DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus is missing")
        }
        return try DBusConnection(address: address)
    }

    /// The system bus address: `DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket.
    package static func systemBusAddress(environment: [String: String] = ProcessInfo.processInfo.environment) -> String
    {
        if let address = environment["DBUS_SYSTEM_BUS_ADDRESS"], !address.isEmpty { return address }
        return "unix:path=/run/dbus/system_bus_socket"
    }

    /// Connects to the system bus.
    package static func system() throws(DBusError) -> DBusConnection {
        try DBusConnection(address: systemBusAddress())
    }

    /// Asks the bus itself (`org.freedesktop.DBus`) `member` about `name`, as in `GetNameOwner` or
    /// `GetConnectionUnixProcessID`: the reply's first value, nil on an error or no answer in time.
    package func askBus(_ member: String, about name: String, timeoutMilliseconds: Int32 = 2_000) -> DBusValue? {
        guard
            let question = try? DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: member, arguments: [.string(name)]),
            let reply = try? call(question, timeoutMilliseconds: timeoutMilliseconds)
        else { return nil }
        return try? reply.arguments().first
    }

    /// The unique name owning `name` on the bus, nil when nobody does (or the bus does not answer in time).
    package func owner(of name: String, timeoutMilliseconds: Int32 = 2_000) -> String? {
        guard case .string(let owner)? = askBus("GetNameOwner", about: name, timeoutMilliseconds: timeoutMilliseconds)
        else { return nil }
        return owner
    }

    /// Whether the connection is still open.
    package var isConnected: Bool { dbus_connection_get_is_connected(pointer) != 0 }

    /// The socket, for `poll`.
    package var fileDescriptor: Int32? {
        var fd: Int32 = -1
        return dbus_connection_get_unix_fd(pointer, &fd) != 0 ? fd : nil
    }

    /// Whether outgoing messages are waiting to be written.
    package var hasOutgoingMessages: Bool { dbus_connection_has_messages_to_send(pointer) != 0 }

    /// Reads and writes what the socket allows, waiting at most `timeoutMilliseconds`
    /// (0: not at all). False once the connection is closed.
    @discardableResult
    package func readWrite(timeoutMilliseconds: Int32) -> Bool {
        dbus_connection_read_write(pointer, timeoutMilliseconds) != 0
    }

    /// The next incoming message, if one has been read.
    package func popMessage() -> DBusMessage? {
        dbus_connection_pop_message(pointer).map { DBusMessage(owning: $0) }
    }

    /// Queues a message for sending; its serial, for matching the reply to a call.
    @discardableResult
    package func send(_ message: DBusMessage) -> UInt32 {
        var serial: UInt32 = 0
        dbus_connection_send(pointer, message.pointer, &serial)
        return serial
    }

    /// Blocks until every queued message is written.
    package func flush() {
        dbus_connection_flush(pointer)
    }

    /// Sends a method call and waits for its reply.
    ///
    /// - Throws: the error reply as a ``DBusError``, or a timeout or disconnection.
    package func call(_ message: DBusMessage, timeoutMilliseconds: Int32 = 25_000) throws(DBusError) -> DBusMessage {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        guard
            let reply = dbus_connection_send_with_reply_and_block(pointer, message.pointer, timeoutMilliseconds, &error)
        else {
            throw DBusError.consume(&error, fallback: "no reply to \(message.member ?? "call")")
        }
        return DBusMessage(owning: reply)
    }

    /// Asks the bus for a well-known name.
    package func requestName(_ name: String, flags: NameFlags) throws(DBusError) -> NameReply {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let result = dbus_bus_request_name(pointer, name, flags.rawValue, &error)
        guard result >= 0 else { throw DBusError.consume(&error, fallback: "cannot request \(name)") }
        return NameReply(rawValue: result) ?? .exists
    }

    /// Tells the bus to route signals matching `rule` to this connection.
    package func addMatch(_ rule: String) throws(DBusError) {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        dbus_bus_add_match(pointer, rule, &error)
        if dbus_error_is_set(&error) != 0 { throw DBusError.consume(&error, fallback: "cannot add match") }
    }

    /// Flags of ``requestName(_:flags:)``.
    package struct NameFlags: OptionSet, Sendable {
        /// The raw bits.
        package let rawValue: UInt32
        /// Wraps raw bits.
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Let a later `replaceExisting` request take the name.
        package static let allowReplacement = NameFlags(rawValue: UInt32(DBUS_NAME_FLAG_ALLOW_REPLACEMENT))
        /// Take the name from an owner that allows it.
        package static let replaceExisting = NameFlags(rawValue: UInt32(DBUS_NAME_FLAG_REPLACE_EXISTING))
        /// Fail rather than wait in the queue.
        package static let doNotQueue = NameFlags(rawValue: UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE))
    }

    /// What the bus answered a name request.
    package enum NameReply: Int32, Sendable {
        /// This connection owns the name now.
        case primaryOwner = 1
        /// Queued behind the owner.
        case inQueue = 2
        /// Someone else owns it.
        case exists = 3
        /// This connection already owned it.
        case alreadyOwner = 4
    }
}
