import Glibc

/// Programs only root can change: the only ones a prompt program (`PINENTRY`) may be when it is chosen by
/// something a process of the user could have written (the PAM environment, a session's variables, the systemd
/// user manager's environment). One rule for every place such a name comes from: the name is resolved once to
/// its real path, that path is checked, and that path is what runs, so that a symlink on the way that is
/// repointed later changes nothing.
package enum ProtectedProgram {
    /// Where a program given by name alone is looked for when only root may have written it.
    package static let searchPath = ["/usr/local/bin", "/usr/bin", "/bin"]

    /// Why a program was refused, in one line.
    package struct Refusal: Error, Sendable {
        /// The reason, naming the program.
        package let reason: String
    }

    /// `program` resolved once to its real path (`realpath`: no symlink, `.` or `..` left in it): a path as it
    /// is, a name alone looked for in `searchPath`. With `onlyRoot`, the program must be one only root can
    /// change (``isProtected(realPath:)``), and a relative path is refused.
    package static func resolve(_ program: String, searchPath: [String] = searchPath, onlyRoot: Bool)
        throws(Refusal) -> String
    {
        guard !program.isEmpty else { throw Refusal(reason: "no program given") }
        let candidate: String
        if program.contains("/") {
            guard !onlyRoot || program.hasPrefix("/") else {
                throw Refusal(reason: "\(program) is not an absolute path or a name")
            }
            candidate = program
        } else {
            let found = searchPath.lazy.map { ($0.isEmpty ? "." : $0) + "/" + program }
                .first { access($0, X_OK) == 0 }
            guard let found else {
                throw Refusal(reason: "\(program) not found in \(searchPath.joined(separator: ":"))")
            }
            candidate = found
        }
        guard let resolved = realpath(candidate, nil) else { throw Refusal(reason: "\(program) is not an executable") }
        let path = String(cString: resolved)
        free(resolved)
        var info = stat()
        guard access(path, X_OK) == 0, stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw Refusal(reason: "\(program) is not an executable")
        }
        guard !onlyRoot || isProtected(realPath: path) else {
            throw Refusal(reason: "\(program) is not a program only root can change (\(path))")
        }
        return path
    }

    /// Whether the real path `path` names a file only root can change: every component, read with `lstat` (a
    /// symlink is no component of a real path, so one found there was put in since and is refused), is owned by
    /// root and writable by no one else; a directory may be writable by others when it is sticky (as `/tmp`:
    /// there only an entry's owner can replace it). A program that a process of the user (a sandboxed
    /// application among them) wrote would run outside any sandbox, answer the daemon's prompts and read the
    /// passwords typed into them.
    package static func isProtected(realPath path: String) -> Bool {
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
