import Glibc

/// Programs only root can change: the only ones a prompt program (`PINENTRY`) may be, when it is chosen by
/// something a process of the user could have written (the session's variables, the PAM environment).
package enum ProtectedProgram {
    /// Where a program given by name is looked for.
    package static let searchPath = ["/usr/local/bin", "/usr/bin", "/bin"]

    /// Whether `program` (a name looked for in ``searchPath``, or an absolute path) is an executable file only
    /// root can change: owned by root and writable by no one else, in directories that are too (or sticky, as
    /// `/tmp`: there only an entry's owner can replace it). A program that a process of the user (a sandboxed
    /// application among them) wrote would run outside any sandbox, answer the daemon's prompts and read the
    /// passwords typed into them.
    package static func isProtected(_ program: String) -> Bool {
        let candidates =
            program.hasPrefix("/") ? [program] : program.contains("/") ? [] : searchPath.map { $0 + "/" + program }
        guard let path = candidates.first(where: { access($0, X_OK) == 0 }) else { return false }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == 0,
            info.st_mode & 0o022 == 0
        else { return false }
        var directory = path
        while let slash = directory.lastIndex(of: "/") {
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
            guard stat(directory, &info) == 0, info.st_uid == 0,
                info.st_mode & 0o022 == 0 || info.st_mode & UInt32(S_ISVTX) != 0
            else { return false }
            if directory == "/" { break }
        }
        return true
    }
}
