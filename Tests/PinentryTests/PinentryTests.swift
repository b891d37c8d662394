import Foundation
import Glibc
import Pinentry
import Posix
import Synchronization
import Testing

/// The Assuan peer shared with the daemon's tests: Tests/Support/scripted-pinentry.
private let scriptedPinentry = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Support/scripted-pinentry").path

/// A minimal environment, so the commands the program receives do not depend on the caller's terminal.
private let baseEnvironment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]

/// Whether the real `pinentry-tty` is installed (Debian package pinentry-tty).
private let hasPinentryTty = FileManager.default.isExecutableFile(atPath: "/usr/bin/pinentry-tty")

/// One line of the scripted pinentry's log.
private struct LogEntry: Decodable, Equatable {
    let pid: Int32
    let command: String
    let argument: String
}

/// A temporary directory holding the answers for the scripted pinentry, its log, and any throwaway programs.
private final class Sandbox {
    let directory: String

    init(answers: [String] = []) throws {
        let template = NSTemporaryDirectory() + "/pinentry-tests.XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let created = mkdtemp(&bytes) else { throw POSIXError(.EIO) }
        directory = String(cString: created)
        try (answers.map { $0 + "\n" }.joined()).write(toFile: answersPath, atomically: true, encoding: .utf8)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    var answersPath: String { directory + "/answers" }
    var logPath: String { directory + "/log" }

    /// The environment that points the scripted pinentry at this sandbox, plus `extra`.
    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        baseEnvironment.merging(
            ["SCRIPTED_PINENTRY_ANSWERS": answersPath, "SCRIPTED_PINENTRY_LOG": logPath].merging(extra) { $1 }
        ) { $1 }
    }

    /// The scripted pinentry, answering from this sandbox.
    func pinentry(timeout: Duration = .seconds(20), environment extra: [String: String] = [:]) -> Pinentry {
        Pinentry(program: scriptedPinentry, environment: environment(extra), timeout: timeout)
    }

    /// Everything the scripted pinentry received so far, in order.
    func log() throws -> [LogEntry] {
        guard FileManager.default.fileExists(atPath: logPath) else { return [] }
        return try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n").map {
            try JSONDecoder().decode(LogEntry.self, from: Data($0.utf8))
        }
    }

    /// Writes an executable shell script and returns its path.
    func script(_ name: String, _ body: String) throws -> String {
        let path = directory + "/" + name
        try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }
}

/// Whether `pid` names no process at all: not running and not a zombie waiting to be reaped.
private func isGone(_ pid: pid_t) -> Bool {
    kill(pid, 0) == -1 && errno == ESRCH
}

/// A pseudo-terminal whose other side a thread watches: it records what is shown and types `input` once `prompt`
/// appears, the way a user of `pinentry-tty` would.
private final class TypingTerminal: Sendable {
    let slaveName: String
    private let master: Int32
    private let slave: Int32
    private let shown = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(prompt: String, input: String) throws {
        // posix_openpt and friends are not visible from Swift; these are the ioctls they use on Linux.
        let unlockRequest: UInt = 0x4004_5431  // TIOCSPTLCK
        let numberRequest: UInt = 0x8004_5430  // TIOCGPTN
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlocked: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, unlockRequest, &unlocked) == 0, ioctl(master, numberRequest, &number) == 0
        else { throw POSIXError(.ENOTTY) }
        slaveName = "/dev/pts/\(number)"
        slave = open(slaveName, O_RDWR | O_NOCTTY)  // Held open so reads on the master never see EIO.
        Thread.detachNewThread { [self] in
            watch(until: Array(prompt.utf8), thenType: Array(input.utf8))
        }
    }

    deinit {
        close(master)
        close(slave)
    }

    /// What the program wrote to the terminal, once the input was typed (or after 20 seconds).
    var screen: String {
        _ = done.wait(timeout: .now() + 20)
        return shown.withLock { String(decoding: $0, as: UTF8.self) }
    }

    private func watch(until prompt: [UInt8], thenType input: [UInt8]) {
        defer { done.signal() }
        let giveUp = ContinuousClock.now.advanced(by: .seconds(20))
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < giveUp {
            var entry = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            let count = read(master, &buffer, buffer.count)
            guard count > 0 else { continue }
            let seen = shown.withLock { text in
                text += buffer[0..<count]
                return text
            }
            if seen.firstRange(of: prompt) != nil {
                _ = write(master, input, input.count)
                return
            }
        }
    }
}

@Suite struct PinentryTests {
    private let simpleRequest = PinentryRequest(title: "Latchkey", description: "Unlock the login keychain")

    @Test func passwordWithPercentSpacesAndUTF8IsReturned() throws {
        let sandbox = try Sandbox(answers: ["password  p%ss wörd ✓ 100%0A "])
        let outcome = try sandbox.pinentry().askPassword(simpleRequest)
        #expect(outcome == .password(SharedSecret.forTesting(Array(" p%ss wörd ✓ 100%0A ".utf8))))
    }

    @Test func emptyPasswordIsReturned() throws {
        let sandbox = try Sandbox(answers: ["password "])
        #expect(try sandbox.pinentry().askPassword(simpleRequest) == .password(SharedSecret.forTesting([])))
    }

    @Test func passwordSpanningSeveralDataLinesIsJoined() throws {
        let password = String(repeating: "abc%defgh ", count: 300)
        let sandbox = try Sandbox(answers: ["password " + password])
        #expect(
            try sandbox.pinentry().askPassword(simpleRequest)
                == .password(SharedSecret.forTesting(Array(password.utf8))))
    }

    /// A long answer over many `D` lines, with escapes split across them, is assembled in secret memory that
    /// grows several times (each time to new pages, the old ones wiped) and comes back whole.
    @Test func longAnswerOverManyDataLinesIsAssembledWhole() throws {
        let password = (0..<2_000).map { "\($0 % 10)%2A✓ " }.joined()
        let sandbox = try Sandbox(answers: ["password " + password])
        let outcome = try sandbox.pinentry().askPassword(simpleRequest)
        guard case .password(let secret) = outcome else {
            Issue.record("not a password: \(outcome)")
            return
        }
        let expected = Array(password.utf8)
        #expect(expected.count > 8_000)
        #expect(secret.count == expected.count)
        #expect(secret.withUnsafeBytes { $0.elementsEqual(expected) })
        #expect(secret.bytes.capacity < 4 * expected.count)
    }

    /// An answer longer than any password (64 KiB) is refused, not taken.
    @Test func answerLongerThanAnyPasswordIsAnError() throws {
        let sandbox = try Sandbox(answers: ["password " + String(repeating: "x", count: 70_000)])
        #expect(throws: PinentryError.self) { try sandbox.pinentry().askPassword(simpleRequest) }
    }

    @Test func passwordAfterAnInquiryIsReturned() throws {
        let sandbox = try Sandbox(answers: ["password-after-inquire secret"])
        #expect(
            try sandbox.pinentry().askPassword(simpleRequest)
                == .password(SharedSecret.forTesting(Array("secret".utf8))))
        let commands = try sandbox.log().map(\.command)
        #expect(commands.suffix(3) == ["GETPIN", "END", "BYE"])
    }

    @Test func cancelGivesCancelled() throws {
        let sandbox = try Sandbox(answers: ["cancel"])
        #expect(try sandbox.pinentry().askPassword(simpleRequest) == .cancelled)
    }

    @Test func otherGetpinErrorIsAFailure() throws {
        let sandbox = try Sandbox(answers: ["timeout"])
        let error = #expect(throws: PinentryError.self) { try sandbox.pinentry().askPassword(simpleRequest) }
        #expect(error?.reason.contains("83886142") == true)
        #expect(error?.reason.contains("Timeout") == true)
    }

    @Test func requestTextReachesTheProgramDecoded() throws {
        let sandbox = try Sandbox(answers: ["password x"])
        let request = PinentryRequest(
            title: "Latchkey – unlock", description: "Line one\nLine two: 100% sure, C:\\path\\",
            prompt: "Passphrase:", error: "Wrong password, try again", okLabel: "_Unlock", cancelLabel: "_Deny")
        _ = try sandbox.pinentry().askPassword(request)
        let log = try sandbox.log()
        let shown = Dictionary(log.map { ($0.command, $0.argument) }) { first, _ in first }
        #expect(shown["SETTITLE"] == request.title)
        #expect(shown["SETDESC"] == request.description)
        #expect(shown["SETPROMPT"] == request.prompt)
        #expect(shown["SETERROR"] == request.error)
        #expect(shown["SETOK"] == request.okLabel)
        #expect(shown["SETCANCEL"] == request.cancelLabel)
        let commands = log.map(\.command)
        #expect(commands.suffix(2) == ["GETPIN", "BYE"])
        let lastSet = try #require(commands.lastIndex { $0.hasPrefix("SET") })
        #expect(lastSet < commands.count - 2)
    }

    @Test func absentOptionalTextsAreNotSent() throws {
        let sandbox = try Sandbox(answers: ["password x"])
        _ = try sandbox.pinentry().askPassword(simpleRequest)
        let commands = Set(try sandbox.log().map(\.command))
        #expect(commands.isDisjoint(with: ["SETERROR", "SETOK", "SETCANCEL"]))
        #expect(commands.isSuperset(of: ["SETTITLE", "SETDESC", "SETPROMPT"]))
    }

    @Test func overlongDescriptionIsCutToTheLineLimit() throws {
        let sandbox = try Sandbox(answers: ["password x"])
        let request = PinentryRequest(title: "T", description: String(repeating: "100% é\n", count: 400))
        #expect(try sandbox.pinentry().askPassword(request) == .password(SharedSecret.forTesting(Array("x".utf8))))
        let description = try #require(try sandbox.log().first { $0.command == "SETDESC" }?.argument)
        #expect(!description.isEmpty)
        #expect(request.description.hasPrefix(description))
        #expect(description.count < request.description.count)
    }

    @Test func terminalOptionsComeFromTheEnvironment() throws {
        let sandbox = try Sandbox(answers: ["password x"])
        let extra = ["GPG_TTY": "/dev/pts/77", "TERM": "xterm-256color", "LANG": "de_DE.UTF-8"]
        _ = try sandbox.pinentry(environment: extra).askPassword(simpleRequest)
        let options = try sandbox.log().filter { $0.command == "OPTION" }.map(\.argument)
        #expect(
            Set(options) == [
                "ttyname=/dev/pts/77", "ttytype=xterm-256color", "lc-ctype=de_DE.UTF-8", "lc-messages=de_DE.UTF-8",
            ])
    }

    @Test func aParentWindowIsSentAsGpgAgentSendsIt() throws {
        let sandbox = try Sandbox(answers: ["password x", "password y", "password z", "password w"])
        for window: Int64? in [4242, 0, -3, nil] {
            // Kept through the copies the daemon makes (session variables, a shorter bound).
            _ = try sandbox.pinentry().parented(by: window).inSession(SessionEnvironment())
                .bounded(to: .seconds(10)).askPassword(simpleRequest)
        }
        let windows = try sandbox.log().filter { $0.argument.hasPrefix("parent-wid") }.map(\.argument)
        #expect(windows == ["parent-wid=4242"], "none for 0, a negative id or nil")
    }

    @Test func retryAfterWrongPasswordShowsTheError() throws {
        let sandbox = try Sandbox(answers: ["password wrong", "password right"])
        let pinentry = sandbox.pinentry()
        #expect(try pinentry.askPassword(simpleRequest) == .password(SharedSecret.forTesting(Array("wrong".utf8))))
        var retry = simpleRequest
        retry.error = "Wrong password, try again"
        #expect(try pinentry.askPassword(retry) == .password(SharedSecret.forTesting(Array("right".utf8))))
        let log = try sandbox.log()
        let first = try #require(log.first?.pid)
        let second = try #require(log.last?.pid)
        #expect(first != second)
        let errors = log.filter { $0.command == "SETERROR" }
        #expect(errors == [LogEntry(pid: second, command: "SETERROR", argument: "Wrong password, try again")])
    }

    @Test func childIsReapedAfterANormalExchange() throws {
        let sandbox = try Sandbox(answers: ["password x", "confirm"])
        _ = try sandbox.pinentry().askPassword(simpleRequest)
        _ = try sandbox.pinentry().confirm(simpleRequest)
        let pids = Set(try sandbox.log().map(\.pid))
        #expect(pids.count == 2)
        #expect(pids.allSatisfy(isGone))
    }

    @Test func confirmIsTrueForOK() throws {
        let sandbox = try Sandbox(answers: ["confirm"])
        #expect(try sandbox.pinentry().confirm(simpleRequest) == true)
        #expect(try sandbox.log().map(\.command).suffix(2) == ["CONFIRM", "BYE"])
    }

    @Test(arguments: ["cancel", "deny"])
    func confirmIsFalseWhenDeclined(answer: String) throws {
        let sandbox = try Sandbox(answers: [answer])
        #expect(try sandbox.pinentry().confirm(simpleRequest) == false)
    }

    @Test func confirmFailsOnOtherErrors() throws {
        let sandbox = try Sandbox(answers: ["timeout"])
        #expect(throws: PinentryError.self) { try sandbox.pinentry().confirm(simpleRequest) }
    }

    private let threeButtons = PinentryRequest(
        title: "Keychain Access", description: "/usr/bin/tool wants a secret", prompt: "", okLabel: "Allow once",
        cancelLabel: "Deny", notOKLabel: "Always allow")

    /// `threeButtons` with the two questions asked where no third button shows.
    private var withFollowUp: PinentryRequest {
        var request = threeButtons
        request.followUp = PinentryFollowUp(firstOKLabel: "Allow…", question: "Every time?")
        return request
    }

    @Test(arguments: [
        (["ok", "ok"], PinentryChoice.notOK), (["ok", "cancel"], .ok), (["ok", "timeout"], .ok),
        (["cancel"], .cancelled),
    ])
    func aPinentryWithTwoButtonsIsAskedTheThirdAsASecondQuestion(answers: [String], choice: PinentryChoice)
        throws
    {
        let sandbox = try Sandbox(answers: answers)
        let gnome3 = sandbox.pinentry(environment: ["SCRIPTED_PINENTRY_FLAVOR": "gnome3"])
        #expect(try gnome3.choose(withFollowUp) == choice)
        let sent = try sandbox.log().filter { ["SETOK", "SETCANCEL", "SETDESC", "CONFIRM"].contains($0.command) }
            .map { "\($0.command) \($0.argument)" }
        let first = [
            "SETDESC /usr/bin/tool wants a secret", "SETOK Allow once", "SETCANCEL Deny", "SETOK Allow…", "CONFIRM ",
        ]
        let second = ["SETDESC Every time?", "SETOK Always allow", "SETCANCEL Allow once", "CONFIRM "]
        #expect(sent == (answers.count == 2 ? first + second : first))
    }

    /// pinentry answers the third button with GPG_ERR_NOT_CONFIRMED, and so it answers whatever ended in neither
    /// OK nor Cancel ("deny" here): either is the third button only once the follow-up question is answered OK.
    @Test(arguments: [
        (["notok", "ok"], PinentryChoice.notOK), (["notok", "cancel"], .cancelled), (["deny", "ok"], .notOK),
        (["deny", "deny"], .cancelled), (["notok", "timeout"], .cancelled),
    ])
    func theThirdButtonCountsOnlyOnceTheFollowUpConfirmsIt(answers: [String], choice: PinentryChoice) throws {
        let sandbox = try Sandbox(answers: answers)
        #expect(try sandbox.pinentry().choose(withFollowUp) == choice)
        let sent = try sandbox.log().map { "\($0.command) \($0.argument)" }
            .filter {
                ["SETNOTOK", "SETOK", "SETCANCEL", "SETDESC", "CONFIRM", "RESET"].contains($0.split(separator: " ")[0])
            }
        #expect(
            sent == [
                "SETDESC /usr/bin/tool wants a secret", "SETOK Allow once", "SETCANCEL Deny", "SETNOTOK Always allow",
                "CONFIRM ", "RESET ", "SETDESC Every time?", "SETOK Always allow", "SETCANCEL Deny", "CONFIRM ",
            ])
    }

    /// Without a follow-up there is no third button: nothing could confirm it.
    @Test func withoutAFollowUpNoThirdButtonIsShown() throws {
        let sandbox = try Sandbox(answers: ["deny"])
        #expect(try sandbox.pinentry().choose(threeButtons) == .cancelled)
        #expect(try !sandbox.log().contains { $0.command == "SETNOTOK" })
        // A two-button pinentry is asked once and never answers the third button.
        let plain = try Sandbox(answers: ["ok"])
        #expect(try plain.pinentry(environment: ["SCRIPTED_PINENTRY_FLAVOR": "gnome3"]).choose(threeButtons) == .ok)
        #expect(try plain.log().filter { $0.command == "GETINFO" }.isEmpty)
    }

    @Test(arguments: [(["ok"], PinentryChoice.ok), (["notok", "ok"], .notOK), (["cancel"], .cancelled)])
    func chooseTellsTheThreeButtonsApart(answers: [String], choice: PinentryChoice) throws {
        let sandbox = try Sandbox(answers: answers)
        #expect(try sandbox.pinentry().choose(withFollowUp) == choice)
        let log = try sandbox.log()
        #expect(log.first { $0.command == "SETNOTOK" }?.argument == "Always allow")
        #expect(log.map(\.command).suffix(2) == ["CONFIRM", "BYE"])
    }

    @Test func withoutAThirdButtonNotConfirmedIsACancel() throws {
        var twoButtons = threeButtons
        twoButtons.notOKLabel = nil
        let sandbox = try Sandbox(answers: ["deny"])
        #expect(try sandbox.pinentry().choose(twoButtons) == .cancelled)
        #expect(try !sandbox.log().contains { $0.command == "SETNOTOK" })
    }

    @Test func chooseFailsOnATimeout() throws {
        let sandbox = try Sandbox(answers: ["timeout"])
        #expect(throws: PinentryError.self) { try sandbox.pinentry().choose(threeButtons) }
    }

    @Test func fromEnvironmentPrefersPINENTRY() throws {
        let sandbox = try Sandbox(answers: ["password from-env"])
        let pinentry = Pinentry.fromEnvironment(sandbox.environment(["PINENTRY": scriptedPinentry]))
        #expect(pinentry.program == scriptedPinentry)
        #expect(try pinentry.askPassword(simpleRequest) == .password(SharedSecret.forTesting(Array("from-env".utf8))))
        #expect(Pinentry.fromEnvironment(baseEnvironment).program == "pinentry")
    }

    @Test(arguments: ["/nonexistent/pinentry", "no-such-pinentry-program", ""])
    func missingProgramIsAnError(program: String) {
        let pinentry = Pinentry(program: program, environment: baseEnvironment, timeout: .seconds(5))
        #expect(throws: PinentryError.self) { try pinentry.askPassword(simpleRequest) }
    }

    @Test func silentProgramTimesOutAndIsKilled() throws {
        let sandbox = try Sandbox()
        let program = try sandbox.script("silent", "echo $$ > \"$0.pid\"\nexec sleep 600")
        let start = ContinuousClock.now
        let pinentry = Pinentry(program: program, environment: baseEnvironment, timeout: .seconds(1))
        let error = #expect(throws: PinentryError.self) { try pinentry.askPassword(simpleRequest) }
        let elapsed = start.duration(to: .now)
        #expect(error?.reason.contains("no answer") == true)
        #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(60))
        let pidText = try String(contentsOfFile: program + ".pid", encoding: .utf8)
        let pid = try #require(pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(isGone(pid))
    }

    /// The timeout leaves the scripted program (python) time to start and reach GETPIN on a loaded machine:
    /// with 1 s it sometimes had not logged anything yet, and the test could not tell whether it was killed.
    @Test func programThatHangsOnGetpinTimesOutAndIsKilled() throws {
        let sandbox = try Sandbox(answers: ["hang"])
        let start = ContinuousClock.now
        #expect(throws: PinentryError.self) { try sandbox.pinentry(timeout: .seconds(10)).askPassword(simpleRequest) }
        #expect(start.duration(to: .now) < .seconds(90))
        let pid = try #require(try sandbox.log().last?.pid)
        #expect(isGone(pid))
    }

    /// A prompt withdrawn from another thread ends at once as cancelled, its child ended (SIGTERM, or SIGKILL
    /// when it ignores SIGTERM) and reaped before the call returns; the timeout is far away.
    @Test(arguments: ["hang", "hang-ignoring-term"])
    func cancellingEndsAHangingPromptAndReapsItsChild(answer: String) throws {
        let sandbox = try Sandbox(answers: [answer])
        let cancellation = try PinentryCancellation()
        let outcome = Mutex<PinentryOutcome?>(nil)
        let (pinentry, request) = (sandbox.pinentry(timeout: .seconds(120)), simpleRequest)
        let thread = Thread {
            let result = try? pinentry.askPassword(request, cancellation: cancellation)
            outcome.withLock { $0 = result }
        }
        thread.start()
        let shown = Date().addingTimeInterval(20)
        while try !sandbox.log().contains(where: { $0.command == "HANGING" }), Date() < shown { usleep(20_000) }
        let pid = try #require(try sandbox.log().last?.pid)
        cancellation.cancel()
        let bound = Date().addingTimeInterval(10)
        while outcome.withLock({ $0 }) == nil, Date() < bound { usleep(10_000) }
        #expect(outcome.withLock { $0 } == .cancelled)
        #expect(isGone(pid), "the child was reaped before the call returned")
    }

    /// A cancellation made before the call shows nothing.
    @Test func aCancelledPromptStartsNoProgram() throws {
        let sandbox = try Sandbox(answers: ["password unused"])
        let cancellation = try PinentryCancellation()
        cancellation.cancel()
        #expect(try sandbox.pinentry().askPassword(simpleRequest, cancellation: cancellation) == .cancelled)
        #expect(try sandbox.pinentry().confirm(simpleRequest, cancellation: cancellation) == false)
        #expect(try sandbox.log().isEmpty)
    }

    @Test(arguments: [
        "echo 'HELLO I am not a pinentry'; exec sleep 600",
        "echo 'ERR 83886081 go away'; exec sleep 600",
        "head -c 5000 /dev/zero | tr '\\0' x; exec sleep 600",
        "exit 0",
        "echo OK; exit 0",
    ])
    func misbehavingProgramIsAnErrorWithoutWaiting(body: String) throws {
        let sandbox = try Sandbox()
        let program = try sandbox.script("bad", body)
        let start = ContinuousClock.now
        let pinentry = Pinentry(program: program, environment: baseEnvironment, timeout: .seconds(300))
        #expect(throws: PinentryError.self) { try pinentry.askPassword(simpleRequest) }
        #expect(start.duration(to: .now) < .seconds(150))
    }

    @Test func programExitingAtGetpinIsAnError() throws {
        let sandbox = try Sandbox(answers: ["exit"])
        #expect(throws: PinentryError.self) { try sandbox.pinentry().askPassword(simpleRequest) }
    }

    @Test(.enabled(if: hasPinentryTty))
    func realPinentryTtyWithoutATerminalCancels() throws {
        let environment = baseEnvironment.merging(["GPG_TTY": "/nonexistent/tty", "LANG": "C.UTF-8"]) { $1 }
        let pinentry = Pinentry(program: "pinentry-tty", environment: environment, timeout: .seconds(300))
        let start = ContinuousClock.now
        #expect(try pinentry.askPassword(simpleRequest) == .cancelled)
        #expect(start.duration(to: .now) < .seconds(150))
    }

    @Test(.enabled(if: hasPinentryTty && access("/dev/ptmx", R_OK | W_OK) == 0))
    func realPinentryTtyReadsAPasswordFromItsTerminal() throws {
        let terminal = try TypingTerminal(prompt: "Secret please:", input: "s3cr%t wörd\n")
        let environment = baseEnvironment.merging(["GPG_TTY": terminal.slaveName, "TERM": "dumb", "LANG": "C.UTF-8"]) {
            $1
        }
        let request = PinentryRequest(
            title: "Latchkey", description: "Line one\nLine two: 100% sure, C:\\path\\", prompt: "Secret please:")
        let pinentry = Pinentry(program: "pinentry-tty", environment: environment, timeout: .seconds(20))
        #expect(try pinentry.askPassword(request) == .password(SharedSecret.forTesting(Array("s3cr%t wörd".utf8))))
        let screen = terminal.screen
        #expect(screen.contains("Line one\r\nLine two: 100% sure, C:\\path\\"))
    }
}

extension SharedSecret {
    /// A copy of `bytes` in secret memory, for a test (which has the memory to spare).
    fileprivate static func forTesting(_ bytes: some Collection<UInt8>) -> SharedSecret {
        try! SharedSecret(copying: bytes)
    }
}
