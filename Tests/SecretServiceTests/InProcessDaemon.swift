import DBus
import Foundation
import Glibc
import KeychainRegistry
import KeychainStore
import Pinentry
import Posix
import Testing

@testable import SecretService

/// The scripted pinentry of the integration tests (Tests/Support/scripted-pinentry).
let scriptedPinentry = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Support/scripted-pinentry").path

/// A daemon driven in-process: no bus, no loop. Messages are built with libdbus, stamped as the bus would
/// stamp them, handed to ``SecretServiceDaemon/handle(_:)``, and what it gives back is inspected.
final class InProcessDaemon {
    static let password = Array("in-process password".utf8)
    let directory: String
    let answers: String
    /// What the scripted pinentry received, one JSON object a line (see Tests/Support/scripted-pinentry).
    let pinentryLog: String
    let daemon: SecretServiceDaemon
    private var serial: UInt32 = 0
    /// Every signal the daemon sent, in order.
    private(set) var signals: [DBusMessage] = []

    /// A daemon over a new keychain directory whose login keychain is made with ``password`` (cheap KDF);
    /// pinentry prompts answer from `answers` (scripted-pinentry lines), with `pinentryEnvironment` added to
    /// the pinentry's environment; `systemctl` is asked for the session's variables (none by default); the
    /// Secret portal's backend answers only an executable named `portalProgram`.
    init(
        answers lines: [String] = [], identifiesCallers: Bool = false, pinentryEnvironment: [String: String] = [:],
        systemctl: String? = nil, portalProgram: String = PortalGate.portalProgram
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("inproc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        answers = directory + "/answers"
        pinentryLog = directory + "/pinentry-log"
        try (lines.joined(separator: "\n") + "\n").write(toFile: answers, atomically: true, encoding: .utf8)
        let pinentry = Pinentry(
            program: scriptedPinentry,
            environment: [
                "SCRIPTED_PINENTRY_ANSWERS": answers, "SCRIPTED_PINENTRY_LOG": pinentryLog, "PATH": "/usr/bin:/bin",
            ].merging(pinentryEnvironment) { $1 },
            timeout: .seconds(30))
        let configuration = SecretServiceConfiguration(
            registry: RegistryConfiguration(
                keychainDirectory: directory + "/keychains", pinentry: pinentry, systemctl: systemctl),
            identifiesCallers: identifiesCallers, portalProgram: portalProgram)
        daemon = try SecretServiceDaemon(
            configuration: configuration, loginPassword: try SecretBytes(copying: Self.password))
    }

    /// The daemon's login part, which answers the control socket.
    var userLogin: UserLogin { daemon.registry.userLogin }

    deinit {
        daemon.registry.shutDown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A method call from `sender`, as the bus would deliver it.
    func message(
        _ path: String, _ interface: String?, _ member: String, _ arguments: [DBusValue] = [],
        sender: String = ":1.7"
    ) throws -> DBusMessage {
        let call = try DBusMessage.methodCall(
            destination: "org.freedesktop.secrets", path: path, interface: interface, member: member,
            arguments: arguments)
        serial += 1
        call.stampAsDelivered(from: sender, serial: serial)
        return call
    }

    /// Handles a call; everything sent back (the reply, if it came now, and signals).
    func send(
        _ path: String, _ interface: String?, _ member: String, _ arguments: [DBusValue] = [],
        sender: String = ":1.7"
    ) throws -> (reply: DBusMessage?, call: DBusMessage) {
        let call = try message(path, interface, member, arguments, sender: sender)
        return (record(daemon.handle(call), for: call), call)
    }

    /// The reply's arguments; fails the test on an error reply or no reply.
    @discardableResult
    func ok(
        _ path: String, _ interface: String?, _ member: String, _ arguments: [DBusValue] = [],
        sender: String = ":1.7", sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [DBusValue] {
        let reply = try #require(try send(path, interface, member, arguments, sender: sender).reply)
        #expect(
            reply.kind == .methodReturn, "\(member): \(reply.errorName ?? "") \((try? reply.arguments()) ?? [])",
            sourceLocation: sourceLocation)
        return try reply.arguments()
    }

    /// The error name of the reply to a call.
    func errorName(
        _ path: String, _ interface: String?, _ member: String, _ arguments: [DBusValue] = [], sender: String = ":1.7"
    ) throws -> String? {
        try send(path, interface, member, arguments, sender: sender).reply?.errorName
    }

    /// Waits (at most `seconds`) until work done off the serving thread comes back, and delivers it: the
    /// reply to `call`, if it came.
    func awaitCompletion(of call: DBusMessage, seconds: Int = 30) -> DBusMessage? {
        let deadline = Date().addingTimeInterval(TimeInterval(seconds))
        while Date() < deadline {
            var entry = pollfd(fd: daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 100)
            if let reply = record(daemon.deliverCompletions(), for: call) { return reply }
        }
        return nil
    }

    /// Waits until every piece of work handed off has come back, delivering it.
    func settle(seconds: Int = 30) {
        let deadline = Date().addingTimeInterval(TimeInterval(seconds))
        while daemon.registry.hasWorkInProgress, Date() < deadline {
            var entry = pollfd(fd: daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 100)
            var sent = daemon.deliverCompletions()
            while daemon.hasItemAnnouncements { sent += daemon.nextItemAnnouncements() }
            signals += sent.filter { $0.kind == .signal }
        }
    }

    /// Keeps the signals of `messages`; the reply to `call` among them.
    /// A lock's or unlock's item signals are all sent at once, as the serving loop sends them with nothing else
    /// to do.
    private func record(_ messages: [DBusMessage], for call: DBusMessage) -> DBusMessage? {
        var messages = messages
        while daemon.hasItemAnnouncements { messages += daemon.nextItemAnnouncements() }
        signals += messages.filter { $0.kind == .signal }
        return messages.first { $0.kind != .signal && $0.replySerial == call.serial }
    }

    /// The bus's announcement that `client` connected (`NameOwnerChanged` with no previous owner): what the
    /// daemon sends.
    func arrive(_ client: String) throws -> [DBusMessage] {
        try ownerChanged(client, from: "", to: client)
    }

    /// The bus's word that `client` left (`NameOwnerChanged` with no new owner); what the daemon sent.
    @discardableResult
    func leave(_ client: String) throws -> [DBusMessage] {
        try ownerChanged(client, from: client, to: "")
    }

    /// The bus's `NameOwnerChanged` for `name` (an empty owner: none); what the daemon sent.
    @discardableResult
    func ownerChanged(_ name: String, from old: String, to new: String) throws -> [DBusMessage] {
        let signal = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            arguments: [.string(name), .string(old), .string(new)])
        serial += 1
        signal.stampAsDelivered(from: "org.freedesktop.DBus", serial: serial)
        let sent = daemon.handle(signal)
        signals += sent.filter { $0.kind == .signal }
        return sent
    }

    /// What the scripted pinentry received so far: (pid, command) in order.
    func pinentryCommands() throws -> [(pid: Int32, command: String)] {
        guard let text = try? String(contentsOfFile: pinentryLog, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let entry = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return (Int32(try #require(entry["pid"] as? Int)), try #require(entry["command"] as? String))
        }
    }

    /// Answers, as the bus would, the daemon's `GetConnectionCredentials` requests among `messages`: process
    /// `pid` (this test process unless told) of this user, or an error (`pid` 0: the name is gone). Returns
    /// what the daemon sent in return.
    @discardableResult
    func answerCredentials(in messages: [DBusMessage], pid: Int32 = getpid()) throws -> [DBusMessage] {
        var sent: [DBusMessage] = []
        for request in messages where request.kind == .methodCall && request.member == "GetConnectionCredentials" {
            let answer: DBusMessage
            if pid == 0 {
                answer = try #require(
                    request.errorReply(DBusError(name: "org.freedesktop.DBus.Error.NameHasNoOwner", message: "gone")))
            } else {
                answer = try request.reply([
                    .variantDictionary(["ProcessID": .uint32(UInt32(pid)), "UnixUserID": .uint32(getuid())])
                ])
            }
            serial += 1
            answer.stampAsDelivered(from: "org.freedesktop.DBus", serial: serial)
            sent += daemon.handle(answer)
        }
        return sent
    }

    /// Forgets the signals seen so far.
    func clearSignals() { signals.removeAll() }

    /// A plain session of `sender`.
    func openPlainSession(sender: String = ":1.7") throws -> String {
        let reply = try ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession",
            [.string("plain"), .variant(.string(""))], sender: sender)
        return try #require(reply.last?.text)
    }

    /// Stores an item in the login collection through CreateItem; its path.
    func createItem(
        session: String, attributes: [String: String], secret: String, label: String = "item",
        sender: String = ":1.7"
    ) throws -> String {
        let reply = try ok(
            "/org/freedesktop/secrets/collection/login", "org.freedesktop.Secret.Collection", "CreateItem",
            [
                .variantDictionary([
                    "org.freedesktop.Secret.Item.Label": .string(label),
                    "org.freedesktop.Secret.Item.Attributes": .stringDictionary(attributes),
                ]),
                .structure([.objectPath(session), .bytes([]), .bytes(Array(secret.utf8)), .string("text/plain")]),
                .bool(false),
            ], sender: sender)
        return try #require(reply.first?.text)
    }
}

extension SharedSecret {
    /// A copy of `bytes` in secret memory, for a test (which has the memory to spare).
    static func forTesting(_ bytes: some Collection<UInt8>) -> SharedSecret {
        try! SharedSecret(copying: bytes)
    }
}
