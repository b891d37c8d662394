import Glibc
import Posix
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

/// The `VmFlags` of the mapping of this process that holds `address`, from /proc/self/smaps.
private func mappingFlags(at address: UInt) -> [Substring]? {
    guard let file = fopen("/proc/self/smaps", "r") else { return nil }
    defer { fclose(file) }
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    var inside = false
    while getline(&line, &capacity, file) > 0, let line {
        let text = String(cString: line)
        if let dash = text.firstIndex(of: "-"), let space = text.firstIndex(of: " "), dash < space,
            let start = UInt(text[..<dash], radix: 16),
            let end = UInt(text[text.index(after: dash)..<space], radix: 16)
        {
            inside = start <= address && address < end
        } else if inside, text.hasPrefix("VmFlags:") {
            return text.dropFirst("VmFlags:".count).split(whereSeparator: { $0 == " " || $0.isNewline })
        }
    }
    return nil
}

@Suite(.serialized) struct SecretBytesTests {
    static let sample = Array("correct horse battery staple, 2026".utf8)

    @Test func holdsWhatItWasGiven() {
        let secret = SecretBytes(copying: Self.sample)
        let count = secret.count
        #expect(count == Self.sample.count)
        let holds = secret.hasSameBytes(as: Self.sample)
        let holdsOther = secret.hasSameBytes(as: Array("correct horse battery staple, 2027".utf8))
        #expect(holds && !holdsOther)
        let same = secret.duplicate()
        let equal = same.hasSameBytes(as: secret)
        let (here, there) = (same.pageAddress, secret.pageAddress)
        #expect(equal && here != there)
    }

    @Test func wipedWhenReleased() throws {
        let released = ReleasedPages()
        SecretBytes.observeReleasesForTesting { released.record($0) }
        defer { SecretBytes.observeReleasesForTesting(nil) }
        var secret = SecretBytes(capacity: 64)
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
        let secret = SecretBytes(copying: Self.sample)
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
        let secret = SecretBytes(copying: Self.sample)
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
        var secret = SecretBytes(copying: Self.sample)
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
        var stash = SecretBytes(capacity: 4097)
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

    @Test func anEmptySecretHoldsNoPages() {
        let secret = SecretBytes(capacity: 0)
        let (empty, address, lent) = (secret.isEmpty, secret.pageAddress, secret.withUnsafeBytes { $0.isEmpty })
        #expect(empty && address == nil && lent)
    }
}
