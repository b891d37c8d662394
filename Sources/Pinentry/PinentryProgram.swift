import Glibc

/// Finds the pinentry program the daemon runs, the same way for every place a name can come from (`--pinentry`,
/// `PINENTRY` in the daemon's environment, a session's `UpdateEnvironment`, the systemd user manager's
/// environment): resolved once to its real path, checked there, and that path is what runs.
package enum PinentryProgram {
    /// Where a program given by name alone is looked for when only root may have written it.
    package static let protectedSearchPath = ["/usr/local/bin", "/usr/bin", "/bin"]

    /// `program` resolved once to its real path (`realpath`: no symlink, `.` or `..` left in it): an absolute or
    /// relative path as it is, a name alone looked for in `searchPath`. The result is what is run from then on,
    /// so a symlink on the way that is repointed later changes nothing. With `onlyRoot`, the program must be one
    /// only root can change (``isProtected(_:)``), and a relative path is refused. Throws with the reason.
    package static func resolve(_ program: String, searchPath: [String], onlyRoot: Bool) throws(PinentryError)
        -> String
    {
        guard !program.isEmpty else { throw PinentryError(reason: "no program given") }
        let candidate: String
        if program.contains("/") {
            guard !onlyRoot || program.hasPrefix("/") else {
                throw PinentryError(reason: "\(program) is not an absolute path or a name")
            }
            candidate = program
        } else {
            let found = searchPath.lazy.map { ($0.isEmpty ? "." : $0) + "/" + program }
                .first { access($0, X_OK) == 0 }
            guard let found else {
                throw PinentryError(reason: "\(program) not found in \(searchPath.joined(separator: ":"))")
            }
            candidate = found
        }
        guard let resolved = realpath(candidate, nil) else {
            throw PinentryError(reason: "\(program) is not an executable")
        }
        let path = String(cString: resolved)
        free(resolved)
        var info = stat()
        guard access(path, X_OK) == 0, stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw PinentryError(reason: "\(program) is not an executable")
        }
        guard !onlyRoot || isProtected(path) else {
            throw PinentryError(reason: "\(program) is not a program only root can change (\(path))")
        }
        return path
    }

    /// Whether the real path `path` names a file only root can change: every component, read with `lstat`
    /// (a symlink is no component of a real path, so one found there was put in since and is refused), is owned
    /// by root and writable by no one else; a directory may be writable by others when it is sticky (as `/tmp`:
    /// there only an entry's owner can replace it). A session may choose the pinentry, but not a program that a
    /// process of the user (a sandboxed application among them) wrote: it runs outside any sandbox, answers the
    /// daemon's prompts and reads the passwords typed into them.
    package static func isProtected(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == 0,
            info.st_mode & 0o022 == 0
        else { return false }
        var directory = path
        while directory != "/", let slash = directory.lastIndex(of: "/") {
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
            guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == 0,
                info.st_mode & 0o022 == 0 || info.st_mode & UInt32(S_ISVTX) != 0
            else { return false }
        }
        return true
    }
}
