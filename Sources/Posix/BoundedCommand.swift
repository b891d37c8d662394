import Glibc

/// A helper program run for its output, bounded in time and size: `dpkg -S` for an access prompt,
/// `systemctl --user show-environment` for where a prompt shows. Its standard input is `/dev/null`, its
/// standard error is dropped, it starts with default signal handling and none blocked (``Posix/spawn(_:_:environment:input:output:)``),
/// and it is never run through a shell. Blocking: call it off the serving thread.
package enum BoundedCommand {
    /// The standard output of `executable` run with `arguments` (not counting the program name) and
    /// exactly `environment`; nil when it cannot start, exits with another status than 0, writes more than
    /// `limit` bytes, or takes longer than `timeoutMilliseconds` (it is then killed). Reaped either way.
    package static func output(
        of executable: String, _ arguments: [String], environment: [String], timeoutMilliseconds: Int32 = 2_000,
        limit: Int = 65_536
    ) -> [UInt8]? {
        guard access(executable, X_OK) == 0 else { return nil }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0
        else { return nil }
        let child: pid_t
        do {
            child = try Posix.spawn(executable, arguments, environment: environment, input: nil, output: ends[1])
        } catch {
            close(ends[1])
            close(ends[0])
            return nil
        }
        close(ends[1])
        defer { close(ends[0]) }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let deadline = Deadline(millisecondsFromNow: Int(timeoutMilliseconds))
        var finished = false
        while output.count <= limit {
            let left = deadline.remainingMilliseconds
            guard left > 0 else { break }
            var descriptor = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, left)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { break }
            let count = read(ends[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                finished = count == 0
                break
            }
            output += buffer[0..<count]
        }
        // Its output ended; it still has until the deadline to exit (a helper that closed its output and went
        // on running is killed then, as one that overran).
        var exitStatus: Int32 = 0
        var exited = false
        while finished, !exited, !deadline.hasPassed {
            let reaped = waitpid(child, &exitStatus, WNOHANG)
            // ECHILD: reaped already (SIGCHLD ignored); its status is not known, its output is.
            if reaped == child || (reaped < 0 && errno == ECHILD) {
                exited = true
            } else {
                usleep(1_000)
            }
        }
        if !exited {
            kill(child, SIGKILL)
            while waitpid(child, &exitStatus, 0) < 0 && errno == EINTR {}
        }
        guard finished, exited, exitStatus == 0, output.count <= limit else { return nil }
        return output
    }
}
