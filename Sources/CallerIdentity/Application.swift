/// The program behind a caller, as the keychain trusts it: what an item's access list names, and what a
/// prompt shows the user.
///
/// An application is named by where it lives and fingerprinted by the SHA-256 of its file, so that an
/// upgrade (same name, other bytes) is recognised as the same application that changed.
package indirect enum Application: Hashable, Sendable, CustomStringConvertible {
    /// A compiled program: its executable's path (as `/proc/PID/exe` names it) and the digest of the file
    /// that is running.
    case executable(path: String, digest: FileDigest)
    /// A script run by an interpreter (python3, perl, node, sh, …): the interpreter's path, the script's
    /// absolute path and the script's digest.
    case script(interpreter: String, path: String, digest: FileDigest)
    /// A Flatpak application, by the app id its sandbox declares (`/.flatpak-info` inside it, written by
    /// Flatpak and read-only to the app).
    case flatpak(appID: String)
    /// A program (`.executable` or `.script`, its paths the container's) run inside a container: another
    /// application than the host's program at the same path (docs/containers.md).
    case inContainer(Container, Application)

    /// What stays the same across versions of the application: the executable's path, the interpreter's and
    /// the script's paths (`/usr/bin/python3.11 /home/me/bin/sync.py`), or the Flatpak app id; in a container,
    /// the container's key before it (`container:podman:dev:/usr/bin/secret-tool`), so that no host program's
    /// entry matches it by path. Access lists are keyed by it.
    ///
    /// A script is named with its interpreter: the same file run by another program (a copy of python3
    /// elsewhere, or any program named `python3`) is another application.
    package var name: String {
        switch self {
        case .executable(let path, _): path
        case .script(let interpreter, let path, _): Self.scriptName(interpreter: interpreter, script: path)
        case .flatpak(let appID): "flatpak:" + appID
        case .inContainer(let container, let program): container.key + ":" + program.name
        }
    }

    /// The name of the script at `script` run by the interpreter at `interpreter` (both absolute paths).
    package static func scriptName(interpreter: String, script: String) -> String { interpreter + " " + script }

    /// The digest of the file that runs, nil for a Flatpak app (its files are the sandbox's).
    package var digest: FileDigest? {
        switch self {
        case .executable(_, let digest), .script(_, _, let digest): digest
        case .flatpak: nil
        case .inContainer(_, let program): program.digest
        }
    }

    /// How a prompt names it: `/usr/bin/git`, `/home/me/bin/sync.py (python3 script)`,
    /// `org.example.App (Flatpak)`, `/usr/bin/secret-tool in podman container “dev”`.
    package var description: String {
        switch self {
        case .executable(let path, _): path
        case .script(let interpreter, let path, _):
            "\(path) (\(interpreter.split(separator: "/").last.map(String.init) ?? interpreter) script)"
        case .flatpak(let appID): "\(appID) (Flatpak)"
        case .inContainer(let container, let program): "\(program) in \(container)"
        }
    }

    /// The container it runs in, nil on the host (and for a Flatpak app, which is its sandbox).
    package var container: Container? {
        if case .inContainer(let container, _) = self { return container }
        return nil
    }

    /// The program itself, outside the container it may run in.
    package var program: Application {
        if case .inContainer(_, let program) = self { return program }
        return self
    }
}

extension Application {
    /// A program whose identity alone says nothing of which program is really asking: it asks for whoever runs it
    /// (docs/threat-model.md, "Generic tools").
    package enum GenericTool: Sendable, Equatable {
        /// A keychain command (`secret-tool`, `latchkey`, python-keyring's `keyring`): any program can run it to
        /// read an item. Its prompt says so; it may still be allowed for good, as macOS allows `security(1)`.
        case keychainCommand
        /// A tool that runs whatever its command line says: an interpreter identified as itself (inline code
        /// such as `python3 -c` or `sh -c`, standard input, `python3 -m`), or a general D-Bus client (`gdbus`,
        /// `dbus-send`, `busctl`, `qdbus`). Never allowed for good, and trusted by no item it makes.
        case runsAnything
    }

    /// Keychain commands, by file name.
    static let keychainCommands: Set<String> = ["secret-tool", "latchkey", "keyring"]
    /// General D-Bus clients, by file name.
    static let busClients: Set<String> = ["gdbus", "dbus-send", "busctl", "qdbus", "qdbus6", "qdbus-qt5", "qdbus-qt6"]

    /// What kind of generic tool this application is, nil when it is none (it asks for itself). A script is
    /// its own program, except a keychain command written as one; an interpreter identified as itself runs
    /// code that has no file of its own.
    package var genericTool: GenericTool? {
        switch self {
        case .executable(let path, _):
            let name = path.split(separator: "/").last.map(String.init) ?? path
            if Self.keychainCommands.contains(name) { return .keychainCommand }
            if Self.busClients.contains(name) || InterpreterCommandLine.family(ofExecutable: path) != nil {
                return .runsAnything
            }
            return nil
        case .script(_, let path, _):
            let name = path.split(separator: "/").last.map(String.init) ?? path
            return Self.keychainCommands.contains(name) ? .keychainCommand : nil
        case .flatpak:
            return nil
        case .inContainer(_, let program):
            return program.genericTool
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
