import DBus

/// Listens on the system bus for logind announcing sleep (`PrepareForSleep(true)` from
/// `org.freedesktop.login1`), so that keychains set to lock on sleep (`latchkey set-keychain-settings -l`)
/// are locked when the machine suspends or hibernates.
///
/// Only a signal sent by the current owner of `org.freedesktop.login1` counts: any client may send a signal
/// straight to this connection, and the bus's match rule does not filter those.
package final class SleepWatch {
    private let connection: DBusConnection

    /// The match rule: logind's sleep announcement, and nothing else.
    static let matchRule =
        "type='signal',sender='org.freedesktop.login1',path='/org/freedesktop/login1',"
        + "interface='org.freedesktop.login1.Manager',member='PrepareForSleep'"

    /// Subscribes `connection`, a connection to the system bus, to logind's sleep announcements.
    package init(systemBus connection: DBusConnection) throws(DBusError) {
        try connection.addMatch(Self.matchRule)
        self.connection = connection
    }

    /// The socket to poll while the connection is open; nil once the system bus has gone.
    var fileDescriptor: Int32? {
        connection.isConnected ? connection.fileDescriptor : nil
    }

    /// Whether outgoing messages (error replies) are waiting to be written.
    var hasOutgoingMessages: Bool { connection.hasOutgoingMessages }

    /// Reads what arrived; true when logind announced that the machine is going to sleep. Method calls
    /// get an error reply: this connection serves nothing.
    func sleepAnnounced() -> Bool {
        guard connection.readWrite(timeoutMilliseconds: 0) else { return false }
        var announced = false
        while let message = connection.popMessage() {
            switch message.kind {
            case .methodCall:
                let refusal = DBusError(.unknownMethod, "latchkeyd serves nothing on the system bus")
                if !message.expectsNoReply, let reply = message.errorReply(refusal) { connection.send(reply) }
            case .signal:
                if isSleepAnnouncement(message) { announced = true }
            default:
                break
            }
        }
        return announced
    }

    private func isSleepAnnouncement(_ message: DBusMessage) -> Bool {
        guard message.path == "/org/freedesktop/login1", message.interface == "org.freedesktop.login1.Manager",
            message.member == "PrepareForSleep", message.signature == "b",
            case .bool(true)? = try? message.arguments().first,
            let sender = message.sender
        else { return false }
        return sender == connection.owner(of: "org.freedesktop.login1")
    }
}
