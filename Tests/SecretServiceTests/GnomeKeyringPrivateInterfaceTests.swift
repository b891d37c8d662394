import DBus
import Foundation
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import LoginControl
import Pinentry
import Posix
import Testing

@testable import SecretService

/// gnome-keyring's private interface (what Seahorse calls to change a keyring's password), driven in-process.
@Suite(.serialized) struct GnomeKeyringPrivateInterfaceTests {
    static let service = "/org/freedesktop/secrets"
    static let interface = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
    static let login = "/org/freedesktop/secrets/collection/login"
    static let denied = "org.gnome.keyring.Error.Denied"

    /// A `(oayays)` password in a plain session.
    private func secret(_ session: String, _ text: String) -> DBusValue {
        .structure([.objectPath(session), .bytes([]), .bytes(Array(text.utf8)), .string("text/plain")])
    }

    /// Sends a call answered after work off the serving thread; its reply.
    private func deferred(
        _ daemon: InProcessDaemon, _ member: String, _ arguments: [DBusValue], sender: String = ":1.7"
    ) throws -> DBusMessage {
        let (immediate, call) = try daemon.send(Self.service, Self.interface, member, arguments, sender: sender)
        if let immediate { return immediate }
        return try #require(daemon.awaitCompletion(of: call, seconds: 60))
    }

    private func lock(_ daemon: InProcessDaemon, _ paths: [String]) throws {
        try daemon.ok(Self.service, "org.freedesktop.Secret.Service", "Lock", [.objectPaths(paths)])
    }

    private func isLocked(_ daemon: InProcessDaemon, _ path: String) throws -> Bool {
        let reply = try daemon.ok(
            path, "org.freedesktop.DBus.Properties", "Get",
            [.string("org.freedesktop.Secret.Collection"), .string("Locked")])
        return reply == [.variant(.bool(true))]
    }

    @Test func changeWithMasterPasswordChangesTheLoginPasswordAndRefusesAWrongOriginal() throws {
        let daemon = try InProcessDaemon()
        let session = try daemon.openPlainSession()
        let wrong = try deferred(
            daemon, "ChangeWithMasterPassword",
            [.objectPath(Self.login), secret(session, "not it"), secret(session, "new login")])
        #expect(wrong.errorName == Self.denied)

        // Another client's session cannot carry the passwords.
        let foreign = try deferred(
            daemon, "ChangeWithMasterPassword",
            [.objectPath(Self.login), secret(session, "in-process password"), secret(session, "new login")],
            sender: ":1.99")
        #expect(foreign.errorName == "org.freedesktop.Secret.Error.NoSession")

        let changed = try deferred(
            daemon, "ChangeWithMasterPassword",
            [.objectPath(Self.login), secret(session, "in-process password"), secret(session, "new login")])
        #expect(changed.kind == .methodReturn, "\(changed.errorName ?? "")")

        try lock(daemon, [Self.login])
        let old = try deferred(
            daemon, "UnlockWithMasterPassword", [.objectPath(Self.login), secret(session, "in-process password")])
        #expect(old.errorName == Self.denied)
        #expect(try isLocked(daemon, Self.login))
        let unlocked = try deferred(
            daemon, "UnlockWithMasterPassword", [.objectPath(Self.login), secret(session, "new login")])
        #expect(unlocked.kind == .methodReturn, "\(unlocked.errorName ?? "")")
        #expect(try !isLocked(daemon, Self.login))
        // The file itself opens with the new password only.
        let file = try #require(daemon.daemon.registry.login?.keychain.path)
        let reopened = try Keychain(opening: file)
        #expect(throws: KeychainError.self) { try reopened.unlock(password: InProcessDaemon.password) }
        try reopened.unlock(password: Array("new login".utf8))

        let missing = try deferred(
            daemon, "UnlockWithMasterPassword",
            [.objectPath("/org/freedesktop/secrets/collection/nothing"), secret(session, "x")])
        #expect(missing.errorName == "org.freedesktop.Secret.Error.NoSuchObject")
        let session2 = try deferred(
            daemon, "ChangeWithMasterPassword",
            [.objectPath("/org/freedesktop/secrets/collection/session"), secret(session, "x"), secret(session, "y")])
        #expect(session2.errorName == "org.freedesktop.DBus.Error.NotSupported")
    }

    @Test func createWithMasterPasswordMakesACollectionWithItsOwnPasswordThatSurvivesARestart() throws {
        let daemon = try InProcessDaemon(answers: [
            "password in-process password", "password wrong", "password vault password",
        ])
        let session = try daemon.openPlainSession()
        let created = try deferred(
            daemon, "CreateWithMasterPassword",
            [
                .variantDictionary(["org.freedesktop.Secret.Collection.Label": .string("Vault")]),
                secret(session, "vault password"),
            ])
        let path = try #require(try created.arguments().first?.text)
        #expect(path == "/org/freedesktop/secrets/collection/vault")
        #expect(daemon.signals.contains { $0.member == "CollectionCreated" })
        #expect(try !isLocked(daemon, path))
        try daemon.ok(
            path, "org.freedesktop.Secret.Collection", "CreateItem",
            [
                .variantDictionary(["org.freedesktop.Secret.Item.Label": .string("in the vault")]),
                secret(session, "vault secret"), .bool(false),
            ])

        // Unlocking the login keychain does not open it: it has a password of its own, asked for after the
        // login password (right), wrong then right.
        try lock(daemon, [Self.login, path])
        let unlock = try daemon.ok(
            Self.service, "org.freedesktop.Secret.Service", "Unlock", [.objectPaths([Self.login, path])])
        #expect(unlock.first == .objectPaths([]))
        let prompt = try #require(unlock.last?.text)
        daemon.clearSignals()
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
        daemon.settle(seconds: 60)
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(try completed.arguments() == [.bool(false), .variant(.objectPaths([Self.login, path]))])
        #expect(try !isLocked(daemon, path))
        // Three answers taken: one prompt per password asked.
        let taken = try String(contentsOfFile: daemon.answers + ".pos", encoding: .utf8)
        #expect(taken.trimmingCharacters(in: .whitespacesAndNewlines) == "3")

        // Restarted on the same files: served again, locked, and opened by its own password only.
        daemon.daemon.registry.shutDown()
        let restarted = try SecretServiceDaemon(
            configuration: SecretServiceConfiguration(
                registry: RegistryConfiguration(
                    keychainDirectory: daemon.directory + "/keychains",
                    pinentry: Pinentry(program: "/bin/false", environment: [:], timeout: .seconds(1)))),
            loginPassword: try SecretBytes(copying: InProcessDaemon.password))
        defer { restarted.registry.shutDown() }
        let vault = try #require(restarted.registry.keychain(id: "vault"))
        #expect(vault.isLocked && vault.label == "Vault")
        #expect(!restarted.registry.unlockWithoutPassword(vault))
        try vault.keychain.unlock(password: Array("vault password".utf8))
    }

    @Test func changeWithPromptGivesACollectionUnderTheLoginKeyAPasswordOfItsOwn() throws {
        let daemon = try InProcessDaemon(answers: [
            "password wrong", "password in-process password",  // the current (login) password, wrong then right
            // The new password and its confirmation in one dialog (SETREPEAT): a mismatch is the pinentry's
            // to ask again, and it answers once they match.
            "password work password",
        ])
        let created = try daemon.ok(
            Self.service, "org.freedesktop.Secret.Service", "CreateCollection",
            [.variantDictionary(["org.freedesktop.Secret.Collection.Label": .string("Work")]), .string("")])
        let work = try #require(created.first?.text)
        let registry = daemon.daemon.registry
        let held = try #require(registry.keychain(id: "work"))
        guard case .loginKey = held.unlocking else {
            Issue.record("not under the login key")
            return
        }

        let reply = try daemon.ok(Self.service, Self.interface, "ChangeWithPrompt", [.objectPath(work)])
        let prompt = try #require(reply.first?.text)
        #expect(prompt.hasPrefix("/org/freedesktop/secrets/prompt/"))
        #expect(
            try daemon.errorName(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")], sender: ":1.99")
                == "org.freedesktop.DBus.Error.AccessDenied")
        daemon.clearSignals()
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
        daemon.settle(seconds: 60)
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(completed.path == prompt)
        #expect(try completed.arguments() == [.bool(false), .variant(.string(""))])
        guard case .ownPassword = held.unlocking else {
            Issue.record("no password of its own")
            return
        }

        // Now the login keychain no longer opens it; its new password does.
        try lock(daemon, [Self.login, work])
        let (_, unlockLogin) = try daemon.send(
            Keychain1Interface.path(collection: "login"), Keychain1Interface.interface, "Unlock",
            [.bytes(InProcessDaemon.password)])
        #expect(daemon.awaitCompletion(of: unlockLogin)?.kind == .methodReturn)
        #expect(try !isLocked(daemon, Self.login))
        #expect(try isLocked(daemon, work))
        let session = try daemon.openPlainSession()
        let refused = try deferred(
            daemon, "UnlockWithMasterPassword", [.objectPath(work), secret(session, "in-process password")])
        #expect(refused.errorName == Self.denied)
        let opened = try deferred(
            daemon, "UnlockWithMasterPassword", [.objectPath(work), secret(session, "work password")])
        #expect(opened.kind == .methodReturn)
        #expect(try !isLocked(daemon, work))
    }

    @Test func aCancelledChangePromptCompletesDismissedAndChangesNothing() throws {
        let daemon = try InProcessDaemon(answers: ["password in-process password", "cancel"])
        let reply = try daemon.ok(Self.service, Self.interface, "ChangeWithPrompt", [.objectPath(Self.login)])
        let prompt = try #require(reply.first?.text)
        daemon.clearSignals()
        try daemon.ok(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
        daemon.settle(seconds: 60)
        let completed = try #require(daemon.signals.first { $0.member == "Completed" })
        #expect(try completed.arguments().first == .bool(true))
        let file = try #require(daemon.daemon.registry.login?.keychain.path)
        try Keychain(opening: file).unlock(password: InProcessDaemon.password)
    }

    /// The login keychain's password changed alone (as Seahorse does) is out of step with the login password:
    /// the next login's hand-over brings the re-key prompt, and the password set through Seahorse puts the
    /// keychain back on the login password.
    @Test func theNextLoginReKeysALoginKeychainWhosePasswordWasChangedAlone() throws {
        let daemon = try InProcessDaemon(answers: ["password seahorse password"])
        let session = try daemon.openPlainSession()
        let changed = try deferred(
            daemon, "ChangeWithMasterPassword",
            [.objectPath(Self.login), secret(session, "in-process password"), secret(session, "seahorse password")])
        #expect(changed.kind == .methodReturn)
        daemon.settle()
        try lock(daemon, [Self.login])
        var replies: [ControlReply] = []
        daemon.userLogin.answer(.handOver(password: SharedSecret.forTesting(InProcessDaemon.password)), from: .login) {
            replies.append($0)
        }
        daemon.settle(seconds: 60)
        #expect(replies.first?.status == .ok)
        #expect(try !isLocked(daemon, Self.login))
        let file = try #require(daemon.daemon.registry.login?.keychain.path)
        #expect(throws: KeychainError.self) {
            try Keychain(opening: file).unlock(password: Array("seahorse password".utf8))
        }
        try Keychain(opening: file).unlock(password: InProcessDaemon.password)
    }

    /// A lock made while an own password's key is derived wins: the derived key is not installed.
    @Test func aLockMadeWhileTheKeyIsDerivedWins() throws {
        let daemon = try InProcessDaemon()
        let session = try daemon.openPlainSession()
        let created = try deferred(
            daemon, "CreateWithMasterPassword",
            [.variantDictionary(["org.freedesktop.Secret.Collection.Label": .string("Vault")]), secret(session, "v")])
        let vault = try #require(try created.arguments().first?.text)
        try lock(daemon, [vault])
        let (immediate, call) = try daemon.send(
            Self.service, Self.interface, "UnlockWithMasterPassword", [.objectPath(vault), secret(session, "v")])
        #expect(immediate == nil)
        try lock(daemon, [vault])
        // The caller is told its unlock did not stand.
        #expect(daemon.awaitCompletion(of: call, seconds: 60)?.kind == .error)
        #expect(try isLocked(daemon, vault))
        // Asked again with nothing in the way, it unlocks.
        #expect(
            try deferred(daemon, "UnlockWithMasterPassword", [.objectPath(vault), secret(session, "v")]).kind
                == .methodReturn)
        #expect(try !isLocked(daemon, vault))
    }
}
