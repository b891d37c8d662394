import FoundationEssentials
import Glibc
import Posix

/// A keyring file's bytes as read once from disk, with what identifies this version of it.
package struct KeyringFile: Sendable {
    /// A keyring file larger than this is refused before it is read (gnome-keyring's own files
    /// are kilobytes; a secret is at most 1 MiB in Latchkey).
    package static let maximumSize = 64 << 20

    /// The path it was read from.
    package let path: String
    /// Its contents.
    package let bytes: [UInt8]
    /// Its modification time, as Unix seconds.
    package let modified: UInt64
    /// The SHA-256 of its contents, in lower-case hex: with the path, what an import record names.
    package let digest: String

    /// Reads the file at `path` (never writing it) with ``readRegularFile(_:atMost:)``: a FIFO, device,
    /// directory or symbolic link is refused without blocking, and at most ``maximumSize`` bytes are read.
    package init(path: String) throws(GnomeKeyringError) {
        let file = try Self.readRegularFile(path, atMost: Self.maximumSize)
        self.init(path: path, bytes: file.bytes, modified: file.modified)
    }

    /// The bytes and modification time (Unix seconds) of the regular file at `path`, read to its end, every
    /// read bounded: opened with `O_NONBLOCK` (a FIFO's open does not wait for a writer) and `O_NOFOLLOW` (a
    /// symbolic link in the last component is not followed: another program, or a Flatpak app inside its own
    /// directory, could point it at a FIFO or a device), then required by `fstat` to be a regular file, whose
    /// reads never block; one larger than `limit` is refused, before and while it is read.
    ///
    /// - Throws: `notAKeyring` for anything but a regular file (a FIFO, a device, a directory), `unreadable`
    ///   naming a symbolic link or the failed call, `tooLarge`.
    package static func readRegularFile(_ path: String, atMost limit: Int) throws(GnomeKeyringError) -> (
        bytes: [UInt8], modified: UInt64
    ) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ELOOP { throw GnomeKeyringError(path, .unreadable("a symbolic link, which is not followed")) }
            throw GnomeKeyringError(path, .unreadable(SystemError.last("open").description))
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw GnomeKeyringError(path, .unreadable(SystemError.last("fstat").description))
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw GnomeKeyringError(path, .notAKeyring) }
        guard status.st_size <= limit else { throw GnomeKeyringError(path, .tooLarge(Int(status.st_size))) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count: Int
            do {
                count = try Posix.read(fd, &buffer, buffer.count)
            } catch {
                throw GnomeKeyringError(path, .unreadable(error.description))
            }
            if count == 0 { break }
            bytes += buffer[0..<count]
            // The file may have grown since fstat.
            guard bytes.count <= limit else { throw GnomeKeyringError(path, .tooLarge(bytes.count)) }
        }
        return (bytes, UInt64(max(0, status.st_mtim.tv_sec)))
    }

    /// A file's contents given directly (tests, or a file read elsewhere).
    package init(path: String, bytes: [UInt8], modified: UInt64) {
        self.path = path
        self.bytes = bytes
        self.modified = modified
        self.digest = (KeyringCrypto.sha256(bytes) ?? []).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Which format the file is in; nil when it is neither.
    package var format: GnomeKeyring.Format? {
        if LibsecretFile.matches(bytes) { return .libsecretFile }
        if BinaryKeyring.matches(bytes) { return .binary }
        if PlainTextKeyring.matches(bytes) { return .plainText }
        return nil
    }

    /// Whether opening it needs a password (a binary keyring; a plain-text one needs none).
    package var needsPassword: Bool { format != .plainText }

    /// The keyring, opened with `password` when it is a binary one.
    ///
    /// - Throws: ``GnomeKeyringError`` naming the file: `wrongPassword` when the password does not
    ///   open it, `truncated`/`corrupt` for damage, `notAKeyring` for anything else.
    package func keyring(password: [UInt8]) throws(GnomeKeyringError) -> GnomeKeyring {
        switch format {
        case .binary: try BinaryKeyring.read(bytes, path: path, password: password)
        case .libsecretFile: try LibsecretFile.read(bytes, path: path, password: password)
        case .plainText: try PlainTextKeyring.read(bytes, path: path)
        case nil:
            // A binary file cut inside its magic is still recognisably one.
            if !bytes.isEmpty, bytes.count < BinaryKeyring.magic.count,
                Array(BinaryKeyring.magic[0..<bytes.count]) == bytes
            {
                throw GnomeKeyringError(path, .truncated("the header"))
            }
            throw GnomeKeyringError(path, .notAKeyring)
        }
    }

    /// The keyrings gnome-keyring keeps for the user: `*.keyring` in `$XDG_DATA_HOME/keyrings`
    /// (default `~/.local/share/keyrings`), sorted, `login.keyring` first.
    package static func defaultPaths(environment: [String: String]) -> [String] {
        let directory = keyringDirectory(environment: environment)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".keyring") }
            .sorted { ($0 == "login.keyring" ? 0 : 1, $0) < ($1 == "login.keyring" ? 0 : 1, $1) }
            .map { directory + "/" + $0 }
    }

    /// The Flatpak apps' libsecret files that exist: `<app id>/data/keyrings/default.keyring` in
    /// ``flatpakAppDirectory(environment:)``, sorted.
    package static func flatpakPaths(environment: [String: String]) -> [String] {
        let directory = flatpakAppDirectory(environment: environment)
        let apps = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return apps.sorted().map { directory + "/" + $0 + "/data/keyrings/default.keyring" }
            .filter { FileManager.default.fileExists(atPath: $0) }
    }

    /// Where Flatpak apps keep their data: `~/.var/app` (each app's libsecret file is
    /// `<app id>/data/keyrings/default.keyring` in it).
    package static func flatpakAppDirectory(environment: [String: String]) -> String {
        (environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path) + "/.var/app"
    }

    /// gnome-keyring's directory: `$XDG_DATA_HOME/keyrings`, default `~/.local/share/keyrings`.
    package static func keyringDirectory(environment: [String: String]) -> String {
        let dataHome =
            environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path) + "/.local/share"
        return dataHome + "/keyrings"
    }
}
