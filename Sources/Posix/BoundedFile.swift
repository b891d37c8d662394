import Glibc

/// Reads the first bytes of a small file, as those of `/proc` are, with plain system calls (no Foundation: the
/// PAM module reads them too).
package enum BoundedFile {
    /// At most `limit` bytes of `path`, nil when it cannot be opened or read.
    package static func read(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let got = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(fd, buffer.baseAddress.map { $0 + count }, limit - count)
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else {
                if got < 0 { return nil }
                break
            }
            count += got
        }
        return Array(bytes[..<count])
    }
}
