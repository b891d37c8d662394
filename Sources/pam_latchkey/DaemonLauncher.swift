import CPAM
import Glibc
import LoginControl
import Posix

/// What the module did, for the log.
struct StepReport {
    var succeeded: Bool
    var message: String

    static func success(_ message: String) -> StepReport { StepReport(succeeded: true, message: message) }
    static func failure(_ message: String) -> StepReport { StepReport(succeeded: false, message: message) }
}

/// Starts the user's `latchkeyd` from the session step (option `auto_start`) or runs it once to re-key the
/// login keychain file (password step, no daemon). The module runs as root: between fork and exec the child
/// does only what is safe in a child of a threaded process (reset signals, move descriptors, close the rest,
/// take the user's groups, gid and uid, exec). It becomes the user before `execve`, so that nothing of the
/// program, its dynamic loader or libc runs as root, and the daemon gets an allow-listed environment
/// (``DaemonEnvironment``). The daemon reads its one request on standard input, a socket pair the module made as
/// root (which is how the daemon knows it for a login's), so that nothing the module writes can raise
/// `SIGPIPE` in the host process.
struct DaemonLauncher {
    /// The executable (option `daemon=`).
    let path: String
    /// The environment the daemon gets (``DaemonEnvironment``).
    let environment: [String]
    /// The user the daemon runs as; its home is the daemon's working directory.
    let account: UserAccount

    /// What starting the daemon gave.
    enum Outcome {
        /// Its reply to the request.
        case replied(ControlReply)
        /// No reply: why, for the log.
        case failed(String)
    }

    /// Starts `latchkeyd --foreground --login` in a session of its own, detached from the host process (it
    /// is not the host's child), hands it `request` and returns its reply.
    func startDaemon(_ request: ControlRequest, deadline: Deadline) -> Outcome {
        run(["--foreground", "--login"], request, deadline: deadline, detach: true)
    }

    /// Runs `latchkeyd --change-login-password` with `request` and returns its reply.
    func changePassword(_ request: ControlRequest, deadline: Deadline) -> Outcome {
        run(["--change-login-password"], request, deadline: deadline, detach: false)
    }

    /// The outcome, for the log.
    func report(_ outcome: Outcome) -> StepReport {
        switch outcome {
        case .replied(let reply): StepReport(succeeded: reply.status == .ok, message: "\(path): \(reply.message)")
        case .failed(let reason): .failure(reason)
        }
    }

    private func run(_ arguments: [String], _ request: ControlRequest, deadline: Deadline, detach: Bool)
        -> Outcome
    {
        guard access(path, X_OK) == 0 else {
            return .failed("cannot start \(path): \(String(cString: strerror(errno)))")
        }
        guard let groupIDs = account.groupIDs() else { return .failed("cannot list the groups of \(account.name)") }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            return .failed("socketpair: \(String(cString: strerror(errno)))")
        }
        // Everything the child needs is made before the fork: after it, no allocation, no lock, no NSS lookup.
        let argv = CStringArray([path, "--user", String(account.uid)] + arguments)
        let envp = CStringArray(environment)
        let directory = CStringArray([account.home])
        let groups = UnsafeMutablePointer<gid_t>.allocate(capacity: max(1, groupIDs.count))
        groups.initialize(from: groupIDs, count: groupIDs.count)
        let (uid, gid, groupCount) = (account.uid, account.gid, groupIDs.count)
        let failure = Array("cannot execute \(path)".utf8)
        let dropFailure = Array("cannot become uid \(uid)".utf8)
        var defaultAction = sigaction()
        defaultAction.__sigaction_handler.sa_handler = SIG_DFL
        var noSignals = sigset_t()
        sigemptyset(&noSignals)

        let pid = fork()
        defer {
            if pid != 0 {
                for array in [argv, envp, directory] { array.release() }
                groups.deallocate()
            }
        }
        if pid == 0 {
            if detach {
                // The daemon is the grandchild: the host never gets it as a child to reap.
                let grandchild = fork()
                if grandchild != 0 { _exit(grandchild < 0 ? 1 : 0) }
                setsid()
            }
            // The host may ignore or block signals; the daemon starts with every default and none blocked.
            var number: Int32 = 1
            while number < 65 {
                sigaction(number, &defaultAction, nil)
                number += 1
            }
            sigprocmask(SIG_SETMASK, &noSignals, nil)
            dup2(ends[1], 0)
            dup2(ends[1], 1)
            let null = open("/dev/null", O_WRONLY)
            if null >= 0 { dup2(null, 2) }
            if latchkey_close_from(3) != 0 {
                var fd: Int32 = 3
                while fd < 65_536 {
                    close(fd)
                    fd += 1
                }
            }
            // The user's groups, gid and uid before exec (each checked, and root must not come back): the
            // loader, libc and the program run as the user only. Async-signal-safe calls, on values made above.
            guard setgroups(groupCount, groups) == 0, setgid(gid) == 0, setuid(uid) == 0, getuid() == uid,
                geteuid() == uid, getgid() == gid, getegid() == gid, uid == 0 || setuid(0) != 0
            else {
                _ = dropFailure.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
                _exit(126)
            }
            if let home = directory.pointers[0], chdir(home) == 0 {} else { _ = chdir("/") }
            umask(0o077)
            execve(path, argv.pointers, envp.pointers)
            _ = failure.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            _exit(127)
        }
        close(ends[1])
        defer { close(ends[0]) }
        guard pid > 0 else { return .failed("fork: \(String(cString: strerror(errno)))") }
        if detach { _ = try? Posix.waitpid(pid) }  // the intermediate child exits at once
        let reply: Result<ControlReply, ControlClientError>
        if let error = ControlFrames.send(request, on: ends[0], deadline: deadline) {
            reply = .failure(error)
        } else {
            reply = ControlFrames.receiveReply(on: ends[0], deadline: deadline)
        }
        if !detach { reap(pid, killFirst: !((try? reply.get()) != nil)) }
        switch reply {
        case .success(let reply):
            return .replied(reply)
        case .failure(.timedOut):
            return .failed("\(path) did not answer in time")
        case .failure(let error):
            return .failed("\(path) exited without an answer (\(error))")
        }
    }

    /// Collects the child's exit status, killing it first when it overran; waits 100 ms at most.
    private func reap(_ pid: pid_t, killFirst: Bool) {
        if killFirst { kill(pid, SIGKILL) }
        for _ in 0..<100 {
            // Reaped, or not ours to reap (ECHILD when the host ignores SIGCHLD): done.
            guard let result = try? Posix.waitpid(pid, options: WNOHANG), result.pid == 0 else { return }
            usleep(1_000)
        }
    }
}

/// A NULL-terminated array of C strings for `execve`, made before forking. The parent releases it; the
/// child never does (it executes or exits).
private struct CStringArray {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointers[index] = strdup(string) }
        pointers[strings.count] = nil
    }

    func release() {
        for index in 0..<count { free(pointers[index]) }
        pointers.deallocate()
    }
}
