import Foundation
import Glibc
import LoginControl
import Posix
import Testing

/// pam_latchkey's client when the daemon's listen backlog is full (issue 31, item 6): it tries the connect
/// again within its deadline instead of failing at once with `EAGAIN`.
@Suite struct FullBacklogTests {
    /// A listening socket at `<directory>/latchkey/control` (the directory 0700, as the daemon makes it) whose
    /// backlog is full: the connections filling it are the second value, the path the third.
    private static func fullListener(_ name: String) -> (
        listening: Int32, filling: [Int32], path: String, directory: String
    ) {
        let directory = "/tmp/latchkey-backlog-\(getpid())-\(name)"
        #expect(mkdir(directory, 0o700) == 0)
        let runtime = ControlSocketPath.directory(inRuntimeDirectory: directory)
        #expect(mkdir(runtime, 0o700) == 0)
        let path = ControlSocketPath.socket(inRuntimeDirectory: directory)
        let listening = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = UnixSocketAddress(path)
        #expect(address.apply(listening, bind) == 0 && listen(listening, 0) == 0)
        var filling: [Int32] = []
        while filling.count < 64 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            let connected = address.apply(fd, connect)
            if connected != 0 {
                #expect(errno == EAGAIN)
                close(fd)
                break
            }
            filling.append(fd)
        }
        #expect(!filling.isEmpty && filling.count < 64)
        return (listening, filling, path, directory)
    }

    /// Closes what `fullListener` opened and removes its directory.
    private static func release(_ made: (listening: Int32, filling: [Int32], path: String, directory: String)) {
        for fd in made.filling { close(fd) }
        close(made.listening)
        unlink(made.path)
        rmdir(ControlSocketPath.directory(inRuntimeDirectory: made.directory))
        rmdir(made.directory)
    }

    @Test func aConnectToAFullBacklogWaitsUntilTheDaemonAccepts() {
        let made = Self.fullListener("accepted")
        defer { Self.release(made) }
        let (listening, path) = (made.listening, made.path)
        // The "daemon" accepts 300 ms later, on a thread of its own: the connections that filled the backlog
        // send nothing and are closed; the client's request is answered.
        let daemon = AcceptingDaemon()
        Thread.detachNewThread {
            usleep(300_000)
            let deadline = Deadline(millisecondsFromNow: 3_000)
            while !deadline.hasPassed {
                let fd = accept(listening, nil, nil)
                guard fd >= 0 else { break }
                defer { close(fd) }
                guard Deadline(millisecondsFromNow: 20).waitUntil(fd, isReadyFor: Int16(POLLIN)) else { continue }
                if case .success(let request) = ControlFrames.receiveRequest(on: fd, deadline: deadline) {
                    _ = ControlFrames.send(ControlReply(.ok, "served"), on: fd, deadline: deadline)
                    daemon.request = request
                }
                break
            }
            daemon.done.signal()
        }
        let started = MonotonicClock.nanoseconds()
        let result = ControlClient.exchange(
            .status, socketPath: path, owner: getuid(), deadline: Deadline(millisecondsFromNow: 2_000))
        let waited = (MonotonicClock.nanoseconds() - started) / 1_000_000
        #expect(result == .success(ControlReply(.ok, "served")))
        #expect(daemon.done.wait(timeout: .now() + 5) == .success)
        #expect(daemon.request == .status)
        #expect(waited >= 250 && waited < 2_000, "waited \(waited) ms")
    }

    @Test func aBacklogThatStaysFullTimesOutAtTheDeadline() {
        let made = Self.fullListener("full")
        defer { Self.release(made) }
        let path = made.path
        let started = MonotonicClock.nanoseconds()
        let result = ControlClient.exchange(
            .status, socketPath: path, owner: getuid(), deadline: Deadline(millisecondsFromNow: 300))
        let waited = (MonotonicClock.nanoseconds() - started) / 1_000_000
        #expect(result == .failure(.timedOut))
        #expect(waited >= 280 && waited < 1_000, "waited \(waited) ms")
    }
}

/// What the accepting thread of ``FullBacklogTests`` got; read after `done` is signalled.
private final class AcceptingDaemon: @unchecked Sendable {
    var request: ControlRequest?
    let done = DispatchSemaphore(value: 0)
}
