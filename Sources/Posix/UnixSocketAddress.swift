import Glibc

/// Connects `fd` to the unix socket at `path`: 0, or the errno.
package func connectUnix(_ fd: Int32, _ path: String) -> Int32 {
    guard var address = unixAddress(path) else { return ENAMETOOLONG }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    return result == 0 ? 0 : errno
}

/// A `sockaddr_un` for `path`, nil if the path is too long.
package func unixAddress(_ path: String) -> sockaddr_un? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity, !bytes.contains(0) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    return address
}
