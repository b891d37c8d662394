import DBus
import Foundation
import KWalletFormat
import KeychainCore
import KeychainRegistry
import KeychainStore
import Testing

@testable import SecretService

/// `org.kde.KWallet` driven in-process (docs/kwallet.md): handles per connection, the mapping onto items that
/// the Secret Service sees too, and KDE's failure values for whatever a client sends.
@Suite(.serialized) struct KWalletObjectTests {
    static let path = "/modules/kwalletd5"
    static let interface = "org.kde.KWallet"

    // MARK: Helpers

    /// The reply's values to a KWallet call.
    @discardableResult
    static func kw(
        _ inproc: InProcessDaemon, _ member: String, _ arguments: [DBusValue] = [], sender: String = ":1.7",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [DBusValue] {
        try inproc.ok(path, interface, member, arguments, sender: sender, sourceLocation: sourceLocation)
    }

    /// A handle on the network wallet for `sender`.
    static func open(_ inproc: InProcessDaemon, _ wallet: String = "kdewallet", sender: String = ":1.7") throws -> Int32
    {
        let reply = try kw(inproc, "open", [.string(wallet), .int64(0), .string("test-app")], sender: sender)
        guard case .int32(let handle)? = reply.first else { throw DBusError(.failed, "open: \(reply)") }
        return handle
    }

    /// Qt's `QDataStream` QString, written here independently of KWalletFormat.
    static func qString(_ text: String) -> [UInt8] {
        let units = Array(text.utf16)
        return bigEndian(UInt32(units.count * 2)) + units.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    /// A `QMap<QString,QString>` as Debian 12's KF5 library writes it (ascending keys).
    static func qMap(_ pairs: [String: String]) -> [UInt8] {
        pairs.keys.sorted().reduce(bigEndian(UInt32(pairs.count))) { $0 + qString($1) + qString(pairs[$1] ?? "") }
    }

    /// The `a{sv}` reply as a dictionary.
    static func dictionary(_ value: DBusValue?) -> [String: DBusValue] {
        guard case .dictionary("s", "v", let entries)? = value else { return [:] }
        var result: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let key) = entry.key, case .variant(let inner) = entry.value { result[key] = inner }
        }
        return result
    }

    // MARK: Tests

    @Test func theNamesKwalletrcGivesAreTheDefaultCollection() throws {
        let inproc = try InProcessDaemon()
        inproc.daemon.kwallet.names = KWalletrc()
        #expect(try Self.kw(inproc, "networkWallet") == [.string("kdewallet")])
        #expect(try Self.kw(inproc, "localWallet") == [.string("kdewallet")])
        #expect(try Self.kw(inproc, "wallets") == [.array(elementSignature: "s", [.string("kdewallet")])])
        #expect(try Self.kw(inproc, "isOpen", [.string("kdewallet")]) == [.bool(true)])
        let handle = try Self.open(inproc)
        #expect(handle > 0)
        #expect(inproc.daemon.kwallet.handles[handle]?.collection.id == "login")
        #expect(try Self.open(inproc) == handle, "the same connection gets the same handle again")
        let other = try Self.open(inproc, sender: ":1.8")
        #expect(other > 0 && other != handle)
        #expect(
            try Self.kw(inproc, "users", [.string("kdewallet")]) == [
                .array(elementSignature: "s", [.string("test-app")])
            ])
    }

    @Test func kwalletrcIsReadBoundedAndOnlyItsThreeKeys() throws {
        let two = KWalletrc(
            kwalletrc:
                "[Other]\nDefault Wallet=no\n[Wallet]\nDefault Wallet = mine\nLocal Wallet=\\slocal\nUse One Wallet=false\n"
        )
        #expect(two.networkWallet == "mine" && two.localWallet == " local")
        let one = KWalletrc(kwalletrc: "[Wallet]\nLocal Wallet=local\n[Wallet][Sub]\nDefault Wallet=sub\n")
        #expect(one.networkWallet == "kdewallet" && one.localWallet == "kdewallet")
        let long = KWalletrc(kwalletrc: "[Wallet]\nDefault Wallet=" + String(repeating: "x", count: 300) + "\n")
        #expect(long.networkWallet == "kdewallet")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kwrc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let huge = directory + "/huge"
        try ("[Wallet]\nDefault Wallet=big\n" + String(repeating: "#", count: 70_000)).write(
            toFile: huge, atomically: true, encoding: .utf8)
        #expect(KWalletrc.read(path: huge) == KWalletrc())
        #expect(KWalletrc.read(path: directory) == KWalletrc(), "a directory")
        #expect(KWalletrc.read(path: "/dev/zero") == KWalletrc(), "not a regular file")
        let small = directory + "/small"
        try "[Wallet]\nDefault Wallet=small\n".write(toFile: small, atomically: true, encoding: .utf8)
        #expect(KWalletrc.read(path: small).networkWallet == "small")
    }

    @Test func aSetCostsItsRangesAgainstThePatternBudget() throws {
        // 4,000 one-character ranges that do not touch (so they stay 4,000 after merging): each test of the
        // set looks at all of them, and the budget counts that.
        let members = (0..<4_000).compactMap { Unicode.Scalar(0x4E00 + 2 * $0) }
        let set = String(String.UnicodeScalarView(members))
        let first = try #require(members.first)
        var fresh = KWalletPattern("*[" + set + "]x")
        let control = fresh.matches(String(first) + "x")
        #expect(control)
        var hostile = KWalletPattern("*[" + set + "]x")
        let long = hostile.matches(String(repeating: "a", count: 4_000))
        let after = hostile.matches(String(first) + "x")
        #expect(!long)
        #expect(hostile.budget <= 0, "4,000 set tests of 4,000 ranges spend the budget")
        #expect(!after, "the rest of the call's keys are left out")
        // Repeated members are one range: the reviewer's `[bbbb…]` costs one step per test.
        var repeated = KWalletPattern("*[" + String(repeating: "b", count: 4_000) + "]x")
        let missed = repeated.matches(String(repeating: "a", count: 4_000))
        let found = repeated.matches("bx")
        #expect(!missed && found)
        #expect(repeated.budget > KWalletPattern.stepBudget - 10_000)
    }

    @Test func keyPatternsAreQtWildcardsWithinABudget() {
        func matches(_ pattern: String, _ key: String) -> Bool {
            var compiled = KWalletPattern(pattern)
            return compiled.matches(key)
        }
        #expect(matches("*@*", "me@example.org") && !matches("*@*", "me"))
        #expect(matches("*", "") && matches("*", "anything") && !matches("", "x"))
        #expect(matches("a?c", "abc") && !matches("a?c", "ac"))
        #expect(matches("[bs]*", "blob") && matches("[bs]*", "settings") && !matches("[bs]*", "mail"))
        #expect(matches("[!a]x", "bx") && !matches("[!a]x", "ax") && matches("[a-c]1", "b1"))
        #expect(matches("[x", "[x"), "an unclosed set is itself")
        #expect(matches("ü*", "über") && !matches("abc", "abcd"))
        // A pattern that backtracks over many long keys: the budget ends it, at once.
        var hostile = KWalletPattern("*" + String(repeating: "a", count: 2_000) + "b")
        let key = String(repeating: "a", count: 16_000)
        let started = Date()
        var matched = 0
        for _ in 0..<1_000 where hostile.matches(key) { matched += 1 }
        #expect(matched == 0)
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test func passwordsMapsAndStreamsKeepKDEsWireForms() throws {
        let inproc = try InProcessDaemon()
        let handle = try Self.open(inproc)
        let h = DBusValue.int32(handle)
        let app = DBusValue.string("test-app")
        #expect(try Self.kw(inproc, "hasFolder", [h, .string("Mail"), app]) == [.bool(false)])
        #expect(try Self.kw(inproc, "createFolder", [h, .string("Mail"), app]) == [.bool(true)])
        #expect(try Self.kw(inproc, "hasFolder", [h, .string("Mail"), app]) == [.bool(true)], "an empty folder exists")
        #expect(try Self.kw(inproc, "createFolder", [h, .string("Mail"), app]) == [.bool(false)], "it exists")
        #expect(try Self.kw(inproc, "folderDoesNotExist", [.string("kdewallet"), .string("Mail")]) == [.bool(false)])
        #expect(
            try Self.kw(
                inproc, "writePassword", [h, .string("Mail"), .string("me@example.org"), .string("pässword"), app])
                == [.int32(0)])
        #expect(
            try Self.kw(inproc, "readPassword", [h, .string("Mail"), .string("me@example.org"), app]) == [
                .string("pässword")
            ])
        #expect(
            try Self.kw(inproc, "readEntry", [h, .string("Mail"), .string("me@example.org"), app])
                == [.bytes(Self.qString("pässword"))], "a password read as bytes is one QString, as kwalletd5 gives it")
        #expect(try Self.kw(inproc, "entryType", [h, .string("Mail"), .string("me@example.org"), app]) == [.int32(1)])
        let map = Self.qMap(["user": "me", "host": "imap", "empty": ""])
        #expect(
            try Self.kw(inproc, "writeMap", [h, .string("Mail"), .string("settings"), .bytes(map), app]) == [.int32(0)])
        #expect(try Self.kw(inproc, "readMap", [h, .string("Mail"), .string("settings"), app]) == [.bytes(map)])
        #expect(try Self.kw(inproc, "entryType", [h, .string("Mail"), .string("settings"), app]) == [.int32(3)])
        #expect(try Self.kw(inproc, "readPassword", [h, .string("Mail"), .string("settings"), app]) == [.string("")])
        let stream: [UInt8] = [0, 1, 0, 255, 0]
        #expect(
            try Self.kw(inproc, "writeEntry", [h, .string("Mail"), .string("blob"), .bytes(stream), app]) == [.int32(0)]
        )
        #expect(try Self.kw(inproc, "readEntry", [h, .string("Mail"), .string("blob"), app]) == [.bytes(stream)])
        #expect(try Self.kw(inproc, "entryType", [h, .string("Mail"), .string("blob"), app]) == [.int32(2)])
        #expect(try Self.kw(inproc, "entryType", [h, .string("Mail"), .string("none"), app]) == [.int32(0)])
        #expect(
            try Self.kw(inproc, "entryList", [h, .string("Mail"), app])
                == [.array(elementSignature: "s", [.string("blob"), .string("me@example.org"), .string("settings")])])
        let passwords = Self.dictionary(
            try Self.kw(inproc, "readPasswordList", [h, .string("Mail"), .string("*@*"), app]).first)
        #expect(passwords == ["me@example.org": .string("pässword")])
        let maps = Self.dictionary(try Self.kw(inproc, "mapList", [h, .string("Mail"), app]).first)
        #expect(maps == ["settings": .bytes(map)])
        let entries = Self.dictionary(
            try Self.kw(inproc, "readEntryList", [h, .string("Mail"), .string("[bs]*"), app]).first)
        #expect(entries == ["blob": .bytes(stream), "settings": .bytes(map)])
        #expect(
            try Self.kw(inproc, "renameEntry", [h, .string("Mail"), .string("blob"), .string("settings"), app]) == [
                .int32(-1)
            ],
            "the new key is taken")
        #expect(
            try Self.kw(inproc, "renameEntry", [h, .string("Mail"), .string("blob"), .string("blob2"), app]) == [
                .int32(0)
            ])
        #expect(try Self.kw(inproc, "readEntry", [h, .string("Mail"), .string("blob2"), app]) == [.bytes(stream)])
        #expect(try Self.kw(inproc, "removeEntry", [h, .string("Mail"), .string("blob2"), app]) == [.int32(0)])
        #expect(try Self.kw(inproc, "hasEntry", [h, .string("Mail"), .string("blob2"), app]) == [.bool(false)])
        #expect(try Self.kw(inproc, "removeEntry", [h, .string("Nope"), .string("x"), app]) == [.int32(0)])
        #expect(try Self.kw(inproc, "removeEntry", [h, .string("Mail"), .string("x"), app]) == [.int32(-3)])
        #expect(try Self.kw(inproc, "folderList", [h, app]) == [.array(elementSignature: "s", [.string("Mail")])])
        // A libsecret item with that server and no user is no entry: removeFolder leaves it.
        let session = try inproc.openPlainSession()
        let host = try inproc.createItem(session: session, attributes: ["server": "Mail"], secret: "host")
        #expect(try Self.kw(inproc, "removeFolder", [h, .string("Mail"), app]) == [.bool(true)])
        #expect(inproc.daemon.resolve(host) != nil)
        #expect(try Self.kw(inproc, "folderList", [h, app]) == [.array(elementSignature: "s", [])])
        #expect(
            try Self.kw(inproc, "keyDoesNotExist", [.string("kdewallet"), .string("Mail"), .string("me@example.org")])
                == [.bool(true)])
    }

    @Test func anEntryDeletedThroughTheSecretServiceUpdatesItsFolder() throws {
        let inproc = try InProcessDaemon()
        let handle = try Self.open(inproc)
        let app = DBusValue.string("test-app")
        try Self.kw(
            inproc, "writePassword", [.int32(handle), .string("Mail"), .string("alice"), .string("pw"), app])
        let session = try inproc.openPlainSession()
        let plain = try inproc.createItem(session: session, attributes: ["note": "no folder"], secret: "x")
        let found = try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SearchItems",
            [.stringDictionary(["server": "Mail", "user": "alice"])])
        let entry = try #require(found.first?.objectPathList?.first)
        inproc.clearSignals()
        try inproc.ok(entry, "org.freedesktop.Secret.Item", "Delete")
        let updated = inproc.signals.filter { $0.member == "folderUpdated" }
        #expect(updated.count == 2, "from both paths")
        #expect(try updated.first?.arguments() == [.string("kdewallet"), .string("Mail")])
        #expect(updated.allSatisfy { $0.destination == nil })
        // An item that is no KWallet entry sends none.
        inproc.clearSignals()
        try inproc.ok(plain, "org.freedesktop.Secret.Item", "Delete")
        #expect(!inproc.signals.contains { $0.member == "folderUpdated" })
    }

    @Test func anEntryIsTheSameItemThroughBothFaces() throws {
        let inproc = try InProcessDaemon()
        let handle = try Self.open(inproc)
        let h = DBusValue.int32(handle)
        let app = DBusValue.string("test-app")
        try Self.kw(inproc, "writePassword", [h, .string("Web"), .string("alice"), .string("from kwallet"), app])
        let session = try inproc.openPlainSession()
        let found = try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SearchItems",
            [.stringDictionary(["server": "Web", "user": "alice", "type": "plaintext"])])
        let paths = try #require(found.first?.objectPathList)
        #expect(paths.count == 1)
        let secret = try inproc.ok(
            try #require(paths.first), "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(session)])
        guard case .structure(let fields)? = secret.first, case .bytes(let value) = fields[2] else {
            Issue.record("no secret: \(secret)")
            return
        }
        #expect(String(decoding: value, as: UTF8.self) == "from kwallet")
        let label = try inproc.ok(
            try #require(paths.first), "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Item"), .string("Label")])
        #expect(label == [.variant(.string("Web/alice"))])
        // The other way: a libsecret network password (server and user, no type) is a KWallet password, and
        // KWallet clients are told its folder changed.
        inproc.clearSignals()
        _ = try inproc.createItem(
            session: session, attributes: ["server": "Web", "user": "bob"], secret: "from libsecret")
        let updated = inproc.signals.filter { $0.member == "folderUpdated" }
        #expect(updated.count == 2, "from both paths")
        #expect(try updated.first?.arguments() == [.string("kdewallet"), .string("Web")])
        #expect(updated.allSatisfy { $0.destination == nil })
        #expect(
            try Self.kw(inproc, "readPassword", [h, .string("Web"), .string("bob"), app]) == [.string("from libsecret")]
        )
        #expect(
            try Self.kw(inproc, "keyDoesNotExist", [.string("kdewallet"), .string("Web"), .string("bob")]) == [
                .bool(false)
            ])
        // A write replaces the item with that folder and key, keeping its other attributes.
        try Self.kw(inproc, "writePassword", [h, .string("Web"), .string("bob"), .string("changed"), app])
        let bobs = try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "SearchItems",
            [.stringDictionary(["server": "Web", "user": "bob"])])
        #expect(bobs.first?.objectPathList?.count == 1)
    }

    @Test func badHandlesForeignHandlesAndBadInputGetKDEsFailureValues() throws {
        let inproc = try InProcessDaemon()
        let mine = try Self.open(inproc, sender: ":1.7")
        let app = DBusValue.string("test-app")
        try Self.kw(inproc, "writePassword", [.int32(mine), .string("F"), .string("k"), .string("secret"), app])
        let foreign = DBusValue.int32(mine)
        let huge = String(repeating: "x", count: 20_000)
        let emptyMap = DBusValue.dictionary(keySignature: "s", valueSignature: "v", [])
        let emptyList = DBusValue.array(elementSignature: "s", [])
        // Each call with a handle that is not the caller's: another connection's, unknown, zero, negative.
        for (handle, sender) in [
            (foreign, ":1.9"), (.int32(123_456), ":1.7"), (.int32(0), ":1.7"), (.int32(-1), ":1.7"),
        ] {
            let calls: [(String, [DBusValue], DBusValue)] = [
                ("isOpen", [handle], .bool(false)),
                ("folderList", [handle, app], emptyList),
                ("hasFolder", [handle, .string("F"), app], .bool(false)),
                ("createFolder", [handle, .string("G"), app], .bool(false)),
                ("removeFolder", [handle, .string("F"), app], .bool(false)),
                ("entryList", [handle, .string("F"), app], emptyList),
                ("hasEntry", [handle, .string("F"), .string("k"), app], .bool(false)),
                ("entryType", [handle, .string("F"), .string("k"), app], .int32(0)),
                ("readEntry", [handle, .string("F"), .string("k"), app], .bytes([])),
                ("readMap", [handle, .string("F"), .string("k"), app], .bytes([])),
                ("readPassword", [handle, .string("F"), .string("k"), app], .string("")),
                ("entriesList", [handle, .string("F"), app], emptyMap),
                ("passwordList", [handle, .string("F"), app], emptyMap),
                ("mapList", [handle, .string("F"), app], emptyMap),
                ("readEntryList", [handle, .string("F"), .string("*"), app], emptyMap),
                ("readPasswordList", [handle, .string("F"), .string("*"), app], emptyMap),
                ("readMapList", [handle, .string("F"), .string("*"), app], emptyMap),
                ("renameEntry", [handle, .string("F"), .string("k"), .string("k2"), app], .int32(-1)),
                ("writeEntry", [handle, .string("F"), .string("k"), .bytes([1]), .int32(2), app], .int32(-1)),
                ("writeEntry", [handle, .string("F"), .string("k"), .bytes([1]), app], .int32(-1)),
                ("writeMap", [handle, .string("F"), .string("k"), .bytes(Self.qMap([:])), app], .int32(-1)),
                ("writePassword", [handle, .string("F"), .string("k"), .string("stolen"), app], .int32(-1)),
                ("removeEntry", [handle, .string("F"), .string("k"), app], .int32(-1)),
                ("close", [handle, .bool(true), app], .int32(-1)),
            ]
            for (member, arguments, failure) in calls {
                let reply = try #require(
                    try inproc.send(Self.path, Self.interface, member, arguments, sender: sender).reply)
                #expect(reply.kind == .methodReturn, "\(member) from \(sender): \(reply.errorName ?? "")")
                #expect(try reply.arguments() == [failure], "\(member) from \(sender)")
            }
        }
        // The other connection changed nothing, and the handle still works for its owner.
        let h = DBusValue.int32(mine)
        #expect(try Self.kw(inproc, "readPassword", [h, .string("F"), .string("k"), app]) == [.string("secret")])
        #expect(try Self.kw(inproc, "isOpen", [h]) == [.bool(true)])
        // A negative window id is taken, as kwalletd5 takes it.
        #expect(try Self.kw(inproc, "open", [.string("kdewallet"), .int64(-5), app]) == [h])
        // Ill-formed and oversized input, through a good handle.
        let bad: [(String, [DBusValue], DBusValue)] = [
            ("writeEntry", [h, .string("F"), .string("p"), .bytes([0, 0, 0, 3, 0]), .int32(1), app], .int32(-1)),
            (
                "writeEntry", [h, .string("F"), .string("p"), .bytes(Self.qString("a") + [0]), .int32(1), app],
                .int32(-1)
            ),
            ("writeEntry", [h, .string("F"), .string("p"), .bytes([0xD8, 0]), .int32(1), app], .int32(-1)),
            ("writeEntry", [h, .string("F"), .string("p"), .bytes([1]), .int32(9), app], .int32(-1)),
            ("writeEntry", [h, .string("F"), .string("m"), .bytes([0, 0, 0, 9]), .int32(3), app], .int32(-1)),
            ("writeMap", [h, .string("F"), .string("m"), .bytes([0xFF, 0xFF, 0xFF, 0xFF]), app], .int32(-1)),
            ("writeMap", [h, .string("F"), .string("m"), .bytes(Self.qMap(["a": "b"]) + [7]), app], .int32(-1)),
            ("writePassword", [h, .string(huge), .string("k"), .string("v"), app], .int32(-1)),
            ("writePassword", [h, .string("F"), .string(huge), .string("v"), app], .int32(-1)),
            ("hasFolder", [h, .string(huge), app], .bool(false)),
            ("createFolder", [h, .string(huge), app], .bool(false)),
            ("readPasswordList", [h, .string("F"), .string(huge), app], emptyMap),
            ("renameEntry", [h, .string("F"), .string("k"), .string(huge), app], .int32(-1)),
            ("open", [.string(huge), .int64(0), app], .int32(-1)),
            ("open", [.string(""), .int64(0), app], .int32(-1)),
            ("folderDoesNotExist", [.string("no such wallet"), .string("F")], .bool(true)),
            ("keyDoesNotExist", [.string("kdewallet"), .string(huge), .string("k")], .bool(true)),
            ("deleteWallet", [.string("kdewallet")], .int32(-1)),
            ("deleteWallet", [.string("no such wallet")], .int32(-1)),
            ("close", [.string("no such wallet"), .bool(true)], .int32(-1)),
            ("disconnectApplication", [.string("kdewallet"), .string("another-app")], .bool(false)),
            ("openPath", [.string("/tmp/x.kwl"), .int64(0), app], .int32(-1)),
        ]
        for (member, arguments, failure) in bad {
            let reply = try #require(try inproc.send(Self.path, Self.interface, member, arguments).reply)
            #expect(reply.kind == .methodReturn, "\(member): \(reply.errorName ?? "")")
            #expect(try reply.arguments() == [failure], "\(member) \(arguments.prefix(4))")
        }
        #expect(
            try Self.kw(inproc, "entryList", [h, .string("F"), app]) == [.array(elementSignature: "s", [.string("k")])])
        #expect(
            try Self.kw(inproc, "wallets") == [.array(elementSignature: "s", [.string("kdewallet")])], "no wallet made")
        // A signature the method does not take is a D-Bus error naming it (no handler runs).
        let wrong = try #require(try inproc.send(Self.path, Self.interface, "close", [.int32(mine)]).reply)
        #expect(wrong.errorName == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try Self.kw(inproc, "isOpen", [h]) == [.bool(true)])
    }

    @Test func handlesEndWhenTheirConnectionLeavesAndOnlyTheOwnerIsTold() throws {
        let inproc = try InProcessDaemon()
        let first = try Self.open(inproc, sender: ":1.7")
        let second = try Self.open(inproc, sender: ":1.8")
        inproc.clearSignals()
        try inproc.leave(":1.7")
        #expect(inproc.daemon.kwallet.handles[first] == nil)
        #expect(inproc.daemon.kwallet.handles[second] != nil)
        // A later connection given the same unique name (never, on a real bus) still cannot use it.
        #expect(try Self.kw(inproc, "isOpen", [.int32(first)], sender: ":1.7") == [.bool(false)])
        // close(handle) by its owner: the signals go to it alone.
        #expect(
            try Self.kw(inproc, "close", [.int32(second), .bool(false), .string("test-app")], sender: ":1.8") == [
                .int32(0)
            ])
        let closed = inproc.signals.filter { $0.member == "walletClosedId" || $0.member == "walletClosed" }
        #expect(closed.count == 2)
        #expect(closed.allSatisfy { $0.destination == ":1.8" })
        #expect(try Self.kw(inproc, "isOpen", [.int32(second)], sender: ":1.8") == [.bool(false)])
        // A new handle is a new number: never one issued before.
        let third = try Self.open(inproc, sender: ":1.8")
        #expect(third != second && third != first)
    }

    @Test func openAsyncAnswersAnIdThenSignalsTheCallerOnly() throws {
        let inproc = try InProcessDaemon()
        inproc.clearSignals()
        let (reply, _) = try inproc.send(
            Self.path, Self.interface, "openAsync",
            [.string("kdewallet"), .int64(0), .string("test-app"), .bool(true)], sender: ":1.7")
        guard case .int32(let transaction)? = try reply?.arguments().first else {
            Issue.record("no transaction id")
            return
        }
        #expect(transaction > 0)
        let opened = try #require(inproc.signals.first { $0.member == "walletAsyncOpened" })
        #expect(opened.destination == ":1.7")
        guard case .int32(let handle)? = try opened.arguments().last else {
            Issue.record("no handle")
            return
        }
        #expect(try opened.arguments().first == .int32(transaction))
        #expect(try Self.kw(inproc, "isOpen", [.int32(handle)]) == [.bool(true)])
    }

    @Test func aLockedWalletOpensThroughTheUnlockPromptAndLockingEndsHandles() throws {
        let inproc = try InProcessDaemon(answers: [
            "password \(String(decoding: InProcessDaemon.password, as: UTF8.self))", "cancel",
        ])
        let before = try Self.open(inproc)
        inproc.clearSignals()
        try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock",
            [.objectPaths(["/org/freedesktop/secrets/collection/login"])])
        let ended = inproc.signals.filter { $0.member == "walletClosedId" }
        #expect(ended.count == 1 && ended.first?.destination == ":1.7")
        #expect(inproc.signals.contains { $0.member == "walletClosed" && $0.destination == nil && $0.signature == "s" })
        #expect(inproc.signals.contains { $0.member == "allWalletsClosed" })
        #expect(try Self.kw(inproc, "isOpen", [.int32(before)]) == [.bool(false)])
        // Names are answered while locked, without a handle.
        #expect(try Self.kw(inproc, "networkWallet") == [.string("kdewallet")])
        #expect(try Self.kw(inproc, "isOpen", [.string("kdewallet")]) == [.bool(false)])
        let (now, call) = try inproc.send(
            Self.path, Self.interface, "open", [.string("kdewallet"), .int64(0), .string("test-app")])
        #expect(now == nil, "open waits for the unlock prompt")
        let reply = try #require(inproc.awaitCompletion(of: call))
        guard case .int32(let handle)? = try reply.arguments().first else {
            Issue.record("no handle")
            return
        }
        #expect(handle > 0 && handle != before)
        #expect(try Self.kw(inproc, "isOpen", [.int32(handle)]) == [.bool(true)])
        // Locked again, and the person cancels: -1.
        try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock",
            [.objectPaths(["/org/freedesktop/secrets/collection/login"])])
        let (_, cancelled) = try inproc.send(
            Self.path, Self.interface, "open", [.string("kdewallet"), .int64(0), .string("test-app")])
        #expect(try inproc.awaitCompletion(of: cancelled)?.arguments() == [.int32(-1)])
    }

    @Test func anOpenWaitingForItsPromptGoesWithItsClient() throws {
        let inproc = try InProcessDaemon(answers: ["hang"])
        try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock",
            [.objectPaths(["/org/freedesktop/secrets/collection/login"])])
        let (now, _) = try inproc.send(
            Self.path, Self.interface, "open", [.string("kdewallet"), .int64(0), .string("test-app")], sender: ":1.7")
        #expect(now == nil)
        #expect(inproc.daemon.kwallet.pendingCount == 1)
        // Meanwhile the names answer at once.
        let started = Date()
        #expect(try Self.kw(inproc, "networkWallet", sender: ":1.8") == [.string("kdewallet")])
        #expect(Date().timeIntervalSince(started) < 0.5)
        try inproc.leave(":1.7")
        #expect(inproc.daemon.kwallet.pendingCount == 0)
        inproc.settle()
        #expect(inproc.daemon.registry.promptCount == 0, "its prompt was withdrawn")
    }

    @Test func anUnknownWalletIsANewCollectionAndDeletingItAsksFirst() throws {
        let inproc = try InProcessDaemon(answers: ["cancel", "confirm"])
        inproc.clearSignals()
        let handle = try Self.open(inproc, "Work")
        #expect(handle > 0)
        #expect(inproc.daemon.registry.keychains.contains { $0.label == "Work" })
        #expect(inproc.signals.contains { $0.member == "walletCreated" })
        #expect(
            try Self.kw(inproc, "wallets") == [.array(elementSignature: "s", [.string("kdewallet"), .string("Work")])])
        let (_, refused) = try inproc.send(Self.path, Self.interface, "deleteWallet", [.string("Work")])
        #expect(try inproc.awaitCompletion(of: refused)?.arguments() == [.int32(-1)])
        let (_, confirmed) = try inproc.send(Self.path, Self.interface, "deleteWallet", [.string("Work")])
        #expect(try inproc.awaitCompletion(of: confirmed)?.arguments() == [.int32(0)])
        #expect(!inproc.daemon.registry.keychains.contains { $0.label == "Work" })
        #expect(try Self.kw(inproc, "isOpen", [.int32(handle)]) == [.bool(false)])
    }

    @Test func changePasswordRunsTheChangePromptAndRepliesWhenItEnds() throws {
        let inproc = try InProcessDaemon(answers: ["cancel"])
        let (now, call) = try inproc.send(
            Self.path, Self.interface, "changePassword", [.string("kdewallet"), .int64(0), .string("test-app")])
        #expect(now == nil, "the reply waits for the prompt")
        let reply = try #require(inproc.awaitCompletion(of: call, seconds: 60))
        #expect(reply.kind == .methodReturn)
        #expect(try reply.arguments().isEmpty)
        #expect(try inproc.pinentryCommands().contains { $0.command == "GETPIN" })
        let file = try #require(inproc.daemon.registry.login?.keychain.path)
        try Keychain(opening: file).unlock(password: InProcessDaemon.password)
        let unknown = try Self.kw(inproc, "changePassword", [.string("no such wallet"), .int64(0), .string("a")])
        #expect(unknown.isEmpty)
    }

    @Test func closeDisconnectAndCloseAllActOnlyOnTheCallersHandles() throws {
        let inproc = try InProcessDaemon()
        let mine = try Self.open(inproc, sender: ":1.7")
        _ = try Self.open(inproc, sender: ":1.7")  // a second session on it
        let theirs = try Self.open(inproc, sender: ":1.8")
        #expect(
            try Self.kw(inproc, "close", [.int32(theirs), .bool(true), .string("test-app")], sender: ":1.7") == [
                .int32(-1)
            ])
        #expect(
            try Self.kw(inproc, "disconnectApplication", [.string("kdewallet"), .string("test-app")], sender: ":1.9")
                == [.bool(false)])
        #expect(try Self.kw(inproc, "close", [.string("kdewallet"), .bool(true)], sender: ":1.9") == [.int32(-1)])
        try Self.kw(inproc, "closeAllWallets", sender: ":1.9")
        #expect(try Self.kw(inproc, "isOpen", [.int32(theirs)], sender: ":1.8") == [.bool(true)])
        #expect(
            try Self.kw(inproc, "close", [.int32(mine), .bool(false), .string("other")], sender: ":1.7") == [.int32(1)])
        #expect(
            try Self.kw(inproc, "close", [.int32(mine), .bool(false), .string("test-app")], sender: ":1.7") == [
                .int32(1)
            ])
        #expect(
            try Self.kw(inproc, "close", [.int32(mine), .bool(false), .string("test-app")], sender: ":1.7") == [
                .int32(0)
            ])
        inproc.clearSignals()
        let again = try Self.open(inproc, sender: ":1.7")
        #expect(
            try Self.kw(inproc, "disconnectApplication", [.string("kdewallet"), .string("test-app")], sender: ":1.7")
                == [.bool(true)])
        #expect(try Self.kw(inproc, "isOpen", [.int32(again)], sender: ":1.7") == [.bool(false)])
        let disconnected = try #require(inproc.signals.first { $0.member == "applicationDisconnected" })
        #expect(disconnected.destination == ":1.7")
        #expect(try Self.kw(inproc, "isOpen", [.int32(theirs)], sender: ":1.8") == [.bool(true)])
        try Self.kw(inproc, "closeAllWallets", sender: ":1.8")
        #expect(try Self.kw(inproc, "isOpen", [.int32(theirs)], sender: ":1.8") == [.bool(false)])
    }

    @Test func readingAnotherProgramsItemAsksAsGetSecretDoes() throws {
        let (inproc, session, _) = try AccessPromptTests.untrustedItem(answers: ["cancel", "ok"])
        let path = try inproc.createItem(
            session: session, attributes: ["server": "Mail", "user": "me", "type": "plaintext"], secret: "guarded")
        try AccessPromptTests.trustOnly(
            TrustedApplication(name: "/usr/bin/another-program", digest: nil), path: path, in: inproc)
        let handle = try Self.open(inproc)
        let arguments: [DBusValue] = [.int32(handle), .string("Mail"), .string("me"), .string("another-program")]
        // Names need no leave.
        #expect(try Self.kw(inproc, "hasEntry", arguments) == [.bool(true)])
        let (denied, deniedCall) = try inproc.send(Self.path, Self.interface, "readPassword", arguments)
        #expect(denied == nil, "the reply waits for the prompt")
        #expect(try inproc.awaitCompletion(of: deniedCall)?.arguments() == [.string("")])
        let (_, allowedCall) = try inproc.send(Self.path, Self.interface, "readPassword", arguments)
        #expect(try inproc.awaitCompletion(of: allowedCall)?.arguments() == [.string("guarded")])
        // A write over it is a change: asked too (the script has no answer left: refused).
        let (_, writeCall) = try inproc.send(
            Self.path, Self.interface, "writePassword",
            [.int32(handle), .string("Mail"), .string("me"), .string("overwritten"), .string("another-program")])
        #expect(try inproc.awaitCompletion(of: writeCall)?.arguments() == [.int32(-1)])
    }
}
