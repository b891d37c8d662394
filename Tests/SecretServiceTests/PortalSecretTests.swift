import DBus
import Foundation
import Glibc
import Testing

@testable import SecretService

/// The Secret portal's backend, `org.freedesktop.impl.portal.Secret`, driven in-process with real pipes, as
/// xdg-desktop-portal calls it.
@Suite(.serialized) struct PortalSecretTests {
    static let portal = "/org/freedesktop/portal/desktop"
    static let interface = "org.freedesktop.impl.portal.Secret"
    static let service = "/org/freedesktop/secrets"

    /// A pipe whose write end goes in the call: its read end, and the call's arguments.
    private static func request(_ appID: String) throws -> (readEnd: Int32, arguments: [DBusValue]) {
        let ends = try makePipe()
        // The call keeps its own duplicate: ours closes when the value goes.
        let arguments: [DBusValue] = [
            .objectPath("/org/freedesktop/portal/desktop/request/1_5/t"), .string(appID),
            .unixFileDescriptor(DBusFileDescriptor(owning: ends[1])), .variantDictionary([:]),
        ]
        return (ends[0], arguments)
    }

    /// A pipe, both ends close-on-exec: read end, write end.
    private static func makePipe() throws -> [Int32] {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return ends
    }

    /// Everything in the pipe until its end (every write end closed), or until nothing comes for a second.
    private static func drain(_ readEnd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            var entry = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 1000) == 1 else { break }
            let count = read(readEnd, &buffer, buffer.count)
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        close(readEnd)
        return bytes
    }

    /// Calls RetrieveSecret for `appID`: the response code and what arrived in the pipe.
    private static func retrieve(_ daemon: InProcessDaemon, _ appID: String) throws -> (UInt32, [UInt8]) {
        let (readEnd, arguments) = try request(appID)
        let reply = try daemon.ok(portal, interface, "RetrieveSecret", arguments)
        guard case .uint32(let response)? = reply.first else {
            Issue.record("RetrieveSecret gave \(reply)")
            return (99, [])
        }
        #expect(reply.last == .variantDictionary([:]))
        return (response, drain(readEnd))
    }

    private static func search(_ daemon: InProcessDaemon, _ attributes: [String: String]) throws -> [DBusValue] {
        try daemon.ok(service, "org.freedesktop.Secret.Service", "SearchItems", [.stringDictionary(attributes)])
    }

    @Test func eachApplicationGetsItsOwnSecretKeptAsAnItemOfTheLoginKeychain() throws {
        let daemon = try InProcessDaemon()
        let (firstResponse, first) = try Self.retrieve(daemon, "org.example.A")
        #expect(firstResponse == 0)
        #expect(first.count == 64)
        #expect(Set(first).count > 8)
        let (againResponse, again) = try Self.retrieve(daemon, "org.example.A")
        #expect(againResponse == 0)
        #expect(again == first)
        let (otherResponse, other) = try Self.retrieve(daemon, "org.example.B")
        #expect(otherResponse == 0)
        #expect(other.count == 64)
        #expect(other != first)

        // One item per application, in the login collection, with the portal's schema and the id.
        let found = try Self.search(daemon, ["xdg:schema": "org.freedesktop.portal.Secret", "app_id": "org.example.A"])
        let paths = try #require(found.first?.objectPathList)
        #expect(paths.count == 1)
        let item = try #require(paths.first)
        #expect(item.hasPrefix("/org/freedesktop/secrets/collection/login/"))
        #expect(
            try Self.search(daemon, ["xdg:schema": "org.freedesktop.portal.Secret"]).first?.objectPathList?.count == 2)
        let attributes = try daemon.ok(
            item, "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Item"), .string("Attributes")])
        #expect(
            attributes == [
                .variant(.stringDictionary(["xdg:schema": "org.freedesktop.portal.Secret", "app_id": "org.example.A"]))
            ])
        let label = try daemon.ok(
            item, "org.freedesktop.DBus.Properties", "Get", [.string("org.freedesktop.Secret.Item"), .string("Label")])
        #expect(label == [.variant(.string("Application key for org.example.A"))])
        // The secret read through the Secret Service is the one the application got.
        let session = try daemon.openPlainSession()
        let secret = try daemon.ok(item, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(session)])
        guard case .structure(let members)? = secret.first, members.count == 4 else {
            Issue.record("GetSecret gave \(secret)")
            return
        }
        #expect(members[2] == .bytes(first))
        // Clients were told of the new items.
        #expect(daemon.signals.filter { $0.member == "ItemCreated" }.count == 2)
    }

    /// An item shaped as gnome-keyring's backend saves them (imported at the switch) is the application's
    /// key; another program's item that merely has an `app_id` attribute is not.
    @Test func aKeyGnomeKeyringMadeIsKeptAndOtherItemsWithAnAppIDAreNot() throws {
        let daemon = try InProcessDaemon()
        let session = try daemon.openPlainSession()
        _ = try daemon.createItem(
            session: session,
            attributes: ["app_id": "org.example.Old", "xdg:schema": "org.freedesktop.Secret.Generic"],
            secret: "made by gnome-keyring", label: "")
        _ = try daemon.createItem(
            session: session,
            attributes: ["app_id": "org.example.Other", "xdg:schema": "org.freedesktop.Secret.Generic", "user": "x"],
            secret: "somebody else's")
        let (oldResponse, old) = try Self.retrieve(daemon, "org.example.Old")
        #expect(oldResponse == 0)
        #expect(old == Array("made by gnome-keyring".utf8))
        #expect(try Self.search(daemon, ["app_id": "org.example.Old"]).first?.objectPathList?.count == 1)
        let (otherResponse, other) = try Self.retrieve(daemon, "org.example.Other")
        #expect(otherResponse == 0)
        #expect(other.count == 64)
        #expect(try Self.search(daemon, ["app_id": "org.example.Other"]).first?.objectPathList?.count == 2)
    }

    @Test func aRequestWithoutAnApplicationIDIsRefusedAndStoresNothing() throws {
        let daemon = try InProcessDaemon()
        let (response, bytes) = try Self.retrieve(daemon, "")
        #expect(response == 2)
        #expect(bytes.isEmpty)
        #expect(try Self.search(daemon, ["xdg:schema": "org.freedesktop.portal.Secret"]).first?.objectPathList == [])
    }

    @Test func aLockedLoginKeychainIsUnlockedThroughThePromptFirst() throws {
        let daemon = try InProcessDaemon(answers: ["password in-process password", "cancel"])
        let (_, first) = try Self.retrieve(daemon, "org.example.A")
        let login = "/org/freedesktop/secrets/collection/login"
        try daemon.ok(Self.service, "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])])

        // Answered once the prompt has unlocked the keychain, with the same secret.
        var (readEnd, arguments) = try Self.request("org.example.A")
        let (immediate, call) = try daemon.send(Self.portal, Self.interface, "RetrieveSecret", arguments)
        #expect(immediate == nil)
        let reply = try #require(daemon.awaitCompletion(of: call))
        #expect(try reply.arguments() == [.uint32(0), .variantDictionary([:])])
        #expect(daemon.daemon.registry.login?.isLocked == false)
        #expect(Self.drain(readEnd) == first)

        // A prompt the user cancels leaves it locked: response 2 and nothing written.
        try daemon.ok(Self.service, "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])])
        (readEnd, arguments) = try Self.request("org.example.A")
        let (_, cancelled) = try daemon.send(Self.portal, Self.interface, "RetrieveSecret", arguments)
        let refusal = try #require(daemon.awaitCompletion(of: cancelled))
        #expect(try refusal.arguments() == [.uint32(2), .variantDictionary([:])])
        #expect(daemon.daemon.registry.login?.isLocked == true)
        #expect(Self.drain(readEnd).isEmpty)
    }

    /// While the prompt shows, the request is an `org.freedesktop.impl.portal.Request` at its handle: the
    /// portal (and no one else) may close it; the call is answered "cancelled" at once and, when the prompt
    /// unlocks the keychain after all, nothing is written.
    @Test func aRequestClosedWhileThePromptShowsIsAnsweredCancelledAndGetsNothing() throws {
        let daemon = try InProcessDaemon(answers: ["password in-process password"])
        let login = "/org/freedesktop/secrets/collection/login"
        try daemon.ok(Self.service, "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])])
        let (readEnd, arguments) = try Self.request("org.example.A")
        let handle = try #require(arguments.first?.text)
        let (immediate, call) = try daemon.send(
            Self.portal, Self.interface, "RetrieveSecret", arguments, sender: ":1.40")
        #expect(immediate == nil)
        let request = "org.freedesktop.impl.portal.Request"
        #expect(
            try daemon.errorName(handle, request, "Close", sender: ":1.41") == "org.freedesktop.DBus.Error.AccessDenied"
        )
        let close = try daemon.message(handle, request, "Close", sender: ":1.40")
        let sent = daemon.daemon.handle(close)
        #expect(sent.first { $0.replySerial == close.serial }?.kind == .methodReturn)
        // The RetrieveSecret is answered with the Close: cancelled.
        let answer = try #require(sent.first { $0.replySerial == call.serial })
        #expect(try answer.arguments() == [.uint32(1), .variantDictionary([:])])
        // The prompt runs to its end: the keychain is unlocked, and nothing is written.
        daemon.settle()
        #expect(daemon.daemon.registry.login?.isLocked == false)
        #expect(Self.drain(readEnd).isEmpty)
        #expect(
            try daemon.errorName(handle, request, "Close", sender: ":1.40")
                == "org.freedesktop.Secret.Error.NoSuchObject")
    }

    /// A pipe its reader filled would block a plain write: the request fails at once instead, and the
    /// descriptor's flags are as they were.
    @Test func aFullPipeFailsTheRequestWithoutStallingTheDaemon() throws {
        let daemon = try InProcessDaemon()
        let ends = try Self.makePipe()
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        defer { close(ends[0]) }
        let filler = [UInt8](repeating: 7, count: 4096)
        while write(ends[1], filler, filler.count) > 0 {}
        // Blocking again, as a client's pipe is.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) & ~O_NONBLOCK)
        let writeEnd = DBusFileDescriptor(owning: ends[1])
        let reply = try daemon.ok(
            Self.portal, Self.interface, "RetrieveSecret",
            [
                .objectPath("/org/freedesktop/portal/desktop/request/1_5/t"), .string("org.example.Full"),
                .unixFileDescriptor(writeEnd), .variantDictionary([:]),
            ])
        #expect(reply.first == .uint32(2))
        #expect(fcntl(writeEnd.rawValue, F_GETFL) & O_NONBLOCK == 0)
        // The secret was made and kept: a later request gets it.
        #expect(try Self.search(daemon, ["app_id": "org.example.Full"]).first?.objectPathList?.count == 1)
    }

    @Test func theBackendIsIntrospectableWhereThePortalCallsIt() throws {
        let daemon = try InProcessDaemon()
        let xml = try #require(
            try daemon.ok(Self.portal, "org.freedesktop.DBus.Introspectable", "Introspect").first?.text)
        #expect(xml.contains("<interface name=\"org.freedesktop.impl.portal.Secret\">"))
        #expect(xml.contains("<arg name=\"fd\" type=\"h\" direction=\"in\"/>"))
        #expect(
            try daemon.ok(
                Self.portal, "org.freedesktop.DBus.Properties", "Get", [.string(Self.interface), .string("version")])
                == [.variant(.uint32(1))])
        let parent = try #require(
            try daemon.ok("/org/freedesktop/portal", "org.freedesktop.DBus.Introspectable", "Introspect").first?.text)
        #expect(parent.contains("<node name=\"desktop\"/>"))
    }
}
