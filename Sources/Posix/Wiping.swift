import Glibc

/// Overwrites `bytes` with zeros in place, in a way the compiler cannot remove.
package func wipeBytes(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { wipeBytes($0) }
}

/// Overwrites the memory of `buffer` with zeros, in a way the compiler cannot remove.
package func wipeBytes(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
    explicit_bzero(base, buffer.count)
}
