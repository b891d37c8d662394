import DBus
import Foundation
import KWalletFormat
import Testing

@testable import SecretService

/// The KWallet face's bounds on what a client can make it hold (docs/kwallet.md "Bounds, as built (review)"):
/// appids per handle, empty folders per collection, requests waiting for a prompt per connection, and
/// kwalletrc read again off the serving thread.
@Suite(.serialized) struct KWalletBoundsTests {
    static let path = KWalletObjectTests.path
    static let interface = KWalletObjectTests.interface

    /// `open(kdewallet)` as `appid` from `sender`: the handle.
    static func open(_ inproc: InProcessDaemon, appid: String, sender: String = ":1.7") throws -> Int32 {
        let reply = try KWalletObjectTests.kw(
            inproc, "open", [.string("kdewallet"), .int64(0), .string(appid)], sender: sender)
        guard case .int32(let handle)? = reply.first else { throw DBusError(.failed, "open: \(reply)") }
        return handle
    }

    @Test func aHandleHoldsABoundedSetOfAppids() throws {
        let inproc = try InProcessDaemon()
        inproc.daemon.kwallet.names = KWalletrc()
        let handle = try Self.open(inproc, appid: "app-0")
        #expect(handle > 0)
        for index in 1..<KWalletSessions.appidsPerHandle {
            #expect(try Self.open(inproc, appid: "app-\(index)") == handle)
        }
        #expect(try Self.open(inproc, appid: "one-too-many") == -1, "a further appid is refused")
        #expect(try Self.open(inproc, appid: "app-3") == handle, "a known appid opens one more session")
        #expect(inproc.daemon.kwallet.handles[handle]?.appids["app-3"] == 2)
        let users = try KWalletObjectTests.kw(inproc, "users", [.string("kdewallet")])
        guard case .array(_, let names)? = users.first else { throw DBusError(.failed, "users: \(users)") }
        #expect(names.count == KWalletSessions.appidsPerHandle)
        #expect(!names.contains(.string("one-too-many")))
        // Each session of an appid closes on its own; once an appid is gone, another fits.
        let close = { (appid: String) in
            try KWalletObjectTests.kw(inproc, "close", [.int32(handle), .bool(false), .string(appid)])
        }
        #expect(try close("app-3") == [.int32(1)])
        #expect(inproc.daemon.kwallet.handles[handle]?.appids["app-3"] == 1)
        #expect(try close("app-5") == [.int32(1)])
        #expect(try Self.open(inproc, appid: "one-too-many") == handle)
        // Another connection has its own handle and its own bound.
        #expect(try Self.open(inproc, appid: "elsewhere", sender: ":1.8") > 0)
    }

    @Test func emptyFoldersAreBoundedPerCollection() throws {
        let inproc = try InProcessDaemon()
        inproc.daemon.kwallet.names = KWalletrc()
        let handle = try Self.open(inproc, appid: "test-app")
        let create = { (folder: String) in
            try KWalletObjectTests.kw(
                inproc, "createFolder", [.int32(handle), .string(folder), .string("test-app")])
        }
        for index in 0..<KWalletSessions.emptyFoldersPerCollection {
            #expect(try create("empty-\(index)") == [.bool(true)])
        }
        #expect(try create("one-too-many") == [.bool(false)], "the collection holds its bound of empty folders")
        #expect(inproc.daemon.kwallet.emptyFolders["login"]?.count == KWalletSessions.emptyFoldersPerCollection)
        // Removing one makes room again.
        let removed = try KWalletObjectTests.kw(
            inproc, "removeFolder", [.int32(handle), .string("empty-0"), .string("test-app")])
        #expect(removed == [.bool(true)])
        #expect(try create("one-too-many") == [.bool(true)])
    }

    @Test func aConnectionHasABoundedNumberOfOpensWaiting() throws {
        let inproc = try InProcessDaemon(answers: ["hang"])
        try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock",
            [.objectPaths(["/org/freedesktop/secrets/collection/login"])])
        let arguments: [DBusValue] = [.string("kdewallet"), .int64(0), .string("test-app")]
        for _ in 0..<KWalletSessions.pendingPerConnection {
            let (now, _) = try inproc.send(Self.path, Self.interface, "open", arguments, sender: ":1.7")
            #expect(now == nil, "waits for the unlock prompt")
        }
        let (refused, _) = try inproc.send(Self.path, Self.interface, "open", arguments, sender: ":1.7")
        #expect(try refused?.arguments() == [.int32(-1)], "one more waiting open fails at once")
        #expect(inproc.daemon.kwallet.pendingCount == KWalletSessions.pendingPerConnection)
        // Another connection still waits its turn.
        let (other, _) = try inproc.send(Self.path, Self.interface, "open", arguments, sender: ":1.8")
        #expect(other == nil)
        try inproc.leave(":1.7")
        try inproc.leave(":1.8")
        #expect(inproc.daemon.kwallet.pendingCount == 0)
        inproc.settle()
    }

    @Test func reconfigureAppliesTheNamesItReadsOffTheServingThread() throws {
        let inproc = try InProcessDaemon()
        let file = inproc.directory + "/kwalletrc"
        try "[Wallet]\nDefault Wallet=Work\nUse One Wallet=false\nLocal Wallet=Here\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        inproc.daemon.kwallet.names = KWalletrc()
        inproc.daemon.kwallet.kwalletrcPath = file
        try KWalletObjectTests.kw(inproc, "reconfigure")
        // Not read on the serving thread: the names change when the read comes back (deliverCompletions).
        #expect(try KWalletObjectTests.kw(inproc, "networkWallet") == [.string("kdewallet")])
        #expect(inproc.daemon.kwallet.rereading.underWay)
        // A second call while the first read is under way reads once more after it.
        try KWalletObjectTests.kw(inproc, "reconfigure")
        inproc.settle()
        #expect(inproc.daemon.kwallet.rereading == (false, false))
        #expect(try KWalletObjectTests.kw(inproc, "networkWallet") == [.string("Work")])
        #expect(try KWalletObjectTests.kw(inproc, "localWallet") == [.string("Here")])
    }
}
