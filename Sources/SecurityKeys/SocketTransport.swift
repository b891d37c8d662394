import CFIDO2
import Glibc
import Posix
import Synchronization

/// The `unix:PATH` seam: libfido2's I/O and transport hooks (`fido_dev_set_io_functions`,
/// `fido_dev_set_transport_functions`) carrying whole CTAP commands over a stream socket instead of HID reports.
///
/// A request is one CTAPHID command byte (0x10 CBOR, 0x06 INIT, 0x11 CANCEL, …), a 4-byte big-endian length and
/// the payload; a reply is a 4-byte big-endian length and the payload. A reply longer than the buffer libfido2
/// gives for it (at most its 2048-byte message limit), cut short, or late past libfido2's read timeout fails the
/// read, and the connection is then dropped: nothing after a failed frame is trusted or read.
enum SocketTransport {
    /// How long a request may take to be written (the peer not reading).
    static let writeTimeoutMilliseconds = 5_000

    /// Installs the seam's hooks on `device` (before it is opened with the `unix:PATH` name).
    static func install(on device: OpaquePointer) -> Int32 {
        var io = fido_dev_io_t(open: open, close: close, read: unusedRead, write: unusedWrite)
        var transport = fido_dev_transport_t(rx: receive, tx: send)
        let status = fido_dev_set_io_functions(device, &io)
        guard status == FIDO_OK else { return status }
        return fido_dev_set_transport_functions(device, &transport)
    }

    /// Connects to the socket the name `unix:PATH` gives (libfido2 passes the name it was opened with).
    private static let open: @convention(c) (UnsafePointer<CChar>?) -> UnsafeMutableRawPointer? = { name in
        guard let name else { return nil }
        let device = SecurityKeyDevice(path: String(cString: name))
        guard let path = device.socketPath else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        guard connectUnix(fd, path) == 0 else {
            Glibc.close(fd)
            return nil
        }
        return Unmanaged.passRetained(SocketConnection(fd: fd)).toOpaque()
    }

    private static let close: @convention(c) (UnsafeMutableRawPointer?) -> Void = { handle in
        guard let handle else { return }
        Unmanaged<SocketConnection>.fromOpaque(handle).release()
    }

    /// HID report I/O, which the transport hooks replace: libfido2 wants them set all the same.
    private static let unusedRead:
        @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int, Int32)
            -> Int32 = { _, _, _, _ in -1 }
    private static let unusedWrite: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int) -> Int32 = {
        _, _, _ in -1
    }

    private static let receive:
        @convention(c) (OpaquePointer?, UInt8, UnsafeMutablePointer<UInt8>?, Int, Int32) -> Int32 = {
            device, _, buffer, capacity, milliseconds in
            guard let connection = connection(of: device), let buffer else { return -1 }
            return connection.receive(
                into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity),
                timeoutMilliseconds: milliseconds)
        }

    private static let send: @convention(c) (OpaquePointer?, UInt8, UnsafePointer<UInt8>?, Int) -> Int32 = {
        device, command, payload, count in
        guard let connection = connection(of: device) else { return -1 }
        return connection.send(command: command, payload: UnsafeRawBufferPointer(start: payload, count: count))
    }

    private static func connection(of device: OpaquePointer?) -> SocketConnection? {
        guard let device, let handle = fido_dev_io_handle(device) else { return nil }
        return Unmanaged<SocketConnection>.fromOpaque(handle).takeUnretainedValue()
    }
}

/// One connection to a `unix:` authenticator, for the time a device is open. A ``SecurityKeyCancellation`` sends
/// its CANCEL from another thread while the operation's thread waits for the reply: requests are written one at
/// a time, whole, and the failed flag is atomic.
final class SocketConnection {
    private let fd: Int32
    /// Set once a frame failed: the stream is then out of step and is not used again.
    private let failed = Atomic<Bool>(false)
    /// Held while a request is written, so that two requests never interleave on the stream.
    private let sending = Mutex<Void>(())

    init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        Glibc.close(fd)
    }

    /// Writes one request: the command byte, the payload's length and the payload. The bytes written, or -1.
    func send(command: UInt8, payload: UnsafeRawBufferPointer) -> Int32 {
        guard !failed.load(ordering: .acquiring), payload.count <= Int(UInt32.max), payload.count < Int(Int32.max)
        else { return fail() }
        let length = UInt32(payload.count)
        let header: [UInt8] = [
            command, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF),
        ]
        let deadline = Deadline(millisecondsFromNow: SocketTransport.writeTimeoutMilliseconds)
        let sent = sending.withLock { _ in
            header.withUnsafeBytes { writeAll($0, by: deadline) } && writeAll(payload, by: deadline)
        }
        return sent ? Int32(payload.count) : fail()
    }

    /// Reads one reply into `buffer`: its length, or -1 when it is longer than `buffer`, cut short, or not complete
    /// within `timeoutMilliseconds` (libfido2's time left for the operation; negative: no limit).
    func receive(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) -> Int32 {
        guard !failed.load(ordering: .acquiring) else { return -1 }
        let deadline = timeoutMilliseconds < 0 ? nil : Deadline(millisecondsFromNow: Int(timeoutMilliseconds))
        var header: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        let headerRead = withUnsafeMutableBytes(of: &header) { readAll(into: $0, by: deadline) }
        guard headerRead else { return fail() }
        let length = Int(header.0) << 24 | Int(header.1) << 16 | Int(header.2) << 8 | Int(header.3)
        guard length <= buffer.count, length < Int(Int32.max) else { return fail() }
        guard readAll(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]), by: deadline) else {
            return fail()
        }
        return Int32(length)
    }

    private func fail() -> Int32 {
        failed.store(true, ordering: .releasing)
        _ = shutdown(fd, Int32(SHUT_RDWR))
        return -1
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, by deadline: Deadline) -> Bool {
        var written = 0
        while written < bytes.count {
            guard let base = bytes.baseAddress else { return false }
            let count = Glibc.send(fd, base + written, bytes.count - written, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if count > 0 {
                written += count
            } else if count < 0 && (errno == EAGAIN || errno == EINTR) {
                guard deadline.waitUntil(fd, isReadyFor: Int16(POLLOUT)) else { return false }
            } else {
                return false
            }
        }
        return true
    }

    private func readAll(into buffer: UnsafeMutableRawBufferPointer, by deadline: Deadline?) -> Bool {
        var read = 0
        while read < buffer.count {
            guard let base = buffer.baseAddress else { return false }
            let count = recv(fd, base + read, buffer.count - read, Int32(MSG_DONTWAIT))
            if count > 0 {
                read += count
            } else if count < 0 && (errno == EAGAIN || errno == EINTR) {
                guard waitReadable(by: deadline) else { return false }
            } else {
                return false  // closed by the peer, or an error
            }
        }
        return true
    }

    private func waitReadable(by deadline: Deadline?) -> Bool {
        if let deadline { return deadline.waitUntil(fd, isReadyFor: Int16(POLLIN)) }
        var entries = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        return (try? Posix.poll(&entries, timeoutMilliseconds: -1)).map { $0 > 0 } ?? false
    }
}
