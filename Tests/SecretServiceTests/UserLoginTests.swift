import Foundation
import Glibc
import KeychainCore
import KeychainRegistry
import KeychainStore
import LoginControl
import Pinentry
import Posix
import Testing

/// The login part on its own: a registry with no bus and no daemon over it, driven through ``UserLogin``, its
/// outcomes checked as the enums it returns (the control socket's wording is tested in DaemonDispatchTests).
@Suite struct UserLoginTests {
    static let password = Array("login password".utf8)

    /// A registry over a new directory, with the login keychain made with ``password`` unless `withLogin` is
    /// false; no prompt can be shown.
    final class Registry {
        let directory: String
        let registry: KeychainRegistry
        var login: UserLogin { registry.userLogin }

        init(withLogin: Bool = true) throws {
            directory =
                FileManager.default.temporaryDirectory.appendingPathComponent("login-\(UUID().uuidString)")
                .path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let password: SecretBytes? = withLogin ? try SecretBytes(copying: UserLoginTests.password) : nil
            registry = try KeychainRegistry(
                configuration: RegistryConfiguration(
                    keychainDirectory: directory, pinentry: Pinentry(program: "/bin/false"), systemctl: nil),
                loginPassword: password)
        }

        deinit {
            registry.shutDown()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Delivers work done off the serving thread until none is left.
        func settle() {
            registry.settle()
        }
    }

    static func secret(_ text: String) -> SharedSecret { SharedSecret.forTesting(Array(text.utf8)) }

    @Test func aHandOverUnlocksHoldingClientsThenFindsNothingToDo() throws {
        let held = try Registry()
        let login = held.login
        held.registry.lockLoginKeychains()
        #expect(login.state == .locked)
        #expect(login.handOver(password: SharedSecret.forTesting(Self.password)) == .unlocking)
        #expect(login.isUnlockingAtLogin, "clients are held while the key is derived")
        held.settle()
        #expect(!login.isUnlockingAtLogin)
        #expect(login.state == .unlocked)
        #expect(login.handOver(password: SharedSecret.forTesting(Self.password)) == .nothingToDo(.unlocked))
        #expect(login.openSessions == 2)
    }

    @Test func aFirstLoginsHandOverCreatesTheLoginKeychain() throws {
        let held = try Registry(withLogin: false)
        let login = held.login
        #expect(login.state == .absent)
        #expect(login.unlockFromTPM() == .noLoginKeychain)
        #expect(login.handOver(password: Self.secret("first login")) == .creating)
        held.settle()
        #expect(login.state == .unlocked)
        #expect(FileManager.default.fileExists(atPath: held.directory + "/login.keychain-db"))
    }

    @Test func aHandOverWithoutPasswordSaysWhatTheTPMSlotsAllow() throws {
        let held = try Registry()
        let login = held.login
        #expect(login.handOver(password: nil) == .withoutPassword(.alreadyUnlocked))
        held.registry.lockLoginKeychains()
        #expect(login.handOver(password: nil) == .withoutPassword(.noTPMSlot))
        #expect(!login.isUnlockingAtLogin && login.state == .locked)
        #expect(login.openSessions == 2)
    }

    @Test func onlyTheLastSessionsCloseLocks() throws {
        let held = try Registry()
        let login = held.login
        login.countSession()
        login.countSession()
        #expect(login.closeSession(lockIfLast: true) == .closed(left: 1))
        #expect(login.state == .unlocked)
        #expect(login.closeSession(lockIfLast: false) == .closed(left: 0))
        #expect(login.state == .unlocked, "a close without the lock flag only counts")
        login.countSession()
        #expect(login.closeSession(lockIfLast: true) == .lastClosedAndLocked)
        #expect(login.state == .locked)
        // Never below zero: a close with no session open still locks.
        #expect(login.closeSession(lockIfLast: true) == .lastClosedAndLocked)
        #expect(login.openSessions == 0)
    }

    /// The daemon's re-key and the one on the file with no daemon are one: the same outcomes, and the same
    /// replies for the same refusal.
    @Test func theDaemonsReKeyAndTheFilesAgree() throws {
        let held = try Registry()
        var outcomes: [LoginRekeyOutcome] = []
        held.login.rekey(from: Self.secret("wrong"), to: Self.secret("new"), limited: true) { outcomes.append($0) }
        held.settle()
        guard case .refused(.failed(let error))? = outcomes.last else {
            Issue.record("not refused: \(outcomes)")
            return
        }
        #expect(error.status == .authFailed)
        held.login.rekey(from: SharedSecret.forTesting(Self.password), to: Self.secret("new"), limited: true) {
            outcomes.append($0)
        }
        held.settle()
        guard case .rekeyed? = outcomes.last else {
            Issue.record("not re-keyed: \(outcomes)")
            return
        }
        held.registry.shutDown()

        let onFile = UserLogin.rekeyFile(
            inDirectory: held.directory, from: Self.secret("wrong"), to: Self.secret("other"), limited: true)
        guard case .refused(.failed(let fileError)) = onFile else {
            Issue.record("not refused on the file: \(onFile)")
            return
        }
        #expect(fileError.status == .authFailed)
        let request = ControlRequest.changePassword(old: Self.secret("wrong"), new: Self.secret("other"))
        var daemonReply: ControlReply?
        held.login.answer(request, from: .userProcess) { daemonReply = $0 }
        held.settle()
        let fileReply = UserLogin.answerWithoutDaemon(
            .success(request), keychainDirectory: held.directory, from: .userProcess)
        #expect(
            fileReply
                == ControlReply(.wrongPassword, "the old password does not unlock the login keychain; nothing changed"))
        #expect(daemonReply == fileReply)

        guard
            case .rekeyed = UserLogin.rekeyFile(
                inDirectory: held.directory, from: Self.secret("new"), to: Self.secret("other"), limited: false)
        else {
            Issue.record("not re-keyed on the file")
            return
        }
        let reopened = try Keychain(opening: held.directory + "/login.keychain-db")
        #expect(throws: KeychainError.self) { try reopened.unlock(password: Array("new".utf8)) }
        try reopened.unlock(password: Array("other".utf8))
    }

    /// Wrong old passwords from a process of the user count; a login's request (`passwd`) is never refused for
    /// them, on the file as through the daemon.
    @Test func aReKeyOnTheFileCountsAUserProcesssWrongPasswordsButNotALogins() throws {
        let held = try Registry()
        held.registry.shutDown()
        var last: LoginRekeyOutcome = .noLoginKeychain
        for _ in 0..<4 {
            last = UserLogin.rekeyFile(
                inDirectory: held.directory, from: Self.secret("wrong"), to: Self.secret("x"), limited: true)
        }
        guard case .refused(.notTried(let wait)) = last else {
            Issue.record("tried after four wrong passwords: \(last)")
            return
        }
        #expect(wait > 0)
        let reply = UserLogin.answerWithoutDaemon(
            .success(.changePassword(old: SharedSecret.forTesting(Self.password), new: Self.secret("x"))),
            keychainDirectory: held.directory, from: .login)
        #expect(reply == ControlReply(.ok, "login keychain re-keyed to the new password"))
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("none-\(UUID().uuidString)").path
        guard
            case .noLoginKeychain = UserLogin.rekeyFile(
                inDirectory: empty, from: Self.secret("a"), to: Self.secret("b"), limited: true)
        else {
            Issue.record("a missing file is not reported as such")
            return
        }
        #expect(
            UserLogin.answerWithoutDaemon(
                .success(.status), keychainDirectory: held.directory, from: .login
            ).status == .badRequest)
    }
}
