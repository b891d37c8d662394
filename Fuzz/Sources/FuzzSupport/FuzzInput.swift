import Glibc

/// A fuzz input read front to back as the fields a harness wants; past the end every read gives zeros or
/// nothing, so any input is a valid one.
public struct FuzzInput {
    /// The bytes.
    public let bytes: [UInt8]
    /// Where the next read starts.
    public private(set) var offset = 0

    /// The input at `start` of `count` bytes, as libFuzzer hands it.
    public init(_ start: UnsafePointer<UInt8>?, _ count: Int) {
        bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    }

    /// An input of `bytes`.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Whether every byte was read.
    public var isAtEnd: Bool { offset >= bytes.count }

    /// The next byte, 0 past the end.
    public mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// The next two bytes, big-endian.
    public mutating func uint16() -> Int { Int(byte()) << 8 | Int(byte()) }

    /// The next `count` bytes, fewer at the end.
    public mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return Array(bytes[min(offset, end)..<end])
    }

    /// A field: a 2-byte big-endian length, then that many bytes.
    public mutating func field() -> [UInt8] { take(uint16()) }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] { take(bytes.count - offset) }
}

/// Builds seed inputs field by field, in the layout ``FuzzInput`` reads.
public struct SeedBuilder {
    /// The seed so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty seed.
    public init() {}

    /// Appends one byte.
    public mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// Appends a 2-byte big-endian length and `field`.
    public mutating func field(_ field: [UInt8]) {
        bytes += [UInt8(field.count >> 8 & 0xff), UInt8(field.count & 0xff)] + field
    }

    /// Appends `raw` as it is.
    public mutating func raw(_ raw: [UInt8]) { bytes += raw }
}

/// Writes a seed corpus when `LATCHKEY_FUZZ_WRITE_SEEDS` names a directory: each harness calls this from
/// `LLVMFuzzerInitialize` with its seeds, which end the process after writing them.
public enum SeedCorpus {
    /// The directory seeds go to, if this run writes seeds.
    public static var directory: String? {
        guard let value = getenv("LATCHKEY_FUZZ_WRITE_SEEDS") else { return nil }
        return String(cString: value)
    }

    /// Writes `seeds` as `<directory>/<name>` files and exits; does nothing without the variable.
    public static func writeIfAsked(_ seeds: () throws -> [(name: String, bytes: [UInt8])]) {
        guard let directory else { return }
        do {
            for (name, bytes) in try seeds() {
                let path = directory + "/" + name
                guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
                _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
                fclose(file)
            }
        } catch {
            fatalError("cannot make the seeds: \(error)")
        }
        exit(0)
    }
}

/// A new private directory under `/dev/shm` (or `/tmp`) for one harness's files.
public func scratchDirectory(_ name: String) -> String {
    let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
    var template = Array("\(base)/latchkey-\(name)-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { fatalError("mkdtemp failed") }
    return String(cString: made)
}

/// Copies `source` to `destination` (a new file).
public func copyFile(_ source: String, _ destination: String) {
    let input = open(source, O_RDONLY | O_CLOEXEC)
    let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    defer {
        close(input)
        close(output)
    }
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = read(input, &buffer, buffer.count)
        guard count > 0 else { return }
        _ = write(output, buffer, count)
    }
}
