import KeychainCore
import Posix

/// Work handed off the serving thread (the worker threads, a prompt's own thread) and its results' way back:
/// the registry's face over its ``OffLoopJobs``.
extension KeychainRegistry {
    /// Runs, on the serving thread, what finished elsewhere.
    package func deliverCompletions() {
        jobs.deliverCompletions()
    }

    /// Runs `work` on the worker thread (`onOwnThread`: on a thread of its own, for prompts that wait for a
    /// person; `quick`: on the second worker, for jobs of a few milliseconds), then `continuation` with its
    /// result, of its own type, on the serving thread. The stack `work` used is wiped after it
    /// (``ProcessHardening/wipeDeadStack()``).
    package func offLoop<Result: Sendable>(
        onOwnThread: Bool = false, quick: Bool = false, _ work: @escaping @Sendable () -> Result,
        then continuation: @escaping (Result) -> Void
    ) {
        jobs.run(at: onOwnThread ? .ownThread : quick ? .quickWorker : .worker, work, then: continuation)
    }

    /// Whether work handed off is still to come back.
    package var hasWorkInProgress: Bool { jobs.hasWorkInProgress }
}
