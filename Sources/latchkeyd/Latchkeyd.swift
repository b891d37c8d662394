import ArgumentParser
import DBus
import FoundationEssentials
import Glibc
import KeychainStore
import Pinentry
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

    mutating func run() throws {
        let signalMask = ServiceLoop.blockTerminationSignals()
        if printIntrospection {
            print(Introspection.interfaces, terminator: "")
            return
        }
        var password = unlock ? try readPassword() : nil

        let connection: DBusConnection
        do {
            connection = try DBusConnection.session()
        } catch {
            throw fail("cannot connect to the session bus: \(error.message)")
        }
        let prompt =
            pinentry.map { Pinentry(program: $0) } ?? Pinentry.fromEnvironment(ProcessInfo.processInfo.environment)
        let service: SecretService
        do {
            // The keychain key is derived; the password itself is wiped in place whatever happens.
            defer { password?.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
            service = try SecretService(
                connection: connection,
                configuration: SecretServiceConfiguration(keychainDirectory: keychainDirectory, pinentry: prompt),
                loginPassword: password)
        } catch {
            throw fail("cannot open the login keychain: \(error.reason)")
        }
        try claimName(connection)
        try? connection.addMatch(
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'")
        let loop: ServiceLoop
        do {
            loop = try ServiceLoop(service: service, signalMask: signalMask)
        } catch {
            throw fail(error.reason)
        }
        let exit = loop.run()
        loop.shutDown()
        if case .busGone = exit { printError("latchkeyd: the session bus went away") }
    }

    private func readPassword() throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var count = 0
        while count < bytes.count {
            let got = read(0, &bytes[count], bytes.count - count)
            guard got > 0 else { break }
            count += got
        }
        bytes.removeSubrange(count...)
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else { throw fail("--unlock needs the password on standard input") }
        return bytes
    }

    private func claimName(_ connection: DBusConnection) throws {
        var flags: DBusConnection.NameFlags = [.doNotQueue, .allowReplacement]
        if replace { flags.insert(.replaceExisting) }
        let reply: DBusConnection.NameReply
        do {
            reply = try connection.requestName("org.freedesktop.secrets", flags: flags)
        } catch {
            throw fail("cannot request org.freedesktop.secrets: \(error.message)")
        }
        guard reply == .primaryOwner || reply == .alreadyOwner else {
            throw fail(
                "org.freedesktop.secrets is already owned by \(describeOwner(connection)); use --replace to take it")
        }
    }

    /// The current owner of the name: unique name, pid and executable when the bus tells them.
    private func describeOwner(_ connection: DBusConnection) -> String {
        func ask(_ member: String, _ argument: String) -> DBusValue? {
            guard
                let call = try? DBusMessage.methodCall(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: member, arguments: [.string(argument)]),
                let reply = try? connection.call(call, timeoutMilliseconds: 2000)
            else { return nil }
            return try? reply.arguments().first
        }
        guard case .string(let owner)? = ask("GetNameOwner", "org.freedesktop.secrets") else {
            return "another process"
        }
        guard case .uint32(let pid)? = ask("GetConnectionUnixProcessID", owner) else { return owner }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? "?"
        return "\(owner) (pid \(pid), \(executable))"
    }

    private func fail(_ message: String) -> ExitCode {
        printError("latchkeyd: \(message)")
        return ExitCode.failure
    }
}

/// Writes one line to standard error.
private func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
