import AccessControl
import CallerIdentity
import DBus
import Foundation
import Glibc
import Keychain1
import KeychainCore
import Testing

@testable import SecretService

/// The daemon identifies each client from the bus and `/proc`, records the application that creates an
/// item in its access list, and keeps the list out of the Secret Service's reach.
@Suite struct CallerAccessTests {
    static let collection = "/org/freedesktop/secrets/collection/login"
    static let itemInterface = "org.freedesktop.Secret.Item"

    /// This test process as the daemon should record it: its executable and the file's SHA-256.
    static func thisProcess() throws -> TrustedApplication {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        try #require(count > 0)
        let path = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return TrustedApplication(name: path, digest: try FileDigester().digest(ofFileAt: path).description)
    }

    /// Opens a plain session for `sender`, answering the daemon's credentials request with `pid` (0: the
    /// bus says the name is gone); the session's path.
    static func introduce(_ sender: String, to inproc: InProcessDaemon, pid: Int32 = getpid()) throws -> String {
        let call = try inproc.message(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession",
            [.string("plain"), .variant(.string(""))], sender: sender)
        let first = inproc.daemon.handle(call)
        #expect(!first.contains { $0.replySerial == call.serial }, "the first call waits for the caller's identity")
        let asked = first.filter { $0.member == "GetConnectionCredentials" }
        #expect(asked.count == 1)
        #expect(try asked.first?.arguments() == [.string(sender)])
        let answered = try inproc.answerCredentials(in: first, pid: pid)
        let reply =
            try answered.first { $0.replySerial == call.serial } ?? #require(inproc.awaitCompletion(of: call))
        #expect(reply.kind == .methodReturn)
        return try #require(try reply.arguments().last?.text)
    }

    /// The access list stored with the item at `path` (read past the Secret Service's view).
    static func access(of path: String, in inproc: InProcessDaemon) throws -> ItemAccess {
        guard case .item(let held, let reference)? = inproc.daemon.resolve(path) else {
            Issue.record("no item at \(path)")
            return ItemAccess()
        }
        let item = try #require(try held.item(reference, returning: .attributes))
        return ItemAccess(attributes: item.attributes ?? [:])
    }

    @Test func anItemCreatedByAnIdentifiedClientTrustsThatClient() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        let session = try Self.introduce(":1.7", to: inproc)
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        let access = try Self.access(of: path, in: inproc)
        #expect(access.trustedApplications == [try Self.thisProcess()])
        #expect(!access.anyApplication)
        // Asked once per connection: the second call is served at once.
        let again = try inproc.send(
            Self.collection, "org.freedesktop.Secret.Collection", "SearchItems",
            [
                .stringDictionary(["service": "mail"])
            ])
        #expect(again.reply?.kind == .methodReturn)
    }

    @Test func anUnidentifiedClientCreatesAnItemWithNoList() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        let session = try Self.introduce(":1.9", to: inproc, pid: 0)
        let path = try inproc.createItem(
            session: session, attributes: ["service": "mail"], secret: "s3cret", sender: ":1.9")
        #expect(try Self.access(of: path, in: inproc).isEmpty)
    }

    @Test func callsOfAnUnidentifiedSenderWaitInOrderAndOthersDoNot() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        let first = try inproc.message(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession",
            [.string("plain"), .variant(.string(""))], sender: ":1.7")
        let asked = inproc.daemon.handle(first)
        let second = try inproc.message(
            Self.collection, "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Collection"), .string("Label")], sender: ":1.7")
        #expect(inproc.daemon.handle(second).isEmpty, "held behind the first, not asked again")
        // Another client that is identified already is not held.
        _ = try Self.introduce(":1.8", to: inproc)
        let other = try inproc.send(
            Self.collection, "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Collection"), .string("Label")], sender: ":1.8")
        #expect(other.reply?.kind == .methodReturn)
        var sent = try inproc.answerCredentials(in: asked)
        let deadline = Date().addingTimeInterval(30)
        while sent.filter({ $0.kind == .methodReturn }).count < 2, Date() < deadline {
            var entry = pollfd(fd: inproc.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 100)
            sent += inproc.daemon.deliverCompletions()
        }
        #expect(sent.filter { $0.kind == .methodReturn }.map(\.replySerial) == [first.serial, second.serial])
    }

    /// A connection is identified when the bus announces it, before its first call (the process that
    /// connected, not a program it executes later); a process that executed another program since is
    /// unidentified at its next secret request, and creates items that trust nothing.
    @Test func aConnectionIsIdentifiedWhenItAppearsAndNotAsAProgramItExecutesLater() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        // A shell under a name of its own: `sh -c` is inline code, which no item trusts (a tool any program can
        // run), while this program is identified as itself and trusted with what it creates.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waiter-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let waiter = directory.appendingPathComponent("waiter")
        try FileManager.default.copyItem(
            atPath: URL(fileURLWithPath: "/bin/sh").resolvingSymlinksInPath().path, toPath: waiter.path)
        let process = Process()
        let input = Pipe()
        process.executableURL = waiter
        process.arguments = ["-c", "read line; exec /bin/sleep 30"]
        process.standardInput = input
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let pid = process.processIdentifier
        func executable() -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") }
        // Up to 60 s (a loaded machine starts a process slowly); the test goes on only once the process runs it.
        func waitFor(_ path: String) throws {
            for _ in 0..<6_000 where executable() != path { usleep(10_000) }
            try #require(executable() == path, "the process runs \(path)")
        }
        try waitFor(waiter.path)

        let asked = try inproc.arrive(":1.7")
        #expect(asked.filter { $0.member == "GetConnectionCredentials" }.count == 1, "asked before any call")
        _ = try inproc.answerCredentials(in: asked, pid: pid)
        inproc.settle()
        let identified = try #require(inproc.daemon.application(of: ":1.7"))
        #expect(identified.name == executable())
        // Its first call is served at once, and the item it creates trusts it.
        let opened = try inproc.send(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession",
            [.string("plain"), .variant(.string(""))])
        let session = try #require(try opened.reply?.arguments().last?.text)
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        #expect(try Self.access(of: path, in: inproc).trustedApplications.map(\.name) == [identified.name])
        guard case .item(let held, let reference)? = inproc.daemon.resolve(path) else {
            Issue.record("no item at \(path)")
            return
        }
        let target = SecretServiceDaemon.SecretTarget(held: held, reference: reference)
        #expect(inproc.daemon.decide(.read, target, caller: ":1.7") == .allowed, "the creator is trusted")

        // The process executes another program (its pid and start time unchanged).
        input.fileHandleForWriting.write(Data("go\n".utf8))
        try waitFor("/usr/bin/sleep")
        let decision = inproc.daemon.decide(.read, target, caller: ":1.7")
        guard case .ask(let question) = decision, case .unidentified(let reason) = question.asker else {
            Issue.record("still identified: \(decision)")
            return
        }
        #expect(reason.description.contains("started another program"))
        #expect(inproc.daemon.application(of: ":1.7") == nil, "what it creates trusts nothing")
    }

    @Test func aSenderThatLeftIsAskedAgainUnderItsNameNoMore() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        _ = try Self.introduce(":1.7", to: inproc)
        #expect(inproc.daemon.application(of: ":1.7") != nil)
        try inproc.leave(":1.7")
        #expect(inproc.daemon.application(of: ":1.7") == nil)
        #expect(inproc.daemon.callers?.entries[":1.7"] == nil)
    }

    @Test func latchkeyAttributesAreNeitherShownNorMatchedNorSetThroughTheSecretService() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        let session = try Self.introduce(":1.7", to: inproc)
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        let before = try Self.access(of: path, in: inproc)
        #expect(!before.isEmpty)

        let shown = try inproc.ok(
            path, "org.freedesktop.DBus.Properties", "Get", [.string(Self.itemInterface), .string("Attributes")])
        guard case .variant(let attributes)? = shown.first, let pairs = attributes.stringPairs else {
            Issue.record("Attributes is a{ss}: \(shown)")
            return
        }
        #expect(pairs == ["service": "mail"])

        var stored = ""
        if case .string(let text)? = before.attributes[ItemAccess.trustedApplicationsKey] { stored = text }
        let search = try inproc.ok(
            Self.collection, "org.freedesktop.Secret.Collection", "SearchItems",
            [.stringDictionary(["lk:trusted-apps": stored])])
        let found = search.first?.objectPathList
        #expect(found == [])

        let set = try inproc.errorName(
            path, "org.freedesktop.DBus.Properties", "Set",
            [
                .string(Self.itemInterface), .string("Attributes"),
                .variant(
                    .stringDictionary(["service": "mail", "lk:trusted-apps": "/usr/bin/evil", "lk:any-app": "1"])),
            ])
        #expect(set == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try Self.access(of: path, in: inproc) == before)

        let create = try inproc.errorName(
            Self.collection, "org.freedesktop.Secret.Collection", "CreateItem",
            [
                .variantDictionary([
                    "org.freedesktop.Secret.Item.Attributes": .stringDictionary(["lk:any-app": "1"])
                ]),
                .structure([.objectPath(session), .bytes([]), .bytes([1]), .string("text/plain")]),
                .bool(false),
            ])
        #expect(create == "org.freedesktop.DBus.Error.InvalidArgs")
    }

    @Test func keychain1AddTrustsItsCallerAndUpdatesMayOnlyNarrowTheList() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        _ = try Self.introduce(":1.7", to: inproc)
        let native = Keychain1Interface.path(collection: "login")
        try inproc.ok(
            native, Keychain1Interface.interface, "Add",
            [
                .string(ItemClass.genericPassword.rawValue),
                Keychain1Interface.encode([.service: .string("native"), .account: .string("me")]), .bytes([1]),
                .bool(true),
            ])
        let query = ItemQuery(.genericPassword, attributes: [.service: .string("native")], returning: .attributes)
        func stored() throws -> ItemAccess {
            let found = try inproc.ok(
                native, Keychain1Interface.interface, "Search", [Keychain1Interface.encode(query)])
            guard case .array(_, let items)? = found.first, let item = items.first else {
                Issue.record("no item: \(found)")
                return ItemAccess()
            }
            return ItemAccess(attributes: try Keychain1Interface.decodeItem(item).attributes ?? [:])
        }
        let me = try Self.thisProcess()
        #expect(try stored().trustedApplications == [me])

        // Adding an application, or any application, is refused; the list stays.
        var wider = ItemAccess(trustedApplications: [me])
        wider.trust(TrustedApplication(name: "/usr/bin/other", digest: nil))
        for widened in [wider, ItemAccess(anyApplication: true, trustedApplications: [me])] {
            let refused = try inproc.errorName(
                native, Keychain1Interface.interface, "Update",
                [
                    Keychain1Interface.encode(query), Keychain1Interface.encode(widened.attributes), .bytes([]),
                    .bool(false),
                ])
            #expect(refused == Keychain1Interface.statusError)
            #expect(try stored().trustedApplications == [me])
            #expect(try !stored().anyApplication)
        }
        // Removing is allowed (remove-access).
        try inproc.ok(
            native, Keychain1Interface.interface, "Update",
            [
                Keychain1Interface.encode(query), Keychain1Interface.encode(ItemAccess().attributes), .bytes([]),
                .bool(false),
            ])
        #expect(try stored().isEmpty)
    }

    /// A key, certificate or identity an identified client adds trusts it, as a password does (on 1dbbbc4 the Add
    /// failed, -25303: the class could not hold the creator's list); it reads the item back unasked, and through
    /// `Keychain1` the list can only be narrowed.
    @Test(arguments: [ItemClass.key, .certificate, .identity])
    func keychain1AddOfEveryClassTrustsItsCaller(itemClass: ItemClass) throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        _ = try Self.introduce(":1.7", to: inproc)
        let native = Keychain1Interface.path(collection: "login")
        let tag: ItemAttributes = [.label: .string("made by me"), .subject: .data(Data([7]))]
        let attributes = itemClass == .key ? tag.filter { $0.key == .label } : tag
        try inproc.ok(
            native, Keychain1Interface.interface, "Add",
            [.string(itemClass.rawValue), Keychain1Interface.encode(attributes), .bytes([1]), .bool(true)])
        let query = ItemQuery(itemClass, synchronizable: .any, returning: [.attributes, .data])
        let found = try inproc.ok(native, Keychain1Interface.interface, "Search", [Keychain1Interface.encode(query)])
        guard case .array(_, let items)? = found.first, let encoded = items.first else {
            Issue.record("no item: \(found)")
            return
        }
        let item = try Keychain1Interface.decodeItem(encoded)
        #expect(item.secret == Data([1]), "read back by its creator without a prompt")
        let me = try Self.thisProcess()
        #expect(ItemAccess(attributes: item.attributes ?? [:]).trustedApplications == [me])
        let widened = ItemAccess(anyApplication: true, trustedApplications: [me])
        let refused = try inproc.errorName(
            native, Keychain1Interface.interface, "Update",
            [Keychain1Interface.encode(query), Keychain1Interface.encode(widened.attributes), .bytes([]), .bool(false)])
        #expect(refused == Keychain1Interface.statusError)
    }
}
