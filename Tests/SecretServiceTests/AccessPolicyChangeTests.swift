import DBus
import Foundation
import Glibc
import Keychain1
import KeychainCore
import Testing

@testable import SecretService

/// `org.latchkey.Keychain1.SetAccessPolicy`: `allow-all` only after the user confirms it in a prompt that
/// belongs to the caller, `prompt` at once, bad words refused; `Status` tells the policy.
@Suite struct AccessPolicyChangeTests {
    static let login = Keychain1Interface.path(collection: "login")

    static func status(_ daemon: InProcessDaemon) throws -> KeychainDescription {
        let reply = try daemon.ok(Self.login, Keychain1Interface.interface, "Status")
        return try Keychain1Interface.decodeDescription(try #require(reply.first))
    }

    /// The keychain status an error reply of `Keychain1` carries.
    static func errorStatus(_ reply: DBusMessage?) -> KeychainStatus? {
        guard let reply, reply.errorName == Keychain1Interface.statusError,
            case .string(let message)? = try? reply.arguments().first
        else { return nil }
        return Keychain1Interface.keychainError(DBusError(name: Keychain1Interface.statusError, message: message))
            .status
    }

    @Test func allowAllWaitsForTheConfirmationAndPromptDoesNot() throws {
        let daemon = try InProcessDaemon(answers: ["deny", "confirm"])
        #expect(try Self.status(daemon).accessPolicy == .prompt)
        #expect(try Self.status(daemon).accessPolicyChecked)

        let refused = try daemon.send(
            Self.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("allow-all")])
        #expect(refused.reply == nil, "the reply waits for the user")
        let declined = try #require(daemon.awaitCompletion(of: refused.call))
        #expect(Self.errorStatus(declined) == .userCanceled)
        #expect(try Self.status(daemon).accessPolicy == .prompt)

        let asked = try daemon.send(Self.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("allow-all")])
        let confirmed = try #require(daemon.awaitCompletion(of: asked.call))
        #expect(confirmed.kind == .methodReturn)
        #expect(try Self.status(daemon).accessPolicy == .allowAll)
        #expect(try daemon.daemon.registry.keychain(id: "login")?.keychain.accessPolicy() == .allowAll)
        #expect(try daemon.pinentryCommands().filter { $0.command == "CONFIRM" }.count == 2)

        try daemon.ok(Self.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("prompt")])
        #expect(try Self.status(daemon).accessPolicy == .prompt)
        #expect(try daemon.pinentryCommands().filter { $0.command == "CONFIRM" }.count == 2, "prompt asks nothing")

        let bad = try daemon.send(Self.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("everyone")])
            .reply
        #expect(Self.errorStatus(bad) == .param)
    }

    /// The caller that asked leaves while its confirmation shows: the pinentry is ended at once and nothing
    /// changes; no other client's answer can stand in for it.
    @Test func theConfirmationEndsWhenItsCallerLeaves() throws {
        let daemon = try InProcessDaemon(answers: ["hang", "confirm"])
        let asked = try daemon.send(
            Self.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("allow-all")], sender: ":1.40")
        #expect(asked.reply == nil)
        try PromptQueueTests.wait(daemon) { try daemon.pinentryCommands().contains { $0.command == "CONFIRM" } }
        let pid = try #require(try daemon.pinentryCommands().first { $0.command == "CONFIRM" }?.pid)
        try daemon.leave(":1.41")
        usleep(200_000)
        #expect(!PromptQueueTests.isGone(pid), "another client leaving does not end it")
        try daemon.leave(":1.40")
        PromptQueueTests.wait(daemon, seconds: 5) { PromptQueueTests.isGone(pid) }
        #expect(PromptQueueTests.isGone(pid))
        daemon.settle()
        #expect(daemon.daemon.registry.promptCount == 0)
        #expect(daemon.daemon.policyConfirmations.isEmpty)
        #expect(try Self.status(daemon).accessPolicy == .prompt)
    }

    @Test func aLockedKeychainsPolicyIsNotChangedAndIsShownUnchecked() throws {
        let daemon = try InProcessDaemon()
        try daemon.ok(Self.login, Keychain1Interface.interface, "Lock")
        let reply = try daemon.send(Self.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("prompt")])
            .reply
        #expect(Self.errorStatus(reply) == .interactionNotAllowed)
        #expect(try Self.status(daemon).accessPolicyChecked == false)
        #expect(try daemon.pinentryCommands().isEmpty)
    }
}
