import Foundation
import Glibc
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import Testing

@testable import KeychainRegistry

/// The registry's timers read "now" from the clock its configuration gives (``RegistryClock``): with a
/// ``ManualClock`` a test sees a lock timeout, a checkpoint retry and a prompt deadline come when the clock
/// says, and not before, without sleeping for them.
@Suite struct RegistryClockTests {
    /// A registry over a new directory whose login keychain is made with a password (cheap KDF), reading the
    /// time from `clock`; prompts answer from `answers` (Tests/Support/scripted-pinentry lines).
    final class Fixture {
        let directory: String
        let pinentryLog: String
        let registry: KeychainRegistry

        init(clock: ManualClock, answers: [String] = []) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("clock-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let answerFile = directory + "/answers"
            pinentryLog = directory + "/pinentry-log"
            try (answers.joined(separator: "\n") + "\n").write(toFile: answerFile, atomically: true, encoding: .utf8)
            let pinentry = Pinentry(
                program: scriptedPinentry,
                environment: [
                    "SCRIPTED_PINENTRY_ANSWERS": answerFile, "SCRIPTED_PINENTRY_LOG": pinentryLog,
                    "PATH": "/usr/bin:/bin",
                ],
                timeout: .seconds(30))
            registry = try KeychainRegistry(
                configuration: RegistryConfiguration(
                    keychainDirectory: directory + "/keychains", pinentry: pinentry, kdf: .insecureForTesting,
                    systemctl: nil, clock: clock.clock),
                loginPassword: try SecretBytes(copying: Array("clock password".utf8)))
        }

        deinit {
            registry.shutDown()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Delivers what comes back from off the serving thread until `condition` holds (at most `seconds`
        /// of real time: the pinentry and the worker are real).
        func deliver(seconds: Double = 20, until condition: () -> Bool) {
            let deadline = Date().addingTimeInterval(seconds)
            while !condition(), Date() < deadline {
                var entry = pollfd(fd: registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 20)
                registry.deliverCompletions()
            }
        }

        /// Whether the scripted pinentry logged `command`.
        func pinentryLogged(_ command: String) -> Bool {
            ((try? String(contentsOfFile: pinentryLog, encoding: .utf8)) ?? "").contains("\"\(command)\"")
        }
    }

    /// A registry on a manual clock whose unlocked login keychain locks after `seconds` unused.
    static func loginLocking(after seconds: UInt32) throws -> (ManualClock, Fixture, HeldKeychain) {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock)
        let login = try #require(fixture.registry.login)
        try fixture.registry.setSettings(KeychainSettings(lockTimeout: seconds), of: login)
        return (clock, fixture, login)
    }

    @Test func aKeychainLocksAfterItsIdleTimeoutAndNotBefore() throws {
        let (clock, fixture, login) = try Self.loginLocking(after: 60)
        let registry = fixture.registry
        #expect(!login.isLocked)
        clock.advance(by: .seconds(30))
        login.markUsed()
        // 59.999 s after the last use: still unlocked, and the timer is due in the millisecond left.
        clock.advance(by: .milliseconds(59_999))
        #expect(registry.runTimers() == 1)
        #expect(!login.isLocked)
        _ = registry.takeEvents()
        clock.advance(by: .milliseconds(1))
        _ = registry.runTimers()
        #expect(login.isLocked)
        let locked = registry.takeEvents().contains {
            if case .lockChanged(let held) = $0 { held === login } else { false }
        }
        #expect(locked)
    }

    @Test func aOneSecondTimeoutCountsFromTheSecondOfTheLastUse() throws {
        let (clock, fixture, login) = try Self.loginLocking(after: 1)
        let registry = fixture.registry
        // Read every 0.1 s: still, it locks when the next second begins.
        for _ in 0..<9 {
            clock.advance(by: .milliseconds(100))
            login.markUsed()
            _ = registry.runTimers()
            #expect(!login.isLocked)
        }
        clock.advance(by: .milliseconds(100))
        _ = registry.runTimers()
        #expect(login.isLocked)
    }

    @Test func aFailedCheckpointIsRetriedWhenItsTimeComesAndNotBefore() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock)
        let registry = fixture.registry
        let login = try #require(registry.login)
        let path = login.keychain.path
        // A reader holding a snapshot older than the next commit: the checkpoint cannot empty the log.
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        reader.arguments = [
            "-c",
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute('BEGIN')\n"
                + "c.execute('SELECT count(*) FROM meta').fetchall()\nprint('ready', flush=True)\nsys.stdin.read()",
            path,
        ]
        let (input, output) = (Pipe(), Pipe())
        reader.standardInput = input
        reader.standardOutput = output
        try reader.run()
        #expect(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("ready"))
        registry.setLabel("Login, relabelled", of: login)
        var emptied: Bool?
        registry.scheduleCheckpoint(path) { emptied = $0 }
        fixture.deliver { !registry.hasWorkInProgress }
        #expect(registry.hasPendingCheckpoints, "the first try failed: a reader holds an older snapshot")
        #expect(emptied == nil, "the reply waits for the retries")
        try input.fileHandleForWriting.close()
        reader.waitUntilExit()

        clock.advance(by: .milliseconds(249))
        #expect(registry.runTimers() == 1, "the retry is due in a millisecond")
        #expect(!registry.hasWorkInProgress, "not retried before its time")
        clock.advance(by: .milliseconds(1))
        _ = registry.runTimers()
        #expect(registry.hasWorkInProgress, "retried when its time came")
        fixture.deliver { !registry.hasWorkInProgress }
        #expect(emptied == true)
        #expect(!registry.hasPendingCheckpoints)
        let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        #expect(wal == 0)
    }

    @Test func anAccessPromptPastItsDeadlineEndsDeniedAsPinentrysTimeoutWould() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang"])
        let registry = fixture.registry
        let failure = AccessPromptFailure()
        var allowed: Bool?
        let question: @Sendable () -> AccessQuestion = {
            AccessQuestion(.read, who: "a test", warnings: [], labels: ["item"], keychain: "Login", offersAlways: true)
        }
        _ = registry.promptForAccess(
            sharingKey: "item", question: question, failure: failure, trust: {}, isAllowed: { false },
            completion: { allowed = $0 })
        fixture.deliver { fixture.pinentryLogged("CONFIRM") }
        #expect(fixture.pinentryLogged("CONFIRM"))

        clock.advance(by: .milliseconds(19_999))
        #expect(registry.runTimers() == 1, "the deadline is a millisecond away")
        #expect(allowed == nil, "still asking before the deadline")
        clock.advance(by: .milliseconds(1))
        _ = registry.runTimers()
        #expect(allowed == false, "denied once the deadline passed")
        #expect(failure.description == "pinentry: no answer within 20.0 seconds")
        // The pinentry is ended and reaped; the queue is empty again.
        fixture.deliver { registry.promptCount == 0 && !registry.hasWorkInProgress }
        #expect(registry.promptCount == 0)
    }

    @Test func aConfirmationPastItsDeadlineEndsAsNobodyCouldBeAsked() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang"])
        let registry = fixture.registry
        var outcome: Result<Void, KeychainError>?
        _ = registry.confirmKeychainCreation(label: "New", requester: "a test") { outcome = $0 }
        fixture.deliver { fixture.pinentryLogged("CONFIRM") }
        clock.advance(by: .milliseconds(19_999))
        _ = registry.runTimers()
        #expect(outcome == nil)
        clock.advance(by: .milliseconds(1))
        _ = registry.runTimers()
        let ended = try #require(outcome, "ended once the deadline passed")
        let error = try #require(ended.refusal, "not confirmed")
        #expect(error.status == .interactionNotAllowed)
        #expect(error.reason.contains("(pinentry: no answer within 20.0 seconds)"))
        fixture.deliver { registry.promptCount == 0 && !registry.hasWorkInProgress }
    }

    /// A change that protects less (`allow-all`, lock settings that lock less) is confirmed within the same
    /// deadline as every other confirmation: before, its pinentry could show for ever.
    @Test func aLooseningConfirmationPastItsDeadlineEndsAsNobodyCouldBeAsked() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "hang"])
        let registry = fixture.registry
        let login = try #require(registry.login)
        try registry.setSettings(KeychainSettings(lockTimeout: 300, lockOnSleep: true), of: login)
        var policyOutcome: Result<Void, KeychainError>?
        _ = registry.setAccessPolicy(.allowAll, of: login, requester: "a test") { policyOutcome = $0 }
        var settingsOutcome: Result<Void, KeychainError>?
        _ = registry.setSettings(KeychainSettings(lockTimeout: 300), of: login, requester: "a test") {
            settingsOutcome = $0
        }
        // The second shows beside the first once that one held it for the queue's hold limit (3 s), so its
        // deadline comes 3 s after the first's.
        let log = { (try? String(contentsOfFile: fixture.pinentryLog, encoding: .utf8)) ?? "" }
        fixture.deliver { log().components(separatedBy: "\"CONFIRM\"").count == 2 }
        clock.advance(by: .seconds(3))
        _ = registry.runTimers()
        fixture.deliver { log().components(separatedBy: "\"CONFIRM\"").count == 3 }
        for index in 0..<2 {
            let outcome: () -> Result<Void, KeychainError>? = { index == 0 ? policyOutcome : settingsOutcome }
            clock.advance(by: .milliseconds(index == 0 ? 16_999 : 2_999))
            _ = registry.runTimers()
            #expect(outcome() == nil, "still asking before the deadline")
            clock.advance(by: .milliseconds(1))
            _ = registry.runTimers()
            let ended = try #require(outcome(), "ended once the deadline passed")
            let error = try #require(ended.refusal, "not confirmed")
            #expect(error.status == .interactionNotAllowed)
            #expect(error.reason.contains("(pinentry: no answer within 20.0 seconds)"))
        }
        #expect(try login.keychain.accessPolicy() == .prompt)
        fixture.deliver { registry.promptCount == 0 && !registry.hasWorkInProgress }
    }
}

extension Result where Success == Void {
    /// The error, nil when the change was made.
    fileprivate var refusal: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
