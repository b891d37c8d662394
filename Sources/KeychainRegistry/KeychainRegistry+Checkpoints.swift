import KeychainCore
import KeychainStore
import Posix

/// Emptying the keychain files' write-ahead logs off the serving thread, retried until it completes, as the
/// registry's ``CheckpointSchedule`` says.
extension KeychainRegistry {
    // MARK: Checkpoints

    /// Asks for the write-ahead log of `path` to be emptied, off the serving thread, retried until it
    /// completes (a reader holding an older snapshot makes it wait); then `completion` runs on the serving
    /// thread with whether it did (false once it was retried for ``CheckpointSchedule/tries``).
    func scheduleCheckpoint(_ path: String, then completion: ((Bool) -> Void)? = nil) {
        checkpoints.request(path, waiter: completion)
        _ = startDueCheckpoint()
    }

    /// Starts one due checkpoint on the worker; the milliseconds until the next is due.
    func startDueCheckpoint() -> Int64? {
        let checkpoint: CheckpointSchedule.Checkpoint
        switch checkpoints.next(now: configuration.clock.nanoseconds()) {
        case .idle: return nil
        case .wait(let milliseconds): return milliseconds
        case .start(let due): checkpoint = due
        }
        let path = checkpoint.path
        offLoop(
            { Keychain.checkpoint(at: path, waitMilliseconds: 0) },
            then: { [self] emptied in
                switch checkpoints.finish(checkpoint, emptied: emptied, now: configuration.clock.nanoseconds()) {
                case .askedAgain:
                    _ = startDueCheckpoint()
                case .settled(let emptied, let waiters):
                    for waiter in waiters { waiter(emptied) }
                case .retrying(let givenUp):
                    for waiter in givenUp { waiter(false) }
                }
            })
        return RegistryClock.nanoseconds(CheckpointSchedule.retryInterval) / 1_000_000
    }

    /// Whether checkpoints are still to be made.
    package var hasPendingCheckpoints: Bool { !checkpoints.isEmpty }
}
