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

/// Overwrites with zeros the storage `bytes` shares with every other copy of the same array (the value a
/// decoder produced and the copies passed around), in place: for the last use of a secret that arrived as
/// an array. Binding it to a `var` and wiping that would wipe a new copy and leave the shared storage as it
/// was (copy on write).
package func wipeSharedStorage(of bytes: [UInt8]) {
    bytes.withUnsafeBufferPointer { buffer in
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        explicit_bzero(UnsafeMutableRawPointer(mutating: base), buffer.count)
    }
}
