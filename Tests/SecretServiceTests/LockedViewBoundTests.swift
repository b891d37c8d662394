import DBus
import Testing

@testable import SecretService

/// What a locked collection's items show is kept in the daemon's memory (``LockedItemViews``), within a bound on
/// all collections' views together: items with huge attributes cannot grow the daemon without bound, while
/// unlocked or locked, and an item that does not fit shows nothing while locked.
@Suite struct LockedViewBoundTests {
    static let login = "/org/freedesktop/secrets/collection/login"
    static let bound = 256 << 10

    /// A daemon whose views hold at most ``bound`` bytes, with `count` items of about 64 KiB of attributes each.
    static func daemonWithHugeItems(_ count: Int) throws -> (InProcessDaemon, [String]) {
        let inproc = try InProcessDaemon(answers: ["password in-process password"])
        inproc.daemon.lockedViews = LockedItemViews(byteLimit: bound)
        let session = try inproc.openPlainSession()
        let huge = String(repeating: "x", count: 16 << 10)
        let paths = try (0..<count).map { number in
            try inproc.createItem(
                session: session,
                attributes: ["service": "huge.example", "n": "\(number)", "a": huge, "b": huge, "c": huge, "d": huge],
                secret: "s", label: "Huge \(number)")
        }
        return (inproc, paths)
    }

    static func label(_ path: String, in inproc: InProcessDaemon) throws -> String? {
        try inproc.ok(
            path, "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Item"), .string("Label")]
        ).first.flatMap {
            guard case .variant(.string(let text)) = $0 else { return nil }
            return text
        }
    }

    @Test func hugeItemsHoldNoMoreThanTheBoundUnlockedLockedAndUnlockedAgain() throws {
        // 40 items of 64 KiB: 2.5 MiB of attribute text, ten times the bound.
        let (inproc, paths) = try Self.daemonWithHugeItems(40)
        #expect(inproc.daemon.lockedViews.heldBytes <= Self.bound)
        try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", [.objectPaths([Self.login])])
        let held = inproc.daemon.lockedViews.heldBytes
        #expect(held <= Self.bound)
        #expect(held >= Self.bound / 2, "the bound is used, not left empty")
        // Those that fit show their labels while locked; the others nothing.
        let labels = try paths.map { try Self.label($0, in: inproc) }
        let shown = labels.filter { $0?.hasPrefix("Huge ") == true }.count
        #expect(shown >= 1 && shown < paths.count)
        #expect(labels.filter { $0 == "" }.count == paths.count - shown)
        // Unlocked again (the announcement reads every item again): still within the bound.
        let unlock = try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Unlock", [.objectPaths([Self.login])])
        let prompt = try #require(unlock.last?.text)
        try inproc.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
        inproc.settle()
        #expect(inproc.signals.contains { $0.member == "Completed" })
        #expect(inproc.daemon.lockedViews.heldBytes <= Self.bound)
        #expect(try Self.label(paths[0], in: inproc) == "Huge 0")
    }

    @Test func smallItemsAreAllKept() throws {
        let inproc = try InProcessDaemon()
        let session = try inproc.openPlainSession()
        let paths = try (0..<50).map {
            try inproc.createItem(
                session: session, attributes: ["service": "small", "n": "\($0)"], secret: "s", label: "Small \($0)")
        }
        try inproc.ok(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Lock", [.objectPaths([Self.login])])
        for (number, path) in paths.enumerated() { #expect(try Self.label(path, in: inproc) == "Small \(number)") }
    }
}
