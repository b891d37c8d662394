import DBus
import DaemonLoop
import Glibc
import Posix
import Synchronization

/// latchkeyd's tries to reach the session bus and claim its names. Each try (connect, authentication, `Hello`,
/// `RequestName` and the rest of the claim) runs on a thread of its own; the serving loop only looks whether it
/// has ended, so a bus that never answers, or a listener that never accepts, never holds the control socket.
/// The loop stops waiting for a try after ``boundMilliseconds`` and says so; a try that has not ended by then is
/// left to end on its own (a blocking `connect` to a full listener may never), and no other starts meanwhile:
/// at most one is in flight. A try that took over a second is followed by the next ``pauseMilliseconds`` after
/// it began, never earlier than it ended.
struct BusAttempts {
    /// What one try gave.
    enum Outcome: Sendable {
        /// Connected, with the names claimed.
        case connected(DBusConnection)
        /// A bus, but latchkeyd must not serve it (the reason).
        case refused(String)
        /// No bus (why).
        case failed(String)
    }

    /// How long the loop waits for one try as a whole.
    static let boundMilliseconds: Int64 = 10_000
    /// The pause after a slow try, from its start.
    static let pauseMilliseconds: Int64 = 30_000

    private final class Slot: Sendable {
        let outcome = Mutex<Outcome?>(nil)
    }

    private let attempt: @Sendable () -> Outcome
    private var inFlight: Slot?
    private var startedAt: Int64 = 0
    private var tries = 0
    private var toldNoBus = false
    private var next = Deadline(millisecondsFromNow: 0)

    /// Tries with `attempt`, which runs on threads of its own.
    init(attempt: @escaping @Sendable () -> Outcome) {
        self.attempt = attempt
    }

    /// Asked by the serving loop: starts a try when one is due, hands over what an ended one gave.
    mutating func poll() -> ServiceLoop.BusAttempt {
        guard let slot = inFlight else {
            if next.hasPassed { start() }
            return .notYet
        }
        let elapsed = (MonotonicClock.nanoseconds() - startedAt) / 1_000_000
        guard let outcome = slot.outcome.withLock({ $0.take() }) else {
            if elapsed >= Self.boundMilliseconds {
                let address = DBusConnection.sessionBusAddress() ?? "?"
                tellNoBus("the bus at \(address) did not answer within \(Self.boundMilliseconds / 1_000) s")
            }
            return .notYet
        }
        inFlight = nil
        if elapsed > 1_000 { next = Deadline(millisecondsFromNow: Int(max(0, Self.pauseMilliseconds - elapsed))) }
        switch outcome {
        case .connected(let connection):
            if tries > 1 || toldNoBus {
                printError("latchkeyd: the session bus appeared: serving org.freedesktop.secrets on it")
            }
            return .connected(connection)
        case .refused(let reason): return .refused(reason)
        case .failed(let reason):
            tellNoBus(reason)
            return .notYet
        }
    }

    /// Waits (at most ``boundMilliseconds`` from the start of the try) for the try in flight, or starts one.
    mutating func settle() -> ServiceLoop.BusAttempt {
        while true {
            let result = poll()
            guard case .notYet = result, inFlight != nil,
                (MonotonicClock.nanoseconds() - startedAt) / 1_000_000 < Self.boundMilliseconds
            else { return result }
            usleep(20_000)
        }
    }

    private mutating func start() {
        let slot = Slot()
        inFlight = slot
        startedAt = MonotonicClock.nanoseconds()
        tries += 1
        let attempt = self.attempt
        runDetached {
            let outcome = attempt()
            slot.outcome.withLock { $0 = outcome }
        }
    }

    /// Says once, after the first try, that there is no bus yet.
    private mutating func tellNoBus(_ reason: String) {
        guard tries == 1, !toldNoBus else { return }
        toldNoBus = true
        printError(
            "latchkeyd: no session bus yet (\(reason)): serving the control socket; "
                + "org.freedesktop.secrets is claimed once a bus appears at $XDG_RUNTIME_DIR/bus")
    }
}
