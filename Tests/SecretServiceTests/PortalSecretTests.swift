import CallerIdentity
import DBus
import Foundation
import Glibc
import Keychain1
import KeychainCore
import Testing

@testable import SecretService

/// This test process, as the daemons below take it for xdg-desktop-portal: its executable's path, and whether
/// it passes for a program only root could have installed (the tests run as root from root-owned directories).
enum PortalStandIn {
    static let executable: String =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "/proc/self/exe"
    static let program = String(executable.split(separator: "/").last ?? "")
    static let passes = ProcessInspector().runsSystemProgram("/proc/self", executable: executable)

    /// A daemon that identifies its callers and answers `owner`, this process, as the owner of
    /// `org.freedesktop.portal.Desktop` running the portal's program.
    static func daemon(answers: [String] = [], owner: String = ":1.7") throws -> InProcessDaemon {
        let daemon = try InProcessDaemon(answers: answers, identifiesCallers: true, portalProgram: program)
        try daemon.ownerChanged(PortalGate.portalName, from: "", to: owner)
        _ = try CallerAccessTests.introduce(owner, to: daemon)
        return daemon
    }
}

/// The Secret portal's backend, `org.freedesktop.impl.portal.Secret`, driven in-process with real pipes, as
/// xdg-desktop-portal calls it (this test process standing in for it).
@Suite(
    .serialized,
    .enabled(if: PortalStandIn.passes, "the test binary must be a root-owned file in root-owned directories")
)
struct PortalSecretTests {
    static let portal = "/org/freedesktop/portal/desktop"
    static let interface = "org.freedesktop.impl.portal.Secret"
    static let service = "/org/freedesktop/secrets"

    /// A pipe whose write end goes in the call: its read end, and the call's arguments.
    static func request(_ appID: String) throws -> (readEnd: Int32, arguments: [DBusValue]) {
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
    static func drain(_ readEnd: Int32) -> [UInt8] {
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
    static func retrieve(_ daemon: InProcessDaemon, _ appID: String) throws -> (UInt32, [UInt8]) {
        let (readEnd, arguments) = try request(appID)
        let reply = try daemon.ok(portal, interface, "RetrieveSecret", arguments)
        guard case .uint32(let response)? = reply.first else {
            Issue.record("RetrieveSecret gave \(reply)")
            return (99, [])
        }
        #expect(reply.last == .variantDictionary([:]))
        return (response, drain(readEnd))
    }

    static func search(_ daemon: InProcessDaemon, _ attributes: [String: String]) throws -> [DBusValue] {
        try daemon.ok(service, "org.freedesktop.Secret.Service", "SearchItems", [.stringDictionary(attributes)])
    }

    @Test func eachApplicationGetsItsOwnSecretKeptAsAnItemOfTheLoginKeychain() throws {
        let daemon = try PortalStandIn.daemon()
        // Read back below through the Secret Service without an access prompt.
        try #require(daemon.daemon.registry.login).keychain.setAccessPolicy(.allowAll)
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

    /// Items a client planted before the application first asked, shaped as this backend's keys and as
    /// gnome-keyring's, with secrets the client knows: the application gets a key the backend makes and
    /// marks, and the planted items stay as they were (nothing of theirs is overwritten or lost).
    @Test func anItemAClientPlantedIsNeverAnApplicationsKey() throws {
        let daemon = try PortalStandIn.daemon()
        let session = try daemon.openPlainSession()
        let planted = [
            (
                "org.example.Old", ["app_id": "org.example.Old", "xdg:schema": "org.freedesktop.Secret.Generic"],
                "planted as gnome-keyring's"
            ),
            (
                "org.example.Mine", ["app_id": "org.example.Mine", "xdg:schema": "org.freedesktop.portal.Secret"],
                "planted as latchkey's"
            ),
        ]
        for (_, attributes, secret) in planted {
            _ = try daemon.createItem(session: session, attributes: attributes, secret: secret, label: "")
        }
        for (appID, _, secret) in planted {
            let (response, key) = try Self.retrieve(daemon, appID)
            #expect(response == 0)
            #expect(key.count == 64 && key != Array(secret.utf8))
            #expect(try Self.retrieve(daemon, appID) == (0, key))
            let found = try #require(try Self.search(daemon, ["app_id": appID]).first?.objectPathList)
            #expect(found.count == 2)
            let stored = try found.compactMap { path -> [UInt8]? in
                guard case .item(let held, let reference)? = daemon.daemon.resolve(path) else { return nil }
                return try held.item(reference, returning: .data)?.secret.map { [UInt8]($0) }
            }
            #expect(Set(stored) == [Array(secret.utf8), key])
        }
    }

    /// A key gnome-keyring's backend made, imported with the mark (`GnomeKeyringImporter.newItem`), is the
    /// application's key. Found by the mark alone: a client that changes a marked item's `app_id` does not make
    /// it another application's key.
    @Test func aMarkedKeyIsTheKeyOfTheApplicationItsMarkNames() throws {
        let daemon = try PortalStandIn.daemon()
        let login = try #require(daemon.daemon.registry.login)
        let imported = AttributeMapping.secretServiceItem(
            label: "", attributes: ["app_id": "org.example.Old", "xdg:schema": "org.freedesktop.Secret.Generic"],
            contentType: "text/plain"
        ).merging([.portalKey: .string("org.example.Old")]) { $1 }
        let item = try login.keychain.add(
            .genericPassword, attributes: imported, secret: Data("made by gnome-keyring".utf8))
        #expect(try Self.retrieve(daemon, "org.example.Old") == (0, Array("made by gnome-keyring".utf8)))
        #expect(try Self.search(daemon, ["app_id": "org.example.Old"]).first?.objectPathList?.count == 1)

        // Its app_id changed (through the store: through the Secret Service the change is a write to an item
        // that trusts no application, asked about first; WriteAccessTests).
        try login.update(
            item.reference, attributes: ["app_id": "org.example.Victim", "xdg:schema": "org.freedesktop.portal.Secret"])
        let (response, victim) = try Self.retrieve(daemon, "org.example.Victim")
        #expect(response == 0)
        #expect(victim.count == 64)
        #expect(try Self.retrieve(daemon, "org.example.Old") == (0, Array("made by gnome-keyring".utf8)))
    }

    /// `org.latchkey.Keychain1` refuses the mark (the Secret Service face refuses every `lk:` name): no client
    /// can make an item of its own pass for an application's key.
    @Test func noClientCanSetTheMark() throws {
        let daemon = try PortalStandIn.daemon()
        let native = Keychain1Interface.path(collection: "login")
        let marked: ItemAttributes = [.service: .string("planted"), .portalKey: .string("org.example.A")]
        let add = try #require(
            try daemon.send(
                native, Keychain1Interface.interface, "Add",
                [
                    .string(ItemClass.genericPassword.rawValue), Keychain1Interface.encode(marked), .bytes([1]),
                    .bool(true),
                ]
            ).reply)
        #expect(add.errorName == Keychain1Interface.statusError)
        try daemon.ok(
            native, Keychain1Interface.interface, "Add",
            [
                .string(ItemClass.genericPassword.rawValue), Keychain1Interface.encode([.service: .string("planted")]),
                .bytes([1]), .bool(true),
            ])
        let update = try #require(
            try daemon.send(
                native, Keychain1Interface.interface, "Update",
                [
                    Keychain1Interface.encode(ItemQuery(.genericPassword, attributes: [.service: .string("planted")])),
                    Keychain1Interface.encode([.portalKey: .string("org.example.A")]), .bytes([]), .bool(false),
                ]
            ).reply)
        #expect(update.errorName == Keychain1Interface.statusError)
        let (response, key) = try Self.retrieve(daemon, "org.example.A")
        #expect(response == 0)
        #expect(key != [1])
        let createdWithMark = try daemon.errorName(
            "/org/freedesktop/secrets/collection/login", "org.freedesktop.Secret.Collection", "CreateItem",
            [
                .variantDictionary([
                    "org.freedesktop.Secret.Item.Attributes": .stringDictionary(["lk:portal-key": "org.example.A"])
                ]),
                .structure([.objectPath(try daemon.openPlainSession()), .bytes([]), .bytes([1]), .string("text/plain")]
                ),
                .bool(false),
            ])
        #expect(createdWithMark == "org.freedesktop.DBus.Error.InvalidArgs")
    }

    @Test func aRequestWithoutAnApplicationIDIsRefusedAndStoresNothing() throws {
        let daemon = try PortalStandIn.daemon()
        let (response, bytes) = try Self.retrieve(daemon, "")
        #expect(response == 2)
        #expect(bytes.isEmpty)
        #expect(try Self.search(daemon, ["xdg:schema": "org.freedesktop.portal.Secret"]).first?.objectPathList == [])
    }

    @Test func aLockedLoginKeychainIsUnlockedThroughThePromptFirst() throws {
        let daemon = try PortalStandIn.daemon(answers: ["password in-process password", "cancel"])
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
        let daemon = try PortalStandIn.daemon(answers: ["password in-process password"], owner: ":1.40")
        for client in [":1.41", ":1.7"] { _ = try CallerAccessTests.introduce(client, to: daemon) }
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
        let daemon = try PortalStandIn.daemon()
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

/// Who the backend answers: the owner of `org.freedesktop.portal.Desktop`, identified as running the portal's
/// program as the system installed it. Anyone else calling RetrieveSecret, with any application's id, gets
/// `AccessDenied`, nothing written and nothing stored.
@Suite(.serialized) struct PortalGateTests {
    static let portal = PortalSecretTests.portal
    static let interface = PortalSecretTests.interface

    /// The error name a RetrieveSecret for `appID` from `sender` gets, and what came in its pipe.
    static func refusal(_ daemon: InProcessDaemon, _ appID: String, sender: String = ":1.7") throws -> (
        String?, [UInt8]
    ) {
        let (readEnd, arguments) = try PortalSecretTests.request(appID)
        let reply = try #require(try daemon.send(portal, interface, "RetrieveSecret", arguments, sender: sender).reply)
        return (reply.errorName, PortalSecretTests.drain(readEnd))
    }

    static let denied = "org.freedesktop.DBus.Error.AccessDenied"

    @Test func onlyTheCurrentOwnerOfThePortalNameIsAnswered() throws {
        let daemon = try InProcessDaemon(identifiesCallers: true, portalProgram: PortalStandIn.program)
        _ = try CallerAccessTests.introduce(":1.7", to: daemon)
        _ = try CallerAccessTests.introduce(":1.9", to: daemon)
        // Nobody owns the name: nobody is answered.
        #expect(try Self.refusal(daemon, "org.example.A") == (Self.denied, []))
        try daemon.ownerChanged(PortalGate.portalName, from: "", to: ":1.7")
        // The same program on another connection is not the owner.
        #expect(try Self.refusal(daemon, "org.example.A", sender: ":1.9") == (Self.denied, []))
        if PortalStandIn.passes {
            #expect(try PortalSecretTests.retrieve(daemon, "org.example.A").0 == 0)
        }
        // A signal claiming a new owner counts only from the bus itself.
        let forged = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            arguments: [.string(PortalGate.portalName), .string(":1.7"), .string(":1.9")])
        forged.stampAsDelivered(from: ":1.9", serial: 900)
        _ = daemon.daemon.handle(forged)
        #expect(try Self.refusal(daemon, "org.example.A", sender: ":1.9") == (Self.denied, []))
        // The portal left: its name's next owner must be identified as the portal too.
        try daemon.ownerChanged(PortalGate.portalName, from: ":1.7", to: "")
        #expect(try Self.refusal(daemon, "org.example.A") == (Self.denied, []))
    }

    @Test func anotherProgramOwningThePortalNameIsRefused() throws {
        // The owner runs this test binary, not xdg-desktop-portal.
        let daemon = try InProcessDaemon(identifiesCallers: true)
        try daemon.ownerChanged(PortalGate.portalName, from: "", to: ":1.7")
        _ = try CallerAccessTests.introduce(":1.7", to: daemon)
        #expect(try Self.refusal(daemon, "org.example.A") == (Self.denied, []))
        #expect(
            try PortalSecretTests.search(daemon, ["app_id": "org.example.A"]).first?.objectPathList == [],
            "nothing was made")
    }

    @Test func withoutCallerIdentificationNobodyIsAnswered() throws {
        let daemon = try InProcessDaemon(portalProgram: PortalStandIn.program)
        try daemon.ownerChanged(PortalGate.portalName, from: "", to: ":1.7")
        #expect(try Self.refusal(daemon, "org.example.A") == (Self.denied, []))
    }
}
