import Posix
import Synchronization

/// Where the registry reads "now": a monotonic clock, in nanoseconds from an arbitrary fixed point, that no
/// change of the wall clock moves. Lock timeouts, checkpoint retries and prompt deadlines are measured on it.
/// The daemon uses the system's (``system``); a ``ManualClock`` moves only when told to, as swift-nio's
/// `EmbeddedEventLoop.advanceTime(by:)`, so that tests see timers pass without sleeping.
package struct RegistryClock: Sendable {
    private let read: @Sendable () -> Int64

    /// A clock that reads its time (nanoseconds, never going back) from `read`.
    package init(nanoseconds read: @escaping @Sendable () -> Int64) {
        self.read = read
    }

    /// The system's monotonic clock (`CLOCK_MONOTONIC`).
    package static let system = RegistryClock { MonotonicClock.nanoseconds() }

    /// Now, in nanoseconds.
    package func nanoseconds() -> Int64 { read() }

    /// `duration` in nanoseconds (saturating).
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : whole.addingReportingOverflow(attoseconds / 1_000_000_000).0
    }

    /// The milliseconds from `now` until `deadline` (nanoseconds on this clock), rounded up, never negative: how
    /// long the serving loop may sleep before the deadline's timer is due.
    static func milliseconds(from now: Int64, until deadline: Int64) -> Int64 {
        guard deadline > now else { return 0 }
        let left = deadline - now
        return left / 1_000_000 + (left % 1_000_000 == 0 ? 0 : 1)
    }
}

/// A clock that stands still until ``advance(by:)`` moves it: tests give its ``clock`` to the registry
/// (``RegistryConfiguration/clock``) and see a lock timeout, a checkpoint retry or a prompt deadline come,
/// and not before, without waiting for it.
package final class ManualClock: Sendable {
    private let now: Mutex<Int64>

    /// A clock at `nanoseconds`.
    package init(nanoseconds: Int64 = 1_000_000_000) {
        now = Mutex(nanoseconds)
    }

    /// Moves the clock forward by `duration`.
    package func advance(by duration: Duration) {
        now.withLock { $0 += RegistryClock.nanoseconds(duration) }
    }

    /// The clock to give the registry.
    package var clock: RegistryClock {
        RegistryClock { [self] in now.withLock { $0 } }
    }
}
