import Glibc
import Posix
import Synchronization

/// A way to end a running prompt from another thread: the owner of a prompt whose requester went away calls
/// ``cancel()``, and the pinentry exchange waiting with it ends at once, its child sent `SIGTERM`, then
/// `SIGKILL` after a short grace, and reaped before the blocked call returns (as if the user had cancelled).
///
/// Several exchanges in turn may use one cancellation (a prompt asked again after a wrong password); once
/// cancelled it stays cancelled, and an exchange started with it ends before showing anything.
package final class PinentryCancellation: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32
    private let cancelled = Atomic<Bool>(false)

    /// A cancellation not yet cancelled.
    package init() throws(PinentryError) {
        do {
            (readEnd, writeEnd) = try makeWakePipe()
        } catch {
            throw PinentryError(reason: "cannot create a pipe: \(error)")
        }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Ends the exchange waiting with this cancellation, and any started later. Safe from any thread.
    package func cancel() {
        guard !cancelled.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Whether ``cancel()`` was called.
    package var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }

    /// The descriptor that becomes readable once cancelled (never drained).
    var fileDescriptor: Int32 { readEnd }
}
