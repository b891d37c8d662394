import DBus
import Glibc

/// Listens on the system bus for systemd-logind: `PrepareForSleep(true)` when the machine suspends or
/// hibernates (for keychains set to lock on sleep, `latchkey set-keychain-settings -l`), and a session's
/// `Lock` (`loginctl lock-session`, `lock-sessions`, a desktop locking through logind) for keychains set to
/// lock with the screen (`-s`).
///
/// `PrepareForSleep` does not say whether the machine suspends or hibernates. So at each one the watch asks
/// systemd (`org.freedesktop.systemd1`, `ListJobs`) which sleep it has started: logind starts the sleep's target
/// right after its signal, and a job for `hibernate.target`, `hybrid-sleep.target` or
/// `suspend-then-hibernate.target` (or their services) means the machine's memory goes to disk, which ends
/// what `AfterFirstUnlock` items may outlast (docs/secitem-semantics.md, "Accessibility classes").
///
/// Only a signal sent by the current owner of `org.freedesktop.login1` counts: any client may send a signal
/// straight to this connection, and the bus's match rule does not filter those. A `Lock` counts only for a
/// session of this daemon's user: logind's signal does not say whose session it is, so the watch asks logind
/// for the session's `User` property and locks when the answer comes, without waiting for it.
package final class LogindWatch {
    /// What logind announced.
    enum Announcement: Equatable {
        /// The machine is going to sleep.
        case sleep
        /// One of the user's sessions is to lock its screen.
        case screenLock
        /// The sleep announced is a hibernation (systemd runs a job of a hibernating sleep).
        case hibernation
    }

    /// The units whose job means the sleep writes memory to disk.
    static let hibernatingUnits: Set<String> = [
        "hibernate.target", "hybrid-sleep.target", "suspend-then-hibernate.target", "systemd-hibernate.service",
        "systemd-hybrid-sleep.service", "systemd-suspend-then-hibernate.service",
    ]
    static let systemdName = "org.freedesktop.systemd1"
    /// Serials of the `ListJobs` questions sent at a sleep announcement, awaiting systemd's answer.
    private var pendingJobQuestions: Set<UInt32> = []

    private let connection: DBusConnection
    private let userID: uid_t
    /// logind's unique name, as `GetNameOwner` answered once and `NameOwnerChanged` said since: signals are
    /// believed only from it, with no call to the bus while serving.
    private var logindOwner: String?
    /// Serials of the `User` questions sent about sessions that announced `Lock`, awaiting logind's answer.
    private var pendingSessionQuestions: Set<UInt32> = []
    /// At most this many questions wait at once; further `Lock`s are dropped until logind answers.
    static let pendingQuestionLimit = 16

    static let logindName = "org.freedesktop.login1"
    static let sessionInterface = "org.freedesktop.login1.Session"

    /// The match rules: logind's sleep announcement and its sessions' `Lock`, and nothing else.
    static let matchRules = [
        "type='signal',sender='\(logindName)',path='/org/freedesktop/login1',"
            + "interface='org.freedesktop.login1.Manager',member='PrepareForSleep'",
        "type='signal',sender='\(logindName)',interface='\(sessionInterface)',member='Lock'",
        "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',"
            + "arg0='\(logindName)'",
    ]

    /// Subscribes `connection`, a connection to the system bus, to logind's announcements for the sessions of
    /// `userID`.
    package init(systemBus connection: DBusConnection, userID: uid_t = getuid()) throws(DBusError) {
        for rule in Self.matchRules { try connection.addMatch(rule) }
        self.connection = connection
        self.userID = userID
        // Once, at start (the match above is in place first, so a change after this answer is heard).
        logindOwner = connection.owner(of: Self.logindName)
    }

    /// The socket to poll while the connection is open; nil once the system bus has gone.
    var fileDescriptor: Int32? {
        connection.isConnected ? connection.fileDescriptor : nil
    }

    /// Whether outgoing messages (error replies, questions to logind) are waiting to be written.
    var hasOutgoingMessages: Bool { connection.hasOutgoingMessages }

    /// Reads what arrived: what logind announced, at most once each. Method calls get an error reply: this
    /// connection serves nothing.
    func readAnnouncements() -> Set<Announcement> {
        guard connection.readWrite(timeoutMilliseconds: 0) else { return [] }
        var announced: Set<Announcement> = []
        while let message = connection.popMessage() {
            switch message.kind {
            case .methodCall:
                let refusal = DBusError(.unknownMethod, "latchkeyd serves nothing on the system bus")
                if !message.expectsNoReply, let reply = message.errorReply(refusal) { connection.send(reply) }
            case .signal:
                noteOwnerChange(message)
                if isSleepAnnouncement(message) {
                    announced.insert(.sleep)
                    askWhichSleep()
                }
                if isSessionLock(message), let session = message.path { askWhoseSession(session) }
            case .methodReturn, .error:
                if pendingJobQuestions.remove(message.replySerial) != nil {
                    if isHibernationAnswer(message) { announced.insert(.hibernation) }
                    break
                }
                guard pendingSessionQuestions.remove(message.replySerial) != nil else { break }
                if isUserAnswer(message) { announced.insert(.screenLock) }
            default:
                break
            }
        }
        return announced
    }

    private func isSleepAnnouncement(_ message: DBusMessage) -> Bool {
        guard message.path == "/org/freedesktop/login1", message.interface == "org.freedesktop.login1.Manager",
            message.member == "PrepareForSleep", message.signature == "b",
            case .bool(true)? = try? message.arguments().first
        else { return false }
        return isFromLogind(message)
    }

    private func isSessionLock(_ message: DBusMessage) -> Bool {
        message.interface == Self.sessionInterface && message.member == "Lock" && message.signature.isEmpty
            && isFromLogind(message)
    }

    private func isFromLogind(_ message: DBusMessage) -> Bool {
        guard let sender = message.sender else { return false }
        return sender == logindOwner
    }

    /// Follows who owns `org.freedesktop.login1`, as the bus itself says (a client could send the signal too).
    private func noteOwnerChange(_ message: DBusMessage) {
        guard let change = message.nameOwnerChange, change.name == Self.logindName else { return }
        logindOwner = change.newOwner.isEmpty ? nil : change.newOwner
    }

    /// Asks logind for the `User` of the session at `path`; the answer is read by ``readAnnouncements()``.
    private func askWhoseSession(_ path: String) {
        guard pendingSessionQuestions.count < Self.pendingQuestionLimit,
            let question = try? DBusMessage.methodCall(
                destination: Self.logindName, path: path, interface: "org.freedesktop.DBus.Properties",
                member: "Get", arguments: [.string(Self.sessionInterface), .string("User")])
        else { return }
        pendingSessionQuestions.insert(connection.send(question))
    }

    /// Asks systemd for its jobs; the answer is read by ``readAnnouncements()``. The reply comes from the name's
    /// owner (the bus routes a reply only from the connection the call went to), which on the system bus only root
    /// may be.
    private func askWhichSleep() {
        guard pendingJobQuestions.count < Self.pendingQuestionLimit,
            let question = try? DBusMessage.methodCall(
                destination: Self.systemdName, path: "/org/freedesktop/systemd1",
                interface: "org.freedesktop.systemd1.Manager", member: "ListJobs")
        else { return }
        question.startsService = false
        pendingJobQuestions.insert(connection.send(question))
    }

    /// Whether `message` is systemd's `ListJobs` answer (`a(usssoo)`: id, unit, type, state, job, unit path)
    /// with a job of a hibernating sleep.
    private func isHibernationAnswer(_ message: DBusMessage) -> Bool {
        guard message.kind == .methodReturn, case .array(_, let jobs)? = try? message.arguments().first else {
            return false
        }
        return jobs.contains { job in
            guard case .structure(let fields) = job, fields.count > 1, case .string(let unit) = fields[1] else {
                return false
            }
            return Self.hibernatingUnits.contains(unit)
        }
    }

    /// Whether `message` is logind's answer naming this daemon's user: `User` is `(uo)`, the uid and the
    /// user's object path.
    private func isUserAnswer(_ message: DBusMessage) -> Bool {
        guard message.kind == .methodReturn, message.sender == logindOwner,
            case .variant(.structure(let fields))? = try? message.arguments().first,
            case .uint32(let uid)? = fields.first
        else { return false }
        return uid == userID
    }
}
