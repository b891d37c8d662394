/// Why a KWallet wallet file could not be imported, naming the file; never the password or a value.
package struct KWalletError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong.
    package enum Kind: Equatable, Sendable {
        /// The file does not start with KWallet's magic, or is no regular file (a FIFO, a device, a directory).
        case notAWallet
        /// A wallet encrypted with GnuPG (cipher 2): skipped, Latchkey has no GnuPG key to open it with.
        case gpgWallet
        /// A version, cipher or hash this reader does not know (major, minor, cipher, hash bytes).
        case unsupported(String)
        /// The password does not open the wallet (the SHA-1 inside does not match), or the file is damaged
        /// inside its encryption.
        case wrongPassword
        /// The wallet's salt file is missing or unusable (a PBKDF2 wallet cannot be opened without it).
        case noSalt(String)
        /// The file ends inside `what`.
        case truncated(String)
        /// A count or length that cannot be right.
        case corrupt(String)
        /// The file is larger than an import reads.
        case tooLarge(Int)
        /// The file could not be read.
        case unreadable(String)
        /// OpenSSL could not do a step (its legacy provider missing, for Blowfish).
        case crypto(String)
    }

    /// The wallet file.
    package let path: String
    /// What went wrong.
    package let kind: Kind

    /// An error about the file at `path`.
    package init(_ path: String, _ kind: Kind) {
        self.path = path
        self.kind = kind
    }

    /// One line: the file and the reason.
    package var description: String {
        let reason =
            switch kind {
            case .notAWallet: "not a KWallet wallet file"
            case .gpgWallet: "a GnuPG-encrypted wallet, which cannot be imported; skipped"
            case .unsupported(let what): "unsupported wallet format (\(what))"
            case .wrongPassword: "wrong password, or the wallet is damaged (its SHA-1 check fails)"
            case .noSalt(let why): "its salt file \(why)"
            case .truncated(let what): "the file ends inside \(what)"
            case .corrupt(let what): "damaged: \(what)"
            case .tooLarge(let size): "too large to import (\(size) bytes)"
            case .unreadable(let why): "cannot be read: \(why)"
            case .crypto(let why): "cannot be decrypted here: \(why)"
            }
        return "\(path): \(reason)"
    }
}
