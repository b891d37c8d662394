import FoundationEssentials
import Glibc
import KeychainClient
import KeychainCore
import Pinentry
import Posix

/// Where the command gets secrets: the terminal with echo off, standard
/// input (`--stdin`), or pinentry when there is no terminal.
enum SecretInput {
    /// Reads a line from the controlling terminal with echo off (unless
    /// `echo`), after showing `prompt` on it; nil when the process has no
    /// terminal. Ctrl-C and Ctrl-D on an empty line cancel (`errSecUserCanceled`).
    static func fromTerminal(prompt: String, echo: Bool = false) throws(KeychainError) -> [UInt8]? {
        SecretsAhead.prepare()
        let terminal = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard terminal >= 0 else { return nil }
        defer { close(terminal) }
        var saved = termios()
        guard tcgetattr(terminal, &saved) == 0 else { return nil }
        var quiet = saved
        // No echo (but the newline), and Ctrl-C arrives as a byte instead of a signal, so echo always comes back.
        quiet.c_lflag &= ~tcflag_t(echo ? ISIG : ECHO | ISIG)
        quiet.c_lflag |= tcflag_t(ECHONL)
        // In canonical mode a read returns at the end of a line: make Ctrl-C end one too.
        withUnsafeMutableBytes(of: &quiet.c_cc) { $0[Int(VEOL)] = 0x03 }
        guard tcsetattr(terminal, TCSAFLUSH, &quiet) == 0 else { return nil }
        defer { tcsetattr(terminal, TCSAFLUSH, &saved) }
        write(terminal, prompt)
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = (try? Posix.read(terminal, &byte, 1)) ?? -1
            if count <= 0 || byte == 0x04 {
                if line.isEmpty {
                    write(terminal, "\n")
                    throw KeychainError(.userCanceled, "no password was entered")
                }
                break
            }
            if byte == 0x03 {
                wipeBytes(&line)
                write(terminal, "\n")
                throw KeychainError(.userCanceled, "cancelled")
            }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { break }
            line.append(byte)
        }
        return line
    }

    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        _ = Glibc.write(fd, &bytes, bytes.count)
    }

    /// Reads `count` secrets from standard input: with one, all of it but a
    /// final newline (so a secret may span lines); with more, one per line.
    static func fromStandardInput(count: Int) throws(KeychainError) -> [[UInt8]] {
        SecretsAhead.prepare()
        var input = try allOfStandardInput()
        defer { wipeBytes(&input) }
        var secrets: [[UInt8]]
        if count == 1 {
            var secret = input
            if secret.last == UInt8(ascii: "\n") { secret.removeLast() }
            if secret.last == UInt8(ascii: "\r") { secret.removeLast() }
            secrets = [secret]
        } else {
            secrets = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
                Array($0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0)
            }
        }
        guard secrets.count >= count else {
            throw KeychainError.param("standard input holds \(secrets.count) lines; \(count) are needed")
        }
        return Array(secrets.prefix(count))
    }

    /// All of standard input, up to 1 MiB (the caller wipes it); the read buffer is wiped.
    private static func allOfStandardInput() throws(KeychainError) -> [UInt8] {
        var input: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { wipeBytes(&buffer) }
        while true {
            guard let got = try? Posix.read(STDIN_FILENO, &buffer, buffer.count), got > 0 else { break }
            input += buffer[0..<got]
            guard input.count <= 1 << 20 else {
                wipeBytes(&input)
                throw KeychainError(.dataTooLarge, "standard input holds over 1 MiB")
            }
        }
        return input
    }

    /// Every line of standard input (without its line end), for verbs that take several passwords;
    /// a final empty line is dropped.
    static func linesFromStandardInput() throws(KeychainError) -> [[UInt8]] {
        SecretsAhead.prepare()
        var input = try allOfStandardInput()
        defer { wipeBytes(&input) }
        var lines = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            Array($0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0)
        }
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Asks for a keychain password: on the terminal when there is one, else
    /// through pinentry (`PINENTRY`, default `pinentry`), with `error` shown
    /// after a wrong try.
    static func keychainPassword(for path: String, error: String?) throws(KeychainError) -> [UInt8] {
        SecretsAhead.prepare()
        let prompt = (error.map { "\($0)\n" } ?? "") + "password to unlock \(path): "
        if let typed = try fromTerminal(prompt: prompt) { return typed }
        let request = PinentryRequest(
            title: "Unlock keychain",
            description: "latchkey needs the password of the keychain\n\(path)", prompt: "Password:", error: error)
        let outcome: PinentryOutcome
        do throws(PinentryError) {
            outcome = try PinentryWait.fromEnvironment { (pinentry) throws(PinentryError) in
                try pinentry.askPassword(request)
            }
        } catch {
            throw KeychainError(
                .interactionNotAllowed, "no terminal to ask the password on, and \(error.description)")
        }
        guard case .password(let password) = outcome else {
            throw KeychainError(.userCanceled, "the password prompt was dismissed")
        }
        return password.withUnsafeBytes { [UInt8]($0) }
    }

    /// Asks for a new password twice on the terminal until both agree (three tries).
    static func newPassword(for what: String) throws(KeychainError) -> [UInt8] {
        SecretsAhead.prepare()
        for _ in 0..<3 {
            guard var first = try fromTerminal(prompt: "new password for \(what): ") else {
                throw KeychainError(.interactionNotAllowed, "no terminal to ask the new password on: use --stdin")
            }
            guard var second = try fromTerminal(prompt: "retype new password for \(what): ") else {
                throw KeychainError(.interactionNotAllowed, "no terminal to ask the new password on: use --stdin")
            }
            defer { wipeBytes(&second) }
            if first == second { return first }
            wipeBytes(&first)
            StandardError.write("latchkey: the passwords do not match; try again")
        }
        throw KeychainError(.param, "the passwords did not match")
    }
}

/// Runs pinentry for the command, told after a second (docs/ssh.md): a prompt on a display the person does not
/// look at (a forwarded or stale DISPLAY over ssh) is named, with its bound.
enum PinentryWait {
    /// Runs `body` with the pinentry the environment names.
    static func fromEnvironment<T>(_ body: (Pinentry) throws(PinentryError) -> T) throws(PinentryError) -> T {
        let pinentry = Pinentry.fromEnvironment(ProcessInfo.processInfo.environment)
        let environment = pinentry.environment
        let place =
            environment["WAYLAND_DISPLAY"].map { "Wayland display \($0)" }
            ?? environment["DISPLAY"].map { "display \($0)" } ?? "no display"
        let seconds = pinentry.timeout.components.seconds
        return try DaemonWait.announcing(
            "the prompt of \(pinentry.program) on \(place)", bound: Int32(clamping: seconds * 1_000)
        ) { () throws(PinentryError) in try body(pinentry) }
    }
}

/// The standard error stream, for messages.
enum StandardError {
    /// Writes `line` and a newline.
    static func write(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = Glibc.write(STDERR_FILENO, &bytes, bytes.count)
    }

    /// Whether standard error is a terminal with echo turned off: a pinentry (latchkeyd's, on this terminal,
    /// or the command's own) is reading a password there, and a line written now would land in its field.
    static var isTerminalWithoutEcho: Bool {
        var modes = termios()
        guard isatty(STDERR_FILENO) == 1, tcgetattr(STDERR_FILENO, &modes) == 0 else { return false }
        return modes.c_lflag & tcflag_t(ECHO) == 0
    }
}
