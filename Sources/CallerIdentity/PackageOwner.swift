import Glibc
import Posix

/// The Debian package a file belongs to, as `dpkg -S` tells it: what an access prompt shows next to an
/// application's path, so that the person asked can tell `/usr/bin/secret-tool` (libsecret-tools) from a
/// program of unknown origin.
package enum PackageOwner {
    /// The package (or packages, comma-separated) that installed `path`; nil when dpkg knows none, is not
    /// there, or takes longer than `timeoutMilliseconds` (it is then killed). Blocking: call it off the
    /// serving thread. `path` goes to dpkg as one argument, never through a shell.
    package static func package(
        of path: String, dpkg: String = "/usr/bin/dpkg", timeoutMilliseconds: Int32 = 2_000
    ) -> String? {
        if let found = lookUp(path, dpkg: dpkg, timeoutMilliseconds: timeoutMilliseconds) { return found }
        // A merged /usr: the kernel names /usr/bin/dash where dpkg's database lists /bin/dash.
        for merged in ["/usr/bin/", "/usr/sbin/", "/usr/lib/"] where path.hasPrefix(merged) {
            return lookUp(String(path.dropFirst(4)), dpkg: dpkg, timeoutMilliseconds: timeoutMilliseconds)
        }
        return nil
    }

    /// `dpkg -S path`, bounded.
    private static func lookUp(_ path: String, dpkg: String, timeoutMilliseconds: Int32) -> String? {
        guard path.hasPrefix("/"), !path.contains("\n"), access(dpkg, X_OK) == 0 else { return nil }
        var pipeEnds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pipeEnds) == 0
        else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&signals, signal) }
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let arguments = [strdup(dpkg), strdup("-S"), strdup(path), nil]
        let environment = [strdup("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), strdup("LC_ALL=C"), nil]
        defer { for pointer in arguments + environment { free(pointer) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, dpkg, &actions, &attributes, arguments, environment)
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        guard status == 0 else { return nil }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let started = MonotonicClock.nanoseconds() / 1_000_000
        var finished = false
        while output.count < 65_536 {
            let left = timeoutMilliseconds - Int32(clamping: MonotonicClock.nanoseconds() / 1_000_000 - started)
            guard left > 0 else { break }
            var descriptor = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, left)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { break }
            let count = read(pipeEnds[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                finished = count == 0
                break
            }
            output += buffer[0..<count]
        }
        if !finished { kill(child, SIGKILL) }
        var exitStatus: Int32 = 0
        while waitpid(child, &exitStatus, 0) < 0 && errno == EINTR {}
        guard finished, exitStatus == 0 else { return nil }
        return parse(String(decoding: output, as: UTF8.self), path: path)
    }

    /// The packages `dpkg -S` names for exactly `path` ("pkg[, pkg…]: path" lines; diversion lines skipped).
    static func parse(_ output: String, path: String) -> String? {
        for line in output.split(separator: "\n") where !line.hasPrefix("diversion ") {
            guard let separator = line.firstRange(of: ": "), line[separator.upperBound...] == path else { continue }
            let packages = line[..<separator.lowerBound]
            if !packages.isEmpty { return String(packages) }
        }
        return nil
    }
}
