import DBus
import Foundation
import Testing

/// A private dbus-daemon for one test (forked, so no child of ours keeps
/// running), stopped when released.
final class PrivateBus {
    let address: String
    private let pid: pid_t

    init() throws {
        // popen + two fgets: the forked daemon keeps the pipe open, so nothing here waits for its end.
        guard let pipe = popen("dbus-daemon --session --fork --print-address=1 --print-pid=1", "r") else {
            throw DBusError(.failed, "cannot run dbus-daemon")
        }
        defer { pclose(pipe) }
        var lines: [String] = []
        var buffer = [CChar](repeating: 0, count: 1024)
        while lines.count < 2, fgets(&buffer, Int32(buffer.count), pipe) != nil {
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            lines.append(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard lines.count == 2, let pid = pid_t(lines[1]) else { throw DBusError(.failed, "dbus-daemon did not start") }
        address = lines[0]
        self.pid = pid
    }

    deinit { kill(pid, SIGTERM) }
}

@Suite struct DBusTests {
    /// Every kind of value, nested, as one argument list.
    static let everything: [DBusValue] = [
        .byte(7), .bool(true), .int16(-3), .uint16(65000), .int32(-70000), .uint32(4_000_000_000),
        .int64(-5_000_000_000), .uint64(18_000_000_000_000_000_000), .double(2.5), .string("ünïcødé ✓"),
        .objectPath("/org/example/a_1"), .signature("a{sv}"), .bytes([0, 1, 255]), .bytes([]),
        .array(elementSignature: "s", [.string("a"), .string("b")]), .array(elementSignature: "i", []),
        .stringDictionary(["k": "v", "x": ""]), .variantDictionary(["n": .int32(1), "s": .string("t")]),
        .structure([.objectPath("/"), .bytes([1]), .bytes([2, 3]), .string("text/plain")]),
        .variant(.variant(.uint32(9))),
        .dictionary(
            keySignature: "o", valueSignature: "(oayays)",
            [
                DBusDictEntry(
                    .objectPath("/a"), .structure([.objectPath("/s"), .bytes([]), .bytes([7]), .string("t")]))
            ]),
    ]

    @Test func everyValueTypeCrossesARealBusUnchanged() throws {
        let bus = try PrivateBus()
        let server = try DBusConnection(address: bus.address)
        let client = try DBusConnection(address: bus.address)
        #expect(server.uniqueName.hasPrefix(":"))
        let call = try DBusMessage.methodCall(
            destination: server.uniqueName, path: "/echo", interface: "org.example.Echo", member: "Echo",
            arguments: Self.everything)
        #expect(call.signature == Self.everything.map(\.signature).joined())

        let echo = Thread {
            var answered = false
            while !answered, server.readWrite(timeoutMilliseconds: 5000) {
                while let message = server.popMessage() {
                    guard message.kind == .methodCall, message.member == "Echo",
                        let reply = try? message.reply(try message.arguments())
                    else { continue }
                    server.send(reply)
                    server.flush()
                    answered = true
                }
            }
        }
        echo.start()
        let reply = try client.call(call, timeoutMilliseconds: 10_000)
        #expect(reply.kind == .methodReturn)
        #expect(try reply.arguments() == Self.everything)
    }

    @Test func errorRepliesCarryNameAndMessage() throws {
        let bus = try PrivateBus()
        let server = try DBusConnection(address: bus.address)
        let client = try DBusConnection(address: bus.address)
        let call = try DBusMessage.methodCall(
            destination: server.uniqueName, path: "/x", interface: nil, member: "Fail")
        let answer = Thread {
            while server.readWrite(timeoutMilliseconds: 5000) {
                while let message = server.popMessage() {
                    guard message.kind == .methodCall,
                        let reply = message.errorReply(DBusError(name: "org.example.Error.Broken", message: "it broke"))
                    else { continue }
                    server.send(reply)
                    server.flush()
                    return
                }
            }
        }
        answer.start()
        #expect(throws: DBusError(name: "org.example.Error.Broken", message: "it broke")) {
            _ = try client.call(call, timeoutMilliseconds: 10_000)
        }
    }

    @Test func nameRequestsReportTheOwner() throws {
        let bus = try PrivateBus()
        let first = try DBusConnection(address: bus.address)
        let second = try DBusConnection(address: bus.address)
        #expect(try first.requestName("org.example.Name", flags: [.doNotQueue]) == .primaryOwner)
        #expect(try first.requestName("org.example.Name", flags: [.doNotQueue]) == .alreadyOwner)
        #expect(try second.requestName("org.example.Name", flags: [.doNotQueue]) == .exists)
    }

    @Test func badValuesAreRefusedBeforeLibdbusSeesThem() throws {
        #expect(throws: DBusError.self) {
            _ = try DBusMessage.methodCall(destination: nil, path: "not/a/path", interface: nil, member: "M")
        }
        let message = try DBusMessage.methodCall(destination: nil, path: "/ok", interface: nil, member: "M")
        #expect(throws: DBusError.self) { try message.append([.objectPath("//bad")]) }
        #expect(throws: DBusError.self) { try message.append([.signature("a{")]) }
        #expect(throws: DBusError.self) { try message.append([.string("nul\u{0}inside")]) }
        #expect(throws: DBusError.self) { try message.append([.array(elementSignature: "s", [.int32(1)])]) }
        #expect(throws: DBusError.self) { _ = try DBusConnection(address: "unix:path=/nonexistent/socket") }
    }

    /// A pipe: read end, write end, both close-on-exec.
    private func makePipe() throws -> (readEnd: Int32, writeEnd: Int32) {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    /// Whether the pipe's read end sees its end (every write end closed) within two seconds; its data read.
    private func reachesEnd(_ readEnd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64)
        for _ in 0..<20 {
            var entry = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) == 1 else { continue }
            if read(readEnd, &buffer, buffer.count) == 0 { return true }
        }
        return false
    }

    /// A descriptor sent over a real bus arrives as a descriptor of the receiver's own, typed `h`, that
    /// reaches the sender's pipe, and is closed when the value goes (the pipe then reaches its end).
    @Test func aFileDescriptorCrossesARealBusOwnedByTheReceiver() throws {
        let bus = try PrivateBus()
        let server = try DBusConnection(address: bus.address)
        let client = try DBusConnection(address: bus.address)
        let (readEnd, writeEnd) = try makePipe()
        defer { close(readEnd) }
        var call: DBusMessage? = try DBusMessage.methodCall(
            destination: server.uniqueName, path: "/fd", interface: "org.example.Fd", member: "Take",
            arguments: [.string("x"), .unixFileDescriptor(DBusFileDescriptor(owning: writeEnd)), .uint32(1)])
        #expect(call?.signature == "shu")
        if let call { client.send(call) }
        client.flush()
        call = nil

        var received: DBusFileDescriptor?
        var arguments: [DBusValue] = []
        while received == nil, server.readWrite(timeoutMilliseconds: 5000) {
            while let message = server.popMessage() {
                guard message.kind == .methodCall, message.member == "Take" else { continue }
                arguments = try message.arguments()
                if arguments.count == 3, case .unixFileDescriptor(let descriptor) = arguments[1] {
                    received = descriptor
                }
            }
        }
        do {
            let descriptor = try #require(received)
            #expect(arguments[0] == .string("x") && arguments[2] == .uint32(1))
            #expect(try DBusFileDescriptor(dbusValue: arguments[1]) == descriptor)
            #expect(throws: DBusError.self) { try DBusFileDescriptor(dbusValue: .string("x")) }
            #expect(fcntl(descriptor.rawValue, F_GETFD) & FD_CLOEXEC != 0)
            let bytes: [UInt8] = [1, 2, 3, 250]
            #expect(write(descriptor.rawValue, bytes, bytes.count) == bytes.count)
            var buffer = [UInt8](repeating: 0, count: 16)
            #expect(read(readEnd, &buffer, buffer.count) == bytes.count)
            #expect(Array(buffer.prefix(4)) == bytes)
        }
        // Still held: no end yet. Released (the value and its copies): the last write end is closed.
        #expect(!reachesEnd(readEnd))
        received = nil
        arguments = []
        #expect(reachesEnd(readEnd))
    }

    /// Each read of an `h` argument is a duplicate of its own: one read's value going leaves another usable.
    @Test func eachReadOfAFileDescriptorArgumentOwnsItsOwnDuplicate() throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(readEnd) }
        var message: DBusMessage? = try DBusMessage.methodCall(
            destination: nil, path: "/fd", interface: nil, member: "Take",
            arguments: [.unixFileDescriptor(try DBusFileDescriptor(duplicating: writeEnd))])
        close(writeEnd)
        var first: [DBusValue] = try message?.arguments() ?? []
        var second: [DBusValue] = try message?.arguments() ?? []
        do {
            guard case .unixFileDescriptor(let kept)? = second.first,
                case .unixFileDescriptor(let other)? = first.first
            else {
                Issue.record("no descriptor read back: \(second)")
                return
            }
            #expect(kept != other && kept.rawValue != other.rawValue)
        }
        first = []
        if case .unixFileDescriptor(let kept)? = second.first {
            #expect(write(kept.rawValue, [9], 1) == 1)
            var byte: UInt8 = 0
            #expect(read(readEnd, &byte, 1) == 1 && byte == 9)
        }
        message = nil
        #expect(!reachesEnd(readEnd))
        second = []
        _ = (first, second)
        #expect(reachesEnd(readEnd))
    }

    /// A signal declared once: the interface it is listed in introspects it with each argument's name and
    /// type, and the message made from it carries the declared interface, name and signature.
    @Test func aSignalIsIntrospectedAndSentFromItsDeclaration() throws {
        let xml = Announcer().introspectionDocument
        #expect(
            xml.contains(
                """
                  <interface name="org.example.Announcer">
                    <signal name="Moved">
                      <arg name="where" type="o"/>
                      <arg name="tags" type="as"/>
                      <arg name="detail" type="v"/>
                    </signal>
                    <signal name="Ended"/>
                  </interface>
                """))
        #expect(
            xml.contains(
                """
                    <signal name="PropertiesChanged">
                      <arg name="interface_name" type="s"/>
                      <arg name="changed_properties" type="a{sv}"/>
                      <arg name="invalidated_properties" type="as"/>
                    </signal>
                """))
        #expect(Announcer.moved.declaration.signature == "oasv")
        let moved = try Announcer.moved.message(
            path: "/org/example/announcer", ObjectPath("/a"), ["x", "y"], DBusVariant(.uint32(3)))
        #expect(moved.kind == .signal)
        #expect(moved.path == "/org/example/announcer")
        #expect(moved.interface == "org.example.Announcer")
        #expect(moved.member == "Moved")
        #expect(moved.signature == "oasv")
        #expect(
            try moved.arguments() == [
                .objectPath("/a"), .array(elementSignature: "s", [.string("x"), .string("y")]), .variant(.uint32(3)),
            ])
        let ended = try Announcer.ended.message(path: "/")
        #expect(ended.member == "Ended" && ended.signature.isEmpty)
        let changed = try DBusIntrospection.propertiesChanged.message(
            path: "/", "org.example.Announcer", DBusPropertyList([:]), ["Where"])
        #expect(changed.interface == "org.freedesktop.DBus.Properties" && changed.signature == "sa{sv}as")
    }

    /// A name declared twice with other inputs (KWallet's `close(sb)` and `close(ibs)`): each call reaches the
    /// declaration its signature names, introspection lists both, and a signature neither takes is
    /// `InvalidArgs` naming the method.
    @Test func anOverloadedMethodIsChosenByItsInputSignature() throws {
        func call(_ arguments: [DBusValue]) throws -> DBusMessage? {
            let message = try DBusMessage.methodCall(
                destination: "org.example", path: "/", interface: "org.example.Overloaded", member: "close",
                arguments: arguments)
            message.stampAsDelivered(from: ":1.9", serial: 1)
            return Overloaded().serve(try #require(DBusMethodCall(message)))
        }
        let byName = try #require(try call([.string("kdewallet"), .bool(true)]))
        #expect(try byName.arguments() == [.string("by name kdewallet")])
        let byHandle = try #require(try call([.int32(7), .bool(false), .string("app")]))
        #expect(try byHandle.arguments() == [.string("by handle 7")])
        let wrong = try #require(try call([.int32(7)]))
        #expect(wrong.errorName == "org.freedesktop.DBus.Error.InvalidArgs")
        let text = try wrong.arguments().first?.text ?? ""
        #expect(text.contains("close") && text.contains("(sb)") && text.contains("(ibs)"), "\(text)")
        let xml = Overloaded().introspectionDocument
        #expect(xml.contains("<arg name=\"wallet\" type=\"s\" direction=\"in\"/>"))
        #expect(xml.contains("<arg name=\"handle\" type=\"i\" direction=\"in\"/>"))
        #expect(xml.components(separatedBy: "<method name=\"close\">").count == 3)
    }

    /// `NameOwnerChanged` is read only from the bus itself, with its three names.
    @Test func aNameOwnerChangeCountsOnlyFromTheBus() throws {
        func signal(
            _ arguments: [DBusValue], from sender: String, member: String = "NameOwnerChanged"
        ) throws -> DBusMessage {
            let message = try DBusMessage.signal(
                path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: member,
                arguments: arguments)
            message.stampAsDelivered(from: sender, serial: 1)
            return message
        }
        let names: [DBusValue] = [.string("org.example.Name"), .string(""), .string(":1.5")]
        let change = try #require(try signal(names, from: "org.freedesktop.DBus").nameOwnerChange)
        #expect(change.name == "org.example.Name" && change.oldOwner.isEmpty && change.newOwner == ":1.5")
        #expect(try signal(names, from: ":1.6").nameOwnerChange == nil, "a client's word")
        #expect(try signal(names, from: "org.freedesktop.DBus", member: "NameAcquired").nameOwnerChange == nil)
        #expect(try signal(Array(names.prefix(2)), from: "org.freedesktop.DBus").nameOwnerChange == nil)
        #expect(
            try signal([.string("a"), .string("b"), .uint32(3)], from: "org.freedesktop.DBus").nameOwnerChange == nil)
    }

    @Test func pathElementsEscapeEverythingButLettersAndDigits() {
        #expect(DBusNames.pathElement("login") == "login")
        #expect(DBusNames.pathElement("Work ✓") == "Work_20_e2_9c_93")
        #expect(DBusNames.pathElement("a_b") == "a_5fb")
        #expect(DBusNames.pathElement("") == "_")
        for text in ["x/y", "..", "ü", " ", "a-b.c"] {
            #expect(DBusNames.isValidObjectPath("/" + DBusNames.pathElement(text)))
        }
        #expect(DBusNames.isValidObjectPath("/a/b"))
        #expect(!DBusNames.isValidObjectPath("/a/"))
    }
}

/// An object that only sends signals, for the declaration test.
private struct Announcer: DBusObject {
    static let moved = DBusSignal(
        "org.example.Announcer", "Moved", DBusInput("where", ObjectPath.self), DBusInput("tags", [String].self),
        DBusInput("detail", DBusVariant.self))
    static let ended = DBusSignal("org.example.Announcer", "Ended")
    static let interfaces: [DBusInterface<Announcer>] =
        standardInterfaces() + [
            DBusInterface("org.example.Announcer", signals: [moved.declaration, ended.declaration])
        ]
}

/// An object with one method name declared twice, for the overload test.
private struct Overloaded: DBusObject {
    static let interfaces: [DBusInterface<Overloaded>] =
        standardInterfaces() + [
            DBusInterface(
                "org.example.Overloaded",
                methods: [
                    DBusMethod(
                        "close", DBusInput("wallet", String.self), DBusInput("force", Bool.self),
                        returns: [.init("how", String.self)]
                    ) { _, _, wallet, _ in .reply([.string("by name \(wallet)")]) },
                    DBusMethod(
                        "close", DBusInput("handle", Int32.self), DBusInput("force", Bool.self),
                        DBusInput("appid", String.self), returns: [.init("how", String.self)]
                    ) { _, _, handle, _, _ in .reply([.string("by handle \(handle)")]) },
                ])
        ]
}
