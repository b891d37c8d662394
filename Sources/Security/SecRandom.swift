/// A random number generator (Apple's `SecRandomRef`, an opaque pointer).
public typealias SecRandomRef = OpaquePointer

/// The default generator: nil, as Apple's `kSecRandomDefault` is.
nonisolated(unsafe) public let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` cryptographically secure random bytes, as
/// Apple's `SecRandomCopyBytes` does. They come from the kernel's generator
/// (`getrandom(2)`, through Swift's `SystemRandomNumberGenerator`).
///
/// - Parameter rnd: pass `kSecRandomDefault`.
/// - Returns: `errSecSuccess`, or `errSecParam` for a negative count.
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    var generator = SystemRandomNumberGenerator()
    var offset = 0
    while offset < count {
        let word = generator.next()
        for shift in stride(from: 0, to: min(64, (count - offset) * 8), by: 8) {
            bytes.storeBytes(of: UInt8(truncatingIfNeeded: word >> UInt64(shift)), toByteOffset: offset, as: UInt8.self)
            offset += 1
        }
    }
    return errSecSuccess
}
