// Two small system pieces the daemon needs without Foundation: detached threads and wake-up pipes.

import Glibc
import KeychainCore

/// Runs `body` on a new detached POSIX thread (FoundationEssentials, which the
/// daemon uses to stay small, has no `Thread`).
func runDetached(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(
        &thread, nil,
        { raw in
            guard let raw else { return nil }
            let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
            box.body()
            return nil
        }, context)
    if started == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<Box>.fromOpaque(context).release()
        body()
    }
}

/// A non-blocking, close-on-exec pipe for waking a `poll`.
func makeWakePipe() throws(KeychainError) -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else {
        throw KeychainError(.internalComponent, "cannot create a pipe: \(String(cString: strerror(errno)))")
    }
    for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }
    return (fds[0], fds[1])
}
