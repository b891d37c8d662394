import DBus
import Posix

/// The fingerprint reader through fprintd, the system's fingerprint service (`net.reactivated.Fprint` on the
/// system bus; docs/fingerprint.md). Each call opens a private connection of its own, talks only to the unique
/// name that owns `net.reactivated.Fprint` when that owner is root's, and is bounded by a deadline: no fprintd,
/// no reader, no enrolled finger, a reader someone else holds, an odd reply or silence all give
/// ``FingerprintVerdict/unavailable(reason:)`` (or a nil digest) by the deadline. A verify always ends with
/// `VerifyStop` and `Release` (and fprintd releases a reader whose client went away). The calls block: run them
/// off the serving thread.
package struct FprintdFingerprints: FingerprintChecking {
    /// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket).
    package let systemBusAddress: String
    /// The bound on ``enrolledFingersDigest(user:)``, which has no timeout of its own, in seconds.
    package let digestTimeoutSeconds: Double
    /// Called once fprintd is waiting for a finger (its `VerifyStart` answered), on the verifying thread: the
    /// moment to tell the person to touch the reader.
    package let touchRequested: (@Sendable () -> Void)?

    /// A reader through the fprintd on `systemBusAddress`.
    package init(
        systemBusAddress: String = DBusConnection.systemBusAddress(), digestTimeoutSeconds: Double = 5,
        touchRequested: (@Sendable () -> Void)? = nil
    ) {
        self.systemBusAddress = systemBusAddress
        self.digestTimeoutSeconds = digestTimeoutSeconds
        self.touchRequested = touchRequested
    }

    /// The digest of `user`'s enrolled fingers on fprintd's default reader (``FprintdProtocol/enrolledFingersDigest(deviceName:fingers:)``),
    /// nil when there is no fprintd, no reader or no enrolled finger, or no good answer within
    /// ``digestTimeoutSeconds``.
    package func enrolledFingersDigest(user: String) -> [UInt8]? {
        let deadline = Deadline(millisecondsFromNow: Self.milliseconds(digestTimeoutSeconds))
        do throws(FprintdUnavailable) {
            let session = try FprintdSession(address: systemBusAddress, deadline: deadline)
            let device = try session.defaultDevice()
            let name = try session.deviceName(device)
            let fingers = try session.enrolledFingers(device, user: user)
            return FprintdProtocol.enrolledFingersDigest(deviceName: name, fingers: fingers)
        } catch {
            return nil
        }
    }

    /// Claims fprintd's default reader for `user`, starts a verify of any enrolled finger and waits for its
    /// verdict, at most `timeoutSeconds` in all; stops the verify and releases the reader before returning.
    package func verify(user: String, timeoutSeconds: Double) -> FingerprintVerdict {
        let deadline = Deadline(millisecondsFromNow: Self.milliseconds(timeoutSeconds))
        let session: FprintdSession
        let device: String
        do throws(FprintdUnavailable) {
            session = try FprintdSession(address: systemBusAddress, deadline: deadline)
            device = try session.defaultDevice()
            try session.watchVerifyStatus(of: device)
        } catch {
            return .unavailable(reason: error.reason)
        }
        // Set before each call: a call that timed out may still have happened. Stopping or releasing what was
        // not started or claimed only earns an error reply from fprintd, which finish ignores.
        var claimed = false
        var verifying = false
        defer { session.finish(device, verifying: verifying, claimed: claimed) }
        do throws(FprintdUnavailable) {
            claimed = true
            try session.deviceCall(device, "Claim", [.string(user)], step: "Claim")
            verifying = true
            try session.deviceCall(device, "VerifyStart", [.string(FprintdProtocol.anyFinger)], step: "VerifyStart")
            touchRequested?()
            return try session.waitForVerdict(device, seconds: timeoutSeconds)
        } catch {
            return .unavailable(reason: error.reason)
        }
    }

    /// ``verify(user:timeoutSeconds:)`` that also calls `touchRequested` (after this reader's own
    /// ``touchRequested``) once fprintd waits for the finger.
    package func verify(user: String, timeoutSeconds: Double, touchRequested: @escaping @Sendable () -> Void)
        -> FingerprintVerdict
    {
        let own = self.touchRequested
        let both = FprintdFingerprints(
            systemBusAddress: systemBusAddress, digestTimeoutSeconds: digestTimeoutSeconds,
            touchRequested: {
                own?()
                touchRequested()
            })
        return both.verify(user: user, timeoutSeconds: timeoutSeconds)
    }

    /// Whether fprintd is on the system bus at `systemBusAddress` or can be started there (its D-Bus activation
    /// file): the daemon's choice between this reader and ``NoFingerprintReader``. Bounded by `timeoutSeconds`.
    package static func serviceIsPresent(
        systemBusAddress: String = DBusConnection.systemBusAddress(), timeoutSeconds: Double = 2
    ) -> Bool {
        let deadline = Deadline(millisecondsFromNow: milliseconds(timeoutSeconds))
        guard
            let connection = try? DBusConnection(
                address: systemBusAddress, authenticationTimeoutMilliseconds: Int64(deadline.remainingMilliseconds))
        else { return false }
        if case .bool(true)? = connection.askBus(
            "NameHasOwner", about: FprintdProtocol.service, timeoutMilliseconds: max(1, deadline.remainingMilliseconds))
        {
            return true
        }
        guard
            let question = try? DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "ListActivatableNames"),
            let reply = try? connection.call(question, timeoutMilliseconds: max(1, deadline.remainingMilliseconds)),
            case .array("s", let names)? = try? reply.arguments().first
        else { return false }
        return names.contains(.string(FprintdProtocol.service))
    }

    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return Int(min(seconds, 86_400) * 1_000)
    }
}

/// Why no check could be made, one line; the D-Bus error name when fprintd or the bus answered one.
struct FprintdUnavailable: Error {
    let reason: String
    var errorName: String? = nil
}

/// One conversation with fprintd under one deadline: the connection, and the unique name of root's
/// `net.reactivated.Fprint` that every call goes to and every signal must come from.
final class FprintdSession {
    let connection: DBusConnection
    let deadline: Deadline
    /// The unique name owning `net.reactivated.Fprint`, checked to be root's.
    let owner: String

    /// Connects, starts fprintd if the bus can (it is D-Bus activated and leaves when idle), and checks that its
    /// name is owned by a root connection: on the system bus only root may own it (fprintd's bus policy), and a
    /// bus that lets anyone else is not one whose answer a check may take.
    init(address: String, deadline: Deadline) throws(FprintdUnavailable) {
        self.deadline = deadline
        do {
            connection = try DBusConnection(
                address: address, authenticationTimeoutMilliseconds: Int64(max(1, deadline.remainingMilliseconds)))
        } catch {
            throw FprintdUnavailable(reason: "no system bus (\(error.message))")
        }
        guard let owner = try Self.currentOwner(connection, deadline: deadline) else {
            throw FprintdUnavailable(reason: "fprintd is not available")
        }
        guard
            case .uint32(let uid)? = try Self.busCall(
                connection, "GetConnectionUnixUser", [.string(owner)], deadline: deadline
            ).first
        else { throw FprintdUnavailable(reason: "the bus answered garbage") }
        guard uid == 0 else {
            throw FprintdUnavailable(reason: "\(FprintdProtocol.service) is owned by uid \(uid), not root: not fprintd")
        }
        self.owner = owner
    }

    /// The unique name owning `net.reactivated.Fprint`, after asking the bus to start fprintd when nobody
    /// does; nil when nobody does and the bus cannot start it (`ServiceUnknown`: fprintd is not installed).
    private static func currentOwner(_ connection: DBusConnection, deadline: Deadline) throws(FprintdUnavailable)
        -> String?
    {
        if let owner = try? ownerNow(connection, deadline: deadline) { return owner }
        let start = try busCall(
            connection, "StartServiceByName", [.string(FprintdProtocol.service), .uint32(0)], deadline: deadline)
        guard case .uint32? = start.first else { throw FprintdUnavailable(reason: "the bus answered garbage") }
        return try? ownerNow(connection, deadline: deadline)
    }

    /// `GetNameOwner` of the service; throws when it has none.
    private static func ownerNow(_ connection: DBusConnection, deadline: Deadline) throws(FprintdUnavailable)
        -> String
    {
        guard
            case .string(let owner)? = try busCall(
                connection, "GetNameOwner", [.string(FprintdProtocol.service)], deadline: deadline
            ).first
        else { throw FprintdUnavailable(reason: "the bus answered garbage") }
        return owner
    }

    /// The default reader's object path.
    func defaultDevice() throws(FprintdUnavailable) -> String {
        let reply = try call(
            FprintdProtocol.managerPath, FprintdProtocol.managerInterface, "GetDefaultDevice", [],
            step: "GetDefaultDevice")
        guard reply.count == 1, case .objectPath(let path) = reply[0], path.hasPrefix("/net/reactivated/Fprint/Device/")
        else { throw FprintdUnavailable(reason: "fprintd answered garbage to GetDefaultDevice") }
        return path
    }

    /// The reader's product name (its `name` property).
    func deviceName(_ device: String) throws(FprintdUnavailable) -> String {
        let reply = try call(
            device, "org.freedesktop.DBus.Properties", "Get",
            [.string(FprintdProtocol.deviceInterface), .string("name")], step: "Get name")
        guard reply.count == 1, case .string(let name) = reply[0].unwrapped else {
            throw FprintdUnavailable(reason: "fprintd answered garbage to Get name")
        }
        return name
    }

    /// The fingers `user` enrolled on the reader, empty when none.
    func enrolledFingers(_ device: String, user: String) throws(FprintdUnavailable) -> [String] {
        let reply: [DBusValue]
        do {
            reply = try call(
                device, FprintdProtocol.deviceInterface, "ListEnrolledFingers", [.string(user)],
                step: "ListEnrolledFingers")
        } catch {
            if error.errorName == "net.reactivated.Fprint.Error.NoEnrolledPrints" { return [] }
            throw error
        }
        guard reply.count == 1, case .array("s", let items) = reply[0] else {
            throw FprintdUnavailable(reason: "fprintd answered garbage to ListEnrolledFingers")
        }
        var fingers: [String] = []
        for item in items {
            guard case .string(let finger) = item, FprintdProtocol.fingerNames.contains(finger) else {
                throw FprintdUnavailable(reason: "fprintd answered garbage to ListEnrolledFingers")
            }
            fingers.append(finger)
        }
        return fingers
    }

    /// Asks the bus to route the device's `VerifyStatus` from fprintd's unique name, and fprintd's name changes,
    /// to this connection.
    func watchVerifyStatus(of device: String) throws(FprintdUnavailable) {
        let rules = [
            "type='signal',sender='\(owner)',path='\(device)',interface='\(FprintdProtocol.deviceInterface)',"
                + "member='VerifyStatus'",
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                + "member='NameOwnerChanged',arg0='\(FprintdProtocol.service)'",
        ]
        for rule in rules { _ = try Self.busCall(connection, "AddMatch", [.string(rule)], deadline: deadline) }
    }

    /// A method of the device that answers nothing worth reading.
    func deviceCall(_ device: String, _ member: String, _ arguments: [DBusValue], step: String)
        throws(FprintdUnavailable)
    {
        _ = try call(device, FprintdProtocol.deviceInterface, member, arguments, step: step)
    }

    /// Reads the connection until fprintd's `VerifyStatus` ends the check, fprintd leaves, or the deadline.
    func waitForVerdict(_ device: String, seconds: Double) throws(FprintdUnavailable) -> FingerprintVerdict {
        while !deadline.hasPassed {
            guard connection.readWrite(timeoutMilliseconds: min(deadline.remainingMilliseconds, 250)),
                connection.isConnected
            else { throw FprintdUnavailable(reason: "the system bus closed the connection") }
            while let message = connection.popMessage() {
                if let change = message.nameOwnerChange, change.name == FprintdProtocol.service,
                    change.newOwner != owner
                {
                    throw FprintdUnavailable(reason: "fprintd left the bus during the check")
                }
                guard message.kind == .signal, message.sender == owner, message.path == device,
                    message.interface == FprintdProtocol.deviceInterface, message.member == "VerifyStatus"
                else { continue }
                guard let arguments = try? message.arguments(), arguments.count == 2,
                    case .string(let result) = arguments[0], case .bool(let done) = arguments[1]
                else { throw FprintdUnavailable(reason: "fprintd sent a malformed VerifyStatus") }
                if case .finished(let verdict) = FprintdProtocol.verifyStep(result: result, done: done) {
                    return verdict
                }
            }
        }
        throw FprintdUnavailable(reason: "no finger on the reader within \(Int(seconds.rounded(.up))) s")
    }

    /// Stops the verify and releases the reader. Within the deadline it waits for fprintd's answers; past it,
    /// it sends both and leaves (closing the connection, which makes fprintd release a reader too).
    func finish(_ device: String, verifying: Bool, claimed: Bool) {
        let members = (verifying ? ["VerifyStop"] : []) + (claimed ? ["Release"] : [])
        for member in members {
            guard
                let message = try? DBusMessage.methodCall(
                    destination: owner, path: device, interface: FprintdProtocol.deviceInterface, member: member)
            else { continue }
            message.startsService = false
            if deadline.hasPassed {
                connection.send(message)
            } else {
                _ = try? connection.call(message, timeoutMilliseconds: max(1, deadline.remainingMilliseconds))
            }
        }
        connection.flush()
    }

    /// A method call to fprintd's unique name, bounded by the deadline; its reply's arguments.
    private func call(_ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue], step: String)
        throws(FprintdUnavailable) -> [DBusValue]
    {
        guard !deadline.hasPassed else { throw FprintdUnavailable(reason: "fprintd did not answer \(step) in time") }
        do {
            let message = try DBusMessage.methodCall(
                destination: owner, path: path, interface: interface, member: member, arguments: arguments)
            message.startsService = false
            let reply = try connection.call(message, timeoutMilliseconds: max(1, deadline.remainingMilliseconds))
            return try reply.arguments()
        } catch {
            throw FprintdUnavailable(
                reason: FprintdProtocol.reason(errorName: error.name, during: step), errorName: error.name)
        }
    }

    /// A method call to the bus itself, bounded by `deadline`.
    private static func busCall(
        _ connection: DBusConnection, _ member: String, _ arguments: [DBusValue], deadline: Deadline
    ) throws(FprintdUnavailable) -> [DBusValue] {
        guard !deadline.hasPassed else { throw FprintdUnavailable(reason: "the system bus did not answer in time") }
        do {
            let message = try DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: member, arguments: arguments)
            let reply = try connection.call(message, timeoutMilliseconds: max(1, deadline.remainingMilliseconds))
            return try reply.arguments()
        } catch {
            throw FprintdUnavailable(reason: FprintdProtocol.reason(errorName: error.name, during: member))
        }
    }
}
