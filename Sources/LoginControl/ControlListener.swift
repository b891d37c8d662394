import Glibc

/// Why the daemon could not listen on the control socket.
public enum ControlListenerError: Error, Sendable {
    /// Another process (the pid, when it wrote it) holds the socket's lock file.
    case held(pid: Int32?)
    /// A system call failed.
    case failed(String)

    /// One line for the daemon's log.
    public var reason: String {
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
public final class ControlListener {
    private let listening: Int32
    private let lockFile: Int32
    private let socketPath: String?
    private var connections: [Connection] = []
    private let ownUID = getuid()

    /// Most connections read at once; more wait in the listen backlog.
    static let maximumConnections = 16
    /// How long a client has to send its request.
    static let requestTimeoutMilliseconds = 2_000

    private struct Connection {
        let fd: Int32
        var buffer: [UInt8]
        let deadline: Deadline
        let uid: uid_t
    }

    /// Listens at `<runtime>/latchkey/control`, creating the directory (0700)
    /// and the socket (0600), after taking `<runtime>/latchkey/lock`.
    public init(runtimeDirectory runtime: String) throws(ControlListenerError) {
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
        guard bound == 0, listen(fd, 32) == 0 else {
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
    public static func inherited() -> ControlListener? {
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

    /// What to `poll`: the listening socket (while there is room) and each open connection.
    public var pollDescriptors: [pollfd] {
        var fds = connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        if connections.count < Self.maximumConnections {
            fds.append(pollfd(fd: listening, events: Int16(POLLIN), revents: 0))
        }
        return fds
    }

    /// Milliseconds until the nearest connection deadline, or nil with none open.
    public var nextTimeoutMilliseconds: Int32? {
        connections.map(\.deadline.remainingMilliseconds).min()
    }

    /// Accepts waiting connections, reads what arrived, answers each complete
    /// request with `answer` (given the request and the peer's uid) and drops
    /// connections past their deadline. Only this user's processes and root are served.
    public func serve(_ answer: (inout ControlRequest, uid_t) -> ControlReply) {
        acceptWaiting()
        var index = 0
        while index < connections.count {
            if readAvailable(&connections[index], answer) || connections[index].deadline.hasPassed {
                wipeBytes(&connections[index].buffer)
                close(connections[index].fd)
                connections.remove(at: index)
            } else {
                index += 1
            }
        }
    }

    private func acceptWaiting() {
        while connections.count < Self.maximumConnections {
            let fd = accept(listening, nil, nil)
            guard fd >= 0 else { return }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            guard let uid = peerUID(fd), uid == ownUID || uid == 0 else {
                send(fd, ControlReply(.badRequest, "not allowed").encoded())
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

    /// Reads from one connection; true when it is finished (answered, closed or broken).
    private func readAvailable(_ connection: inout Connection, _ answer: (inout ControlRequest, uid_t) -> ControlReply)
        -> Bool
    {
        var chunk = [UInt8](repeating: 0, count: 4096)
        defer { wipeBytes(&chunk) }
        while true {
            let wanted = expectedLength(connection.buffer) - connection.buffer.count
            if wanted <= 0 { break }
            let count = chunk.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, min(wanted, $0.count), 0) }
            if count > 0 {
                connection.buffer += chunk[0..<count]
            } else if count < 0, errno == EAGAIN || errno == EINTR {
                return false
            } else {
                return true
            }
        }
        let length = Int(readLength(connection.buffer.prefix(4)))
        guard length <= ControlRequest.maximumBodyLength else {
            send(connection.fd, ControlReply(.badRequest, "a request of \(length) bytes is too long").encoded())
            return true
        }
        do {
            var request = try ControlRequest(body: connection.buffer.dropFirst(4))
            defer { request.wipe() }
            send(connection.fd, answer(&request, connection.uid).encoded())
        } catch {
            send(connection.fd, ControlReply(.badRequest, error.reason).encoded())
        }
        return true
    }

    /// How many bytes the frame in `buffer` has in all, as far as is known.
    private func expectedLength(_ buffer: [UInt8]) -> Int {
        guard buffer.count >= 4 else { return 4 }
        let length = Int(readLength(buffer.prefix(4)))
        // A body too long to accept ends the reading at once; the caller refuses it.
        return length > ControlRequest.maximumBodyLength ? 4 : 4 + length
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
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
