import CallerIdentity
import Glibc
import KeychainCore

/// An application named on the command line (`-T`, `remove-access`): a program's path, or `flatpak:APP-ID`.
enum TrustedApplicationArgument {
    static let flatpakPrefix = "flatpak:"

    /// The application `argument` names, fingerprinted now: a path made absolute with its links resolved
    /// (as the daemon sees a running program, through `/proc/PID/exe`), with the interpreter its `#!` line
    /// names when it is a script (`Application.trustedName`), and the SHA-256 of the file.
    static func resolve(_ argument: String) throws(KeychainError) -> TrustedApplication {
        if argument.hasPrefix(flatpakPrefix) {
            guard argument.count > flatpakPrefix.count, TrustedApplication.isStorable(argument) else {
                throw KeychainError.param("\(argument): a Flatpak application is flatpak:APP-ID")
            }
            return TrustedApplication(name: argument, digest: nil)
        }
        let path = try canonicalPath(argument)
        do {
            let digest = try FileDigester().digest(ofFileAt: path)
            return TrustedApplication(name: listedName(ofProgramAt: path), digest: digest.description)
        } catch {
            throw KeychainError.param("\(argument): \(error)")
        }
    }

    /// The name of the program at `path` (canonical) in access lists: a script with the interpreter its `#!`
    /// line names, found through this process's `PATH`.
    static func listedName(ofProgramAt path: String) -> String {
        Application.trustedName(ofProgramAt: path, searchPath: getenv("PATH").map { String(cString: $0) })
    }

    /// `argument` made absolute with its links resolved, as access lists name programs.
    static func canonicalPath(_ argument: String) throws(KeychainError) -> String {
        guard let resolved = realpath(argument, nil) else {
            throw KeychainError.param("\(argument): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        let path = String(cString: resolved)
        guard TrustedApplication.isStorable(path) else {
            throw KeychainError.param("\(argument): a path with a newline or a tab cannot be kept in an access list")
        }
        return path
    }
}
