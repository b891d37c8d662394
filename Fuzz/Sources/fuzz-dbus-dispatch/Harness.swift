// Fuzzes the Secret Service's argument decoding and dispatch, in-process as
// Tests/SecretServiceTests/InProcessDaemon.swift drives it: no bus, no loop. Each call is a D-Bus message put
// together on the wire (a valid header naming a path, an interface and a member the daemon declares, the
// signature and body from the input), read back by libdbus (`dbus_message_demarshal`, which validates the
// body against the signature as the bus does), stamped with a client's unique name and handed to
// `SecretServiceDaemon.handle`; work sent to the worker is waited for and delivered.
//
// Input: up to 8 calls, each:
//   path selector (byte): one of `pathChoices` (the fixture's objects, and the latest session, prompt,
//     collection and item a reply named), the last choice meaning a path given as a field;
//   method selector (byte): one of every method the daemon's objects declare (`declaredMethods`);
//   flags (byte): 1 the other client sends it, 2 no reply wanted, 4 no interface field, 8 instead of a call, the
//     bus says the client left (NameOwnerChanged);
//   signature (a field; empty: the method's declared signature);
//   body (a field).
// The daemon is made anew every 500 inputs, so state one input leaves does not build up without end.
import CDBus
import FoundationEssentials
import FuzzSupport
import Glibc
import KeychainCore
import KeychainStore

@testable import DBus
@testable import Keychain1
@testable import KeychainRegistry
@testable import Pinentry
@testable import Posix
@testable import SecretService

let loginPassword = Array("fuzz login password".utf8)
let clients = [":1.7", ":1.8"]

/// A declared method: its interface, name and input signature.
struct DeclaredMethod: Hashable {
    let interface: String
    let member: String
    let signature: String
}

func methods<Object>(_ interfaces: [DBusInterface<Object>]) -> [DeclaredMethod] {
    interfaces.flatMap { interface in
        interface.methods.map {
            DeclaredMethod(interface: interface.name, member: $0.name, signature: $0.inputSignature)
        }
    }
}

/// Every method of every object the daemon serves, in a fixed order.
let declaredMethods: [DeclaredMethod] = {
    var seen = Set<DeclaredMethod>()
    return
        (methods(ServiceObject.interfaces) + methods(CollectionObject.interfaces) + methods(ItemObject.interfaces)
        + methods(SessionObject.interfaces) + methods(PromptObject.interfaces) + methods(Keychain1ListObject.interfaces)
        + methods(Keychain1Object.interfaces)).filter { seen.insert($0).inserted }
}()

/// A daemon over a fresh keychain directory, and the object paths replies named.
final class Fixture {
    let directory: String
    let daemon: SecretServiceDaemon
    var serial: UInt32 = 0
    var latest: [String: String] = [:]

    init() throws {
        directory = scratchDirectory("dbus-dispatch")
        let pinentry = Pinentry(program: "/nonexistent/pinentry", environment: [:], timeout: .seconds(2))
        daemon = try SecretServiceDaemon(
            configuration: SecretServiceConfiguration(
                registry: RegistryConfiguration(keychainDirectory: directory + "/keychains", pinentry: pinentry)),
            loginPassword: SecretBytes(copying: loginPassword))
    }

    deinit {
        daemon.registry.shutDown()
        removeTree(directory)
    }

    /// The paths a path selector chooses from (the last choice, a path from the input, is not among them).
    var pathChoices: [String] {
        [
            "/org/freedesktop/secrets", "/org/freedesktop/secrets/collection/login",
            "/org/freedesktop/secrets/aliases/default", latest["item"] ?? "/org/freedesktop/secrets/collection/login/x",
            latest["session"] ?? "/org/freedesktop/secrets/session/s1",
            latest["prompt"] ?? "/org/freedesktop/secrets/prompt/p1",
            latest["collection"] ?? "/org/freedesktop/secrets/collection/c", "/org/latchkey/keychain",
            Keychain1Interface.path(collection: "login"), "/", "/org/freedesktop/secrets/collection",
        ]
    }

    /// Hands `message` to the daemon as the bus would deliver it from `sender`, waits for work it sent to the
    /// worker, and remembers the object paths in what came back.
    func deliver(_ message: DBusMessage, from sender: String) -> [DBusMessage] {
        serial += 1
        message.stampAsDelivered(from: sender, serial: serial)
        var sent = daemon.handle(message)
        let deadline = Deadline(millisecondsFromNow: 10_000)
        while daemon.registry.hasWorkInProgress, !deadline.hasPassed {
            var entry = pollfd(fd: daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 50)
            sent += daemon.deliverCompletions()
        }
        for reply in sent where reply.kind == .methodReturn {
            for value in (try? reply.arguments()) ?? [] { remember(value) }
        }
        return sent
    }

    private func remember(_ value: DBusValue) {
        switch value {
        case .objectPath(let path):
            for (kind, prefix) in [
                ("session", ObjectPaths.sessionPrefix), ("prompt", ObjectPaths.promptPrefix),
                ("collection", ObjectPaths.collectionPrefix),
            ] where path.hasPrefix(prefix) {
                let rest = path.dropFirst(prefix.count)
                latest[kind == "collection" && rest.contains("/") ? "item" : kind] = path
            }
        case .array(_, let values), .structure(let values): values.forEach(remember)
        case .variant(let inner): remember(inner)
        default: break
        }
    }
}

nonisolated(unsafe) var fixture: Fixture?
nonisolated(unsafe) var inputsSinceFresh = 0

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    inputsSinceFresh += 1
    if fixture == nil || inputsSinceFresh > 500 {
        fixture = nil
        inputsSinceFresh = 0
        do {
            fixture = try Fixture()
        } catch {
            fatalError("fuzz-dbus-dispatch: cannot start the daemon: \(error)")
        }
    }
    guard let fixture else { return 0 }
    var input = FuzzInput(start, count)
    run(&input, on: fixture)
    return 0
}

/// Runs the calls of one input.
func run(_ input: inout FuzzInput, on fixture: Fixture) {
    var calls = 0
    while !input.isAtEnd, calls < 8 {
        calls += 1
        let choices = fixture.pathChoices
        let pathChoice = Int(input.byte()) % (choices.count + 1)
        let method = declaredMethods[Int(input.byte()) % declaredMethods.count]
        let flags = input.byte()
        let path = pathChoice < choices.count ? choices[pathChoice] : String(decoding: input.field(), as: UTF8.self)
        let signatureField = input.field()
        let body = input.field()
        let sender = clients[Int(flags & 1)]
        if flags & 8 != 0 {
            if let signal = try? DBusMessage.signal(
                path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                arguments: [.string(sender), .string(sender), .string("")])
            {
                _ = fixture.deliver(signal, from: "org.freedesktop.DBus")
            }
            continue
        }
        let signature = signatureField.isEmpty ? method.signature : String(decoding: signatureField, as: UTF8.self)
        let wire = methodCallBytes(
            path: path, interface: flags & 4 != 0 ? nil : method.interface, member: method.member,
            signature: signature, body: body, noReply: flags & 2 != 0)
        guard let message = demarshal(wire) else { continue }
        _ = fixture.deliver(message, from: sender)
    }
}

/// libdbus's reading of `wire`, nil when it is not a valid message.
func demarshal(_ wire: [UInt8]) -> DBusMessage? {
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    defer { dbus_error_free(&error) }
    let raw = wire.withUnsafeBytes { bytes in
        dbus_message_demarshal(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count), &error)
    }
    return raw.map { DBusMessage(owning: $0) }
}

/// A little-endian method call to org.freedesktop.secrets with `body` as its body.
func methodCallBytes(
    path: String, interface: String?, member: String, signature: String, body: [UInt8], noReply: Bool
) -> [UInt8] {
    var fields: [UInt8] = []
    func pad(_ bytes: inout [UInt8], _ alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }
    func uint32(_ value: Int) -> [UInt8] {
        [UInt8(value & 0xff), UInt8(value >> 8 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 24 & 0xff)]
    }
    func field(_ code: UInt8, _ type: Character, _ text: String) {
        // Header fields start 16 bytes into the message, so alignment within `fields` is alignment overall.
        pad(&fields, 8)
        fields += [code, 1, type.asciiValue ?? UInt8(ascii: "s"), 0]
        let bytes = Array(text.utf8)
        if type == "g" {
            fields.append(UInt8(truncatingIfNeeded: bytes.count))
        } else {
            pad(&fields, 4)
            fields += uint32(bytes.count)
        }
        fields += bytes + [0]
    }
    field(1, "o", path)
    if let interface { field(2, "s", interface) }
    field(3, "s", member)
    field(6, "s", "org.freedesktop.secrets")
    if !signature.isEmpty { field(8, "g", signature) }
    var message: [UInt8] = [UInt8(ascii: "l"), 1, noReply ? 1 : 0, 1] + uint32(body.count) + uint32(1)
    message += uint32(fields.count) + fields
    pad(&message, 8)
    return message + body
}

/// The body of a message libdbus built.
func bodyBytes(_ message: DBusMessage) -> [UInt8] {
    message.stampAsDelivered(from: ":1.7", serial: 1)
    var buffer: UnsafeMutablePointer<CChar>?
    var length: Int32 = 0
    guard dbus_message_marshal(message.pointer, &buffer, &length) != 0, let buffer else { return [] }
    defer { dbus_free(buffer) }
    let all = UnsafeRawBufferPointer(start: buffer, count: Int(length))
    let bodyLength = Int(all[4]) | Int(all[5]) << 8 | Int(all[6]) << 16 | Int(all[7]) << 24
    return Array(all[(all.count - bodyLength)...])
}

/// One seed: the calls, each a path selector, a method, flags and arguments.
func seed(_ calls: [(path: Int, interface: String, member: String, flags: UInt8, arguments: [DBusValue])]) throws
    -> [UInt8]
{
    var builder = SeedBuilder()
    for call in calls {
        guard
            let index = declaredMethods.firstIndex(where: { $0.interface == call.interface && $0.member == call.member }
            )
        else { fatalError("no method \(call.interface).\(call.member)") }
        let message = try DBusMessage.methodCall(
            destination: nil, path: "/", interface: nil, member: "x", arguments: call.arguments)
        builder.byte(UInt8(call.path))
        builder.byte(UInt8(index))
        builder.byte(call.flags)
        builder.field([])
        builder.field(bodyBytes(message))
    }
    return builder.bytes
}

/// Seeds: each declared method called with arguments a client would send, after what it needs (a session,
/// an item, a prompt).
func seeds() throws -> [(name: String, bytes: [UInt8])] {
    let service = "org.freedesktop.Secret.Service"
    let collection = "org.freedesktop.Secret.Collection"
    let item = "org.freedesktop.Secret.Item"
    let properties = "org.freedesktop.DBus.Properties"
    let native = Keychain1Interface.interface
    let openPlain = (0, service, "OpenSession", UInt8(0), [DBusValue.string("plain"), .variant(.string(""))])
    let clientKey = try DHSessionCipher(
        clientPublicKey: [2], serverPrivateKey: [0x42, 0x17] + [UInt8](repeating: 3, count: 30))
    let openDH = (
        0, service, "OpenSession", UInt8(0),
        [DBusValue.string("dh-ietf1024-sha256-aes128-cbc-pkcs7"), .variant(.bytes(clientKey.serverPublicKey))]
    )
    func secret(_ text: String) -> DBusValue {
        .structure([
            .objectPath("/org/freedesktop/secrets/session/s1"), .bytes([]), .bytes(Array(text.utf8)),
            .string("text/plain"),
        ])
    }
    let createItem = (
        1, collection, "CreateItem", UInt8(0),
        [
            DBusValue.variantDictionary([
                "org.freedesktop.Secret.Item.Label": .string("fuzz"),
                "org.freedesktop.Secret.Item.Attributes": .stringDictionary(["service": "fuzz", "user": "alice"]),
            ]), secret("pw"), .bool(true),
        ]
    )
    let query = Keychain1Interface.encode(
        ItemQuery(
            .genericPassword, attributes: [.service: .string("svc")], limit: .all, returning: [.attributes, .data]))
    let attributes = Keychain1Interface.encode([.service: .string("svc"), .account: .string("bob")] as ItemAttributes)
    let calls: [(String, [(path: Int, interface: String, member: String, flags: UInt8, arguments: [DBusValue])])] = [
        ("open-plain", [openPlain]),
        ("open-dh", [openDH]),
        (
            "create-collection",
            [
                (
                    0, service, "CreateCollection", 0,
                    [.variantDictionary(["org.freedesktop.Secret.Collection.Label": .string("second")]), .string("")]
                )
            ]
        ),
        ("search", [(0, service, "SearchItems", 0, [.stringDictionary(["service": "fuzz"])])]),
        (
            "lock-unlock-prompt",
            [
                (0, service, "Lock", 0, [.objectPaths(["/org/freedesktop/secrets/collection/login"])]),
                (0, service, "Unlock", 0, [.objectPaths(["/org/freedesktop/secrets/collection/login"])]),
                (5, "org.freedesktop.Secret.Prompt", "Prompt", 0, [.string("")]),
                (8, native, "Unlock", 0, [.bytes(loginPassword)]),
            ]
        ),
        (
            "prompt-dismiss",
            [
                (0, service, "Lock", 0, [.objectPaths(["/org/freedesktop/secrets/collection/login"])]),
                (0, service, "Unlock", 0, [.objectPaths(["/org/freedesktop/secrets/collection/login"])]),
                (5, "org.freedesktop.Secret.Prompt", "Dismiss", 0, []),
                (8, native, "Unlock", 0, [.bytes(loginPassword)]),
            ]
        ),
        (
            "get-secrets",
            [
                openPlain, createItem,
                (
                    0, service, "GetSecrets", 0,
                    [
                        .objectPaths(["/org/freedesktop/secrets/collection/login/x"]),
                        .objectPath("/org/freedesktop/secrets/session/s1"),
                    ]
                ),
            ]
        ),
        ("read-alias", [(0, service, "ReadAlias", 0, [.string("default")])]),
        (
            "set-alias",
            [(0, service, "SetAlias", 0, [.string("fuzz"), .objectPath("/org/freedesktop/secrets/collection/login")])]
        ),
        (
            "collection-delete",
            [
                (0, service, "CreateCollection", 0, [.variantDictionary([:]), .string("")]),
                (6, collection, "Delete", 0, []),
            ]
        ),
        ("collection-search", [(1, collection, "SearchItems", 0, [.stringDictionary(["user": "alice"])])]),
        ("create-item", [openPlain, createItem]),
        (
            "create-item-dh",
            [
                openDH,
                (
                    1, collection, "CreateItem", 0,
                    [
                        .variantDictionary([:]),
                        .structure([
                            .objectPath("/"), .bytes([UInt8](repeating: 7, count: 16)),
                            .bytes([UInt8](repeating: 9, count: 32)), .string("text/plain"),
                        ]), .bool(false),
                    ]
                ),
            ]
        ),
        ("item-get-secret", [openPlain, createItem, (3, item, "GetSecret", 0, [.objectPath("/")])]),
        ("item-set-secret", [openPlain, createItem, (3, item, "SetSecret", 0, [secret("new")])]),
        ("item-delete", [openPlain, createItem, (3, item, "Delete", 0, [])]),
        ("session-close", [openPlain, (4, "org.freedesktop.Secret.Session", "Close", 0, [])]),
        ("properties-get", [(1, properties, "Get", 0, [.string(collection), .string("Label")])]),
        ("properties-getall", [(0, properties, "GetAll", 0, [.string(service)])]),
        (
            "properties-set",
            [
                openPlain, createItem,
                (
                    3, properties, "Set", 0,
                    [.string(item), .string("Attributes"), .variant(.stringDictionary(["a": "b"]))]
                ),
            ]
        ),
        ("introspect", [(9, "org.freedesktop.DBus.Introspectable", "Introspect", 0, [])]),
        (
            "peer",
            [(0, "org.freedesktop.DBus.Peer", "Ping", 0, []), (1, "org.freedesktop.DBus.Peer", "GetMachineId", 0, [])]
        ),
        ("native-list", [(7, native, "List", 0, [])]),
        ("native-add", [(8, native, "Add", 0, [.string("genp"), attributes, .bytes(Array("pw".utf8)), .bool(true)])]),
        ("native-search", [(8, native, "Search", 0, [query])]),
        ("native-update", [(8, native, "Update", 0, [query, attributes, .bytes([]), .bool(false)])]),
        ("native-delete", [(8, native, "Delete", 0, [query])]),
        ("native-status", [(8, native, "Status", 0, [])]),
        ("native-lock-unlock", [(8, native, "Lock", 0, []), (8, native, "Unlock", 0, [.bytes(loginPassword)])]),
        ("native-change-password", [(8, native, "ChangePassword", 0, [.bytes(loginPassword), .bytes(loginPassword)])]),
        ("native-settings", [(8, native, "SetSettings", 0, [Keychain1Interface.encode(KeychainSettings())])]),
        (
            "native-access-policy",
            [
                (8, native, "SetAccessPolicy", 0, [.string("allow-all")]),
                (8, native, "SetAccessPolicy", 0, [.string("prompt")]),
            ]
        ),
        ("client-left", [openPlain, (0, service, "OpenSession", 8, [])]),
    ]
    return try calls.map { ($0.0, try seed($0.1)) }
}

/// Removes `path` and everything under it.
func removeTree(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}
