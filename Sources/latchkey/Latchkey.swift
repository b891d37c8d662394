import ArgumentParser
import Glibc
import KeySlots
import KeychainClient
import KeychainCore
import Posix
import Synchronization
import TPMSealing

/// `latchkey`: the keychain command, in the shape of macOS `security(1)`.
@main
struct Latchkey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latchkey",
        abstract: "Manage keychains and their items, as macOS security(1) does.",
        discussion: """
            Verbs work on the default keychain (the login keychain unless default-keychain -s chose another) or on the \
            keychain named last. When latchkeyd holds that keychain, the command asks it; otherwise it opens the file \
            itself and asks for the keychain's password (on the terminal, else through pinentry).

            Secrets never need to be on the command line: put -w last to be asked, or use --stdin.

            Exit status: 0 on success, 44 when no item matches, 1 otherwise.
            """,
        version: "0.1.0",
        subcommands: [
            AddPassword<GenericPasswordOptions>.self, FindPassword<GenericPasswordOptions>.self,
            DeletePassword<GenericPasswordOptions>.self, AddPassword<InternetPasswordOptions>.self,
            FindPassword<InternetPasswordOptions>.self, DeletePassword<InternetPasswordOptions>.self,
            DumpKeychain.self, ListKeychains.self, DefaultKeychain.self, LoginKeychain.self,
            CreateKeychain.self, DeleteKeychain.self, LockKeychain.self, UnlockKeychain.self,
            SetKeychainPassword.self, SetKeychainSettings.self, ShowKeychainInfo.self, ImportGnomeKeyring.self,
            ImportKWallet.self, ExportKeychain.self, ImportExchangeFile.self,
            MigrationStatus.self, ListAccess.self, RemoveAccess.self, SetAccessPolicy.self, AddSlot.self,
            ListSlots.self, RemoveSlot.self, UpdateEnvironment.self,
        ])

    /// Parses the command line (a trailing `-w` of an add verb means "ask me") and runs the verb. A
    /// command line that does not parse gets one line on standard error and exit status 1.
    static func main() {
        // The command handles passwords and secrets: none of them may land in a core file. It stays dumpable
        // (its /proc/PID/exe readable by latchkeyd, which identifies it) until a secret is about to come:
        // ``SecretsAhead/prepare()``.
        if let problem = ProcessHardening.forbidCoreFiles() {
            StandardError.write("latchkey: \(problem)")
            exit(withError: ExitCode.failure)
        }
        ProcessHardening.endOnFatalSignals()
        ProcessHardening.overwriteFreedMemory()
        SecretBytes.reportLockFailures { StandardError.write("latchkey: \($0)") }
        TPMConfiguration.quietLibraryLog()
        // The ThisDeviceOnly class keys of keychains made or upgraded from now on are sealed to this TPM.
        TPMDeviceSealing.installIfPresent()
        // A wait on the bus or the daemon longer than a second is told (docs/ssh.md).
        DaemonWait.notices.withLock {
            $0 = DaemonWait.Reporting(
                waiting: { StandardError.write("latchkey: waiting for \($0)") },
                gaveUp: {
                    StandardError.write("latchkey: \($0)")
                    _exit(1)
                },
                promptShowing: { StandardError.isTerminalWithoutEcho })
        }
        let arguments = PasswordSourceOptions.rewritingTrailingPasswordFlag(Array(CommandLine.arguments.dropFirst()))
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            let verb = arguments.first { !$0.hasPrefix("-") } ?? ""
            let hint = configuration.subcommands.contains { $0._commandName == verb } ? " \(verb)" : ""
            StandardError.write("latchkey: \(message(for: error)) (see latchkey help\(hint))")
            exit(withError: ExitCode.failure)
        }
    }
}

/// Runs a verb's work; a keychain error is printed on one line and becomes
/// the exit status: 44 for `errSecItemNotFound` (as `security(1)`), 45 for a
/// password not tried after too many wrong ones, else 1.
func reportingFailures(_ work: () throws(KeychainError) -> Void) throws {
    do {
        try work()
    } catch {
        // A duplicate is told in Apple's words (the store's reason is terser); otherwise the specific reason.
        let reason = error.reason.isEmpty || error.status == .duplicateItem ? error.status.message : error.reason
        StandardError.write("latchkey: \(reason)")
        throw ExitCode(error.status == .itemNotFound ? 44 : error.retryAfterSeconds != nil ? 45 : 1)
    }
}

/// The point after which the command holds secrets: it turns non-dumpable (no ptrace attach by its own user,
/// `/proc/PID/mem` and `/proc/PID/exe` closed to it), which also ends latchkeyd's ability to identify it; so
/// the process's one daemon connection is answered once first (the daemon identifies a connection before its
/// first reply, and keeps the identity for the connection's life). Called before a password is read or a
/// keychain file opened (docs/threat-model.md, "The latchkey command").
enum SecretsAhead {
    /// Turns non-dumpable (at most once; a failure is reported and ends the command: secrets must not be read
    /// by a process that stays dumpable).
    static func prepare() {
        guard !done.withLock({ $0 }) else { return }
        // A secret read before any keychain is reached (`--stdin`, a password typed first) must not leave
        // the daemon unable to tell who adds it: the one daemon connection is answered once before.
        DaemonKeychain.introduceProcess()
        if let problem = ProcessHardening.forbidDumping() {
            StandardError.write("latchkey: \(problem)")
            Latchkey.exit(withError: ExitCode.failure)
        }
        done.withLock { $0 = true }
    }

    private static let done = Mutex(false)
}
