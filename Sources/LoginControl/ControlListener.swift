import Glibc
import Posix

/// Why the daemon could not listen on the control socket.
package enum ControlListenerError: Error, Sendable {
    /// Another process (the pid, when it wrote it) holds the socket's lock file.
    case held(pid: Int32?)
    /// A system call failed.
    case failed(String)

    /// One line for the daemon's log.
    package var reason: String {
        switch self {
        case .held(let pid?): return "another latchkeyd (pid \(pid)) serves the control socket"
        case .held(nil): return "another latchkeyd serves the control socket"
        case .failed(let reason): return reason
        }
    }
}

/// The daemon side of the control socket: a listening unix socket in a 0700
/// directory, guarded by a lock file so that one daemon per user serves it,
/// and the connections in progress, each read without blocking and closed
/// after one request or two seconds.
///
/// Root's connections (pam_latchkey's) never wait behind the user's: every waiting connection is accepted at
/// each turn (so the listen backlog stays empty and a connect does not fail with `EAGAIN`), root's and the
/// user's are held in slots of their own (``maximumConnections`` each), a connection beyond its kind's slots
/// is refused at once, and root's requests are answered first.
package final class ControlListener {
    private let listening: Int32
    private let lockFile: Int32
    private let socketPath: String?
    private var connections: [Connection] = []
    private let ownUID = getuid()

    /// Most connections read at once from root, and apart from those, from the user's processes; a
    /// connection beyond them is refused.
    static let maximumConnections = 16
    /// Most connections accepted in one turn of the serving loop, so that a flood of them does not keep the
    /// loop from D-Bus; the rest are accepted at the next turn, which comes at once.
    static let acceptsPerTurn = 256
    /// The listen backlog asked for (the kernel caps it at `net.core.somaxconn`).
    static let listenBacklog = SOMAXCONN
    /// How long a client has to send its request.
    static let requestTimeoutMilliseconds = 2_000

    private struct Connection {
        let fd: Int32
        var buffer: [UInt8]
        let deadline: Deadline
        let uid: uid_t
        /// Set once its request was read: the connection waits for ``ControlListener/respond(_:_:)``.
        var responder: ControlResponder?
    }

    private var nextResponder: UInt64 = 0

    /// Listens at `<runtime>/latchkey/control`, creating the directory (0700)
    /// and the socket (0600), after taking `<runtime>/latchkey/lock`.
    package init(runtimeDirectory runtime: String) throws(ControlListenerError) {
        let directory = ControlSocketPath.directory(inRuntimeDirectory: runtime)
        let path = ControlSocketPath.socket(inRuntimeDirectory: runtime)
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw .failed("cannot create \(directory): \(errorText())")
        }
        var info = stat()
        guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else {
            throw .failed("\(directory) is not a directory of this user")
        }
        chmod(directory, 0o700)
        lockFile = open(directory + "/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lockFile >= 0 else { throw .failed("cannot open \(directory)/lock: \(errorText())") }
        guard flock(lockFile, LOCK_EX | LOCK_NB) == 0 else {
            let pid = Self.readPID(lockFile)
            close(lockFile)
            throw .held(pid: pid)
        }
        Self.writePID(lockFile)
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, var address = unixAddress(path) else {
            close(lockFile)
            throw .failed("cannot make a socket at \(path)")
        }
        let oldMask = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(oldMask)
        guard bound == 0, listen(fd, Self.listenBacklog) == 0 else {
            let reason = errorText()
            close(fd)
            close(lockFile)
            throw .failed("cannot listen on \(path): \(reason)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        listening = fd
        socketPath = path
    }

    /// Serves a socket that systemd passed (socket activation): descriptor 3
    /// when `LISTEN_PID` is this process and `LISTEN_FDS` is at least 1.
    package static func inherited() -> ControlListener? {
        guard let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), Int32(pid) == getpid(),
            let count = getenv("LISTEN_FDS").map({ String(cString: $0) }), let fds = Int(count), fds >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        _ = fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK)
        return ControlListener(inheritedDescriptor: 3)
    }

    private init(inheritedDescriptor fd: Int32) {
        listening = fd
        lockFile = -1
        socketPath = nil
    }

    deinit {
        for connection in connections { close(connection.fd) }
        close(listening)
        if let socketPath { unlink(socketPath) }
        if lockFile >= 0 { close(lockFile) }
    }

    /// What to `poll`: the listening socket (always: a connection is accepted, or refused, at once) and each
    /// open connection still being read.
    package var pollDescriptors: [pollfd] {
        connections.filter { $0.responder == nil }.map {
            pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0)
        } + [pollfd(fd: listening, events: Int16(POLLIN), revents: 0)]
    }

    /// Milliseconds until the nearest connection deadline, or nil with none open.
    package var nextTimeoutMilliseconds: Int32? {
        connections.filter { $0.responder == nil }.map(\.deadline.remainingMilliseconds).min()
    }

    /// Accepts waiting connections, reads what arrived, hands each complete request to `answer` (with the
    /// peer's uid and the responder to pass to ``respond(_:_:)``, now or later) and drops connections past
    /// their deadline. Only this user's processes and root are served.
    package func serve(_ answer: (ControlRequest, uid_t, ControlResponder) -> Void) {
        acceptWaiting()
        var index = 0
        var requests: [(ControlRequest, uid_t, ControlResponder)] = []
        while index < connections.count {
            guard connections[index].responder == nil else {
                index += 1
                continue
            }
            let finished = readAvailable(&connections[index])
            if case .request(let request) = finished {
                nextResponder += 1
                let responder = ControlResponder(number: nextResponder)
                connections[index].responder = responder
                wipeBytes(&connections[index].buffer)
                requests.append((request, connections[index].uid, responder))
                index += 1
            } else if case .closed = finished {
                drop(at: index)
            } else if connections[index].deadline.hasPassed {
                drop(at: index)
            } else {
                index += 1
            }
        }
        // Each request's passwords are wiped when the last holder (this loop, or the work the answer started)
        // lets go of them. Root's (logins') first.
        for (request, uid, responder) in requests.filter({ $0.1 == 0 }) + requests.filter({ $0.1 != 0 }) {
            answer(request, uid, responder)
        }
    }

    /// Sends the reply to the request `responder` stands for and closes its connection.
    package func respond(_ responder: ControlResponder, _ reply: ControlReply) {
        guard let index = connections.firstIndex(where: { $0.responder == responder }) else { return }
        send(connections[index].fd, reply.encoded())
        drop(at: index)
    }

    private func drop(at index: Int) {
        wipeBytes(&connections[index].buffer)
        close(connections[index].fd)
        connections.remove(at: index)
    }

    /// Accepts what waits in the backlog (up to ``acceptsPerTurn``): root's connections and the user's each
    /// into their own ``maximumConnections`` slots; beyond them, and from any other uid, refused at once.
    private func acceptWaiting() {
        for _ in 0..<Self.acceptsPerTurn {
            guard let fd = try? Posix.accept(listening) else { return }
            guard let uid = peerUID(fd), uid == ownUID || uid == 0 else {
                send(fd, ControlReply(.badRequest, "not allowed").encoded())
                close(fd)
                continue
            }
            guard connections.count(where: { ($0.uid == 0) == (uid == 0) }) < Self.maximumConnections else {
                send(
                    fd,
                    ControlReply(.failed, "busy: \(Self.maximumConnections) requests of this uid in progress").encoded()
                )
                close(fd)
                continue
            }
            var buffer: [UInt8] = []
            buffer.reserveCapacity(4 + ControlRequest.maximumBodyLength)
            connections.append(
                Connection(
                    fd: fd, buffer: buffer,
                    deadline: Deadline(millisecondsFromNow: Self.requestTimeoutMilliseconds), uid: uid))
        }
    }

    /// What reading from a connection gave.
    private enum ReadOutcome {
        /// More bytes are to come.
        case partial
        /// A whole request.
        case request(ControlRequest)
        /// Finished without a request (refused, malformed or closed).
        case closed
    }

    /// Reads what one connection sent.
    private func readAvailable(_ connection: inout Connection) -> ReadOutcome {
        var chunk = [UInt8](repeating: 0, count: 4096)
        defer { wipeBytes(&chunk) }
        while true {
            let wanted = expectedLength(connection.buffer) - connection.buffer.count
            if wanted <= 0 { break }
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { (raw) throws(SystemError) in
                    try Posix.recv(connection.fd, raw.baseAddress, min(wanted, raw.count))
                }
            } catch {
                return (error as? SystemError)?.errno == EAGAIN ? .partial : .closed
            }
            guard count > 0 else { return .closed }
            connection.buffer += chunk[0..<count]
        }
        let length = Int(readLength(connection.buffer.prefix(4)))
        guard length <= ControlRequest.maximumBodyLength else {
            send(connection.fd, ControlReply(.badRequest, "a request of \(length) bytes is too long").encoded())
            return .closed
        }
        do {
            return .request(try ControlRequest(body: connection.buffer.dropFirst(4)))
        } catch {
            send(connection.fd, ControlReply(.badRequest, error.reason).encoded())
            return .closed
        }
    }

    /// How many bytes the frame in `buffer` has in all, as far as is known.
    private func expectedLength(_ buffer: [UInt8]) -> Int {
        guard buffer.count >= 4 else { return 4 }
        let length = Int(readLength(buffer.prefix(4)))
        // A body too long to accept ends the reading at once; the caller refuses it.
        return length > ControlRequest.maximumBodyLength ? 4 : 4 + length
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) {
        _ = try? bytes.withUnsafeBytes { (raw) throws(SystemError) in try Posix.send(fd, raw.baseAddress, raw.count) }
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = pread(fd, &bytes, bytes.count, 0)
        guard count > 0 else { return nil }
        return Int32(String(decoding: bytes[0..<count], as: UTF8.self).split(separator: "\n").first ?? "")
    }

    private static func writePID(_ fd: Int32) {
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }
}

/// A request read from the control socket that waits for its reply: pass it to ``ControlListener/respond(_:_:)``.
package struct ControlResponder: Hashable, Sendable {
    let number: UInt64
}
