import ArgumentParser
import DBus
import FoundationEssentials
import Glibc
import KeychainRegistry
import KeychainStore
import LoginControl
import Pinentry
import Posix
import SecretService

@main
struct Latchkeyd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latchkeyd",
        abstract: "Serves the user's keychains as org.freedesktop.secrets on the session bus.",
        discussion: """
            The bus is DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus. Keychains live in
            $XDG_DATA_HOME/latchkey/keychains (or --keychain-directory). With --unlock the login
            keychain password is read from standard input (never from arguments or the
            environment); the login keychain is created with it on first use. Unlock prompts
            run pinentry (--pinentry, else $PINENTRY, else "pinentry").

            pam_latchkey talks to the daemon on the control socket $XDG_RUNTIME_DIR/latchkey/control
            (or the socket systemd passes). Started at login before the session bus exists, the
            daemon holds the keychain and claims the bus name as soon as the bus appears.

            Example, on a private bus with a throwaway keychain directory:
              printf 'pw' | dbus-run-session -- sh -c 'latchkeyd --unlock --keychain-directory /tmp/kc & sleep 1; secret-tool store --label=x a b'
            """)

    @Flag(help: "Serve in the foreground (latchkeyd never forks; accepted for service managers).")
    var foreground = false

    @Flag(help: "Read the login keychain password from standard input and unlock (or create) it.")
    var unlock = false

    @Flag(help: "Take org.freedesktop.secrets from its current owner, if that owner allows it.")
    var replace = false

    @Option(help: "Directory of keychain files.")
    var keychainDirectory: String = KeychainLocation.keychainDirectory()

    @Option(help: "The pinentry program for unlock prompts.")
    var pinentry: String?

    @Flag(help: "Print the Secret Service introspection XML and exit.")
    var printIntrospection = false

    @Flag(
        help: ArgumentHelp(
            "Started by pam_latchkey: standard input holds the login password, or nothing.",
            discussion: """
                A wrong password leaves the keychain locked and offers to re-key it; one line on standard \
                output says what happened ("ok ..." or the reason), then standard output is closed.
                """))
    var login = false

    @Flag(
        help: ArgumentHelp(
            "Re-key the login keychain file and exit: standard input holds the old password, NUL, the new one.",
            discussion: "Used by pam_latchkey when no daemon runs. Prints one line, \"ok ...\" or the reason."))
    var changeLoginPassword = false

    mutating func run() throws {
        let signalMask = ServiceLoop.blockTerminationSignals()
        if printIntrospection {
            print(SecretServiceIntrospection.document, terminator: "")
            return
        }
        if changeLoginPassword { throw rekeyLoginFile() }
        var password = (unlock || login ? try readPassword(required: unlock) : nil) ?? []
        defer { wipeBytes(&password) }

        let connection = try? DBusConnection.session()
        if let connection, let refusal = claimName(connection) { throw fail(refusal) }
        let control = try listenOnControlSocket(haveBus: connection != nil)
        let prompt =
            pinentry.map { Pinentry(program: $0) } ?? Pinentry.fromEnvironment(ProcessInfo.processInfo.environment)
        let daemon: SecretServiceDaemon
        do {
            daemon = try SecretServiceDaemon(
                configuration: SecretServiceConfiguration(
                    registry: RegistryConfiguration(keychainDirectory: keychainDirectory, pinentry: prompt)),
                loginPassword: unlock ? password : nil)
        } catch {
            throw fail("cannot open the login keychain: \(error.reason)")
        }
        if login {
            // The outcome is reported when the key derivation is done, from the serving loop.
            daemon.answer(.openSession(password: password.isEmpty ? nil : password)) { reply in
                Self.reportLogin(reply)
            }
        }
        let loop: ServiceLoop
        do {
            loop = try ServiceLoop(
                daemon: daemon, connection: connection, control: control, sleepWatch: watchForSleep(),
                signalMask: signalMask)
        } catch {
            throw fail(error.reason)
        }
        let exit = loop.run(connectBus: connectLater)
        loop.shutDown()
        switch exit {
        case .busGone: printError("latchkeyd: the session bus went away")
        case .busRefused(let reason): throw fail(reason)
        default: break
        }
    }

    /// Listens on the control socket (or the one systemd passed). Without a
    /// bus the socket is required; with one, a failure is only reported.
    private func listenOnControlSocket(haveBus: Bool) throws -> ControlListener? {
        if let inherited = ControlListener.inherited() { return inherited }
        let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] ?? "/run/user/\(getuid())"
        // A daemon being replaced lets go of the socket when it sees the bus name go.
        let deadline = Deadline(millisecondsFromNow: replace ? 3_000 : 0)
        while true {
            do {
                return try ControlListener(runtimeDirectory: runtime)
            } catch ControlListenerError.held where !deadline.hasPassed {
                usleep(50_000)
            } catch {
                guard haveBus else {
                    throw fail("no session bus and no control socket: \(error.reason)")
                }
                if case .held = error { throw fail(error.reason) }
                printError("latchkeyd: serving without a control socket: \(error.reason)")
                return nil
            }
        }
    }

    /// logind's sleep announcements on the system bus, for keychains that lock on sleep; without a system
    /// bus (containers, tests) the daemon serves without, and says so once.
    private func watchForSleep() -> SleepWatch? {
        do {
            return try SleepWatch(systemBus: DBusConnection.system())
        } catch {
            printError("latchkeyd: keychains will not lock on sleep: no system bus (\(error.message))")
            return nil
        }
    }

    /// Asked by the serving loop while there is no bus: connects and claims the name once one exists.
    private func connectLater() -> ServiceLoop.BusAttempt {
        guard let connection = try? DBusConnection.session() else { return .notYet }
        if let refusal = claimName(connection) { return .refused(refusal) }
        return .connected(connection)
    }

    /// Writes the outcome of a login unlock as one line on standard output, then closes it.
    private static func reportLogin(_ reply: ControlReply) {
        let word = reply.status == .ok ? "ok" : "\(reply.status)"
        let line = Array("\(word) \(reply.message)\n".utf8)
        _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        let null = open("/dev/null", O_WRONLY)
        if null >= 0 {
            dup2(null, 1)
            close(null)
        }
    }

    /// `--change-login-password`: re-wraps the login keychain file's key; the exit status to throw.
    private func rekeyLoginFile() -> ExitCode {
        func outcome(_ line: String, _ code: ExitCode) -> ExitCode {
            print(line)
            return code
        }
        guard var input = try? readPassword(required: true, limit: 2 * 4096 + 1),
            let separator = input.firstIndex(of: 0)
        else { return outcome("error standard input must hold the old password, NUL, the new password", .failure) }
        defer { wipeBytes(&input) }
        let old = input[..<separator]
        let new = input[(separator + 1)...]
        guard !old.isEmpty, !new.isEmpty else { return outcome("error a password is empty", .failure) }
        let path = KeychainLocation.loginKeychainPath(inDirectory: keychainDirectory)
        guard FileManager.default.fileExists(atPath: path) else {
            return outcome("ok no login keychain; nothing to re-key", .success)
        }
        do {
            try Keychain(opening: path).changePassword(from: old, to: new)
        } catch {
            let word = error.status == .authFailed ? "wrongPassword" : "failed"
            return outcome("\(word) \(error.reason)", .failure)
        }
        return outcome("ok login keychain re-keyed to the new password", .success)
    }

    /// Standard input up to `limit` bytes, without a final newline. Empty is
    /// an error when `required`, else no password (nil).
    private func readPassword(required: Bool, limit: Int = 4096) throws -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < bytes.count {
            let got = read(0, &bytes[count], bytes.count - count)
            guard got > 0 else { break }
            count += got
        }
        bytes.removeSubrange(count...)
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else {
            if required { throw fail("--unlock needs the password on standard input") }
            return nil
        }
        return bytes
    }

    /// Claims org.freedesktop.secrets and listens for clients leaving; the reason when refused.
    private func claimName(_ connection: DBusConnection) -> String? {
        var flags: DBusConnection.NameFlags = [.doNotQueue, .allowReplacement]
        if replace { flags.insert(.replaceExisting) }
        let reply: DBusConnection.NameReply
        do {
            reply = try connection.requestName("org.freedesktop.secrets", flags: flags)
        } catch {
            return "cannot request org.freedesktop.secrets: \(error.message)"
        }
        guard reply == .primaryOwner || reply == .alreadyOwner else {
            return "org.freedesktop.secrets is already owned by \(describeOwner(connection)); use --replace to take it"
        }
        try? connection.addMatch(
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'")
        return nil
    }

    /// The current owner of the name: unique name, pid and executable when the bus tells them.
    private func describeOwner(_ connection: DBusConnection) -> String {
        guard let owner = connection.owner(of: "org.freedesktop.secrets") else { return "another process" }
        guard case .uint32(let pid)? = connection.askBus("GetConnectionUnixProcessID", about: owner) else {
            return owner
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? "?"
        return "\(owner) (pid \(pid), \(executable))"
    }

    /// Reports `message` (on standard error, and on standard output for
    /// pam_latchkey with --login) and gives the exit status to throw.
    private func fail(_ message: String) -> ExitCode {
        printError("latchkeyd: \(message)")
        if login { Self.reportLogin(ControlReply(.failed, message)) }
        return ExitCode.failure
    }
}

/// Writes one line to standard error.
private func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
