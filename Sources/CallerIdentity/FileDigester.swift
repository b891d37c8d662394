import COpenSSL
import Glibc
import Posix

/// SHA-256 of open files, remembered by the file's identity (device, inode, size, modification and change
/// times), so that a program's executable is read once however many connections it opens.
package final class FileDigester {
    private struct FileKey: Hashable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: timespec.Parts
        let changed: timespec.Parts
    }

    private var remembered: [FileKey: FileDigest] = [:]
    /// At most this many digests are remembered; the oldest are forgotten first.
    let capacity: Int
    private var order: [FileKey] = []
    /// The largest file hashed, in bytes; a larger one is ``CallerIdentityError/tooLarge(bytes:limit:)``
    /// without a byte being read, and one that grows past it while it is read too.
    package let maximumFileBytes: Int64

    /// The default bound: 512 MiB, above the largest programs that talk to a keychain (Electron apps and
    /// browsers, 150 to 300 MB), about half a second of hashing here (docs/threat-model.md).
    package static let defaultMaximumFileBytes: Int64 = 512 << 20

    /// A digester remembering up to `capacity` files and hashing none larger than `maximumFileBytes`.
    package init(capacity: Int = 256, maximumFileBytes: Int64 = FileDigester.defaultMaximumFileBytes) {
        self.capacity = capacity
        self.maximumFileBytes = maximumFileBytes
    }

    /// How many files were read (not answered from memory) so far.
    package private(set) var filesRead = 0

    /// The digest of the file open on `fd`, read from its start.
    package func digest(of fd: Int32) throws(CallerIdentityError) -> FileDigest {
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .unreadable("fstat", errno: errno) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notAFile }
        let key = FileKey(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            modified: status.st_mtim.parts, changed: status.st_ctim.parts)
        if let known = remembered[key] { return known }
        guard Int64(status.st_size) <= maximumFileBytes else {
            throw .tooLarge(bytes: Int64(status.st_size), limit: maximumFileBytes)
        }
        let digest = try Self.read(fd, atMost: maximumFileBytes)
        filesRead += 1
        remembered[key] = digest
        order.append(key)
        if order.count > capacity { remembered[order.removeFirst()] = nil }
        return digest
    }

    /// The digest of the file at `path` (opened without following a final symbolic link's target's
    /// replacement: what is open is what is hashed).
    package func digest(ofFileAt path: String) throws(CallerIdentityError) -> FileDigest {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw .unreadable(path, errno: errno) }
        defer { close(fd) }
        return try digest(of: fd)
    }

    /// SHA-256 of the file from its start; ``CallerIdentityError/tooLarge(bytes:limit:)`` once more than
    /// `limit` bytes came (a file growing while it is read), so the work stays bounded whatever the file does.
    private static func read(_ fd: Int32, atMost limit: Int64) throws(CallerIdentityError) -> FileDigest {
        guard let context = EVP_MD_CTX_new() else { throw .digestFailed }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw .digestFailed }
        let chunk = 1 << 16
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let count = pread(fd, buffer, chunk, offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable("read", errno: errno)
            }
            if count == 0 { break }
            guard Int64(offset) + Int64(count) <= limit else {
                throw .tooLarge(bytes: Int64(offset) + Int64(count), limit: limit)
            }
            guard EVP_DigestUpdate(context, buffer, count) == 1 else { throw .digestFailed }
            offset += off_t(count)
        }
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &output, &length) == 1,
            let digest = FileDigest(Array(output.prefix(Int(length))))
        else { throw .digestFailed }
        return digest
    }
}

extension timespec {
    /// Seconds and nanoseconds, hashable.
    fileprivate struct Parts: Hashable {
        let seconds: Int
        let nanoseconds: Int
    }

    fileprivate var parts: Parts { Parts(seconds: tv_sec, nanoseconds: tv_nsec) }
}
