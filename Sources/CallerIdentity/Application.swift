/// The program behind a caller, as the keychain trusts it: what an item's access list names, and what a
/// prompt shows the user.
///
/// An application is named by where it lives and fingerprinted by the SHA-256 of its file, so that an
/// upgrade (same name, other bytes) is recognised as the same application that changed.
package enum Application: Hashable, Sendable, CustomStringConvertible {
    /// A compiled program: its executable's path (as `/proc/PID/exe` names it) and the digest of the file
    /// that is running.
    case executable(path: String, digest: FileDigest)
    /// A script run by an interpreter (python3, perl, node, sh, …): the interpreter's path, the script's
    /// absolute path and the script's digest.
    case script(interpreter: String, path: String, digest: FileDigest)
    /// A Flatpak application, by the app id its sandbox declares (`/.flatpak-info` inside it, written by
    /// Flatpak and read-only to the app).
    case flatpak(appID: String)

    /// What stays the same across versions of the application: the executable's path, the interpreter's and
    /// the script's paths (`/usr/bin/python3.11 /home/me/bin/sync.py`), or the Flatpak app id. Access lists
    /// are keyed by it.
    ///
    /// A script is named with its interpreter: the same file run by another program (a copy of python3
    /// elsewhere, or any program named `python3`) is another application.
    package var name: String {
        switch self {
        case .executable(let path, _): path
        case .script(let interpreter, let path, _): Self.scriptName(interpreter: interpreter, script: path)
        case .flatpak(let appID): "flatpak:" + appID
        }
    }

    /// The name of the script at `script` run by the interpreter at `interpreter` (both absolute paths).
    package static func scriptName(interpreter: String, script: String) -> String { interpreter + " " + script }

    /// The digest of the file that runs, nil for a Flatpak app (its files are the sandbox's).
    package var digest: FileDigest? {
        switch self {
        case .executable(_, let digest), .script(_, _, let digest): digest
        case .flatpak: nil
        }
    }

    /// How a prompt names it: `/usr/bin/git`, `/home/me/bin/sync.py (python3 script)`,
    /// `org.example.App (Flatpak)`.
    package var description: String {
        switch self {
        case .executable(let path, _): path
        case .script(let interpreter, let path, _):
            "\(path) (\(interpreter.split(separator: "/").last.map(String.init) ?? interpreter) script)"
        case .flatpak(let appID): "\(appID) (Flatpak)"
        }
    }
}

/// A SHA-256 digest of a file's bytes.
package struct FileDigest: Hashable, Sendable, CustomStringConvertible {
    /// The 32 bytes.
    package let bytes: [UInt8]

    /// Wraps 32 bytes; nil for any other length.
    package init?(_ bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// Lower-case hexadecimal, as `sha256sum` prints it.
    package var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
