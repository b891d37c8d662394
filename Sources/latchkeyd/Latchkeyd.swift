import ArgumentParser
import CStartHardening
import DBus
import DaemonLoop
import Fingerprint
import FoundationEssentials
import Glibc
import GnomeKeyringImport
import KWalletImport
import KeySlots
import KeychainCore
import KeychainRegistry
import KeychainStore
import LoginControl
import Pinentry
import Posix
import SecretService
import TPMSealing

@main
struct Latchkeyd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latchkeyd",
        abstract: "Serves the user's keychains as org.freedesktop.secrets on the session bus.",
        usage: "latchkeyd [<options>]",
        discussion: """
            The bus is DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus. Keychains live in \
            $XDG_DATA_HOME/latchkey/keychains (or --keychain-directory). With --unlock the login keychain password is \
            read from standard input (never from arguments or the environment); the login keychain is created with it \
            on first use. Unlock prompts run pinentry (--pinentry, else $PINENTRY, else "pinentry"), resolved once to \
            its real path; $PINENTRY must be a program only root can change. Without --pinentry each prompt shows \
            where its caller is: the desktop, else pinentry-curses on the caller's terminal, else nowhere (the \
            request fails saying what to do).

            pam_latchkey talks to the daemon on the control socket $XDG_RUNTIME_DIR/latchkey/control (or the socket \
            systemd passes). Started at login before the session bus exists, the daemon holds the keychain and claims \
            the bus name as soon as the bus appears.

            Example, on a private bus with a throwaway keychain directory:
              dbus-run-session -- sh -c '
                printf pw | latchkeyd --unlock --keychain-directory /tmp/kc &
                sleep 1; printf s3cret | secret-tool store --label=x a b'
            """)

    @Flag(help: "Serve in the foreground (latchkeyd never forks; accepted for service managers).")
    var foreground = false

    @Flag(help: "Read the login keychain password from standard input and unlock (or create) it.")
    var unlock = false

    @Flag(help: "Take org.freedesktop.secrets from its current owner, if that owner allows it.")
    var replace = false

    @Flag(
        help: ArgumentHelp(
            "Leave org.kde.kwalletd5 and org.kde.kwalletd6 to KDE's kwalletd.",
            discussion: """
                Without it, latchkeyd also serves KWallet clients under those names, and waits for them when a \
                kwalletd has them (docs/kwallet.md).
                """))
    var noKwallet = false

    @Option(help: "Directory of keychain files.")
    var keychainDirectory: String = KeychainLocation.keychainDirectory()

    @Option(help: "The pinentry program for unlock prompts.")
    var pinentry: String?

    @Flag(help: "Print the Secret Service introspection XML and exit.")
    var printIntrospection = false

    @Flag(
        help: ArgumentHelp(
            "Started by pam_latchkey: standard input holds one hand-over request (docs/control-socket.md).",
            discussion: """
                The reply goes to standard output at once, as on the control socket, and standard output is closed; \
                the login keychain is unlocked (or created) in the background.
                """))
    var login = false

    @Flag(
        help: ArgumentHelp(
            "Re-key the login keychain file and exit: standard input holds one change-password request.",
            discussion: "Used by pam_latchkey when no daemon runs. The reply goes to standard output."))
    var changeLoginPassword = false

    @Option(
        help: ArgumentHelp(
            "Run as this user: started as root, become it (its groups, gid and uid) before anything else.",
            discussion: "pam_latchkey passes it and starts the daemon as the user already.", valueName: "uid"))
    var user: UInt32?

    @Option(help: "The most collections clients may make, besides the login and session ones.")
    var maxCollections = InputLimits().collectionCount

    @Option(help: "The most items in one collection (the in-memory session collection too).")
    var maxItemsPerCollection = InputLimits().itemsPerCollection

    @Option(help: "The most bytes the items of one collection take (sealed secrets and attributes).")
    var maxCollectionBytes = InputLimits().bytesPerCollection

    @Option(help: "The most items one application may store, across collections.")
    var maxItemsPerApplication = InputLimits().itemsPerApplication

    @Option(help: "The most bytes one application's items may take, across collections.")
    var maxApplicationBytes = InputLimits().bytesPerApplication

    /// The daemon, or (started by the daemon with ``KeyDerivationProcess/helperArgument`` alone) its one-shot key
    /// derivation helper, which must not go through the daemon's start-up.
    static func main() {
        let arguments = CommandLine.arguments
        if arguments.count == 2, arguments[1] == KeyDerivationProcess.helperArgument {
            Glibc.exit(KeyDerivationProcess.serveHelperRequest(hardenedAtStart: latchkey_start_hardening_error() == 0))
        }
        main(nil)
    }

    mutating func run() throws {
        // A parent that ignores SIGCHLD hands that on through exec: the kernel would then reap the key
        // derivation helper (and pinentry) itself, and waitpid would answer ECHILD with no status.
        signal(SIGCHLD, SIG_DFL)
        // Before anything is read: freed heap memory is overwritten and never cached unwiped.
        let restartProblem = ProcessHardening.restartWithMallocTunables()
        if let user, let problem = UserSwitch.become(uid: user) { throw fail(problem) }
        // After the switch: changing uid makes a process dumpable again.
        if let problem = ProcessHardening.forbidCoreDumps() { throw fail(problem) }
        let requestFromLogin = login || changeLoginPassword ? try loginRequestOrigin() : false
        ProcessHardening.endOnFatalSignals()
        // Labels and attribute values are decrypted into ordinary heap memory for replies: freed, they are
        // overwritten (docs/threat-model.md, "In memory"; the cost is in docs/benchmarks.md).
        ProcessHardening.overwriteFreedMemory()
        ProcessHardening.allocateFromOneArena()
        SecretBytes.reportLockFailures { printError("latchkeyd: \($0)") }
        if let restartProblem { printError("latchkeyd: freed memory may keep secrets: \(restartProblem)") }
        // Each held collection keeps three files open and each client a pidfd: the soft limit systemd gives
        // (1,024) is raised to the hard one (docs/robustness.md, "Bounds and quotas").
        if let problem = ProcessHardening.raiseDescriptorLimit().problem {
            printError("latchkeyd: the limit on open files stays as it is: \(problem)")
        }
        // A reader of our standard output that went away must not end the daemon.
        signal(SIGPIPE, SIG_IGN)
        // tpm2-tss's own log lines (a wrong PIN at the login keychain's prompt) stay out of the journal.
        TPMConfiguration.quietLibraryLog()
        // The ThisDeviceOnly class keys of keychains made or upgraded from now on are sealed to this TPM.
        TPMDeviceSealing.installIfPresent()
        let signalMask = ServiceLoop.blockTerminationSignals()
        if printIntrospection {
            print(SecretServiceIntrospection.document, terminator: "")
            return
        }
        if changeLoginPassword { throw rekeyLoginFile(verifiedByLogin: requestFromLogin) }
        if login, !requestFromLogin {
            throw fail(
                "--login takes pam_latchkey's hand-over on a socket pair root made; standard input is not one:"
                    + " refused", status: .badRequest)
        }
        // The --unlock password lives until the registry has opened the login keychain with it; the
        // hand-over's until the unlock (or creation) it starts is done (docs/threat-model.md, "In memory").
        // scrypt's 64 MiB is a worker process's, given back when it exits, not the daemon's peak
        // (docs/robustness.md, "Memory of a prompt storm"). The deriver that forks the workers is forked now,
        // while this process runs one thread, and before the password or the hand-over is read.
        if let problem = KeyDerivationProcess.startDeriver(report: { printError("latchkeyd: \($0)") }) {
            printError("latchkeyd: key derivation runs in this process: \(problem)")
        }
        var password: SecretBytes? = unlock ? try readPassword() : nil
        var handOver = login ? try readHandOver() : nil

        // The bus is tried on a thread of its own, bounded as a whole (BusAttempts): the control socket is served
        // before and while it is tried, so a login's hand-over never waits on a bus that does not answer.
        let (replace, noKwallet) = (self.replace, self.noKwallet)
        var bus = BusAttempts { Self.connectAndClaim(replace: replace, noKwallet: noKwallet) }
        var connection: DBusConnection?
        func settleBus() throws {
            switch bus.settle() {
            case .connected(let connected): connection = connected
            case .refused(let refusal): throw fail(refusal)
            case .notYet: break
            }
        }
        // The control socket before the bus name: a client the bus starts this daemon for and a login's
        // hand-over may come at once, and pam_latchkey, finding the socket, hands over to this daemon (or,
        // finding it taken by the time the daemon it started looks, hands over again here). A daemon replacing
        // another takes the name first: the other lets go of the socket when it sees the name go.
        var control: ControlListener?
        if replace {
            try settleBus()
            control = try listenOnControlSocket(haveBus: { connection != nil })
        } else {
            _ = bus.poll()
            // Without a socket the bus is required: only then is its try waited for.
            control = try listenOnControlSocket(haveBus: {
                try settleBus()
                return connection != nil
            })
        }
        var promptEnvironment = ProcessInfo.processInfo.environment
        // A daemon started at login found its bus through XDG_RUNTIME_DIR; pinentry-gnome3 shows its window
        // through a D-Bus service, and gets the address outright.
        if promptEnvironment["DBUS_SESSION_BUS_ADDRESS"] == nil, let address = DBusConnection.sessionBusAddress() {
            promptEnvironment["DBUS_SESSION_BUS_ADDRESS"] = address
        }
        // Resolved once, here, to the program's real path, which is what runs (docs/threat-model.md, "Where
        // prompts show"). A PINENTRY from the environment must be a program only root can change; one that is
        // not (or is missing) is kept as named, and every prompt then fails with the reason.
        let named =
            pinentry.map { Pinentry(program: $0, environment: promptEnvironment) }
            ?? Pinentry.fromEnvironment(promptEnvironment, requiringProtectedProgram: true)
        let prompt = (try? named.resolved()) ?? named
        var registry = RegistryConfiguration(
            keychainDirectory: keychainDirectory, pinentry: prompt,
            gnomeKeyringDirectory: KeyringFile.keyringDirectory(environment: ProcessInfo.processInfo.environment),
            flatpakAppDirectory: KeyringFile.flatpakAppDirectory(environment: ProcessInfo.processInfo.environment),
            kwallet: KWalletLocations(environment: ProcessInfo.processInfo.environment))
        // The fingerprint reader of kSecAccessControlBiometry* items: fprintd on the system bus
        // (docs/fingerprint.md); without it every check is unavailable within milliseconds. The digest is asked on
        // the serving thread when a biometry item is added: bounded to 1 s. Each read tells its person to touch the
        // reader (KeychainRegistry.fingerprintStage).
        registry.fingerprints = FprintdFingerprints(digestTimeoutSeconds: 1)
        let daemon: SecretServiceDaemon
        do {
            daemon = try SecretServiceDaemon(
                configuration: SecretServiceConfiguration(registry: registry, limits: limits, identifiesCallers: true),
                loginPassword: password)
        } catch {
            throw fail("cannot open the login keychain: \(error.reason)")
        }
        password = nil
        if let request = handOver {
            // pam_latchkey (root) made the socket pair on standard input: a login's request.
            daemon.registry.userLogin.answer(request, from: .login) { reply in Self.reportLogin(reply) }
        }
        handOver = nil
        let loop: ServiceLoop
        do {
            loop = try ServiceLoop(
                daemon: daemon, connection: connection, control: control, logindWatch: watchLogind(),
                signalMask: signalMask, answerControl: Self.answerControl(daemon.registry.userLogin))
        } catch {
            throw fail(error.reason)
        }
        let exit = loop.run { bus.poll() }
        loop.shutDown()
        switch exit {
        case .busGone: printError("latchkeyd: the session bus went away")
        case .busRefused(let reason): throw fail(reason)
        default: break
        }
    }

    /// The bounds on clients' input, with the quotas given on the command line.
    private var limits: InputLimits {
        var limits = InputLimits()
        limits.collectionCount = max(0, maxCollections)
        limits.itemsPerCollection = max(0, maxItemsPerCollection)
        limits.bytesPerCollection = max(0, maxCollectionBytes)
        limits.itemsPerApplication = max(0, maxItemsPerApplication)
        limits.bytesPerApplication = max(0, maxApplicationBytes)
        return limits
    }

    /// Listens on the control socket (or the one systemd passed). Without a
    /// bus the socket is required; with one, a failure is only reported.
    private func listenOnControlSocket(haveBus: () throws -> Bool) throws -> ControlListener? {
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
                guard try haveBus() else {
                    throw fail("no session bus and no control socket: \(error.reason)")
                }
                if case .held = error { throw fail(error.reason) }
                printError("latchkeyd: serving without a control socket: \(error.reason)")
                return nil
            }
        }
    }

    /// logind's sleep and session-lock announcements on the system bus, for keychains that lock on sleep or
    /// with the screen; without a system bus (containers, tests) the daemon serves without, and says so once.
    private func watchLogind() -> LogindWatch? {
        do {
            return try LogindWatch(systemBus: DBusConnection.system())
        } catch {
            printError(
                "latchkeyd: keychains will not lock on sleep or with logind's session lock: no system bus "
                    + "(\(error.message))")
            return nil
        }
    }

    /// One try at the session bus, on a thread of its own (BusAttempts): connects and claims the names.
    private static func connectAndClaim(replace: Bool, noKwallet: Bool) -> BusAttempts.Outcome {
        let connection: DBusConnection
        do throws(DBusError) {
            connection = try DBusConnection.session()
        } catch {
            return .failed(error.message)
        }
        if let refusal = claimName(connection, replace: replace, noKwallet: noKwallet) { return .refused(refusal) }
        return .connected(connection)
    }

    /// Writes the reply to the request on standard input to standard output, then closes it.
    private static func reportLogin(_ reply: ControlReply) {
        _ = ControlFrames.send(reply, on: 1, deadline: Deadline(millisecondsFromNow: 2_000))
        let null = open("/dev/null", O_WRONLY)
        if null >= 0 {
            dup2(null, 1)
            close(null)
        }
    }

    /// Whether the request on standard input (`--login`, `--change-login-password`) is a login's: it is when
    /// standard input is a socket pair root made, as pam_latchkey makes it; a pipe, a file or a pair a user
    /// process made is not. Throws when a debugger is attached: it may have attached between the exec and
    /// the process becoming non-dumpable (just before this), and would stay attached to read the password.
    private func loginRequestOrigin() throws -> Bool {
        guard let tracer = ProcessStatus.tracerPID() else {
            throw fail("cannot tell from /proc whether a debugger is attached: the request is refused")
        }
        guard tracer == 0 else { throw fail("a debugger (pid \(tracer)) is attached: the request is refused") }
        return isSocketPairMadeByRoot(0)
    }

    /// The one request on standard input (`--login`): a hand-over from pam_latchkey.
    private func readHandOver() throws -> ControlRequest {
        switch ControlFrames.receiveRequest(on: 0, deadline: Deadline(millisecondsFromNow: 2_000)) {
        case .success(let request):
            guard case .handOver = request else {
                throw fail("--login takes a hand-over request on standard input, not \(request.name)")
            }
            return request
        case .failure(let error):
            throw fail("--login: no hand-over request on standard input: \(error)")
        }
    }

    /// `--change-login-password`: re-wraps the login keychain file's key as the request on standard input
    /// asks (``UserLogin/answerWithoutDaemon(_:keychainDirectory:from:)``: the daemon's re-key, on the file),
    /// and answers on standard output; the exit status to throw. pam_latchkey runs this for `passwd` (whose PAM
    /// stack verified the old password), on a socket pair it made as root; a request on anything else is a
    /// user process's, and its old password counts.
    private func rekeyLoginFile(verifiedByLogin: Bool) -> ExitCode {
        let request = ControlFrames.receiveRequest(on: 0, deadline: Deadline(millisecondsFromNow: 2_000))
        let reply = UserLogin.answerWithoutDaemon(
            request, keychainDirectory: keychainDirectory, from: verifiedByLogin ? .login : .userProcess)
        _ = ControlFrames.send(reply, on: 1, deadline: Deadline(millisecondsFromNow: 2_000))
        return reply.status == .ok ? .success : .failure
    }

    /// Standard input up to the longest password accepted, without one final newline; longer input is
    /// refused, never cut.
    private func readPassword() throws -> SecretBytes {
        let limit = ControlRequest.maximumPasswordLength
        var count = 0
        var bytes: SecretBytes
        do {
            bytes = try SecretBytes(zeros: limit + 2)
        } catch {
            throw fail("cannot read the password: \(error)")
        }
        bytes.withUnsafeMutableBytes { raw in
            while count < raw.count {
                let got = (try? Posix.read(0, raw.baseAddress.map { $0 + count }, raw.count - count)) ?? 0
                guard got > 0 else { break }
                count += got
            }
        }
        if count > 0, bytes.withUnsafeBytes({ $0[count - 1] }) == UInt8(ascii: "\n") { count -= 1 }
        bytes.truncate(to: count)
        guard count <= limit else { throw fail("the password on standard input is longer than \(limit) bytes") }
        guard count > 0 else { throw fail("--unlock needs the password on standard input") }
        return bytes
    }

    /// Claims org.freedesktop.secrets and listens for clients leaving; the reason when refused.
    private static func claimName(_ connection: DBusConnection, replace: Bool, noKwallet: Bool) -> String? {
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
        if !noKwallet {
            // Queued behind a kwalletd that has them (docs/kwallet.md, "Names and packaging, as built").
            for line in KWalletNames.request(on: connection, describeOwner: { describeOwner(connection, of: $0) }) {
                printError("latchkeyd: \(line)")
            }
        }
        return nil
    }

    /// The current owner of `name`: unique name, pid and executable when the bus tells them.
    private static func describeOwner(_ connection: DBusConnection, of name: String = "org.freedesktop.secrets")
        -> String
    {
        guard let owner = connection.owner(of: name) else { return "another process" }
        guard case .uint32(let pid)? = connection.askBus("GetConnectionUnixProcessID", about: owner) else {
            return owner
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? "?"
        return "\(owner) (pid \(pid), \(executable))"
    }

    /// Reports `message` (on standard error, and on standard output for
    /// pam_latchkey with --login) and gives the exit status to throw.
    private func fail(_ message: String, status: ControlStatus = .failed) -> ExitCode {
        printError("latchkeyd: \(message)")
        if login { Self.reportLogin(ControlReply(status, message)) }
        return ExitCode.failure
    }
}

/// Writes one line to standard error.
func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
