import Glibc
import Posix

/// Where the control socket of a user's daemon is.
package enum ControlSocketPath {
    /// `<runtime directory>/latchkey/control`.
    package static func socket(inRuntimeDirectory runtime: String) -> String { runtime + "/latchkey/control" }
    /// `<runtime directory>/latchkey`, the directory holding the socket (mode 0700).
    package static func directory(inRuntimeDirectory runtime: String) -> String { runtime + "/latchkey" }
}

/// Why a request could not be made or answered.
package enum ControlClientError: Error, Equatable, Sendable {
    /// Nothing listens on the socket (or it does not exist).
    case noDaemon
    /// The socket or its directory is not what the user's daemon makes: a
    /// symlink, another owner, open to others, or a peer of another uid.
    case unsafe(String)
    /// No answer before the deadline.
    case timedOut
    /// The daemon (this pid) is stopped (`SIGSTOP`, or a debugger's stop): not waited for.
    case stopped(pid_t)
    /// A system call failed, or the reply was malformed.
    case failed(String)
}

/// The client side of the control socket, as pam_latchkey uses it.
package enum ControlClient {
    /// Sends `request` to the daemon of user `uid` at `path` and reads its
    /// reply, giving up at `deadline`. The socket must be a socket owned by
    /// `uid` (not a symlink) in a directory owned by `uid` closed to others,
    /// and the process listening must run as `uid`.
    package static func exchange(
        _ request: ControlRequest, socketPath path: String, owner uid: uid_t, deadline: Deadline
    ) -> Result<ControlReply, ControlClientError> {
        if let problem = unsafeReason(socketPath: path, owner: uid) {
            return problem == "missing" ? .failure(.noDaemon) : .failure(.unsafe(problem))
        }
        let fd: Int32
        switch connectRetrying(to: path, deadline: deadline) {
        case .success(let connected): fd = connected
        case .failure(let error): return .failure(error)
        }
        defer { close(fd) }
        // Nothing is sent before the peer is known to run as the user: fail closed when it cannot be told.
        guard let peer = peerCredentials(fd) else {
            return .failure(.unsafe("cannot tell which user the process on \(path) runs as"))
        }
        guard peer.uid == uid else {
            return .failure(.unsafe("the process on \(path) runs as uid \(peer.uid), not \(uid)"))
        }
        if let error = ControlFrames.send(request, on: fd, deadline: deadline) { return .failure(error) }
        if let error = awaitReply(on: fd, from: peer.pid, deadline: deadline) { return .failure(error) }
        return ControlFrames.receiveReply(on: fd, deadline: deadline)
    }

    /// A non-blocking socket connected to `path`. A full listen backlog (`EAGAIN`: the daemon has not
    /// accepted what waits yet, or a process of the user filled it) is tried again, after 5 ms and then
    /// every 20 ms, until `deadline`: a login waits for a busy daemon within its bound instead of failing.
    static func connectRetrying(to path: String, deadline: Deadline) -> Result<Int32, ControlClientError> {
        var pause: UInt32 = 5_000
        while true {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return .failure(.failed("socket: \(errorText())")) }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            let code = connectUnix(fd, path)
            if code == 0 { return .success(fd) }
            close(fd)
            switch code {
            case ENOENT, ECONNREFUSED:
                return .failure(.noDaemon)
            case EAGAIN where !deadline.hasPassed:
                usleep(min(pause, UInt32(max(deadline.remainingMilliseconds, 1)) * 1_000))
                pause = 20_000
            case EAGAIN:
                return .failure(.timedOut)
            default:
                return .failure(.failed("connect: \(String(cString: strerror(code)))"))
            }
        }
    }

    /// How long the process that listens may be seen stopped before the client gives up on it.
    static let stoppedPeerMilliseconds: Int64 = 300

    /// Waits until the reply starts to arrive on `fd`, giving up at `deadline`, or sooner when the process
    /// `pid` that listens on the socket stays stopped (`SIGSTOP`, a debugger's stop) for
    /// ``stoppedPeerMilliseconds``: a stopped daemon answers no one, and a login does not wait its whole budget
    /// on it. A daemon that runs, however slowly, gets the whole budget. (Under socket activation the listener
    /// is the service manager, which is never seen stopped: there the whole budget applies.)
    static func awaitReply(on fd: Int32, from pid: pid_t, deadline: Deadline) -> ControlClientError? {
        var stoppedSince: Int64?
        while true {
            if min(deadline, Deadline(millisecondsFromNow: 50)).waitUntil(fd, isReadyFor: Int16(POLLIN)) { return nil }
            if deadline.hasPassed { return .timedOut }
            guard ProcessStatus.isStopped(pid) else {
                stoppedSince = nil
                continue
            }
            let now = MonotonicClock.nanoseconds()
            if let since = stoppedSince, now - since >= stoppedPeerMilliseconds * 1_000_000 { return .stopped(pid) }
            if stoppedSince == nil { stoppedSince = now }
        }
    }

    /// Why the socket at `path` must not be used, "missing" if it does not exist, nil if it is fine.
    static func unsafeReason(socketPath path: String, owner uid: uid_t) -> String? {
        var info = stat()
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard lstat(directory, &info) == 0 else { return "missing" }
        if info.st_mode & S_IFMT != S_IFDIR { return "\(directory) is not a directory" }
        if info.st_uid != uid { return "\(directory) is owned by uid \(info.st_uid), not \(uid)" }
        if info.st_mode & 0o077 != 0 { return "\(directory) is open to other users" }
        guard lstat(path, &info) == 0 else { return "missing" }
        if info.st_mode & S_IFMT == S_IFLNK { return "\(path) is a symlink" }
        if info.st_mode & S_IFMT != S_IFSOCK { return "\(path) is not a socket" }
        if info.st_uid != uid { return "\(path) is owned by uid \(info.st_uid), not \(uid)" }
        return nil
    }
}

/// The uid of the process at the other end of a unix socket.
package func peerUID(_ fd: Int32) -> uid_t? {
    peerCredentials(fd)?.uid
}

/// The credentials the kernel recorded for the other end of a unix socket (`SO_PEERCRED`): those of the
/// process that listened (for a connection) or that made the pair (for a socket pair), as they were then.
func peerCredentials(_ fd: Int32) -> PeerCredentials? {
    var credentials = PeerCredentials()
    var length = socklen_t(MemoryLayout<PeerCredentials>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
    return credentials
}

/// Linux's `struct ucred`, which Glibc declares only under _GNU_SOURCE.
struct PeerCredentials {
    var pid: pid_t = 0
    var uid: uid_t = 0
    var gid: gid_t = 0
}

/// Whether `fd` is one end of a socket pair that root made: a unix stream socket with no address at either
/// end whose peer credentials say uid 0. For a pair the kernel records the credentials of the process that
/// made it, which no process of another uid can forge; a socket connected to a root service's listening
/// socket has that socket's address as its peer's and is not one; a pipe or a file is not a socket. This is
/// how latchkeyd tells pam_latchkey's request on its standard input (a login's) from a user process's.
package func isSocketPairMadeByRoot(_ fd: Int32) -> Bool {
    var type: Int32 = 0
    var typeLength = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &typeLength) == 0, type == Int32(SOCK_STREAM.rawValue) else {
        return false
    }
    for name in [getsockname, getpeername] {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(fd, $0, &length) }
        }
        // Unnamed: the family alone.
        guard got == 0, address.sun_family == sa_family_t(AF_UNIX),
            length == socklen_t(MemoryLayout<sa_family_t>.size)
        else { return false }
    }
    return peerCredentials(fd)?.uid == 0
}

func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer, deadline: Deadline) -> ControlClientError? {
    var sent = 0
    while sent < raw.count {
        var count = Result { () throws(SystemError) in
            try Posix.send(fd, raw.baseAddress.map { $0 + sent }, raw.count - sent)
        }
        if case .failure(let error) = count, error.errno == ENOTSOCK {
            // A pipe (a test, or a person, driving the daemon's standard input and output).
            count = Result { () throws(SystemError) in
                try Posix.write(fd, raw.baseAddress.map { $0 + sent }, raw.count - sent)
            }
        }
        switch count {
        case .success(let count): sent += count
        case .failure(let error) where error.errno == EAGAIN:
            guard deadline.waitUntil(fd, isReadyFor: Int16(POLLOUT)) else { return .timedOut }
        case .failure(let error): return .failed(error.description)
        }
    }
    return nil
}

/// One request or reply on a socket that is not the control socket: the standard input and output of a
/// daemon pam_latchkey starts (a socket pair, so no write raises `SIGPIPE`). The same frames as the socket.
package enum ControlFrames {
    /// Sends `request` on `fd`, giving up at `deadline`.
    package static func send(_ request: ControlRequest, on fd: Int32, deadline: Deadline) -> ControlClientError? {
        do {
            let bytes = try request.encoded()
            return bytes.withUnsafeBytes { writeAll(fd, $0, deadline: deadline) }
        } catch {
            return .failed("\(error)")
        }
    }

    /// Reads one request from `fd`, giving up at `deadline`.
    package static func receiveRequest(on fd: Int32, deadline: Deadline) -> Result<ControlRequest, ControlClientError> {
        // The body goes to secret memory: it holds passwords.
        let length: Int
        switch readFrameLength(fd, maximum: ControlRequest.maximumBodyLength, deadline: deadline, of: "request") {
        case .success(let value): length = value
        case .failure(let error): return .failure(error)
        }
        var body: SecretBytes
        do {
            body = try SecretBytes(zeros: length)
        } catch {
            return .failure(.failed("\(error)"))
        }
        if let failure = body.withUnsafeMutableBytes({ readExactly(fd, $0, deadline: deadline) }) {
            return .failure(failure)
        }
        do {
            return .success(
                try body.withUnsafeBytes { (raw) throws(ControlProtocolError) in try ControlRequest(body: raw) })
        } catch {
            return .failure(.failed(error.reason))
        }
    }

    /// Sends `reply` on `fd`, giving up at `deadline`.
    package static func send(_ reply: ControlReply, on fd: Int32, deadline: Deadline) -> ControlClientError? {
        reply.encoded().withUnsafeBytes { writeAll(fd, $0, deadline: deadline) }
    }

    /// Reads one reply from `fd`, giving up at `deadline`.
    package static func receiveReply(on fd: Int32, deadline: Deadline) -> Result<ControlReply, ControlClientError> {
        switch readFrame(fd, maximum: ControlReply.maximumBodyLength, deadline: deadline) {
        case .success(let body):
            do {
                return .success(try ControlReply(body: body))
            } catch {
                return .failure(.failed(error.reason))
            }
        case .failure(let error):
            return .failure(error)
        }
    }
}

/// Reads one length-prefixed frame of at most `maximum` body bytes.
func readFrame(_ fd: Int32, maximum: Int, deadline: Deadline) -> Result<[UInt8], ControlClientError> {
    let length: Int
    switch readFrameLength(fd, maximum: maximum, deadline: deadline, of: "reply") {
    case .success(let value): length = value
    case .failure(let error): return .failure(error)
    }
    var body = [UInt8](repeating: 0, count: length)
    if let error = body.withUnsafeMutableBytes({ readExactly(fd, $0, deadline: deadline) }) { return .failure(error) }
    return .success(body)
}

/// Reads a frame's length prefix: the body's length, refused above `maximum` (`what` names the frame).
private func readFrameLength(_ fd: Int32, maximum: Int, deadline: Deadline, of what: String)
    -> Result<Int, ControlClientError>
{
    var prefix = [UInt8](repeating: 0, count: 4)
    if let error = prefix.withUnsafeMutableBytes({ readExactly(fd, $0, deadline: deadline) }) {
        return .failure(error)
    }
    let length = Int(readLength(prefix))
    guard length <= maximum else { return .failure(.failed("a \(what) of \(length) bytes is too long")) }
    return .success(length)
}

private func readExactly(_ fd: Int32, _ raw: UnsafeMutableRawBufferPointer, deadline: Deadline) -> ControlClientError? {
    var got = 0
    while got < raw.count {
        let count = Result { () throws(SystemError) in
            try Posix.read(fd, raw.baseAddress.map { $0 + got }, raw.count - got)
        }
        switch count {
        case .success(0): return .failed("the daemon closed the connection")
        case .success(let count): got += count
        case .failure(let error) where error.errno == EAGAIN:
            guard deadline.waitUntil(fd, isReadyFor: Int16(POLLIN)) else { return .timedOut }
        case .failure(let error): return .failed(error.description)
        }
    }
    return nil
}

func errorText() -> String { String(cString: strerror(errno)) }
