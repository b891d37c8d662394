import Glibc
import KeychainCore
import Posix
import Synchronization

/// Where work done off the serving thread comes back to it: each result is posted with the number of the
/// continuation waiting for it, and a byte on a pipe wakes the serving thread's `poll`.
package final class LoopInbox: Sendable {
    private let pending = Mutex<[(number: UInt64, result: any Sendable)]>([])
    private let readEnd: Int32
    private let writeEnd: Int32

    init() throws(KeychainError) {
        do {
            (readEnd, writeEnd) = try makeWakePipe()
        } catch {
            throw KeychainError(.internalComponent, "cannot create a pipe: \(error)")
        }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// The descriptor that becomes readable when a result is waiting.
    package var fileDescriptor: Int32 { readEnd }

    func post(_ number: UInt64, _ result: any Sendable) {
        pending.withLock { $0.append((number, result)) }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func take() -> [(number: UInt64, result: any Sendable)] {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
        return pending.withLock { results in
            defer { results.removeAll() }
            return results
        }
    }
}

/// One thread that runs slow jobs (key derivation, checkpoints) in the order they were given, so that the
/// serving thread never waits for them. The thread ends when the worker is released.
final class Worker: Sendable {
    /// The jobs not yet started, shared with the thread.
    private final class Queue: Sendable {
        let jobs = Mutex<[@Sendable () -> Void]>([])
        let wakeRead: Int32
        init(wakeRead: Int32) { self.wakeRead = wakeRead }
        deinit { close(wakeRead) }

        func next() -> (@Sendable () -> Void)? {
            jobs.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        }
    }

    private let queue: Queue
    private let wakeWrite: Int32

    init() throws(KeychainError) {
        var fds: [Int32] = [-1, -1]
        guard makeCloseOnExecPipe(&fds) else {
            throw KeychainError(.internalComponent, "cannot create the worker's pipe")
        }
        queue = Queue(wakeRead: fds[0])
        wakeWrite = fds[1]
        let queue = queue
        runDetached {
            // A byte per job; end of file once the worker is released.
            while WorkerWake.wait(queue.wakeRead) {
                while let job = queue.next() { job() }
            }
        }
    }

    deinit { close(wakeWrite) }

    /// Queues `job` behind the others.
    func enqueue(_ job: @escaping @Sendable () -> Void) {
        queue.jobs.withLock { $0.append(job) }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }
}

/// The worker thread's wait for its next job.
private enum WorkerWake {
    /// Blocks until a byte arrives on `fd`: false at end of file (the worker was released).
    static func wait(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return (try? Posix.read(fd, &byte, 1)) == 1
    }
}
