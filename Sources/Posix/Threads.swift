import CLinux
import Glibc

// Detached threads and wake-up pipes, without Foundation (FoundationEssentials has no `Thread`).

/// Runs `body` on a new detached POSIX thread; on the calling thread if none can be made.
package func runDetached(_ body: @escaping @Sendable () -> Void) {
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

/// Makes a pipe close-on-exec from the start (no child started by another thread meanwhile inherits it), and
/// non-blocking when asked: false on failure, with `errno`.
package func makeCloseOnExecPipe(_ fds: inout [Int32], nonBlocking: Bool = false) -> Bool {
    latchkey_pipe(&fds, O_CLOEXEC | (nonBlocking ? O_NONBLOCK : 0)) == 0
}

/// A non-blocking, close-on-exec pipe for waking a `poll`.
package func makeWakePipe() throws(SystemError) -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    guard makeCloseOnExecPipe(&fds, nonBlocking: true) else { throw SystemError.last("pipe2") }
    return (fds[0], fds[1])
}
