import DBus
import Foundation
import Glibc
import KeychainCore
import Testing

@testable import SecretService

/// A change or deletion of an item by a caller the item does not trust waits for the person's answer in a
/// prompt, as a read does (AccessChecks.swift); denied, withdrawn or answered late, it changes nothing.
@Suite struct WriteAccessTests {
    static let properties = "org.freedesktop.DBus.Properties"

    /// The item's label, read by the store (not through the caller's eyes).
    static func label(at path: String, in inproc: InProcessDaemon) throws -> String? {
        guard case .item(let held, let reference)? = inproc.daemon.resolve(path),
            case .string(let label)? = try held.item(reference, returning: .attributes)?.attributes?[.label]
        else { return nil }
        return label
    }

    @Test func aRelabelByAnUntrustedCallerWaitsForItsPromptAndADenyChangesNothing() throws {
        let (inproc, _, path) = try AccessPromptTests.untrustedItem(answers: ["cancel", "ok"])
        let arguments: [DBusValue] = [
            .string(AccessPromptTests.itemInterface), .string("Label"), .variant(.string("Bank (official)")),
        ]
        let (now, call) = try inproc.send(path, Self.properties, "Set", arguments)
        #expect(now == nil, "the reply waits for the prompt")
        let denied = try #require(inproc.awaitCompletion(of: call))
        #expect(denied.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(try Self.label(at: path, in: inproc) == "mail password")
        let description = try #require(AccessPromptTests.arguments(of: "SETDESC", in: inproc).last)
        #expect(description.contains("wants to CHANGE “mail password”"))
        #expect(AccessPromptTests.arguments(of: "SETNOTOK", in: inproc).isEmpty, "no Always allow for a change")

        let (_, again) = try inproc.send(path, Self.properties, "Set", arguments)
        let allowed = try #require(inproc.awaitCompletion(of: again))
        #expect(allowed.kind == .methodReturn)
        #expect(try Self.label(at: path, in: inproc) == "Bank (official)")
        #expect(inproc.daemon.accessTickets.isEmpty)
    }

    @Test func aDeleteWhoseClientLeavesBeforeTheAnswerDeletesNothing() throws {
        let (inproc, _, path) = try AccessPromptTests.untrustedItem(answers: ["hang"])
        let (now, _) = try inproc.send(path, AccessPromptTests.itemInterface, "Delete")
        #expect(now == nil)
        let deadline = Date().addingTimeInterval(20)
        while AccessPromptTests.arguments(of: "CONFIRM", in: inproc).isEmpty, Date() < deadline { usleep(20_000) }
        #expect(AccessPromptTests.arguments(of: "SETDESC", in: inproc).last?.contains("wants to DELETE") == true)
        try inproc.leave(":1.7")
        inproc.settle()
        #expect(inproc.daemon.registry.promptCount == 0)
        #expect(inproc.daemon.accessTickets.isEmpty)
        #expect(try Self.label(at: path, in: inproc) == "mail password", "still there")
    }
}
