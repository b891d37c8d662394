import FoundationEssentials
import GnomeKeyringImport
import KWalletFormat
import Posix

/// A `.kwl` wallet file as read once from disk: its clear header (magic, version, cipher, hash), the MD5 name
/// index kwalletd keeps outside the encryption, and the ciphertext (docs/kwallet.md §5). Nothing in it is secret
/// until it is decrypted with ``open(password:salt:)``.
package struct KWalletFile: Sendable {
    /// KWallet's magic, the first 12 bytes of every wallet file (`KWMAGIC`).
    package static let magic: [UInt8] = Array("KWALLET\n\r".utf8) + [0, 0x0D, 0x0A]
    /// A wallet file larger than this is refused before it is read (kwalletd's are kilobytes).
    package static let maximumSize = 64 << 20
    /// The most folders kwalletd accepts in the index (`n > 0xffff` is corrupt in `BlowfishPersistHandler::read`).
    package static let maximumFolders: UInt32 = 0xFFFF

    /// The version bytes after the magic.
    package struct Header: Sendable, Equatable {
        /// Major version: 0.
        package var major: UInt8
        /// Minor version: 0, the key is the legacy SHA-1 hash; 1, the key is PBKDF2-SHA512 with the salt file.
        package var minor: UInt8
        /// Cipher: 0 Blowfish "ECB", 1 3DES (never supported), 2 GnuPG, 3 Blowfish-CBC.
        package var cipher: UInt8
        /// Hash: 0 SHA-1, 1 MD5 (never supported), 2 PBKDF2-SHA512.
        package var hash: UInt8
    }

    /// The path it was read from.
    package let path: String
    /// Its contents.
    package let bytes: [UInt8]
    /// Its modification time, as Unix seconds.
    package let modified: UInt64
    /// The SHA-256 of the whole file (header, index and ciphertext) in lower-case hex: with the path, size and
    /// time, what an import record names. kwalletd writes fresh random bytes into every save, so any save of
    /// the wallet changes it.
    package let digest: String
    /// The version bytes.
    package let header: Header
    /// The MD5 digests of the folder names and, per folder, of its key names, as kwalletd keeps them in clear.
    package let index: [(folder: [UInt8], keys: [[UInt8]])]
    /// Where the ciphertext starts.
    let ciphertextOffset: Int

    /// Reads the file at `path` (never writing it) as a bounded regular file (`O_NONBLOCK|O_NOFOLLOW`, `fstat`:
    /// a FIFO, a device or a symbolic link is refused without blocking) and parses its clear part.
    ///
    /// - Throws: ``KWalletError`` naming the file: `gpgWallet` for a GnuPG wallet, `notAWallet`, `unsupported`,
    ///   `truncated`, `corrupt`, `tooLarge`, `unreadable`.
    package init(path: String) throws(KWalletError) {
        let file: (bytes: [UInt8], modified: UInt64)
        do {
            file = try KeyringFile.readRegularFile(path, atMost: Self.maximumSize)
        } catch {
            switch error.kind {
            case .notAKeyring: throw KWalletError(path, .notAWallet)
            case .tooLarge(let size): throw KWalletError(path, .tooLarge(size))
            case .unreadable(let why): throw KWalletError(path, .unreadable(why))
            default: throw KWalletError(path, .unreadable(error.description))
            }
        }
        try self.init(path: path, bytes: file.bytes, modified: file.modified)
    }

    /// A wallet file's contents given directly (tests, the fuzz harness).
    package init(path: String, bytes: [UInt8], modified: UInt64) throws(KWalletError) {
        self.path = path
        self.bytes = bytes
        self.modified = modified
        self.digest = KWalletDigest.sha256Hex(bytes)
        guard bytes.count >= Self.magic.count + 4 else {
            let shown = min(bytes.count, Self.magic.count)
            if shown > 0 && Array(bytes[0..<shown]) == Array(Self.magic[0..<shown]) {
                throw KWalletError(path, .truncated("the header"))
            }
            throw KWalletError(path, .notAWallet)
        }
        guard Array(bytes[0..<Self.magic.count]) == Self.magic else { throw KWalletError(path, .notAWallet) }
        let version = bytes[Self.magic.count..<Self.magic.count + 4].map { $0 }
        header = Header(major: version[0], minor: version[1], cipher: version[2], hash: version[3])
        if header.cipher == 2 { throw KWalletError(path, .gpgWallet) }
        guard header.major == 0, header.minor <= 1, header.cipher == 0 || header.cipher == 3,
            header.hash == 0 || header.hash == 2
        else {
            throw KWalletError(
                path,
                .unsupported(
                    "version \(header.major).\(header.minor), cipher \(header.cipher), hash \(header.hash)"))
        }
        var offset = Self.magic.count + 4
        func uint32(_ what: String) throws(KWalletError) -> UInt32 {
            guard bytes.count - offset >= 4 else { throw KWalletError(path, .truncated(what)) }
            defer { offset += 4 }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        func digest(_ what: String) throws(KWalletError) -> [UInt8] {
            guard bytes.count - offset >= 16 else { throw KWalletError(path, .truncated(what)) }
            defer { offset += 16 }
            return Array(bytes[offset..<offset + 16])
        }
        let folders = try uint32("the folder count")
        guard folders <= Self.maximumFolders else { throw KWalletError(path, .corrupt("\(folders) folders")) }
        // Each folder takes at least 20 bytes of index.
        guard Int(folders) * 20 <= bytes.count - offset else { throw KWalletError(path, .truncated("the name index")) }
        var index: [(folder: [UInt8], keys: [[UInt8]])] = []
        for _ in 0..<folders {
            let folder = try digest("the name index")
            let keys = try uint32("the name index")
            guard Int(keys) <= (bytes.count - offset) / 16 else {
                throw KWalletError(path, .truncated("the name index"))
            }
            var names: [[UInt8]] = []
            for _ in 0..<keys { names.append(try digest("the name index")) }
            index.append((folder, names))
        }
        self.index = index
        ciphertextOffset = offset
        let ciphertext = bytes.count - offset
        // One random block, the length, the SHA-1: at least 32 bytes, whole blocks.
        guard ciphertext >= 32 else { throw KWalletError(path, .truncated("the encrypted part")) }
        guard ciphertext % 8 == 0 else {
            throw KWalletError(path, .corrupt("the encrypted part is not a whole number of 8-byte blocks"))
        }
    }

    /// The wallet's name: the file name without `.kwl`, decoded as `Backend::decodeWalletName` does (`;XX` is
    /// the byte XX: kwalletd's percent-encoding with `;` for `%`).
    package var walletName: String { Self.walletName(ofPath: path) }

    /// The wallet name of the file at `path` (see ``walletName``).
    package static func walletName(ofPath path: String) -> String {
        var file = Substring(path.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
        if file.hasSuffix(".kwl") { file = file.dropLast(4) }
        return decodeWalletName(String(file))
    }

    /// `Backend::decodeWalletName`: `;XX` (two hex digits) is the byte XX; anything else is kept.
    package static func decodeWalletName(_ encoded: String) -> String {
        let utf8 = Array(encoded.utf8)
        var bytes: [UInt8] = []
        var index = 0
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: ";"), index + 2 < utf8.count, let high = hex(utf8[index + 1]),
                let low = hex(utf8[index + 2])
            {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The path of the wallet's salt file: `NAME.salt` beside it.
    package var saltPath: String { String(path.dropLast(path.hasSuffix(".kwl") ? 4 : 0)) + ".salt" }

    /// The path of the attributes kwalletd5's Secret Service kept for its items: `NAME_attributes.json` beside it.
    package var attributesPath: String { String(path.dropLast(path.hasSuffix(".kwl") ? 4 : 0)) + "_attributes.json" }

    /// Whether opening it needs the salt file (the key is PBKDF2's).
    package var needsSalt: Bool { header.minor == 1 }

    /// Reads the salt file as a bounded regular file (a FIFO or a link to `/dev/zero` is refused at once): kwalletd
    /// writes 56 random bytes; anything empty or over 4 KiB is refused.
    package func salt() throws(KWalletError) -> [UInt8] {
        let file: (bytes: [UInt8], modified: UInt64)
        do {
            file = try KeyringFile.readRegularFile(saltPath, atMost: 4096)
        } catch {
            switch error.kind {
            case .notAKeyring: throw KWalletError(path, .noSalt("\(saltPath) is not a regular file"))
            case .tooLarge(let size): throw KWalletError(path, .noSalt("\(saltPath) is too large (\(size) bytes)"))
            case .unreadable(let why): throw KWalletError(path, .noSalt("\(saltPath) cannot be read: \(why)"))
            default: throw KWalletError(path, .noSalt("\(saltPath): \(error)"))
            }
        }
        guard !file.bytes.isEmpty else { throw KWalletError(path, .noSalt("\(saltPath) is empty")) }
        return file.bytes
    }

    /// The key `password` (UTF-8) gives for this file: PBKDF2 with `salt` for minor version 1, the legacy hash
    /// for minor 0.
    package func key(password: UnsafeRawBufferPointer, salt: [UInt8]?) throws(KWalletError) -> SecretBytes {
        do throws(KWalletError) {
            if needsSalt {
                guard let salt else { throw KWalletError(path, .noSalt("is missing")) }
                return try KWalletCrypto.pbkdf2Key(password: password, salt: salt)
            }
            return try KWalletCrypto.legacyKey(password: password)
        } catch {
            throw KWalletError(path, error.kind)
        }
    }

    /// The wallet decrypted with `key` (from ``key(password:salt:)``).
    ///
    /// - Throws: `wrongPassword` when the SHA-1 inside does not match, `corrupt` for a decrypted stream that does
    ///   not parse or names other folders and keys than the clear index, `crypto` when OpenSSL cannot decrypt.
    package func open(key: borrowing SecretBytes) throws(KWalletError) -> KWalletContents {
        let plain: SecretBytes
        do {
            plain = try KWalletCrypto.blowfishDecrypt(bytes[ciphertextOffset...], key: key, ecb: header.cipher == 0)
        } catch {
            throw KWalletError(path, error.kind)
        }
        let contents = try KWalletContents(plaintext: plain, path: path)
        // The clear index is kwalletd's own record of the names inside: it must agree with them.
        guard contents.matchesIndex(of: self) else {
            throw KWalletError(path, .corrupt("the clear name index does not match the names inside"))
        }
        return contents
    }

    /// The wallet opened with `password`, reading the salt file when it needs one.
    package func open(password: UnsafeRawBufferPointer) throws(KWalletError) -> KWalletContents {
        let key = try key(password: password, salt: needsSalt ? try salt() : nil)
        return try open(key: key)
    }

    /// The wallet opened with `password` (UTF-8), reading the salt file when it needs one.
    package func open(password: borrowing SecretBytes) throws(KWalletError) -> KWalletContents {
        try password.withUnsafeBytes { (bytes) throws(KWalletError) in try open(password: bytes) }
    }

    /// The wallet files kwalletd keeps: `*.kwl` in `directory`, sorted.
    package static func paths(inDirectory directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".kwl") }.sorted().map { directory + "/" + $0 }
    }
}
