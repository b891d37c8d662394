import DBus
import Foundation
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import LoginControl
import Posix
import Testing

@testable import SecretService

/// An interface's declarations without its object type, for checks that walk every object.
private struct DeclaredInterface {
    let name: String
    let methods: [(name: String, inputs: String, outputs: String)]
    let properties: [(name: String, signature: String, writable: Bool)]
    let signals: [(name: String, signature: String)]
    /// Each signal as introspection must show it: its name, and each argument's name and type.
    let signalElements: [String]

    init<Object>(_ interface: DBusInterface<Object>) {
        name = interface.name
        methods = interface.methods.map { ($0.name, $0.inputSignature, $0.outputSignature) }
        properties = interface.properties.map { ($0.name, $0.signature, $0.isWritable) }
        signals = interface.signals.map { ($0.name, $0.arguments.map(\.signature).joined()) }
        signalElements = interface.signals.map { signal in
            #expect(signal.interface == interface.name, "\(signal.name) is declared on \(interface.name)")
            let arguments = signal.arguments.map { "      <arg name=\"\($0.name)\" type=\"\($0.signature)\"/>\n" }
            guard !arguments.isEmpty else { return "    <signal name=\"\(signal.name)\"/>\n" }
            return "    <signal name=\"\(signal.name)\">\n" + arguments.joined() + "    </signal>\n"
        }
    }
}

/// The daemon driven in-process, through the same declarations a bus client reaches.
@Suite(.serialized) struct DaemonDispatchTests {
    /// Every kind of object at a path of a running daemon, with its declared interfaces.
    private func everyObject(_ daemon: InProcessDaemon) throws -> [(path: String, interfaces: [DeclaredInterface])] {
        let session = try daemon.openPlainSession()
        let item = try daemon.createItem(session: session, attributes: ["kind": "all"], secret: "s")
        return [
            ("/org/freedesktop/secrets", ServiceObject.interfaces.map(DeclaredInterface.init)),
            ("/org/freedesktop/secrets/collection/login", CollectionObject.interfaces.map(DeclaredInterface.init)),
            ("/org/freedesktop/secrets/aliases/default", CollectionObject.interfaces.map(DeclaredInterface.init)),
            (item, ItemObject.interfaces.map(DeclaredInterface.init)),
            (session, SessionObject.interfaces.map(DeclaredInterface.init)),
            (Keychain1Interface.rootPath, Keychain1ListObject.interfaces.map(DeclaredInterface.init)),
            (Keychain1Interface.path(collection: "login"), Keychain1Object.interfaces.map(DeclaredInterface.init)),
            (PortalSecretObject.path, PortalSecretObject.interfaces.map(DeclaredInterface.init)),
            (KWalletObject.paths[0], KWalletObject.interfaces.map(DeclaredInterface.init)),
            (KWalletObject.paths[1], KWalletObject.interfaces.map(DeclaredInterface.init)),
        ]
    }

    @Test func aCallWithTheWrongSignatureGetsInvalidArgsForEveryDeclaredMethod() throws {
        let daemon = try InProcessDaemon()
        var checked = 0
        for (path, interfaces) in try everyObject(daemon) {
            for interface in interfaces {
                for method in interface.methods {
                    // One argument too many: never the declared signature.
                    let arguments = try signatureArguments(method.inputs) + [.uint32(7)]
                    let error = try daemon.errorName(path, interface.name, method.name, arguments)
                    #expect(error == "org.freedesktop.DBus.Error.InvalidArgs", "\(interface.name).\(method.name)")
                    checked += 1
                }
            }
        }
        #expect(checked > 40)
        // Nothing those calls did changed the store: the item made above is still there, unlocked.
        let (unlocked, _) = try searchAll(daemon, ["kind": "all"])
        #expect(unlocked.count == 1)
    }

    @Test func unknownMembersInterfacesAndObjects() throws {
        let daemon = try InProcessDaemon()
        let service = "/org/freedesktop/secrets"
        #expect(
            try daemon.errorName(service, "org.freedesktop.Secret.Service", "Nope")
                == "org.freedesktop.DBus.Error.UnknownMethod")
        #expect(
            try daemon.errorName(service, "org.example.Other", "SearchItems", [.stringDictionary([:])])
                == "org.freedesktop.DBus.Error.UnknownMethod")
        #expect(
            try daemon.errorName("/org/freedesktop/secrets/collection/none", nil, "Delete")
                == "org.freedesktop.Secret.Error.NoSuchObject")
        #expect(
            try daemon.errorName("/elsewhere", "org.freedesktop.DBus.Properties", "GetAll", [.string("")])
                == "org.freedesktop.Secret.Error.NoSuchObject")
        #expect(
            try daemon.errorName(Keychain1Interface.path(collection: "none"), Keychain1Interface.interface, "Status")
                == "org.freedesktop.Secret.Error.NoSuchObject")
        // Without an interface, the member is looked up in every interface of the object.
        let reply = try daemon.ok(service, nil, "SearchItems", [.stringDictionary([:])])
        #expect(reply.map(\.signature) == ["ao", "ao"])
    }

    @Test func everyPropertyReadsWithItsDeclaredTypeAndReadOnlyOnesRefuseWrites() throws {
        let daemon = try InProcessDaemon()
        for (path, interfaces) in try everyObject(daemon) {
            for interface in interfaces where !interface.properties.isEmpty {
                let all = try daemon.ok(path, "org.freedesktop.DBus.Properties", "GetAll", [.string(interface.name)])
                guard case .dictionary("s", "v", let entries)? = all.first else {
                    Issue.record("GetAll on \(path) gave \(all)")
                    continue
                }
                let names = Set(entries.compactMap { $0.key.text })
                #expect(names == Set(interface.properties.map(\.name)), "\(path) \(interface.name)")
                for property in interface.properties {
                    let value = try daemon.ok(
                        path, "org.freedesktop.DBus.Properties", "Get",
                        [.string(interface.name), .string(property.name)])
                    guard case .variant(let inner)? = value.first else {
                        Issue.record("Get \(property.name) gave \(value)")
                        continue
                    }
                    #expect(inner.signature == property.signature, "\(interface.name).\(property.name)")
                    if !property.writable {
                        let error = try daemon.errorName(
                            path, "org.freedesktop.DBus.Properties", "Set",
                            [.string(interface.name), .string(property.name), .variant(inner)])
                        #expect(error == "org.freedesktop.DBus.Error.PropertyReadOnly", "\(property.name)")
                    }
                }
            }
        }
        #expect(
            try daemon.errorName(
                "/org/freedesktop/secrets", "org.freedesktop.DBus.Properties", "Get",
                [.string("org.freedesktop.Secret.Service"), .string("Nope")])
                == "org.freedesktop.DBus.Error.UnknownProperty")
    }

    @Test func writablePropertiesCheckTheirTypeAndAnnounceTheChange() throws {
        let daemon = try InProcessDaemon()
        let login = "/org/freedesktop/secrets/collection/login"
        let properties = "org.freedesktop.DBus.Properties"
        let collection = "org.freedesktop.Secret.Collection"
        #expect(
            try daemon.errorName(
                login, properties, "Set", [.string(collection), .string("Label"), .variant(.uint32(3))])
                == "org.freedesktop.DBus.Error.InvalidArgs")
        daemon.clearSignals()
        try daemon.ok(login, properties, "Set", [.string(collection), .string("Label"), .variant(.string("Mine"))])
        #expect(
            try daemon.ok(login, properties, "Get", [.string(collection), .string("Label")]) == [
                .variant(.string("Mine"))
            ])
        #expect(daemon.signals.contains { $0.member == "PropertiesChanged" && $0.path == login })
        #expect(daemon.signals.contains { $0.member == "CollectionChanged" && $0.path == "/org/freedesktop/secrets" })
    }

    @Test func introspectionIsWrittenFromTheDeclarations() throws {
        let daemon = try InProcessDaemon()
        for (path, interfaces) in try everyObject(daemon) {
            let reply = try daemon.ok(path, "org.freedesktop.DBus.Introspectable", "Introspect")
            let xml = try #require(reply.first?.text)
            for interface in interfaces {
                #expect(xml.contains("<interface name=\"\(interface.name)\">"))
                for method in interface.methods { #expect(xml.contains("<method name=\"\(method.name)\"")) }
                for property in interface.properties { #expect(xml.contains("<property name=\"\(property.name)\"")) }
                for signal in interface.signalElements { #expect(xml.contains(signal)) }
            }
        }
        // The Secret Service's signals, as the specification names and types them.
        let specified = [
            ("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "CollectionCreated", "o"),
            ("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "CollectionDeleted", "o"),
            ("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "CollectionChanged", "o"),
            ("/org/freedesktop/secrets/collection/login", "org.freedesktop.Secret.Collection", "ItemCreated", "o"),
            ("/org/freedesktop/secrets/collection/login", "org.freedesktop.Secret.Collection", "ItemDeleted", "o"),
            ("/org/freedesktop/secrets/collection/login", "org.freedesktop.Secret.Collection", "ItemChanged", "o"),
            ("/org/freedesktop/secrets", "org.freedesktop.DBus.Properties", "PropertiesChanged", "sa{sv}as"),
            (
                "/org/freedesktop/secrets/collection/login", "org.freedesktop.DBus.Properties", "PropertiesChanged",
                "sa{sv}as"
            ),
        ]
        for (path, interfaceName, name, signature) in specified {
            let interfaces = try #require(try everyObject(daemon).first { $0.path == path }?.interfaces)
            let interface = try #require(interfaces.first { $0.name == interfaceName })
            #expect(interface.signals.contains { $0 == (name, signature) }, "\(interfaceName).\(name)")
        }
        #expect(
            PromptObject.interfaces.map(DeclaredInterface.init).contains {
                $0.signals.contains { $0 == ("Completed", "bv") }
            })
        let nodes = try daemon.ok(
            "/org/freedesktop/secrets/collection", "org.freedesktop.DBus.Introspectable", "Introspect")
        #expect(nodes.first?.text?.contains("<node name=\"login\"/>") == true)
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("dbus/org.freedesktop.Secrets.xml")
        #expect(try String(contentsOf: file, encoding: .utf8) == SecretServiceIntrospection.document)
    }

    @Test func everySignalSentIsDeclaredByItsInterface() throws {
        let daemon = try InProcessDaemon()
        let session = try daemon.openPlainSession()
        let item = try daemon.createItem(session: session, attributes: ["a": "1"], secret: "one")
        try daemon.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "CreateCollection",
            [.variantDictionary(["org.freedesktop.Secret.Collection.Label": .string("Work")]), .string("")])
        try daemon.ok(
            item, "org.freedesktop.Secret.Item", "SetSecret",
            [
                .structure([.objectPath(session), .bytes([]), .bytes(Array("two".utf8)), .string("text/plain")])
            ])
        try daemon.ok(item, "org.freedesktop.Secret.Item", "Delete")
        try daemon.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock",
            [.objectPaths(["/org/freedesktop/secrets/collection/login"])])
        let declared = [
            ServiceObject.interfaces.map(DeclaredInterface.init),
            CollectionObject.interfaces.map(DeclaredInterface.init),
            ItemObject.interfaces.map(DeclaredInterface.init), PromptObject.interfaces.map(DeclaredInterface.init),
            KWalletObject.interfaces.map(DeclaredInterface.init),
        ].flatMap { $0 }
        let members = Set(daemon.signals.compactMap(\.member))
        #expect(
            members.isSuperset(of: [
                "ItemCreated", "ItemChanged", "CollectionCreated", "CollectionChanged", "PropertiesChanged",
            ]))
        for signal in daemon.signals {
            let interface = try #require(declared.first { $0.name == signal.interface }, "\(signal.interface ?? "")")
            // A name may be declared twice with other arguments (KWallet's `walletClosed(s)` and `(i)`).
            let declaration = try #require(
                interface.signals.first { $0.name == signal.member && $0.signature == signal.signature }
                    ?? interface.signals.first { $0.name == signal.member }, "\(signal.member ?? "")")
            #expect(signal.signature == declaration.signature, "\(signal.member ?? "")")
        }
    }

    @Test func sessionsBelongToTheirClientAndGoWithIt() throws {
        let daemon = try InProcessDaemon()
        let session = try daemon.openPlainSession(sender: ":1.20")
        let item = try daemon.createItem(session: session, attributes: ["who": "me"], secret: "mine", sender: ":1.20")
        #expect(
            try daemon.errorName(
                item, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(session)], sender: ":1.21")
                == "org.freedesktop.Secret.Error.NoSession")
        let secret = try daemon.ok(
            item, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(session)], sender: ":1.20")
        guard case .structure(let members)? = secret.first, case .bytes(let bytes) = members[2] else {
            Issue.record("GetSecret gave \(secret)")
            return
        }
        #expect(bytes == Array("mine".utf8))
        let left = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            arguments: [.string(":1.20"), .string(":1.20"), .string("")])
        left.stampAsDelivered(from: "org.freedesktop.DBus", serial: 99)
        _ = daemon.daemon.handle(left)
        #expect(
            try daemon.errorName(session, "org.freedesktop.Secret.Session", "Close", sender: ":1.20")
                == "org.freedesktop.Secret.Error.NoSuchObject")
        // The same signal from a client is not believed.
        let other = try daemon.openPlainSession(sender: ":1.30")
        let forged = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            arguments: [.string(":1.30"), .string(":1.30"), .string("")])
        forged.stampAsDelivered(from: ":1.31", serial: 100)
        _ = daemon.daemon.handle(forged)
        try daemon.ok(other, "org.freedesktop.Secret.Session", "Close", sender: ":1.30")
    }

    @Test func anUnlockPromptAsksPinentryAndCompletesWithTheUnlockedPaths() throws {
        let daemon = try InProcessDaemon(answers: ["password wrong", "password in-process password"])
        let login = "/org/freedesktop/secrets/collection/login"
        try daemon.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])])
        let unlock = try daemon.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Unlock", [.objectPaths([login])])
        #expect(unlock.first == .objectPaths([]))
        let prompt = try #require(unlock.last?.text)
        #expect(prompt.hasPrefix("/org/freedesktop/secrets/prompt/"))
        // Another client cannot use the prompt's path as its own object after it ends; before, it answers.
        daemon.clearSignals()
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
        daemon.settle()
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(completed.path == prompt)
        #expect(try completed.arguments() == [.bool(false), .variant(.objectPaths([login]))])
        #expect(
            try daemon.ok(
                login, "org.freedesktop.DBus.Properties", "Get",
                [.string("org.freedesktop.Secret.Collection"), .string("Locked")]) == [.variant(.bool(false))])
        #expect(daemon.signals.contains { $0.member == "PropertiesChanged" && $0.path == login })
    }

    @Test func aDismissedPromptCompletesDismissedAndLeavesTheCollectionLocked() throws {
        let daemon = try InProcessDaemon(answers: ["cancel"])
        let login = "/org/freedesktop/secrets/collection/login"
        try daemon.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])])
        let prompt = try #require(
            try daemon.ok(
                "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Unlock", [.objectPaths([login])]
            )
            .last?.text)
        // Another client can neither dismiss nor show it.
        for member in ["Dismiss", "Prompt"] {
            let error = try daemon.errorName(
                prompt, "org.freedesktop.Secret.Prompt", member, member == "Prompt" ? [.string("")] : [],
                sender: ":1.99")
            #expect(error == "org.freedesktop.DBus.Error.AccessDenied")
        }
        daemon.clearSignals()
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Dismiss")
        #expect(
            try daemon.signals.first { $0.member == "Completed" }?.arguments() == [
                .bool(true), .variant(.objectPaths([])),
            ])
        #expect(
            try daemon.errorName(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
                == "org.freedesktop.Secret.Error.NoSuchObject")
        #expect(daemon.daemon.registry.login?.isLocked == true)
    }

    /// A Keychain1 unlock derives the key off the serving thread: the call gets no reply at once, other calls
    /// are answered meanwhile, and the reply comes with the completion.
    @Test func aPasswordUnlockIsAnsweredWhenTheKeyIsDerivedAndOthersAreServedMeanwhile() throws {
        let daemon = try InProcessDaemon()
        let native = Keychain1Interface.path(collection: "login")
        try daemon.ok(native, Keychain1Interface.interface, "Lock")
        let (immediate, call) = try daemon.send(
            native, Keychain1Interface.interface, "Unlock", [.bytes(InProcessDaemon.password)])
        #expect(immediate == nil)
        try daemon.ok("/org/freedesktop/secrets", "org.freedesktop.DBus.Properties", "GetAll", [.string("")])
        let reply = try #require(daemon.awaitCompletion(of: call))
        #expect(reply.kind == .methodReturn)
        #expect(daemon.daemon.registry.login?.isLocked == false)

        try daemon.ok(native, Keychain1Interface.interface, "Lock")
        let (_, wrong) = try daemon.send(native, Keychain1Interface.interface, "Unlock", [.bytes(Array("nope".utf8))])
        let refusal = try #require(daemon.awaitCompletion(of: wrong))
        #expect(refusal.errorName == Keychain1Interface.statusError)
        #expect(daemon.daemon.registry.login?.isLocked == true)
    }

    @Test func aPasswordRefusedForTooManyWrongOnesHasItsOwnErrorName() throws {
        let daemon = try InProcessDaemon()
        let native = Keychain1Interface.path(collection: "login")
        try daemon.ok(native, Keychain1Interface.interface, "Lock")
        for _ in 0..<3 {
            let (_, call) = try daemon.send(
                native, Keychain1Interface.interface, "Unlock", [.bytes(Array("nope".utf8))])
            #expect(daemon.awaitCompletion(of: call)?.errorName == Keychain1Interface.statusError)
        }
        let refused = try daemon.errorName(
            native, Keychain1Interface.interface, "Unlock", [.bytes(InProcessDaemon.password)])
        #expect(refused == Keychain1Interface.tooManyAttemptsError)
        let error = Keychain1Interface.keychainError(
            DBusError(
                name: Keychain1Interface.tooManyAttemptsError,
                message: "2 too many wrong passwords; not tried (wait 2 s)"))
        #expect(error.status == .authFailed && error.retryAfterSeconds == 2)
    }

    /// Keychain1 takes no more than the Secret Service face does: a huge attribute is refused, not stored.
    @Test func keychain1BoundsAttributesAsTheSecretServiceDoes() throws {
        let daemon = try InProcessDaemon()
        let native = Keychain1Interface.path(collection: "login")
        let huge = String(repeating: "a", count: 64 * 1024)
        let reply = try #require(
            try daemon.send(
                native, Keychain1Interface.interface, "Add",
                [
                    .string(ItemClass.genericPassword.rawValue),
                    Keychain1Interface.encode([.account: .string(huge), .service: .string("s")]), .bytes([1]),
                    .bool(true),
                ]
            ).reply)
        #expect(reply.errorName == Keychain1Interface.statusError)
        #expect(
            Keychain1Interface.keychainError(
                DBusError(name: reply.errorName ?? "", message: (try? reply.arguments().first?.text) ?? "")
            ).status == .dataTooLarge)
        let search = try daemon.ok(
            native, Keychain1Interface.interface, "Search",
            [Keychain1Interface.encode(ItemQuery(.genericPassword, limit: .all, returning: .attributes))])
        #expect(search == [.array(elementSignature: "a{sv}", [])])
    }

    @Test func aPasswordChangeThroughKeychain1IsSavedAndTheLogEmptied() throws {
        let daemon = try InProcessDaemon()
        let native = Keychain1Interface.path(collection: "login")
        let new = Array("changed".utf8)
        let (_, call) = try daemon.send(
            native, Keychain1Interface.interface, "ChangePassword", [.bytes(InProcessDaemon.password), .bytes(new)])
        #expect(try #require(daemon.awaitCompletion(of: call)).kind == .methodReturn)
        daemon.settle()
        #expect(!daemon.daemon.registry.hasPendingCheckpoints)
        let file = try #require(daemon.daemon.registry.login?.keychain.path)
        let wal = (try? FileManager.default.attributesOfItem(atPath: file + "-wal")[.size] as? Int) ?? 0
        #expect(wal == 0)
        let reopened = try Keychain(opening: file)
        #expect(throws: KeychainError.self) { try reopened.unlock(password: InProcessDaemon.password) }
        try reopened.unlock(password: new)
    }

    @Test func controlRequestsAreAnsweredThroughTheRegistry() throws {
        let daemon = try InProcessDaemon()
        var replies: [ControlReply] = []
        daemon.userLogin.answer(.closeSession(lockIfLast: true), from: .login) { replies.append($0) }
        #expect(replies.last?.status == .ok)
        #expect(daemon.daemon.registry.login?.isLocked == true)
        daemon.userLogin.answer(.openSession(password: SharedSecret.forTesting(Array("wrong".utf8))), from: .login) {
            replies.append($0)
        }
        daemon.settle()
        #expect(replies.last?.status == .wrongPassword)
        daemon.userLogin.answer(.openSession(password: SharedSecret.forTesting(InProcessDaemon.password)), from: .login)
        {
            replies.append($0)
        }
        #expect(replies.count == 2)  // not answered before the key is derived
        daemon.settle()
        #expect(replies.last == ControlReply(.ok, "login keychain unlocked"))
        daemon.userLogin.answer(.status, from: .userProcess) { replies.append($0) }
        #expect(replies.last == ControlReply(.ok, "unlocked; 2 sessions"))
    }

    /// Only a login counts sessions: a process of the user that opened one would keep the last logout from
    /// locking, and one that closed one would lock under a login still open (issue 31, item 6).
    @Test func aUserProcessNeitherOpensNorClosesASession() throws {
        let daemon = try InProcessDaemon()
        var replies: [ControlReply] = []
        daemon.userLogin.answer(.handOver(password: nil), from: .login) { replies.append($0) }
        daemon.userLogin.answer(.openSession(password: nil), from: .userProcess) { replies.append($0) }
        #expect(
            replies.last == ControlReply(.ok, "not counted as a session (only a login is); no password given: unlocked")
        )
        daemon.userLogin.answer(.closeSession(lockIfLast: true), from: .userProcess) { replies.append($0) }
        #expect(replies.last?.status == .badRequest)
        daemon.userLogin.answer(.status, from: .login) { replies.append($0) }
        #expect(replies.last == ControlReply(.ok, "unlocked; 1 sessions"))
        daemon.userLogin.answer(.closeSession(lockIfLast: true), from: .login) { replies.append($0) }
        #expect(replies.last == ControlReply(.ok, "last session closed; login keychain locked"))
        #expect(daemon.daemon.registry.login?.isLocked == true)
    }

    /// A hand-over is answered at once; the unlock goes on in the background and the bus clients that come
    /// meanwhile are answered after it, finding the keychain unlocked.
    @Test func aLoginsHandOverIsAnsweredAtOnceAndHoldsClientsUntilUnlocked() throws {
        let daemon = try InProcessDaemon()
        let login = "/org/freedesktop/secrets/collection/login"
        try daemon.ok("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", [.objectPaths([login])])
        var replies: [ControlReply] = []
        daemon.userLogin.answer(.handOver(password: SharedSecret.forTesting(InProcessDaemon.password)), from: .login) {
            replies.append($0)
        }
        #expect(replies == [ControlReply(.ok, "unlocking the login keychain")])
        let (early, call) = try daemon.send(
            login, "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Collection"), .string("Locked")])
        #expect(early == nil, "held until the unlock is done")
        let reply = try #require(daemon.awaitCompletion(of: call))
        #expect(try reply.arguments() == [.variant(.bool(false))])
        // Only a login may hand over.
        daemon.userLogin.answer(.handOver(password: nil), from: .userProcess) { replies.append($0) }
        #expect(replies.last?.status == .badRequest)
    }

    /// Another process of the user cannot create the login keychain, nor trigger the re-key prompt with a
    /// password of its own choosing.
    @Test func aUserProcessPasswordOnlyUnlocks() throws {
        let daemon = try InProcessDaemon(answers: ["password in-process password"])
        var replies: [ControlReply] = []
        daemon.userLogin.answer(.closeSession(lockIfLast: true), from: .login) { replies.append($0) }
        daemon.userLogin.answer(
            .openSession(password: SharedSecret.forTesting(Array("attacker".utf8))), from: .userProcess
        ) {
            replies.append($0)
        }
        daemon.settle()
        #expect(replies.last?.status == .wrongPassword)
        #expect(!daemon.daemon.registry.hasWorkInProgress, "no re-key prompt was started")
        let file = try #require(daemon.daemon.registry.login?.keychain.path)
        #expect(throws: KeychainError.self) { try Keychain(opening: file).unlock(password: Array("attacker".utf8)) }

        let empty = try InProcessDaemon()
        let path = try #require(empty.daemon.registry.login?.keychain.path)
        try FileManager.default.removeItem(atPath: path)
        let fresh = SecretServiceDaemon(
            registry: try KeychainRegistry(configuration: empty.daemon.registry.configuration, loginPassword: nil))
        fresh.registry.userLogin.answer(
            .openSession(password: SharedSecret.forTesting(Array("attacker".utf8))), from: .userProcess
        ) {
            replies.append($0)
        }
        fresh.registry.deliverCompletions()
        #expect(replies.last?.status == .failed)
        #expect(fresh.registry.login == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    private func searchAll(_ daemon: InProcessDaemon, _ attributes: [String: String]) throws -> ([String], [String]) {
        let reply = try daemon.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SearchItems", [.stringDictionary(attributes)]
        )
        return (reply.first?.objectPathList ?? [], reply.last?.objectPathList ?? [])
    }

    /// Arguments of the right types for `signature` (a concatenation of complete types).
    private func signatureArguments(_ signature: String) throws -> [DBusValue] {
        var values: [DBusValue] = []
        var rest = Substring(signature)
        while !rest.isEmpty {
            let type = try #require(completeType(rest))
            values.append(sample(String(type)))
            rest = rest.dropFirst(type.count)
        }
        return values
    }

    private func completeType(_ text: Substring) -> Substring? {
        guard let first = text.first else { return nil }
        switch first {
        case "a":
            return completeType(text.dropFirst()).map { text.prefix($0.count + 1) }
        case "(", "{":
            let close: Character = first == "(" ? ")" : "}"
            var depth = 0
            for (offset, character) in text.enumerated() {
                if character == "(" || character == "{" { depth += 1 }
                if character == ")" || character == "}" { depth -= 1 }
                if depth == 0, character == close { return text.prefix(offset + 1) }
            }
            return nil
        default:
            return text.prefix(1)
        }
    }

    private func sample(_ type: String) -> DBusValue {
        switch type {
        case "s": .string("x")
        case "o": .objectPath("/")
        case "b": .bool(false)
        case "u": .uint32(0)
        case "t": .uint64(0)
        case "v": .variant(.string("x"))
        case "ay": .bytes([])
        case "ao": .objectPaths([])
        case "a{ss}": .stringDictionary([:])
        case "a{sv}": .variantDictionary([:])
        case "(oayays)": .structure([.objectPath("/"), .bytes([]), .bytes([]), .string("text/plain")])
        case "h": .unixFileDescriptor(DBusFileDescriptor(owning: open("/dev/null", O_WRONLY | O_CLOEXEC)))
        default: .string("unknown \(type)")
        }
    }
}
