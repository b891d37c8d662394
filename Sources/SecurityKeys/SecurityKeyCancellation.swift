import CFIDO2
import Synchronization

/// Stops an operation that waits for a touch, from another thread: the key is told to stop waiting (CTAPHID
/// CANCEL, libfido2's `fido_dev_cancel`) and the operation ends with ``SecurityKeyError/cancelled``. Without it, a
/// key keeps waiting (and blinking) until its own timeout after the person gave up on it.
package final class SecurityKeyCancellation: Sendable {
    /// The device the operation has open (while it runs), and whether ``cancel()`` was called.
    private let state = Mutex<OpenDevice>(OpenDevice())

    /// A cancellation not yet cancelled.
    package init() {}

    /// Tells the key of the running operation to stop waiting, and makes an operation that has not started yet
    /// end at once. Safe from any thread; once is enough.
    package func cancel() {
        state.withLock { device in
            guard !device.cancelled else { return }
            device.cancelled = true
            if let handle = device.handle { _ = fido_dev_cancel(handle) }
        }
    }

    /// Whether ``cancel()`` was called.
    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Records `handle` as the running operation's device: false when cancelled already (then nothing runs).
    func attach(_ handle: OpaquePointer) -> Bool {
        state.withLock { device in
            guard !device.cancelled else { return false }
            device.handle = handle
            return true
        }
    }

    /// The operation ended: its device is no longer told anything (it is closed next).
    func detach() {
        state.withLock { $0.handle = nil }
    }
}

/// The handle of the device an operation has open, held only under the cancellation's lock.
private struct OpenDevice: @unchecked Sendable {
    var handle: OpaquePointer?
    var cancelled = false
}
