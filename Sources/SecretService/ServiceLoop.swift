import DBus
import FoundationEssentials
import Glibc
import KeychainCore

/// The serving loop: waits on the bus connection, on prompt results and on
/// termination signals, and hands each to the ``SecretService``.
public struct ServiceLoop {
    /// Why the loop ended.
    public enum Exit: Equatable, Sendable {
        /// SIGTERM or SIGINT.
        case signal(Int32)
        /// The bus connection closed.
        case busGone
        /// Another process took the bus name.
        case replaced
    }

    let service: SecretService
    /// Becomes readable with one byte, the signal number, when SIGTERM or SIGINT arrives.
    let signals: Int32

    /// Blocks SIGTERM and SIGINT in the calling thread (and every thread it
    /// starts later) so that they arrive on a descriptor instead. Call it
    /// first thing in `main`, before other threads exist.
    public static func blockTerminationSignals() -> sigset_t {
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        sigaddset(&mask, SIGINT)
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        return mask
    }

    /// A loop for `service`; `mask` is what ``blockTerminationSignals()``
    /// returned. A thread waits for those signals and passes them on through a pipe.
    public init(service: SecretService, signalMask mask: sigset_t) throws(KeychainError) {
        self.service = service
        let (readEnd, writeEnd) = try makeWakePipe()
        self.signals = readEnd
        let waitMask = SignalMask(mask)
        runDetached {
            var mask = waitMask.mask
            var number: Int32 = 0
            while sigwait(&mask, &number) == 0 {
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(writeEnd, &byte, 1)
            }
        }
    }

    /// Serves until a termination signal or the end of the bus connection.
    public func run() -> Exit {
        let connection = service.connection
        while true {
            while let message = connection.popMessage() {
                service.handle(message)
            }
            service.deliverPromptResults()
            if service.hasLostName { return .replaced }
            guard connection.isConnected, let busFD = connection.fileDescriptor else { return .busGone }
            var fds = [
                pollfd(fd: busFD, events: Int16(POLLIN | (connection.hasOutgoingMessages ? POLLOUT : 0)), revents: 0),
                pollfd(fd: service.completions.fileDescriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, nfds_t(fds.count), 5_000)
            if ready < 0, errno != EINTR { return .busGone }
            if fds[2].revents & Int16(POLLIN) != 0 {
                var byte: UInt8 = 0
                let count = read(signals, &byte, 1)
                return .signal(count > 0 ? Int32(byte) : SIGTERM)
            }
            if fds[0].revents != 0 || connection.hasOutgoingMessages {
                if !connection.readWrite(timeoutMilliseconds: 0) { return .busGone }
            }
        }
    }

    /// Sends what is queued and locks every keychain (wiping the keys).
    public func shutDown() {
        service.connection.flush()
        for collection in service.collections { collection.keychain.lock() }
    }
}

/// A signal set that may cross to the signal-waiting thread.
private struct SignalMask: @unchecked Sendable {
    let mask: sigset_t
    init(_ mask: sigset_t) { self.mask = mask }
}
