import Glibc
import LoginControl
import Posix

/// What a child process did, for the log.
struct ChildReport {
    var succeeded: Bool
    var message: String

    static func success(_ message: String) -> ChildReport { ChildReport(succeeded: true, message: message) }
    static func failure(_ message: String) -> ChildReport { ChildReport(succeeded: false, message: message) }
}

/// Work done in a forked child that runs as the user, so that nothing it
/// meets (a stuck daemon, a hostile socket, a crash) can hold up or bring
/// down the process doing the login.
enum UserChild {
    /// Forks; the child drops to `account` (group list, gid, uid: each
    /// checked) and runs `body`, whose report comes back through a pipe. The
    /// caller waits until `deadline` at most; a child still running then is killed.
    static func run(as account: UserAccount, until deadline: Deadline, _ body: (Deadline) -> ChildReport)
        -> ChildReport
    {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return .failure("pipe: \(String(cString: strerror(errno)))") }
        for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let pid = fork()
        if pid < 0 {
            close(ends[0])
            close(ends[1])
            return .failure("fork: \(String(cString: strerror(errno)))")
        }
        if pid == 0 {
            close(ends[0])
            signal(SIGPIPE, SIG_IGN)
            let report: ChildReport
            if let problem = dropPrivileges(to: account) {
                report = .failure(problem)
            } else {
                // Leave the parent time to read the report before its own deadline.
                report = body(Deadline(millisecondsFromNow: Int(deadline.remainingMilliseconds) - 100))
            }
            let bytes = [report.succeeded ? UInt8(1) : 0] + Array(report.message.utf8.prefix(480))
            _ = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
            _exit(0)
        }
        close(ends[1])
        defer { close(ends[0]) }
        let reply = readUntilClosed(ends[0], deadline: deadline)
        reap(pid, killFirst: reply == nil)
        guard let reply else {
            return .failure("gave up after waiting for the user's daemon (it did not answer in time)")
        }
        guard let first = reply.first else { return .failure("the child process ended without a report") }
        return ChildReport(succeeded: first == 1, message: String(decoding: reply.dropFirst(), as: UTF8.self))
    }

    /// Drops to the user's groups, gid and uid; the reason if any step fails.
    private static func dropPrivileges(to account: UserAccount) -> String? {
        if geteuid() == account.uid, getuid() == account.uid { return nil }
        guard initgroups(account.name, account.gid) == 0 else {
            return "initgroups: \(String(cString: strerror(errno)))"
        }
        guard setgid(account.gid) == 0, setuid(account.uid) == 0 else {
            return "cannot switch to uid \(account.uid): \(String(cString: strerror(errno)))"
        }
        guard getuid() == account.uid, geteuid() == account.uid, getgid() == account.gid, getegid() == account.gid,
            account.uid == 0 || setuid(0) != 0
        else { return "dropping privileges to uid \(account.uid) did not hold" }
        return nil
    }

    /// Everything written to `fd` until its writer closes it; nil if `deadline` passes first.
    private static func readUntilClosed(_ fd: Int32, deadline: Deadline) -> [UInt8]? {
        var collected: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 512)
        while collected.count < 4096 {
            guard deadline.waitUntil(fd, isReadyFor: Int16(POLLIN)) else { return nil }
            guard let count = try? Posix.read(fd, &chunk, chunk.count), count > 0 else { break }
            collected += chunk[0..<count]
        }
        return collected
    }

    /// Collects the child's exit status, killing it first when it overran; waits 100 ms at most.
    private static func reap(_ pid: pid_t, killFirst: Bool) {
        if killFirst { kill(pid, SIGKILL) }
        var status: Int32 = 0
        for _ in 0..<100 {
            let result = waitpid(pid, &status, WNOHANG)
            if result != 0 { return }  // reaped, or not ours to reap (ECHILD when SIGCHLD is ignored)
            usleep(1_000)
        }
    }
}
