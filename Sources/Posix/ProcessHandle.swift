import CLinux
import Glibc

/// One process, held by a pidfd: it tells whether that process has exited, and never mistakes a later
/// process given the same pid for it. Checking costs one `poll` (no `/proc` read).
package final class ProcessHandle: Sendable {
    private let descriptor: Int32

    /// A handle on process `pid`; nil when it cannot be had (the process is gone, or the kernel is older than
    /// Linux 5.3).
    package init?(pid: pid_t) {
        let descriptor = latchkey_pidfd_open(pid)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Whether the process has exited (a zombie not reaped yet counts as exited).
    package var hasExited: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&entry, 1, 0)
            if ready < 0 && errno == EINTR { continue }
            return ready != 0
        }
    }
}
