import DBus
import Glibc
import Keychain1
import KeychainCore
import Posix
import Synchronization

/// Says what a blocking call to the session bus or the daemon (or a prompt the command runs) waits for once it
/// has waited a second, with the
/// bound it waits at most (docs/ssh.md, "latchkey never waits silently"). Quiet until a program names where
/// notices go: the latchkey command does, since its person reads standard error; an application using the
/// Security module stays quiet.
package enum DaemonWait {
    /// Where notices go; nil (the default) keeps them quiet.
    package static let notices = Mutex<Reporting?>(nil)

    /// What a program does with waits: says that one goes on, and ends the program when one outlasts its bound
    /// (a wait libdbus does not bound itself: connecting to a socket that accepts and never answers).
    package struct Reporting: Sendable {
        /// Says what is waited for (the words after "waiting for").
        package let waiting: @Sendable (String) -> Void
        /// Ends the program: the wait for what the text names outlasted its bound.
        package let gaveUp: @Sendable (String) -> Never
        /// Whether a prompt may be showing where notices go (a pinentry on the same terminal, which a notice
        /// would write into): the notice waits until it is not.
        package let promptShowing: @Sendable () -> Bool

        /// Reporting with these three.
        package init(
            waiting: @escaping @Sendable (String) -> Void, gaveUp: @escaping @Sendable (String) -> Never,
            promptShowing: @escaping @Sendable () -> Bool = { false }
        ) {
            self.waiting = waiting
            self.gaveUp = gaveUp
            self.promptShowing = promptShowing
        }
    }

    /// How often a notice held back by a showing prompt looks again.
    static let recheckMicroseconds: UInt32 = 100_000

    /// How long a wait goes unannounced.
    static let quietMicroseconds: UInt32 = 1_000_000

    /// How long past its bound a wait may go on before the program gives up on it.
    static let graceMicroseconds: UInt32 = 2_000_000

    /// The wait in progress (its ticket), 0 for none; a later wait's ticket replaces it.
    private static let current = Mutex<UInt64>(0)
    private static let issued = Atomic<UInt64>(0)

    /// Runs `body`, a wait for `what` (words after "waiting for") of at most `boundMilliseconds`, and says so
    /// when it has not returned within a second; past its bound (and a grace of 2 s), the program gives up. A
    /// detached thread watches; it does nothing once `body` returned.
    package static func announcing<T, E: Error>(
        _ what: String, bound boundMilliseconds: Int32, _ body: () throws(E) -> T
    )
        throws(E) -> T
    {
        guard let reporting = notices.withLock({ $0 }) else { return try body() }
        let ticket = issued.add(1, ordering: .relaxed).newValue
        current.withLock { $0 = ticket }
        defer { current.withLock { if $0 == ticket { $0 = 0 } } }
        let bound = "at most \(boundMilliseconds / 1_000) s"
        runDetached {
            let started = ContinuousClock.now
            let givesUpAt = started + .milliseconds(max(boundMilliseconds, 1_000)) + .microseconds(graceMicroseconds)
            // A prompt on the terminal the notice would go to tells the person what the wait is for, and a line
            // written while it shows lands in its field: once one has shown during this wait, no notice.
            var promptShown = false
            while current.withLock({ $0 == ticket }) && ContinuousClock.now < givesUpAt
                && ContinuousClock.now - started < .microseconds(quietMicroseconds)
            {
                usleep(recheckMicroseconds)
                promptShown = promptShown || reporting.promptShowing()
            }
            guard current.withLock({ $0 == ticket }) else { return }
            if !promptShown && !reporting.promptShowing() && ContinuousClock.now < givesUpAt {
                reporting.waiting("\(what) (\(bound))")
            }
            while current.withLock({ $0 == ticket }) && ContinuousClock.now < givesUpAt {
                usleep(recheckMicroseconds)
            }
            guard current.withLock({ $0 == ticket }) else { return }
            reporting.gaveUp("gave up waiting for \(what) after \(boundMilliseconds / 1_000) s")
        }
        return try body()
    }

    /// Whether `error` says no answer came in time: the call's own bound passed (libdbus's `NoReply`), or the
    /// bus gave up starting the daemon.
    static func timedOut(_ error: DBusError) -> Bool {
        error.name == DBusError.Name.noReply.rawValue || error.name == "org.freedesktop.DBus.Error.TimedOut"
            || error.name == "org.freedesktop.DBus.Error.Timeout"
    }

    /// How the error of a call that got no answer in time begins.
    static let noAnswerPrefix = "latchkeyd (\(Keychain1Interface.busName) on the session bus) did not answer"

    /// Whether `error` says the daemon or the bus did not answer in time (as opposed to: no bus, no daemon).
    static func isNoAnswer(_ error: KeychainError) -> Bool {
        error.reason.hasPrefix(noAnswerPrefix)
            || (error.reason.hasPrefix("the bus at ") && error.reason.contains("did not answer"))
    }

    /// The error a call that got no answer within `timeoutMilliseconds` ends with.
    static func noAnswer(_ member: String, _ timeoutMilliseconds: Int32) -> KeychainError {
        KeychainError(.notAvailable, "\(noAnswerPrefix) \(member) within \(timeoutMilliseconds / 1_000) s")
    }

    /// Calls the daemon answers at once, without asking anyone.
    private static let neverPrompting: Set<String> = [
        "Status", "List", "UpdateEnvironment", "Lock", "SetSettings", "OpenSession",
    ]

    /// What a call to the daemon waits for, in the notice's words.
    static func callNotice(_ member: String) -> String {
        neverPrompting.contains(member)
            ? "latchkeyd to answer \(member): it may be starting"
            : "latchkeyd to answer \(member): it may be starting, or waiting for a prompt to be answered"
    }
}
