import DBus
import Foundation
import Glibc
import KeychainRegistry
import LoginControl
import Posix
import Testing

@testable import SecretService

/// Prompts are bounded: one pinentry at a time, shared by concurrent unlock requests, ended when nobody waits
/// for it any more, and a right answer always completes as not dismissed.
@Suite struct PromptQueueTests {
    static let service = "/org/freedesktop/secrets"
    static let login = "/org/freedesktop/secrets/collection/login"

    /// Locks the login collection and has `client` ask to unlock it and show the prompt; the prompt's path.
    static func promptToUnlock(_ daemon: InProcessDaemon, from client: String) throws -> String {
        let unlock = try daemon.ok(
            service, "org.freedesktop.Secret.Service", "Unlock", [.objectPaths([login])], sender: client)
        let prompt = try #require(unlock.last?.text)
        #expect(prompt != "/")
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")], sender: client)
        return prompt
    }

    static func lockLogin(_ daemon: InProcessDaemon) throws {
        try daemon.ok(service, "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])], sender: ":1.2")
    }

    /// Whether `pid` names no process at all (not running, not a zombie).
    static func isGone(_ pid: Int32) -> Bool { kill(pid, 0) == -1 && errno == ESRCH }

    /// Waits (at most `seconds`) until `condition` holds, delivering completions meanwhile.
    static func wait(_ daemon: InProcessDaemon, seconds: Double = 20, until condition: () throws -> Bool) rethrows {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition(), Date() < deadline {
            var entry = pollfd(fd: daemon.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            _ = daemon.daemon.deliverCompletions()
        }
    }

    /// Five clients asking at once get one pinentry (one answer in the script) and all complete unlocked.
    @Test func concurrentUnlocksShareOnePinentry() throws {
        let daemon = try InProcessDaemon(answers: ["password in-process password"])
        try Self.lockLogin(daemon)
        daemon.clearSignals()
        let prompts = try (0..<5).map { try Self.promptToUnlock(daemon, from: ":1.\(40 + $0)") }
        daemon.settle()
        let completed = daemon.signals.filter { $0.member == "Completed" }
        #expect(Set(completed.compactMap(\.path)) == Set(prompts))
        for signal in completed {
            #expect(try signal.arguments() == [.bool(false), .variant(.objectPaths([Self.login]))])
        }
        #expect(try daemon.pinentryCommands().filter { $0.command == "GETPIN" }.count == 1)
        #expect(daemon.daemon.registry.login?.isLocked == false)
    }

    /// A showing prompt stays while one of its requesters waits; once the last one leaves the bus its pinentry
    /// is ended at once and reaped, nothing is sent to the departed, and the next request gets a prompt of its
    /// own that completes.
    @Test func aPromptWhoseCallersLeftIsEndedAndTheNextGetsItsTurn() throws {
        let daemon = try InProcessDaemon(answers: ["hang", "password in-process password"])
        try Self.lockLogin(daemon)
        daemon.clearSignals()
        _ = try Self.promptToUnlock(daemon, from: ":1.50")
        try Self.wait(daemon) { try daemon.pinentryCommands().contains { $0.command == "HANGING" } }
        let pid = try #require(try daemon.pinentryCommands().first { $0.command == "HANGING" }?.pid)
        _ = try Self.promptToUnlock(daemon, from: ":1.51")
        try daemon.leave(":1.50")
        usleep(300_000)
        #expect(!Self.isGone(pid), "another requester still waits for it")
        try daemon.leave(":1.51")
        let left = Date()
        Self.wait(daemon, seconds: 5) { Self.isGone(pid) }
        #expect(Self.isGone(pid))
        #expect(Date().timeIntervalSince(left) < 2, "ended at once, not at the pinentry's timeout")
        daemon.settle()
        #expect(daemon.daemon.registry.promptCount == 0)
        #expect(!daemon.signals.contains { $0.member == "Completed" })

        let next = try Self.promptToUnlock(daemon, from: ":1.52")
        daemon.settle()
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(completed.path == next)
        #expect(try completed.arguments() == [.bool(false), .variant(.objectPaths([Self.login]))])
    }

    /// Dismiss ends the pinentry of a prompt nobody else waits for.
    @Test func dismissEndsTheShowingPinentry() throws {
        let daemon = try InProcessDaemon(answers: ["hang"])
        try Self.lockLogin(daemon)
        let prompt = try Self.promptToUnlock(daemon, from: ":1.55")
        try Self.wait(daemon) { try daemon.pinentryCommands().contains { $0.command == "HANGING" } }
        let pid = try #require(try daemon.pinentryCommands().first { $0.command == "HANGING" }?.pid)
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Dismiss", sender: ":1.55")
        Self.wait(daemon, seconds: 5) { Self.isGone(pid) }
        #expect(Self.isGone(pid))
        daemon.settle()
        #expect(daemon.daemon.registry.promptCount == 0)
        #expect(!daemon.daemon.registry.hasWorkInProgress)
    }

    /// Prompts that do not share wait for the one showing: a re-key prompt (a login's new password) and an
    /// unlock prompt never show at once, and each gets its answer in turn.
    @Test func promptsThatDoNotShareShowOneAtATime() throws {
        let daemon = try InProcessDaemon(answers: ["cancel", "password in-process password"])
        var replies: [ControlReply] = []
        daemon.userLogin.answer(.closeSession(lockIfLast: true), from: .login) { replies.append($0) }
        daemon.userLogin.answer(
            .openSession(password: SharedSecret.forTesting(Array("a new login password".utf8))), from: .login
        ) {
            replies.append($0)
        }
        Self.wait(daemon) { daemon.daemon.registry.promptCount == 1 }
        #expect(replies.last?.status == .wrongPassword)
        daemon.clearSignals()
        let prompt = try Self.promptToUnlock(daemon, from: ":1.56")
        #expect(daemon.daemon.registry.promptCount == 2)
        daemon.settle()
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(completed.path == prompt)
        #expect(try completed.arguments() == [.bool(false), .variant(.objectPaths([Self.login]))])
        let commands = try daemon.pinentryCommands()
        let pids = commands.map(\.pid).reduce(into: [Int32]()) { if !$0.contains($1) { $0.append($1) } }
        #expect(pids.count == 2)
        let lastOfFirst = try #require(commands.lastIndex { $0.pid == pids.first })
        let firstOfSecond = try #require(commands.firstIndex { $0.pid == pids.last })
        #expect(lastOfFirst < firstOfSecond, "the second pinentry started after the first ended")
        #expect(commands[lastOfFirst].command == "BYE")
    }

    /// The right password always completes as not dismissed: another client locks the login collection
    /// before every result from off the serving thread is delivered (the pinentry's answer, the derived key),
    /// and the prompt still completes unlocked, with the collection unlocked after it.
    @Test func aRightPasswordCompletesUndismissedThoughLockedMeanwhile() throws {
        let daemon = try InProcessDaemon(answers: ["password in-process password"])
        try Self.lockLogin(daemon)
        daemon.clearSignals()
        let prompt = try Self.promptToUnlock(daemon, from: ":1.57")
        var completed: DBusMessage?
        let deadline = Date().addingTimeInterval(30)
        while completed == nil, Date() < deadline {
            var entry = pollfd(fd: daemon.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            try Self.lockLogin(daemon)
            completed = daemon.daemon.deliverCompletions().first { $0.member == "Completed" }
        }
        let signal = try #require(completed)
        #expect(signal.path == prompt)
        #expect(try signal.arguments() == [.bool(false), .variant(.objectPaths([Self.login]))])
        #expect(daemon.daemon.registry.login?.isLocked == false)
    }
}
