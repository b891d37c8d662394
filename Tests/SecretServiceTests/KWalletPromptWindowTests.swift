import DBus
import Foundation
import Glibc
import Testing

@testable import SecretService

/// A KWallet client's `wId` parents only the prompts of its own request: a prompt that two requests with
/// different windows share has none (docs/kwallet.md, "Locking and prompts, as built").
@Suite(.serialized) struct KWalletPromptWindowTests {
    static let path = "/modules/kwalletd5"
    static let interface = "org.kde.KWallet"

    /// The `OPTION parent-wid=…` arguments each pinentry run received, by its pid, and the pids that asked GETPIN.
    static func runs(_ inproc: InProcessDaemon) throws -> (windows: [Int32: [String]], asking: [Int32]) {
        let text = (try? String(contentsOfFile: inproc.pinentryLog, encoding: .utf8)) ?? ""
        var windows: [Int32: [String]] = [:]
        var asking: [Int32] = []
        for line in text.split(separator: "\n") {
            let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let pid = Int32(try #require(entry["pid"] as? Int))
            let argument = entry["argument"] as? String ?? ""
            if entry["command"] as? String == "OPTION", argument.hasPrefix("parent-wid=") {
                windows[pid, default: []].append(argument)
            }
            if entry["command"] as? String == "GETPIN", !asking.contains(pid) { asking.append(pid) }
        }
        return (windows, asking)
    }

    func open(_ inproc: InProcessDaemon, window: Int64, from client: String) throws -> DBusMessage {
        let sent = try inproc.send(
            Self.path, Self.interface, "open", [.string("kdewallet"), .int64(window), .string("app")], sender: client)
        #expect(sent.reply == nil, "waits for the unlock prompt")
        return sent.call
    }

    @Test func aPromptSharedByRequestsWithOtherWindowsHasNoParent() throws {
        let inproc = try InProcessDaemon(answers: ["hang", "password in-process password"])
        try PromptQueueTests.lockLogin(inproc)
        // A prompt of another request shows first (a password change, hanging), so that the unlock prompt the
        // two opens share waits in the queue until both have joined it.
        _ = try inproc.send(
            Self.path, Self.interface, "changePassword", [.string("kdewallet"), .int64(0), .string("other")],
            sender: ":1.60")
        try PromptQueueTests.wait(inproc) { try inproc.pinentryCommands().contains { $0.command == "HANGING" } }
        let first = try open(inproc, window: 11, from: ":1.61")
        let second = try open(inproc, window: 22, from: ":1.62")
        try inproc.leave(":1.60")
        // Both replies come from one delivery: collected here rather than one call at a time.
        var replies: [DBusMessage] = []
        let deadline = Date().addingTimeInterval(30)
        while replies.count < 2, Date() < deadline {
            var entry = pollfd(fd: inproc.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 100)
            replies += inproc.daemon.deliverCompletions().filter {
                $0.kind != .signal && [first.serial, second.serial].contains($0.replySerial)
            }
        }
        #expect(replies.count == 2)
        for reply in replies {
            guard case .int32(let handle)? = try reply.arguments().first else {
                Issue.record("open: \(reply)")
                continue
            }
            #expect(handle > 0)
        }
        let (windows, asking) = try Self.runs(inproc)
        #expect(asking.count == 2, "the change prompt, then one unlock prompt for both")
        #expect(windows.isEmpty, "neither client's window: \(windows)")
    }

    @Test func aRequestDoesNotJoinAPromptShowingOverAnotherWindow() throws {
        let inproc = try InProcessDaemon(answers: ["wait 2 cancel", "password in-process password"])
        try PromptQueueTests.lockLogin(inproc)
        let first = try open(inproc, window: 11, from: ":1.61")
        try PromptQueueTests.wait(inproc) { try inproc.pinentryCommands().contains { $0.command == "GETPIN" } }
        // The unlock prompt shows over window 11: the second request, from window 22, waits for a prompt of its
        // own (shown only if the first did not unlock), not for the one over another client's window.
        let second = try open(inproc, window: 22, from: ":1.62")
        let handles = try AccessPromptTests.awaitReplies(to: [first, second], in: inproc).map { reply in
            guard case .int32(let handle)? = try reply?.arguments().first else { return Int32(0) }
            return handle
        }
        #expect(handles.first == -1, "the first prompt was cancelled")
        #expect((handles.last ?? -1) > 0, "its own prompt unlocked: \(handles)")
        let (windows, asking) = try Self.runs(inproc)
        #expect(asking.count == 2)
        #expect(asking.map { windows[$0] ?? [] } == [["parent-wid=11"], ["parent-wid=22"]], "\(windows)")
    }
}
