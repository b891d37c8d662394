import Glibc
import Posix
import ProcessMemoryMaps
import Testing

/// What the release observer saw: for each page address, whether the pages were all zeros.
private final class ReleasedPages: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var seen: [UInt: Bool] = [:]

    func record(_ pages: UnsafeRawBufferPointer) {
        let address = UInt(bitPattern: pages.baseAddress)
        let wiped = pages.allSatisfy { $0 == 0 }
        pthread_mutex_lock(&mutex)
        seen[address] = wiped
        pthread_mutex_unlock(&mutex)
    }

    /// Forgets what an earlier secret at `address` did (pages are reused).
    func forget(_ address: UInt) {
        pthread_mutex_lock(&mutex)
        seen[address] = nil
        pthread_mutex_unlock(&mutex)
    }

    func wiped(at address: UInt) -> Bool? {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return seen[address]
    }
}

@Suite(.serialized) struct SecretBytesTests {
    static let sample = Array("correct horse battery staple, 2026".utf8)

    @Test func holdsWhatItWasGiven() throws {
        let secret = try SecretBytes(copying: Self.sample)
        let count = secret.count
        #expect(count == Self.sample.count)
        let holds = secret.hasSameBytes(as: Self.sample)
        let holdsOther = secret.hasSameBytes(as: Array("correct horse battery staple, 2027".utf8))
        #expect(holds && !holdsOther)
        let same = try SecretBytes(copying: Self.sample)
        let equal = same.hasSameBytes(as: secret)
        let (here, there) = (same.pageAddress, secret.pageAddress)
        #expect(equal && here != there)
    }

    @Test func wipedWhenReleased() throws {
        let released = ReleasedPages()
        SecretBytes.observeReleasesForTesting { released.record($0) }
        defer { SecretBytes.observeReleasesForTesting(nil) }
        var secret = try SecretBytes(capacity: 64)
        Self.sample.withUnsafeBytes { secret.append($0) }
        let page = secret.pageAddress
        let address = try #require(page)
        released.forget(address)
        _ = consume secret
        #expect(released.wiped(at: address) == true)
    }

    @Test func handedOnWithoutACopy() throws {
        let released = ReleasedPages()
        SecretBytes.observeReleasesForTesting { released.record($0) }
        defer { SecretBytes.observeReleasesForTesting(nil) }
        let secret = try SecretBytes(copying: Self.sample)
        let page = secret.pageAddress
        let address = try #require(page)
        released.forget(address)
        func keep(_ secret: consuming SecretBytes) -> SecretBytes { secret }
        let kept = keep(secret)
        let keptAddress = kept.pageAddress
        #expect(keptAddress == address)
        #expect(released.wiped(at: address) == nil)
        let shared = SharedSecret(kept)
        let sharedAddress = shared.bytes.pageAddress
        #expect(sharedAddress == address)
        var holders = [shared, shared]
        holders.removeAll()
        #expect(released.wiped(at: address) == nil)
        _ = consume shared
        #expect(released.wiped(at: address) == true)
    }

    @Test func pagesStayOutOfCoreDumpsAndInMemory() throws {
        let secret = try SecretBytes(copying: Self.sample)
        let page = secret.pageAddress
        let address = try #require(page)
        let flags = try #require(mappingFlags(at: address))
        // dd: VM_DONTDUMP (not in a core file or gcore).
        #expect(flags.contains("dd"))
        var limit = rlimit()
        getrlimit(Int32(__RLIMIT_MEMLOCK.rawValue), &limit)
        if geteuid() == 0 || limit.rlim_cur >= 1 << 20 {
            // lo: VM_LOCKED (never swapped out).
            #expect(flags.contains("lo"))
        }
    }

    @Test func truncatingWipesTheRest() throws {
        var secret = try SecretBytes(copying: Self.sample)
        secret.truncate(to: 7)
        let holds = secret.hasSameBytes(as: Self.sample.prefix(7))
        #expect(holds)
        let page = secret.pageAddress
        let base = try #require(page)
        let tail = UnsafeRawBufferPointer(
            start: UnsafeRawPointer(bitPattern: base + 7), count: Self.sample.count - 7)
        #expect(tail.allSatisfy { $0 == 0 })
    }

    /// pam_latchkey's stash: pages handed to C hold a NUL-terminated copy, are not released with the value,
    /// and are wiped when released by their holder.
    @Test func pagesHandedToCAreWipedWhenReleased() throws {
        let released = ReleasedPages()
        SecretBytes.observeReleasesForTesting { released.record($0) }
        defer { SecretBytes.observeReleasesForTesting(nil) }
        var stash = try SecretBytes(capacity: 4097)
        Self.sample.withUnsafeBytes { stash.append($0) }
        let handed = stash.handedToC()
        let pages = try #require(handed)
        let address = UInt(bitPattern: pages)
        released.forget(address)
        #expect(
            String(cString: pages.assumingMemoryBound(to: CChar.self)) == String(decoding: Self.sample, as: UTF8.self))
        #expect(released.wiped(at: address) == nil)
        SecretBytes.wipeAndRelease(pages, capacity: 4097)
        #expect(released.wiped(at: address) == true)
    }

    @Test func anEmptySecretHoldsNoPages() throws {
        let secret = try SecretBytes(capacity: 0)
        let (empty, address, lent) = (secret.isEmpty, secret.pageAddress, secret.withUnsafeBytes { $0.isEmpty })
        #expect(empty && address == nil && lent)
    }

    /// Growing moves the bytes to new secret pages and wipes the old ones: no copy is left behind.
    @Test func growingWipesTheOldPages() throws {
        let released = ReleasedPages()
        SecretBytes.observeReleasesForTesting { released.record($0) }
        defer { SecretBytes.observeReleasesForTesting(nil) }
        var secret = try SecretBytes(capacity: 40)
        Self.sample.withUnsafeBytes { secret.append($0) }
        let page = secret.pageAddress
        let first = try #require(page)
        released.forget(first)
        try secret.reserveCapacity(forAppending: 5)
        #expect(released.wiped(at: first) == nil)
        try secret.reserveCapacity(forAppending: 10_000)
        let capacity = secret.capacity
        #expect(capacity >= Self.sample.count + 10_000)
        #expect(released.wiped(at: first) == true)
        let moved = secret.pageAddress
        let holds = secret.hasSameBytes(as: Self.sample)
        #expect(moved != first && holds)
        let more = [UInt8](repeating: 0x41, count: 10_000)
        more.withUnsafeBytes { secret.append($0) }
        let holdsAll = secret.hasSameBytes(as: Self.sample + more)
        #expect(holdsAll)
    }

    /// When no pages can be mapped (here: an address-space limit of 0 in a child process), making a secret
    /// throws instead of ending the process; before, it called fatalError, which a PAM module must never do.
    @Test func noMemoryToMapIsAnErrorNotACrash() throws {
        let child = fork()
        try #require(child >= 0)
        if child == 0 {
            // Only async-signal-safe work from here: the test process has other threads.
            var none = rlimit(rlim_cur: 0, rlim_max: rlim_t.max)
            guard setrlimit(Int32(RLIMIT_AS.rawValue), &none) == 0 else { _exit(2) }
            do {
                _ = try SecretBytes(capacity: 4096)
                _exit(3)
            } catch {
                guard error.errno == ENOMEM, error.length == 4096 else { _exit(4) }
            }
            do {
                _ = try SecretBytes(copying: UnsafeRawBufferPointer(start: nil, count: 0))
                // Nothing to hold needs no pages, so it cannot fail.
            } catch {
                _exit(5)
            }
            _exit(0)
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        // Exited (not killed by a trap) with 0: the failure came back as an error.
        #expect(status & 0x7f == 0)
        #expect((status >> 8) & 0xff == 0)
    }
}
