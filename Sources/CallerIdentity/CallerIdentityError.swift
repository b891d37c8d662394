import Glibc

/// Why a caller could not be identified. Any of these means the caller is not trusted with a secret.
package enum CallerIdentityError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The process is gone (it exited, or its pid now belongs to a process started later).
    case processGone(pid_t)
    /// The process executed another program (`execve`) while it was being identified, or since.
    case programChanged(pid_t)
    /// The process belongs to another user than the one the daemon serves.
    case otherUser(uid: uid_t)
    /// A file under `/proc` or the program's file could not be read (what, and `errno`).
    case unreadable(String, errno: Int32)
    /// What `/proc` gave could not be parsed (what).
    case malformed(String)
    /// The program is not a regular file (a script given as a device or a directory).
    case notAFile
    /// OpenSSL's SHA-256 failed.
    case digestFailed
    /// The program's file is larger than the digester hashes (``FileDigester/maximumFileBytes``): it cannot be
    /// fingerprinted, so the caller is unidentified.
    case tooLarge(bytes: Int64, limit: Int64)

    package var description: String {
        switch self {
        case .processGone(let pid): "process \(pid) is gone or was replaced"
        case .programChanged(let pid): "process \(pid) started another program since it connected"
        case .otherUser(let uid): "the process belongs to uid \(uid), not to this user"
        case .unreadable(let what, let code): "cannot read \(what): \(String(cString: strerror(code)))"
        case .malformed(let what): "cannot parse \(what)"
        case .notAFile: "the program is not a regular file"
        case .digestFailed: "SHA-256 failed in OpenSSL"
        case .tooLarge(let bytes, let limit):
            "the program's file (\(bytes) bytes) is larger than the \(limit) bytes hashed to identify it"
        }
    }
}
