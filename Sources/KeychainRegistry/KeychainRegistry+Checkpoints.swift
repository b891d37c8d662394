import KeychainCore
import KeychainStore
import Posix

/// Emptying the keychain files' write-ahead logs off the serving thread, retried until it completes.
extension KeychainRegistry {
    // MARK: Checkpoints

    /// Asks for the write-ahead log of `path` to be emptied, off the serving thread, retried until it
    /// completes (a reader holding an older snapshot makes it wait); then `completion` runs on the serving
    /// thread with whether it did (false once it was retried for ``checkpointTries``).
    func scheduleCheckpoint(_ path: String, then completion: ((Bool) -> Void)? = nil) {
        pendingCheckpoints[path] = (due: 0, tries: 0)
        checkpointRequests[path, default: 0] += 1
        if let completion { checkpointWaiters[path, default: []].append(completion) }
        _ = startDueCheckpoint()
    }

    /// Starts one due checkpoint on the worker; the milliseconds until the next is due.
    func startDueCheckpoint() -> Int64? {
        guard !pendingCheckpoints.isEmpty else { return nil }
        let now = MonotonicClock.nanoseconds() / 1_000_000
        guard !checkpointRunning else { return 250 }
        guard let (path, state) = pendingCheckpoints.min(by: { $0.value.due < $1.value.due }) else { return nil }
        guard state.due <= now else { return state.due - now }
        checkpointRunning = true
        let request = checkpointRequests[path, default: 0]
        offLoop(
            { Keychain.checkpoint(at: path, waitMilliseconds: 0) },
            then: { [self] completed in
                checkpointRunning = false
                if checkpointRequests[path, default: 0] != request {
                    // Asked for again while it ran: what was committed since may still be in the log.
                    pendingCheckpoints[path] = (due: 0, tries: 0)
                    _ = startDueCheckpoint()
                    return
                }
                if completed || state.tries >= Self.checkpointTries {
                    pendingCheckpoints[path] = nil
                    for waiter in checkpointWaiters.removeValue(forKey: path) ?? [] { waiter(completed) }
                } else {
                    // A reply waits at most ``checkpointReplyTries`` (the retries go on).
                    if state.tries >= Self.checkpointReplyTries {
                        for waiter in checkpointWaiters.removeValue(forKey: path) ?? [] { waiter(false) }
                    }
                    pendingCheckpoints[path] = (
                        due: MonotonicClock.nanoseconds() / 1_000_000 + 250, tries: state.tries + 1
                    )
                }
            })
        return 250
    }

    /// How often a checkpoint is retried (every 250 ms: ten minutes) before it is left to SQLite.
    static let checkpointTries = 2_400

    /// How long a reply waiting for a checkpoint waits (every 250 ms: twenty seconds, within a D-Bus call's
    /// default 25 s timeout).
    static let checkpointReplyTries = 80

    /// Whether checkpoints are still to be made.
    package var hasPendingCheckpoints: Bool { !pendingCheckpoints.isEmpty }
}
