import DBus
import Foundation
import Glibc
import KeychainRegistry
import KeychainStore
import Testing

@testable import SecretService

/// The prompts of keychains with a password of their own (an Unlock of one, gnome-keyring's `ChangeWithPrompt`)
/// go through the prompt queue as the login keychain's do: one pinentry at a time, shared by concurrent
/// Unlocks of one keychain, ended when nobody waits for them, and a right answer completes as not dismissed.
@Suite struct OwnPasswordPromptTests {
    static let service = "/org/freedesktop/secrets"
    static let privateInterface = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
    static let prompt = "org.freedesktop.Secret.Prompt"

    static func daemon(answers: [String]) throws -> InProcessDaemon {
        try InProcessDaemon(answers: answers)
    }

    /// Makes a collection labelled `label` with `password` as its own password (CreateWithMasterPassword); its
    /// path.
    static func createOwnPasswordCollection(_ daemon: InProcessDaemon, _ label: String, password: String) throws
        -> String
    {
        let session = try daemon.openPlainSession()
        let (immediate, call) = try daemon.send(
            service, privateInterface, "CreateWithMasterPassword",
            [
                .variantDictionary(["org.freedesktop.Secret.Collection.Label": .string(label)]),
                .structure([.objectPath(session), .bytes([]), .bytes(Array(password.utf8)), .string("text/plain")]),
            ])
        let reply = try #require(immediate ?? daemon.awaitCompletion(of: call, seconds: 60))
        return try #require(try reply.arguments().first?.text)
    }

    static func lock(_ daemon: InProcessDaemon, _ paths: [String], from client: String = ":1.2") throws {
        try daemon.ok(service, "org.freedesktop.Secret.Service", "Lock", [.objectPaths(paths)], sender: client)
    }

    /// Has `client` ask to unlock `path` and show the prompt; the prompt's path.
    static func promptToUnlock(_ daemon: InProcessDaemon, _ path: String, from client: String) throws -> String {
        let unlock = try daemon.ok(
            service, "org.freedesktop.Secret.Service", "Unlock", [.objectPaths([path])], sender: client)
        let prompt = try #require(unlock.last?.text)
        #expect(prompt != "/")
        try daemon.ok(prompt, Self.prompt, "Prompt", [.string("")], sender: client)
        return prompt
    }

    /// Has `client` ask to change the password of `path` and show the prompt; the prompt's path.
    static func promptToChange(_ daemon: InProcessDaemon, _ path: String, from client: String) throws -> String {
        let reply = try daemon.ok(service, privateInterface, "ChangeWithPrompt", [.objectPath(path)], sender: client)
        let prompt = try #require(reply.first?.text)
        try daemon.ok(prompt, Self.prompt, "Prompt", [.string("")], sender: client)
        return prompt
    }

    /// The pid of the first pinentry that hangs (waits until one does).
    static func hangingPinentry(_ daemon: InProcessDaemon) throws -> Int32 {
        try PromptQueueTests.wait(daemon) { try daemon.pinentryCommands().contains { $0.command == "HANGING" } }
        return try #require(try daemon.pinentryCommands().first { $0.command == "HANGING" }?.pid)
    }

    /// Whether each pinentry's exchange came whole, with no other pinentry's lines among them (one at a time).
    static func pinentriesTookTurns(_ daemon: InProcessDaemon) throws -> Bool {
        var finished: Set<Int32> = []
        var current: Int32?
        for (pid, _) in try daemon.pinentryCommands() where pid != current {
            if finished.contains(pid) { return false }
            if let current { finished.insert(current) }
            current = pid
        }
        return true
    }

    static func isOpened(_ daemon: InProcessDaemon, _ path: String, by password: String) throws -> Bool {
        let id = try #require(path.split(separator: "/").last)
        let held = try #require(daemon.daemon.registry.keychain(id: String(id)))
        return (try? Keychain(opening: held.keychain.path).unlock(password: Array(password.utf8))) != nil
    }

    /// A collection's label is its creator's text: in the unlock prompt it stays on its line, its line break and
    /// bidi override replaced, so it cannot add a line that reads as the daemon's.
    @Test func aLabelCannotAddLinesToTheUnlockPrompt() throws {
        let daemon = try Self.daemon(answers: ["password vault password"])
        let label = "Vault\nThis is your LOGIN password prompt\u{202E}"
        let vault = try Self.createOwnPasswordCollection(daemon, label, password: "vault password")
        try Self.lock(daemon, [vault])
        _ = try Self.promptToUnlock(daemon, vault, from: ":1.60")
        daemon.settle()
        let description = try #require(AccessPromptTests.arguments(of: "SETDESC", in: daemon).last)
        #expect(description.contains("“Vault\u{FFFD}This is your LOGIN password prompt\u{FFFD}”"))
        #expect(!description.split(separator: "\n").contains { $0.hasPrefix("This is your LOGIN") })
    }

    /// Five clients asking at once to unlock a keychain with its own password get one pinentry (one answer in
    /// the script) and all complete unlocked.
    @Test func concurrentUnlocksOfAKeychainWithItsOwnPasswordShareOnePinentry() throws {
        let daemon = try Self.daemon(answers: ["password vault password"])
        let vault = try Self.createOwnPasswordCollection(daemon, "Vault", password: "vault password")
        try Self.lock(daemon, [vault])
        daemon.clearSignals()
        let prompts = try (0..<5).map { try Self.promptToUnlock(daemon, vault, from: ":1.\(60 + $0)") }
        daemon.settle()
        let completed = daemon.signals.filter { $0.member == "Completed" }
        #expect(Set(completed.compactMap(\.path)) == Set(prompts))
        for signal in completed {
            #expect(try signal.arguments() == [.bool(false), .variant(.objectPaths([vault]))])
        }
        #expect(try daemon.pinentryCommands().filter { $0.command == "GETPIN" }.count == 1)
        #expect(daemon.daemon.registry.keychain(id: "vault")?.isLocked == false)
    }

    /// Unlocks of three keychains with passwords of their own, asked for at once, show their pinentries one
    /// after another, in the order asked, each answered right (one wrong answer asked again).
    @Test func promptsOfDifferentKeychainsShowOneAtATime() throws {
        let daemon = try Self.daemon(answers: ["password a", "password wrong", "password b", "password c"])
        let paths = try ["A", "B", "C"].map {
            try Self.createOwnPasswordCollection(daemon, $0, password: $0.lowercased())
        }
        try Self.lock(daemon, paths)
        daemon.clearSignals()
        let prompts = try paths.enumerated().map {
            try Self.promptToUnlock(daemon, $0.element, from: ":1.\(70 + $0.offset)")
        }
        daemon.settle()
        for (prompt, path) in zip(prompts, paths) {
            let completed = try #require(daemon.signals.first { $0.member == "Completed" && $0.path == prompt })
            #expect(try completed.arguments() == [.bool(false), .variant(.objectPaths([path]))])
        }
        #expect(try Self.pinentriesTookTurns(daemon))
        #expect(try daemon.pinentryCommands().filter { $0.command == "GETPIN" }.count == 4)
    }

    /// The right password always completes as not dismissed: another client locks the keychain before every
    /// result from off the serving thread is delivered, and the prompt still completes unlocked.
    @Test func aRightOwnPasswordCompletesUndismissedThoughLockedMeanwhile() throws {
        let daemon = try Self.daemon(answers: ["password vault password"])
        let vault = try Self.createOwnPasswordCollection(daemon, "Vault", password: "vault password")
        try Self.lock(daemon, [vault])
        daemon.clearSignals()
        let prompt = try Self.promptToUnlock(daemon, vault, from: ":1.80")
        var completed: DBusMessage?
        let deadline = Date().addingTimeInterval(30)
        while completed == nil, Date() < deadline {
            var entry = pollfd(fd: daemon.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            try Self.lock(daemon, [vault])
            completed = daemon.daemon.deliverCompletions().first { $0.member == "Completed" }
        }
        let signal = try #require(completed)
        #expect(signal.path == prompt)
        #expect(try signal.arguments() == [.bool(false), .variant(.objectPaths([vault]))])
        #expect(daemon.daemon.registry.keychain(id: "vault")?.isLocked == false)
    }

    /// A change prompt whose caller leaves ends its pinentry at once, whether it asks for the current password
    /// or the new one; nothing is sent, nothing changes, and the queue is empty after.
    @Test(arguments: [["hang"], ["password vault password", "hang"]])
    func aChangePromptWhoseCallerLeftEndsItsPinentry(answers: [String]) throws {
        let daemon = try Self.daemon(answers: answers)
        let vault = try Self.createOwnPasswordCollection(daemon, "Vault", password: "vault password")
        daemon.clearSignals()
        _ = try Self.promptToChange(daemon, vault, from: ":1.81")
        let pid = try Self.hangingPinentry(daemon)
        try daemon.leave(":1.81")
        PromptQueueTests.wait(daemon, seconds: 1) { PromptQueueTests.isGone(pid) }
        #expect(PromptQueueTests.isGone(pid), "ended within a second of its caller leaving")
        daemon.settle()
        #expect(daemon.daemon.registry.promptCount == 0)
        #expect(!daemon.signals.contains { $0.member == "Completed" })
        #expect(try Self.isOpened(daemon, vault, by: "vault password"))
    }

    /// Another client can neither show nor dismiss someone's change prompt; its owner's Dismiss ends the
    /// pinentry and completes it dismissed.
    @Test func aChangePromptBelongsToItsCaller() throws {
        let daemon = try Self.daemon(answers: ["hang"])
        let vault = try Self.createOwnPasswordCollection(daemon, "Vault", password: "vault password")
        let reply = try daemon.ok(
            Self.service, Self.privateInterface, "ChangeWithPrompt", [.objectPath(vault)], sender: ":1.82")
        let prompt = try #require(reply.first?.text)
        let denied = "org.freedesktop.DBus.Error.AccessDenied"
        #expect(try daemon.errorName(prompt, Self.prompt, "Prompt", [.string("")], sender: ":1.83") == denied)
        try daemon.ok(prompt, Self.prompt, "Prompt", [.string("")], sender: ":1.82")
        let pid = try Self.hangingPinentry(daemon)
        #expect(try daemon.errorName(prompt, Self.prompt, "Dismiss", sender: ":1.83") == denied)
        usleep(300_000)
        #expect(!PromptQueueTests.isGone(pid), "another client's Dismiss ends nothing")
        daemon.clearSignals()
        try daemon.ok(prompt, Self.prompt, "Dismiss", sender: ":1.82")
        PromptQueueTests.wait(daemon, seconds: 1) { PromptQueueTests.isGone(pid) }
        #expect(PromptQueueTests.isGone(pid))
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(try completed.arguments() == [.bool(true), .variant(.string(""))])
        daemon.settle()
        #expect(daemon.daemon.registry.promptCount == 0)
    }

    /// A change prompt and an unlock prompt asked for at once take turns: the change's three pinentries
    /// (current password, new password, again) show first, one after another, then the unlock's; both
    /// complete as not dismissed, and the new password opens the keychain.
    @Test func aChangePromptAndAnUnlockPromptTakeTurns() throws {
        let daemon = try Self.daemon(answers: [
            "password vault password", "password new vault", "password new vault", "password in-process password",
        ])
        let vault = try Self.createOwnPasswordCollection(daemon, "Vault", password: "vault password")
        let login = PromptQueueTests.login
        try Self.lock(daemon, [login, vault])
        daemon.clearSignals()
        let change = try Self.promptToChange(daemon, vault, from: ":1.84")
        let unlock = try Self.promptToUnlock(daemon, login, from: ":1.85")
        daemon.settle(seconds: 60)
        let changed = try #require(daemon.signals.first { $0.member == "Completed" && $0.path == change })
        #expect(try changed.arguments() == [.bool(false), .variant(.string(""))])
        let unlocked = try #require(daemon.signals.first { $0.member == "Completed" && $0.path == unlock })
        #expect(try unlocked.arguments() == [.bool(false), .variant(.objectPaths([login]))])
        #expect(try Self.pinentriesTookTurns(daemon))
        #expect(try Self.isOpened(daemon, vault, by: "new vault"))
        #expect(try !Self.isOpened(daemon, vault, by: "vault password"))
    }
}
