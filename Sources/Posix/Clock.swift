import Glibc

/// The monotonic clock, which no change of the wall clock moves.
package enum MonotonicClock {
    /// Nanoseconds since an arbitrary fixed point.
    package static func nanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Whole seconds since an arbitrary fixed point.
    package static func seconds() -> Int64 { nanoseconds() / 1_000_000_000 }
}

/// A point in time on the monotonic clock, for bounded waits.
package struct Deadline: Sendable, Comparable {
    /// The point, in ``MonotonicClock/nanoseconds()``.
    package let nanoseconds: Int64

    /// `milliseconds` from now.
    package init(millisecondsFromNow milliseconds: Int) {
        nanoseconds = MonotonicClock.nanoseconds() + Int64(milliseconds) * 1_000_000
    }

    /// Milliseconds left, never negative.
    package var remainingMilliseconds: Int32 {
        let left = (nanoseconds - MonotonicClock.nanoseconds()) / 1_000_000
        return Int32(clamping: max(0, left))
    }

    /// Whether the deadline has passed.
    package var hasPassed: Bool { nanoseconds <= MonotonicClock.nanoseconds() }

    package static func < (lhs: Deadline, rhs: Deadline) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}

extension Deadline {
    /// Waits until `fd` is ready for `events` (`POLLIN`, `POLLOUT`): false if the deadline passes first.
    package func waitUntil(_ fd: Int32, isReadyFor events: Int16) -> Bool {
        while true {
            let left = remainingMilliseconds
            guard left > 0 else { return false }
            var entries = [pollfd(fd: fd, events: events, revents: 0)]
            guard let ready = try? Posix.poll(&entries, timeoutMilliseconds: left) else { return false }
            if ready > 0 { return true }
        }
    }
}
