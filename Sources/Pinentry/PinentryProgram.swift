import Posix

/// Finds the pinentry program the daemon runs, the same way for every place a name can come from (`--pinentry`,
/// `PINENTRY` in the daemon's environment, a session's `UpdateEnvironment`, the systemd user manager's
/// environment): ``ProtectedProgram/resolve(_:searchPath:onlyRoot:)``, resolved once to its real path, checked
/// there, and that path is what runs.
package enum PinentryProgram {
    /// Where a program given by name alone is looked for when only root may have written it.
    package static let protectedSearchPath = ProtectedProgram.searchPath

    /// `program` resolved once to its real path (``ProtectedProgram/resolve(_:searchPath:onlyRoot:)``); throws
    /// with the reason.
    package static func resolve(_ program: String, searchPath: [String], onlyRoot: Bool) throws(PinentryError)
        -> String
    {
        do {
            return try ProtectedProgram.resolve(program, searchPath: searchPath, onlyRoot: onlyRoot)
        } catch {
            throw PinentryError(reason: error.reason)
        }
    }
}
