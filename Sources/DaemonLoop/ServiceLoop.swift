import DBus
import FoundationEssentials
import Glibc
import KeychainCore
import KeychainRegistry
import LoginControl
import Posix
import SecretService

/// The serving loop: waits on the bus connection, on the control socket, on
/// prompt results, on logind and on termination signals, and hands each to the
/// daemon's bus face (`SecretServiceDaemon`) or the control face. Without a bus
/// yet, it asks for one four times a second.
package struct ServiceLoop {
    /// Why the loop ended.
    package enum Exit: Equatable, Sendable {
        /// SIGTERM or SIGINT.
        case signal(Int32)
        /// The bus connection closed.
        case busGone
        /// Another process took the bus name.
        case replaced
        /// A bus appeared but serving on it was refused (the reason).
        case busRefused(String)
    }

    /// What an attempt to reach the bus gave.
    package enum BusAttempt {
        /// Connected, with the name claimed.
        case connected(DBusConnection)
        /// No bus yet; try again later.
        case notYet
        /// A bus, but the daemon must not serve it (the reason).
        case refused(String)
    }

    /// Answers one control socket request from a peer running as the uid given; the reply is given on the
    /// serving thread, at once or when the work it needs is done.
    package typealias ControlAnswer = (ControlRequest, uid_t, @escaping (ControlReply) -> Void) -> Void

    let daemon: SecretServiceDaemon
    /// The bus, once there is one, and the screen saver followed on it.
    private let bus: SessionBus
    let control: ControlListener?
    let answerControl: ControlAnswer
    let logindWatch: LogindWatch?
    /// Becomes readable with one byte, the signal number, when SIGTERM or SIGINT arrives.
    let signals: Int32
    static let busRetryMilliseconds: Int32 = 250

    /// Blocks SIGTERM and SIGINT in the calling thread (and every thread it
    /// starts later) so that they arrive on a descriptor instead. Call it
    /// first thing in `main`, before other threads exist.
    package static func blockTerminationSignals() -> sigset_t {
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        sigaddset(&mask, SIGINT)
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        return mask
    }

    /// A loop for `daemon` on `connection` (nil: none yet), the control socket `control` whose requests
    /// `answerControl` answers, and logind's sleep and session-lock announcements through `logindWatch`;
    /// `mask` is what ``blockTerminationSignals()`` returned. A thread waits for those signals and passes
    /// them on through a pipe.
    package init(
        daemon: SecretServiceDaemon, connection: DBusConnection?, control: ControlListener?,
        logindWatch: LogindWatch? = nil, signalMask mask: sigset_t, answerControl: @escaping ControlAnswer
    ) throws(KeychainError) {
        self.daemon = daemon
        self.bus = SessionBus(daemon: daemon)
        if let connection { bus.attach(connection) }
        self.control = control
        self.answerControl = answerControl
        self.logindWatch = logindWatch
        let readEnd: Int32
        let writeEnd: Int32
        do {
            (readEnd, writeEnd) = try makeWakePipe()
        } catch {
            throw KeychainError(.internalComponent, "cannot create a pipe: \(error)")
        }
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
    /// While there is no bus, `connectBus` is asked for one.
    package func run(connectBus: () -> BusAttempt) -> Exit {
        // When libdbus's buffers are next scrubbed: a moment after the last message read or sent, off the
        // path of the requests themselves.
        var scrubDue: Deadline?
        func deliver(_ messages: [DBusMessage]) {
            if !messages.isEmpty { scrubDue = Deadline(millisecondsFromNow: Self.scrubDelayMilliseconds) }
            send(messages)
        }
        while true {
            if bus.connection == nil {
                switch connectBus() {
                case .connected(let connection):
                    bus.attach(connection)
                case .refused(let reason): return .busRefused(reason)
                case .notYet: break
                }
            }
            let connection = bus.connection
            while let message = connection?.popMessage() {
                if message.isReadBufferScrub { continue }
                scrubDue = Deadline(millisecondsFromNow: Self.scrubDelayMilliseconds)
                send(bus.receive(message))
            }
            deliver(daemon.deliverCompletions())
            if daemon.hasLostName { return .replaced }
            // A lock's or unlock's item signals, a batch at a time once what was sent before is written: the
            // calls read meanwhile were answered above, between two batches (docs/robustness.md).
            let announcing = daemon.hasItemAnnouncements
            if announcing, connection?.hasOutgoingMessages != true { deliver(daemon.nextItemAnnouncements()) }
            let (timerMessages, nextTimer) = daemon.runTimers()
            deliver(timerMessages)
            var fds = [
                pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
                pollfd(fd: daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            var timeout: Int32 = 5_000
            if let connection {
                guard connection.isConnected, let busFD = connection.fileDescriptor else { return .busGone }
                let events = POLLIN | (connection.hasOutgoingMessages ? POLLOUT : 0)
                fds.append(pollfd(fd: busFD, events: Int16(events), revents: 0))
            } else {
                timeout = Self.busRetryMilliseconds
            }
            if let nextTimer { timeout = min(timeout, nextTimer) }
            // More batches to send: poll only for what came meanwhile (a connection with messages still to
            // write polls for POLLOUT instead).
            if announcing, daemon.hasItemAnnouncements, connection?.hasOutgoingMessages != true { timeout = 0 }
            let logindIndex = fds.count
            if let logindFD = logindWatch?.fileDescriptor {
                let events = POLLIN | (logindWatch?.hasOutgoingMessages == true ? POLLOUT : 0)
                fds.append(pollfd(fd: logindFD, events: Int16(events), revents: 0))
            }
            let controlStart = fds.count
            if let control {
                fds += control.pollDescriptors
                timeout = min(timeout, control.nextTimeoutMilliseconds ?? timeout)
            }
            // Once the daemon has been quiet for a moment, the messages it read and sent are released: scrub
            // libdbus's cache of released messages and its read buffer, and the stack the handlers used
            // (docs/threat-model.md, "In memory").
            if let due = scrubDue {
                if due.hasPassed {
                    DBusMessage.scrubReleasedMessages()
                    connection?.scrubReadBuffer()
                    ProcessHardening.wipeDeadStack()
                    ProcessHardening.returnFreedMemory()
                    scrubDue = nil
                } else {
                    timeout = min(timeout, max(due.remainingMilliseconds, 1))
                }
            }
            let ready: Int32
            do {
                ready = try Posix.poll(&fds, timeoutMilliseconds: timeout)
            } catch {
                return .busGone
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var byte: UInt8 = 0
                let count = read(signals, &byte, 1)
                return .signal(count > 0 ? Int32(byte) : SIGTERM)
            }
            // Before any client is served: after a resume the announcement may only be read now.
            if let logindWatch, logindIndex < controlStart, fds[logindIndex].revents != 0 {
                let announced = logindWatch.readAnnouncements()
                if announced.contains(.sleep) { deliver(daemon.lockForSleep()) }
                if announced.contains(.hibernation) { deliver(daemon.forgetClassKeysForHibernation()) }
                if announced.contains(.screenLock) { deliver(daemon.lockForScreenLock()) }
            }
            if let connection, fds[2].revents != 0 || connection.hasOutgoingMessages {
                if !connection.readWrite(timeoutMilliseconds: 0) { return .busGone }
            }
            if let control, ready == 0 || fds[controlStart...].contains(where: { $0.revents != 0 }) {
                control.serve { request, uid, responder in
                    answerControl(request, uid) { reply in control.respond(responder, reply) }
                }
                deliver(daemon.deliverCompletions())
            }
        }
    }

    /// How long after the last message the daemon read the buffers that held it are scrubbed.
    static let scrubDelayMilliseconds = 50

    private func send(_ messages: [DBusMessage]) {
        bus.send(messages)
    }

    /// Sends what is queued and locks every keychain (wiping the keys).
    package func shutDown() {
        bus.connection?.flush()
        daemon.registry.shutDown()
    }
}

/// A signal set that may cross to the signal-waiting thread.
private struct SignalMask: @unchecked Sendable {
    let mask: sigset_t
    init(_ mask: sigset_t) { self.mask = mask }
}
