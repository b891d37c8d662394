import Glibc

/// Bytes that must not outlive their use: a password, a key, a decrypted secret. The one type every secret
/// travels in, from pam_latchkey's stash to the key derivation and from the decrypted item to the session
/// cipher (see docs/threat-model.md, "In memory").
///
/// - It owns its memory: pages of their own (`mmap`), marked `MADV_DONTDUMP` so no core dump or `gcore`
///   holds them, and locked with `mlock` so they are never written to swap, where `RLIMIT_MEMLOCK` allows.
///   When `mlock` is refused (the limit is used up, typically 8 MiB for a user) the bytes are kept all the
///   same, still out of dumps, and the first refusal is reported once (``reportLockFailures(to:)``).
/// - It cannot be copied (`~Copyable`): it is handed on with `consuming` and lent with `borrowing` or
///   ``withUnsafeBytes(_:)``; a second copy exists only where ``duplicate()`` makes one.
/// - `deinit` wipes it with `explicit_bzero`, unlocks and unmaps it.
package struct SecretBytes: ~Copyable, @unchecked Sendable {
    private let base: UnsafeMutableRawPointer?
    private let mappedLength: Int
    /// How many bytes it holds.
    package private(set) var count: Int
    /// How many bytes it can hold (``append(_:)`` never moves the bytes).
    package let capacity: Int

    /// Room for `capacity` bytes, holding none yet.
    ///
    /// - Throws: ``SecretMemoryError`` when the pages cannot be mapped (no address space or memory left):
    ///   never a crash, since pam_latchkey makes secrets in a login's own process.
    package init(capacity: Int) throws(SecretMemoryError) {
        self.capacity = max(capacity, 0)
        count = 0
        guard capacity > 0 else {
            base = nil
            mappedLength = 0
            return
        }
        mappedLength = Self.pagesLength(forCapacity: capacity)
        guard
            let mapped = mmap(nil, mappedLength, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            mapped != MAP_FAILED
        else { throw SecretMemoryError(length: mappedLength, errno: errno) }
        base = mapped
        // Anonymous pages are zeroed. Neither call failing stops the bytes from being kept.
        _ = madvise(mapped, mappedLength, MADV_DONTDUMP)
        if mlock(mapped, mappedLength) != 0 { SecretMemoryNotice.lockFailed(errno: errno, length: mappedLength) }
    }

    /// A copy of `bytes` (the caller wipes its own).
    package init(copying bytes: UnsafeRawBufferPointer) throws(SecretMemoryError) {
        try self.init(capacity: bytes.count)
        append(bytes)
    }

    /// A copy of `bytes` (the caller wipes its own, when they are not constants).
    package init(copying bytes: some Collection<UInt8>) throws(SecretMemoryError) {
        try self.init(capacity: bytes.count)
        if let base {
            var index = 0
            for byte in bytes {
                base.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
                index += 1
            }
            count = index
        }
    }

    /// A copy of the bytes of the C string `string`, without its NUL (the caller wipes its own).
    package init(copyingCString string: UnsafePointer<CChar>) throws(SecretMemoryError) {
        try self.init(copying: UnsafeRawBufferPointer(start: string, count: strlen(string)))
    }

    /// `count` zero bytes, to be written in place with ``withUnsafeMutableBytes(_:)``.
    package init(zeros count: Int) throws(SecretMemoryError) {
        try self.init(capacity: count)
        self.count = self.capacity
    }

    deinit {
        Self.wipeAndRelease(base, capacity: capacity)
    }

    /// The length of the pages holding `capacity` bytes.
    package static func pagesLength(forCapacity capacity: Int) -> Int {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        return (max(capacity, 0) + page - 1) / page * page
    }

    /// Hands the pages to C code that keeps them by pointer (pam_set_data): the bytes, zeros after them up
    /// to the capacity (so text in them is NUL-terminated). Whoever holds the pointer must release it with
    /// ``wipeAndRelease(_:capacity:)`` and the same capacity.
    package consuming func handedToC() -> UnsafeMutableRawPointer? {
        let pages = base
        discard self
        return pages
    }

    /// Wipes and releases pages ``handedToC()`` gave away; `capacity` is the one they were made with.
    package static func wipeAndRelease(_ pages: UnsafeMutableRawPointer?, capacity: Int) {
        guard let pages, capacity > 0 else { return }
        let length = pagesLength(forCapacity: capacity)
        explicit_bzero(pages, length)
        SecretMemoryNotice.observeRelease(UnsafeRawBufferPointer(start: pages, count: length))
        _ = munlock(pages, length)
        _ = munmap(pages, length)
    }

    /// Whether it holds no bytes.
    package var isEmpty: Bool { count == 0 }

    /// Lends the bytes.
    package func withUnsafeBytes<R: ~Copyable, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Lends the bytes to be changed in place.
    package mutating func withUnsafeMutableBytes<R: ~Copyable, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Appends `bytes`; they must fit in the ``capacity`` left (a precondition: growing would leave a copy).
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, let base, let source = bytes.baseAddress else { return }
        precondition(bytes.count <= capacity - count, "a secret buffer cannot grow")
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    /// Makes room for `additional` more bytes. When they do not fit, the bytes move to new secret pages of
    /// twice the room (or more), and the old pages are wiped and released: growing leaves no copy behind.
    /// Pointers lent before may then be stale.
    package mutating func reserveCapacity(forAppending additional: Int) throws(SecretMemoryError) {
        guard additional > capacity - count else { return }
        var larger = try SecretBytes(capacity: max(2 * capacity, count + additional))
        withUnsafeBytes { larger.append($0) }
        self = larger
    }

    /// Appends one byte (within the ``capacity``).
    package mutating func append(_ byte: UInt8) {
        Swift.withUnsafeBytes(of: byte) { append($0) }
    }

    /// Keeps the first `newCount` bytes and wipes the rest.
    package mutating func truncate(to newCount: Int) {
        guard let base, newCount < count else { return }
        let kept = max(newCount, 0)
        explicit_bzero(base + kept, count - kept)
        count = kept
    }

    /// Whether both hold the same bytes, compared in a time that does not depend on where they differ.
    package func hasSameBytes(as other: borrowing SecretBytes) -> Bool {
        withUnsafeBytes { mine in
            other.withUnsafeBytes { theirs in
                guard mine.count == theirs.count else { return false }
                var difference: UInt8 = 0
                for index in 0..<mine.count { difference |= mine[index] ^ theirs[index] }
                return difference == 0
            }
        }
    }

    /// Whether it holds exactly `bytes` (for tests and for comparing with a constant).
    package func hasSameBytes(as bytes: some Collection<UInt8>) -> Bool {
        withUnsafeBytes { $0.elementsEqual(bytes) }
    }

    /// Where its pages start (tests look them up in /proc/self/smaps), nil when it holds nothing.
    package var pageAddress: UInt? { base.map { UInt(bitPattern: $0) } }

    /// Calls `report` (once in the process's life) with a line saying that a secret's pages could not be
    /// locked in memory, the first time `mlock` refuses. The daemon and the CLI log it; pam_latchkey, run
    /// as root (which may lock without limit), does not install one.
    package static func reportLockFailures(to report: @escaping @Sendable (String) -> Void) {
        SecretMemoryNotice.install(report)
    }

    /// Test hook: called in `deinit` with a secret's pages after they were wiped, just before they are unmapped.
    package static func observeReleasesForTesting(_ observe: (@Sendable (UnsafeRawBufferPointer) -> Void)?) {
        SecretMemoryNotice.setObserver(observe)
    }
}

/// A secret several holders share (a password a worker thread and the serving thread both use, a request
/// that is passed around): one ``SecretBytes`` behind a reference, wiped when the last holder lets go.
/// Sharing it never copies the bytes.
package final class SharedSecret: @unchecked Sendable {
    /// The bytes, lent to whoever holds the reference.
    package let bytes: SecretBytes

    /// Takes `bytes` over.
    package init(_ bytes: consuming SecretBytes) {
        self.bytes = bytes
    }

    /// A copy of `bytes` in secret memory (the caller wipes its own).
    package convenience init(copying bytes: some Collection<UInt8>) throws(SecretMemoryError) {
        self.init(try SecretBytes(copying: bytes))
    }

    /// Lends the bytes.
    package func withUnsafeBytes<R: ~Copyable, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }

    /// How many bytes it holds.
    package var count: Int { bytes.count }
}

extension SharedSecret: Equatable {
    /// Same bytes (compared in constant time).
    package static func == (lhs: SharedSecret, rhs: SharedSecret) -> Bool {
        lhs === rhs || lhs.bytes.hasSameBytes(as: rhs.bytes)
    }
}

/// Secret memory could not be made: `mmap` refused the pages (the address space or memory is used up). The
/// secret is not kept anywhere else instead; whoever asked fails the one operation softly.
package struct SecretMemoryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The length of the pages asked for.
    package let length: Int
    /// `mmap`'s error number.
    package let errno: Int32

    /// A failure to map `length` bytes with error number `errno`.
    package init(length: Int, errno: Int32) {
        self.length = length
        self.errno = errno
    }

    /// What failed, for a log line or an error reply.
    package var description: String {
        "cannot map \(length) bytes of secret memory: \(String(cString: strerror(errno)))"
    }
}

/// The process-wide state of secret memory: the once-only `mlock` failure report and the test observer.
private enum SecretMemoryNotice {
    nonisolated(unsafe) static var mutex = pthread_mutex_t()
    nonisolated(unsafe) static var report: (@Sendable (String) -> Void)?
    nonisolated(unsafe) static var reported = false
    nonisolated(unsafe) static var observer: (@Sendable (UnsafeRawBufferPointer) -> Void)?
    nonisolated(unsafe) static var hasObserver = false

    static func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }

    static func install(_ newReport: @escaping @Sendable (String) -> Void) {
        locked { report = newReport }
    }

    static func lockFailed(errno code: Int32, length: Int) {
        let sink: (@Sendable (String) -> Void)? = locked {
            guard !reported, let report else { return nil }
            reported = true
            return report
        }
        var limit = rlimit()
        getrlimit(Int32(__RLIMIT_MEMLOCK.rawValue), &limit)
        sink?(
            "secret memory is not locked (mlock of \(length) bytes: \(String(cString: strerror(code))),"
                + " RLIMIT_MEMLOCK \(limit.rlim_cur) bytes): secrets may reach swap, but stay out of core dumps;"
                + " said once")
    }

    static func setObserver(_ newObserver: (@Sendable (UnsafeRawBufferPointer) -> Void)?) {
        locked {
            observer = newObserver
            hasObserver = newObserver != nil
        }
    }

    static func observeRelease(_ pages: UnsafeRawBufferPointer) {
        guard locked({ hasObserver }) else { return }
        locked { observer }?(pages)
    }
}
