import Glibc

/// A unix socket address the tests bind and connect to.
struct UnixSocketAddress {
    private var address = sockaddr_un()

    init(_ path: String) {
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
    }

    /// `bind` (or `connect`, as `call`) of `fd` to this address: 0, or -1 with errno set.
    mutating func apply(_ fd: Int32, _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        let size = socklen_t(MemoryLayout<sockaddr_un>.size)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, size) }
        }
    }
}
