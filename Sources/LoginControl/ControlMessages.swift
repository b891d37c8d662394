import Posix

// The control socket's messages: what pam_latchkey asks of the user's daemon
// and what it answers. The wire format is in docs/control-socket.md.

/// A request on the control socket. Its passwords are ``SharedSecret``s: passing a request around never
/// copies them, and each is wiped when the last holder lets go of it (there is no copy to forget to wipe).
package enum ControlRequest: Equatable, Sendable {
    /// A login session starts; with the login password when the login gave
    /// one, which unlocks the login keychain (creating it if there is none).
    case openSession(password: SharedSecret?)
    /// A login session ended; `lockIfLast` locks the login keychain when it was the last one.
    case closeSession(lockIfLast: Bool)
    /// The login password changed: re-wrap the login keychain's key from `old` to `new`.
    case changePassword(old: SharedSecret, new: SharedSecret)
    /// Whether the login keychain exists and is locked.
    case status
    /// A login hands over the password PAM verified (or none), and does not wait: the daemon counts the
    /// session, answers at once and unlocks (or creates) the login keychain in the background, holding its
    /// clients' requests until then. Accepted only from root or from the process that started the daemon.
    case handOver(password: SharedSecret?)

    /// Largest request body accepted: two passwords of ``maximumPasswordLength`` and framing.
    package static let maximumBodyLength = 2 * maximumPasswordLength + 64
    /// Longest password carried.
    package static let maximumPasswordLength = 4096
    static let version: UInt8 = 1

    enum Opcode: UInt8 {
        case openSession = 1
        case closeSession = 2
        case changePassword = 3
        case status = 4
        case handOver = 5
    }

    /// The framed bytes: a 4-byte big-endian body length, then the body, in secret memory of their own
    /// (wiped when released); ``SecretMemoryError`` when no secret memory can be had.
    package func encoded() throws(SecretMemoryError) -> SecretBytes {
        var body = try SecretBytes(capacity: Self.maximumBodyLength + 4)
        body.append(0)
        body.append(0)
        body.append(0)
        body.append(0)
        body.append(Self.version)
        switch self {
        case .openSession(let password):
            body.append(Opcode.openSession.rawValue)
            if let password { password.withUnsafeBytes { appendField($0, to: &body) } }
        case .closeSession(let lockIfLast):
            body.append(Opcode.closeSession.rawValue)
            [lockIfLast ? UInt8(1) : 0].withUnsafeBytes { appendField($0, to: &body) }
        case .changePassword(let old, let new):
            body.append(Opcode.changePassword.rawValue)
            old.withUnsafeBytes { appendField($0, to: &body) }
            new.withUnsafeBytes { appendField($0, to: &body) }
        case .status:
            body.append(Opcode.status.rawValue)
        case .handOver(let password):
            body.append(Opcode.handOver.rawValue)
            if let password { password.withUnsafeBytes { appendField($0, to: &body) } }
        }
        let length = UInt32(truncatingIfNeeded: body.count - 4)
        body.withUnsafeMutableBytes { raw in
            for index in 0..<4 { raw[index] = UInt8(truncatingIfNeeded: length >> (24 - 8 * UInt32(index))) }
        }
        return body
    }

    /// Reads a request body (without its length prefix), in place: the only copies of its passwords are
    /// the ``SharedSecret``s the request holds.
    package init<Body: Collection<UInt8>>(body: Body) throws(ControlProtocolError) {
        guard body.count >= 2, body.count <= Self.maximumBodyLength else {
            throw ControlProtocolError("a request body has 2 to \(Self.maximumBodyLength) bytes")
        }
        let version = body[body.startIndex]
        let request = body[body.index(after: body.startIndex)]
        guard version == Self.version else { throw ControlProtocolError("unknown protocol version \(version)") }
        guard let opcode = Opcode(rawValue: request) else { throw ControlProtocolError("unknown request \(request)") }
        let fields = try Self.fields(body.dropFirst(2))
        switch (opcode, fields.count) {
        case (.openSession, 0):
            self = .openSession(password: nil)
        case (.openSession, 1):
            self = .openSession(password: try Self.password(fields[0]))
        case (.closeSession, 1) where fields[0].count == 1 && fields[0].first ?? 2 <= 1:
            self = .closeSession(lockIfLast: fields[0].first == 1)
        case (.changePassword, 2):
            self = .changePassword(old: try Self.password(fields[0]), new: try Self.password(fields[1]))
        case (.status, 0):
            self = .status
        case (.handOver, 0):
            self = .handOver(password: nil)
        case (.handOver, 1):
            self = .handOver(password: try Self.password(fields[0]))
        default:
            throw ControlProtocolError("malformed \(opcode) request")
        }
    }

    /// The request's name, for messages (never its passwords).
    package var name: String {
        switch self {
        case .openSession: "open-session"
        case .closeSession: "close-session"
        case .changePassword: "change-password"
        case .status: "status"
        case .handOver: "hand-over"
        }
    }

    private static func password<Field: Collection<UInt8>>(_ field: Field) throws(ControlProtocolError)
        -> SharedSecret
    {
        guard !field.isEmpty, field.count <= maximumPasswordLength, !field.contains(0) else {
            throw ControlProtocolError("a password has 1 to \(maximumPasswordLength) bytes and no NUL")
        }
        do {
            return try SharedSecret(copying: field)
        } catch {
            throw ControlProtocolError("\(error)")
        }
    }

    private static func fields<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(ControlProtocolError)
        -> [Bytes.SubSequence]
    {
        var fields: [Bytes.SubSequence] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            guard rest.count >= 4, fields.count < 2 else { throw ControlProtocolError("malformed request fields") }
            let length = Int(readLength(rest.prefix(4)))
            rest = rest.dropFirst(4)
            guard length <= rest.count else { throw ControlProtocolError("a field runs past the request") }
            fields.append(rest.prefix(length))
            rest = rest.dropFirst(length)
        }
        return fields
    }
}

/// How a request went.
package enum ControlStatus: UInt8, Sendable {
    /// Done.
    case ok = 0
    /// The password does not unlock the login keychain.
    case wrongPassword = 1
    /// Too many wrong passwords lately: the password was not tried.
    case tooManyAttempts = 2
    /// The daemon could not do it (the message says why).
    case failed = 3
    /// The request was malformed.
    case badRequest = 4
}

/// The daemon's answer: a status and a short message for the log.
package struct ControlReply: Equatable, Sendable {
    /// How the request went.
    package var status: ControlStatus
    /// One line for the log; never holds a password.
    package var message: String

    /// Longest reply body.
    package static let maximumBodyLength = 512

    /// A reply; `message` is cut to fit ``maximumBodyLength``.
    package init(_ status: ControlStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The framed bytes.
    package func encoded() -> [UInt8] {
        frame([status.rawValue] + Array(message.utf8.prefix(Self.maximumBodyLength - 1)))
    }

    /// Reads a reply body (without its length prefix).
    package init(body: [UInt8]) throws(ControlProtocolError) {
        guard let first = body.first, body.count <= Self.maximumBodyLength, let status = ControlStatus(rawValue: first)
        else { throw ControlProtocolError("malformed reply") }
        self.status = status
        self.message = String(decoding: body.dropFirst(), as: UTF8.self)
    }
}

/// A malformed message.
package struct ControlProtocolError: Error, Equatable, Sendable {
    /// What is wrong, in one line.
    package let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// The body length in a 4-byte big-endian prefix.
func readLength(_ bytes: some Collection<UInt8>) -> UInt32 {
    bytes.reduce(0) { $0 << 8 | UInt32($1) }
}

func lengthPrefix(_ count: Int) -> [UInt8] {
    let length = UInt32(truncatingIfNeeded: count)
    return [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
}

func frame(_ body: [UInt8]) -> [UInt8] {
    lengthPrefix(body.count) + body
}

private func appendField(_ bytes: UnsafeRawBufferPointer, to body: inout SecretBytes) {
    lengthPrefix(bytes.count).withUnsafeBytes { body.append($0) }
    body.append(bytes)
}
