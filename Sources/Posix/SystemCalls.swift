import CLinux
import Glibc

/// A failed system call: its name and `errno`.
package struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call that failed.
    package let call: String
    /// Its `errno`.
    package let errno: Int32

    /// The failure of `call` with `errno`.
    package init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// The failure of `call` with the thread's current `errno`.
    package static func last(_ call: String) -> SystemError { SystemError(call, errno: Glibc.errno) }

    /// `call: reason`.
    package var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// System calls that are retried when a signal interrupts them, and report failure with `errno`.
package enum Posix {
    /// Runs `call` again while it fails with `EINTR`; its result, or the error.
    private static func retrying<Result: BinaryInteger>(_ name: String, _ call: () -> Result) throws(SystemError)
        -> Result
    {
        while true {
            let result = call()
            if result >= 0 { return result }
            guard Glibc.errno == EINTR else { throw SystemError.last(name) }
        }
    }

    /// `read(2)`: the bytes read, 0 at end of file.
    package static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) throws(SystemError) -> Int {
        try retrying("read") { Glibc.read(fd, buffer, count) }
    }

    /// `write(2)`: the bytes written.
    package static func write(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) throws(SystemError) -> Int {
        try retrying("write") { Glibc.write(fd, buffer, count) }
    }

    /// Writes all of `bytes`, however many calls it takes.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) in
                    try write(fd, raw.baseAddress.map { $0 + written }, raw.count - written)
                }
            }
            guard try count.get() > 0 else { throw SystemError("write", errno: EIO) }
            written += (try? count.get()) ?? 0
        }
    }

    /// `recv(2)`: the bytes received, 0 when the peer closed.
    package static func recv(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ flags: Int32 = 0)
        throws(SystemError) -> Int
    {
        try retrying("recv") { Glibc.recv(fd, buffer, count, flags) }
    }

    /// `send(2)` without `SIGPIPE` (and with `flags`): the bytes sent.
    package static func send(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ flags: Int32 = 0)
        throws(SystemError) -> Int
    {
        try retrying("send") { Glibc.send(fd, buffer, count, Int32(MSG_NOSIGNAL) | flags) }
    }

    /// `poll(2)`: how many descriptors are ready. An interrupted wait returns 0 (nothing ready) rather than
    /// waiting again, so that callers re-check their deadlines.
    package static func poll(_ fds: inout [pollfd], timeoutMilliseconds: Int32) throws(SystemError) -> Int32 {
        let ready = Glibc.poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        if ready >= 0 { return ready }
        guard Glibc.errno == EINTR else { throw SystemError.last("poll") }
        for index in fds.indices { fds[index].revents = 0 }
        return 0
    }

    /// `accept4(2)`: the new descriptor close-on-exec and non-blocking from the start (a child another thread
    /// starts meanwhile never inherits it).
    package static func accept(_ fd: Int32) throws(SystemError) -> Int32 {
        try retrying("accept4") { latchkey_accept_cloexec(fd) }
    }

    /// Marks `fd` close-on-exec and non-blocking.
    package static func setCloseOnExecNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// `waitpid(2)`: the pid reaped (0 with `WNOHANG` when it has not ended), and its status.
    package static func waitpid(_ pid: pid_t, options: Int32 = 0) throws(SystemError) -> (pid: pid_t, status: Int32) {
        var status: Int32 = 0
        let reaped = try retrying("waitpid") { Glibc.waitpid(pid, &status, options) }
        return (reaped, status)
    }

    /// Sends descriptor `fd` over the Unix socket `socket` (`SCM_RIGHTS`, with one byte of data; a peer gone
    /// gives `EPIPE`, not `SIGPIPE`).
    package static func sendDescriptor(_ fd: Int32, over socket: Int32) throws(SystemError) {
        guard latchkey_send_descriptor(socket, fd) == 0 else { throw SystemError.last("sendmsg") }
    }

    /// Receives one descriptor (close-on-exec) sent with ``sendDescriptor(_:over:)`` on `socket`; nil at end of
    /// file (the peer closed). A message with no single descriptor is an error (`EBADMSG`).
    package static func receiveDescriptor(over socket: Int32) throws(SystemError) -> Int32? {
        let received = latchkey_receive_descriptor(socket)
        if received == -2 { return nil }
        guard received >= 0 else { throw SystemError.last("recvmsg") }
        return received
    }

    /// Closes every descriptor from `first` on (`close_range(2)`).
    package static func closeDescriptors(from first: Int32) throws(SystemError) {
        guard latchkey_close_descriptors_from(first) == 0 else { throw SystemError.last("close_range") }
    }
}
