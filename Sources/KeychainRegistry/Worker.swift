import Glibc
import KeychainCore
import Posix
import Synchronization

/// Where work done off the serving thread comes back to it: each finished job posts the number of the
/// continuation waiting for it (its result waits, typed, in a slot of its own), and a byte on a pipe wakes the
/// serving thread's `poll`.
package final class LoopInbox: Sendable {
    private let pending = Mutex<[UInt64]>([])
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

    func post(_ number: UInt64) {
        pending.withLock { $0.append(number) }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func take() -> [UInt64] {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
        return pending.withLock { numbers in
            defer { numbers.removeAll() }
            return numbers
        }
    }
}

/// Where the result of one job waits, typed, between the thread that made it and its continuation.
private final class ResultSlot<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)

    func put(_ result: Value) { value.withLock { $0 = result } }

    func take() -> Value? { value.withLock { $0.take() } }
}

/// Where a job handed off the serving thread runs.
package enum OffLoopPlace: Sendable {
    /// The worker thread, in turn with the key derivations and checkpoints.
    case worker
    /// The second worker thread, for jobs of a few milliseconds that must not queue behind a key derivation
    /// (identifying a D-Bus caller).
    case quickWorker
    /// A thread of its own (a prompt that waits for a person, an import that reads files others placed).
    case ownThread
}

/// Work handed off the serving thread and the continuations that wait for it there: the off-loop seam of
/// ``KeychainRegistry``. Each job's result keeps its type on the way back (no cast), and every continuation
/// runs on the serving thread, in ``deliverCompletions()``.
final class OffLoopJobs {
    /// Where results arrive; poll its descriptor.
    let inbox: LoopInbox
    private let worker: Worker
    private let quickWorker: Worker
    private var continuations: [UInt64: () -> Void] = [:]
    private var continuationNumber: UInt64 = 0

    init() throws(KeychainError) {
        inbox = try LoopInbox()
        worker = try Worker()
        quickWorker = try Worker()
    }

    /// Runs `work` at `place`, then `continuation` with its result on the serving thread (at the next
    /// ``deliverCompletions()``). The stack `work` used is wiped after it (``ProcessHardening/wipeDeadStack()``).
    func run<Result: Sendable>(
        at place: OffLoopPlace, _ work: @escaping @Sendable () -> Result,
        then continuation: @escaping (Result) -> Void
    ) {
        continuationNumber += 1
        let number = continuationNumber
        let slot = ResultSlot<Result>()
        continuations[number] = {
            guard let result = slot.take() else { return }
            continuation(result)
        }
        let inbox = inbox
        // Work done off the loop handles secrets (a password through the key derivation, a typed answer, a
        // decrypted keyring): once it has returned, the stack it used below this frame is overwritten, on a
        // standing worker before its next job, and on a prompt's thread before the thread ends (glibc keeps
        // the stacks of ended threads for reuse, bytes untouched).
        let job: @Sendable () -> Void = {
            slot.put(work())
            inbox.post(number)
            ProcessHardening.wipeDeadStack()
        }
        switch place {
        case .worker: worker.enqueue(job)
        case .quickWorker: quickWorker.enqueue(job)
        case .ownThread: runDetached(job)
        }
    }

    /// Runs, on the serving thread, the continuations of the jobs that finished.
    func deliverCompletions() {
        for number in inbox.take() {
            continuations.removeValue(forKey: number)?()
        }
    }

    /// Whether work handed off is still to come back.
    var hasWorkInProgress: Bool { !continuations.isEmpty }
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
