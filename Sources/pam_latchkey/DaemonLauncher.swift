import Glibc
import LoginControl
import Posix

/// Starts the user's `latchkeyd` from the session step (option `auto_start`)
/// or runs it once to re-key the login keychain file (password step, no daemon).
/// Runs in the child that already dropped to the user.
struct DaemonLauncher {
    /// The executable (option `daemon=`).
    let path: String
    /// The environment the daemon gets: the PAM environment and the account's basics.
    let environment: [String]
    /// The user's home, the daemon's working directory.
    let home: String

    /// Starts `latchkeyd --foreground --login` in a session of its own, with
    /// `password` (nil: none) on its standard input, and returns the line it
    /// writes once the login keychain is open (or why it is not).
    func startDaemon(password: UnsafePointer<CChar>?, deadline: Deadline) -> ChildReport {
        run(["--foreground", "--login"], input: password.map { [$0] } ?? [], deadline: deadline, detach: true)
    }

    /// Runs `latchkeyd --change-login-password` with the old and new passwords
    /// on its standard input and returns its one-line outcome.
    func changePassword(old: UnsafePointer<CChar>, new: UnsafePointer<CChar>, deadline: Deadline) -> ChildReport {
        run(["--change-login-password"], input: [old, new], deadline: deadline, detach: false)
    }

    /// Executes the daemon with `arguments`, writes `input` (NUL-separated C
    /// strings) to its standard input and reads the first line of its
    /// standard output. With `detach` it gets a session of its own and keeps running.
    private func run(_ arguments: [String], input: [UnsafePointer<CChar>], deadline: Deadline, detach: Bool)
        -> ChildReport
    {
        guard access(path, X_OK) == 0 else {
            return .failure("cannot start \(path): \(String(cString: strerror(errno)))")
        }
        var toDaemon: [Int32] = [-1, -1]
        var fromDaemon: [Int32] = [-1, -1]
        guard pipe(&toDaemon) == 0, pipe(&fromDaemon) == 0 else {
            return .failure("pipe: \(String(cString: strerror(errno)))")
        }
        for fd in toDaemon + fromDaemon { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // Everything exec needs is made before the fork.
        let argv = CStringArray([path] + arguments)
        let envp = CStringArray(environment)
        let pid = fork()
        if pid == 0 {
            if detach { setsid() }
            // The host process may block signals; the daemon starts with none blocked.
            var none = sigset_t()
            sigemptyset(&none)
            sigprocmask(SIG_SETMASK, &none, nil)
            dup2(toDaemon[0], 0)
            dup2(fromDaemon[1], 1)
            let null = open("/dev/null", O_WRONLY)
            if null >= 0 { dup2(null, 2) }
            closeDescriptors(from: 3)
            if chdir(home) != 0 { _ = chdir("/") }
            umask(0o077)
            execve(path, argv.pointers, envp.pointers)
            let message = Array("error cannot execute \(path): \(String(cString: strerror(errno)))\n".utf8)
            _ = message.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            _exit(127)
        }
        close(toDaemon[0])
        close(fromDaemon[1])
        defer { close(fromDaemon[0]) }
        guard pid > 0 else {
            close(toDaemon[1])
            return .failure("fork: \(String(cString: strerror(errno)))")
        }
        for (index, secret) in input.enumerated() {
            if index > 0 { _ = write(toDaemon[1], "\0", 1) }
            _ = write(toDaemon[1], secret, strlen(secret))
        }
        close(toDaemon[1])
        let line = readLine(fromDaemon[0], deadline: deadline)
        if !detach {
            var status: Int32 = 0
            _ = waitpid(pid, &status, WNOHANG)
        }
        guard let line else { return .failure("\(path) (pid \(pid)) did not report in time") }
        guard !line.isEmpty else { return .failure("\(path) (pid \(pid)) exited without a word") }
        return line.hasPrefix("ok") ? .success("\(path): \(line)") : .failure("\(path): \(line)")
    }

    /// The first line written to `fd`, without its newline; nil on timeout.
    private func readLine(_ fd: Int32, deadline: Deadline) -> String? {
        var collected: [UInt8] = []
        var byte: UInt8 = 0
        while collected.count < 512 {
            guard deadline.waitUntil(fd, isReadyFor: Int16(POLLIN)) else { return nil }
            guard let count = try? Posix.read(fd, &byte, 1), count > 0, byte != UInt8(ascii: "\n") else { break }
            collected.append(byte)
        }
        return String(decoding: collected, as: UTF8.self)
    }
}

/// Closes every descriptor from `first` up (the host process may hold
/// descriptors without close-on-exec; the daemon inherits none of them).
private func closeDescriptors(from first: Int32) {
    let limit = min(Int32(clamping: sysconf(Int32(_SC_OPEN_MAX))), 65_536)
    var fd = first
    while fd < limit {
        close(fd)
        fd += 1
    }
}

/// A NULL-terminated array of C strings for `execve`, made before forking.
/// Its memory is never freed: the process either executes or exits.
private struct CStringArray {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    init(_ strings: [String]) {
        pointers = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointers[index] = strdup(string) }
        pointers[strings.count] = nil
    }
}
