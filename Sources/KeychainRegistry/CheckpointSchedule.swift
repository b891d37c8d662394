/// The keychain files whose write-ahead log must still be emptied, when each is tried next, and what waits for
/// it: the checkpoint seam of ``KeychainRegistry``, which runs the checkpoints on its worker as this schedule
/// says. One checkpoint runs at a time; one that did not complete (a reader holding an older snapshot) is
/// tried again ``retryInterval`` later, on the registry's clock, for ``tries`` tries.
struct CheckpointSchedule {
    /// A checkpoint to run now.
    struct Checkpoint {
        /// The keychain file.
        let path: String
        /// The number of the latest request for the file when it started.
        let request: UInt64
        /// How many times it was tried before.
        let tries: Int
    }

    /// What the registry does next.
    enum Step {
        /// Nothing is pending.
        case idle
        /// Run this checkpoint on the worker, then report it with ``finish(_:emptied:now:)``.
        case start(Checkpoint)
        /// Come back in this many milliseconds (one is running, or the next is not due yet).
        case wait(milliseconds: Int64)
    }

    /// How a checkpoint that ran ended for the schedule.
    enum Ending {
        /// Asked for again while it ran: what was committed since may still be in the log, so it runs again now.
        case askedAgain
        /// Done with the file: the log was emptied (`emptied`), or the tries ran out; `waiters` are told which.
        case settled(emptied: Bool, waiters: [(Bool) -> Void])
        /// Tried again later; `waitersGivenUp` waited their longest (``replyTries``) and are told it did not.
        case retrying(waitersGivenUp: [(Bool) -> Void])
    }

    /// How often a checkpoint is retried (every 250 ms: ten minutes) before it is left to SQLite.
    static let tries = 2_400

    /// How long a reply waiting for a checkpoint waits (every 250 ms: twenty seconds, within a D-Bus call's
    /// default 25 s timeout).
    static let replyTries = 80

    /// The time between two tries of a file's checkpoint, and how often a running one is looked at.
    static let retryInterval: Duration = .milliseconds(250)

    /// Files to checkpoint, with when to try next (nanoseconds on the registry's clock) and the tries so far.
    private var pending: [String: (due: Int64, tries: Int)] = [:]
    /// Whether a checkpoint is on the worker now.
    private(set) var isRunning = false
    /// What waits for the log of a file to be emptied (a password change's reply).
    private var waiters: [String: [(Bool) -> Void]] = [:]
    /// How many checkpoints were asked for each path: a checkpoint that started before the latest request
    /// (a password change committed while it ran) does not answer that request's waiters.
    private var requests: [String: UInt64] = [:]

    /// Whether checkpoints are still to be made.
    var isEmpty: Bool { pending.isEmpty }

    /// Asks for the log of `path` to be emptied, at once; `waiter` is told whether it was.
    mutating func request(_ path: String, waiter: ((Bool) -> Void)?) {
        pending[path] = (due: .min, tries: 0)
        requests[path, default: 0] += 1
        if let waiter { waiters[path, default: []].append(waiter) }
    }

    /// What to do at `now`: start the checkpoint due first, or wait.
    mutating func next(now: Int64) -> Step {
        guard !pending.isEmpty else { return .idle }
        guard !isRunning else { return .wait(milliseconds: Self.retryMilliseconds) }
        guard let (path, state) = pending.min(by: { $0.value.due < $1.value.due }) else { return .idle }
        guard state.due <= now else {
            return .wait(milliseconds: RegistryClock.milliseconds(from: now, until: state.due))
        }
        isRunning = true
        return .start(Checkpoint(path: path, request: requests[path, default: 0], tries: state.tries))
    }

    /// Records that `checkpoint` ended at `now`, its log emptied or not.
    mutating func finish(_ checkpoint: Checkpoint, emptied: Bool, now: Int64) -> Ending {
        isRunning = false
        let path = checkpoint.path
        if requests[path, default: 0] != checkpoint.request {
            pending[path] = (due: .min, tries: 0)
            return .askedAgain
        }
        if emptied || checkpoint.tries >= Self.tries {
            pending[path] = nil
            return .settled(emptied: emptied, waiters: waiters.removeValue(forKey: path) ?? [])
        }
        // A reply waits at most ``replyTries`` (the retries go on).
        let givenUp = checkpoint.tries >= Self.replyTries ? waiters.removeValue(forKey: path) ?? [] : []
        pending[path] = (due: now + RegistryClock.nanoseconds(Self.retryInterval), tries: checkpoint.tries + 1)
        return .retrying(waitersGivenUp: givenUp)
    }

    private static let retryMilliseconds = RegistryClock.nanoseconds(retryInterval) / 1_000_000
}
