import Glibc

/// A process that called the daemon, as the kernel describes it.
package struct Caller: Hashable, Sendable {
    /// Its pid, as the bus gave it.
    package let pid: pid_t
    /// Its user.
    package let uid: uid_t
    /// When it started, in clock ticks after boot (`/proc/PID/stat`, field 22): with the pid, it names one
    /// process for the machine's uptime, so a pid reused by a later process is not mistaken for this one.
    package let startTime: UInt64
    /// The program it runs.
    package let application: Application
    /// Whether it runs, outside any sandbox, a program only root could have installed
    /// (``ProcessInspector/runsSystemProgram(_:executable:)``): what the Secret portal's backend asks of
    /// xdg-desktop-portal. False for a script and a Flatpak app.
    package var runsSystemProgram = false
}

/// Reads `/proc` to tell which program a process runs: its executable (hashed), the script when the
/// executable is an interpreter, or its Flatpak app id. Never trusts what the process says about itself
/// beyond its command line, which only picks which file of its own to hash.
package final class ProcessInspector {
    /// Where procfs is mounted.
    let procRoot: String
    /// Hashes files, remembering them by inode.
    package let digester: FileDigester

    /// An inspector of `/proc`.
    package init(procRoot: String = "/proc", digester: FileDigester = FileDigester()) {
        self.procRoot = procRoot
        self.digester = digester
    }

    /// Identifies process `pid`, which the bus says belongs to `uid` and which must belong to `expectedUID`.
    ///
    /// The start time is read before and after everything else: a process that ended (and whose pid may have
    /// been taken by another) while it was read is reported gone, not mistaken for its successor.
    package func identify(pid: pid_t, uid: uid_t, expectedUID: uid_t) throws(CallerIdentityError) -> Caller {
        guard uid == expectedUID else { throw .otherUser(uid: uid) }
        let directory = "\(procRoot)/\(pid)"
        let startTime = try self.startTime(of: pid)
        let processUID = try realAndEffectiveUID(directory)
        guard processUID.real == expectedUID, processUID.effective == expectedUID else {
            throw .otherUser(uid: processUID.effective == expectedUID ? processUID.real : processUID.effective)
        }
        let application = try self.application(in: directory)
        var caller = Caller(pid: pid, uid: uid, startTime: startTime, application: application)
        if case .executable(let path, _) = application {
            caller.runsSystemProgram = runsSystemProgram(directory, executable: path)
        }
        guard try self.startTime(of: pid) == startTime else { throw .processGone(pid) }
        return caller
    }

    /// Whether the process in `directory` (`/proc/PID`), running `executable` (its `exe` link, without
    /// " (deleted)"), runs a program only root could have put there, outside a sandbox:
    /// - its root directory is the daemon's (same device and inode): not a Flatpak or bubblewrap sandbox, nor a
    ///   chroot, whose root is a directory of its own;
    /// - the file it runs (`/proc/PID/exe`, the running inode) is a regular file owned by root that neither
    ///   group nor others may write;
    /// - `executable` names that very file here (same device and inode), so that a mount of the caller's own
    ///   (a user namespace's bind mount over the path) cannot pass another root-owned program off as it; a
    ///   deleted file (the package was upgraded while it ran) is taken by its running inode alone;
    /// - every directory above it, up to `/`, is owned by root and writable by neither group nor others, so
    ///   that no one but root could have placed or renamed it there.
    package func runsSystemProgram(_ directory: String, executable: String) -> Bool {
        var root = stat()
        var ours = stat()
        guard stat(directory + "/root", &root) == 0, stat("/", &ours) == 0, root.st_dev == ours.st_dev,
            root.st_ino == ours.st_ino
        else { return false }
        var running = stat()
        guard stat(directory + "/exe", &running) == 0, running.st_mode & S_IFMT == S_IFREG,
            Self.isRootOnly(running)
        else { return false }
        let deleted = (try? readLink(directory + "/exe"))?.hasSuffix(" (deleted)") ?? false
        if !deleted {
            var named = stat()
            guard lstat(executable, &named) == 0, named.st_dev == running.st_dev, named.st_ino == running.st_ino
            else { return false }
        }
        guard executable.hasPrefix("/") else { return false }
        var parent = Substring(executable)
        while let slash = parent.lastIndex(of: "/") {
            parent = parent[..<slash]
            var info = stat()
            guard lstat(parent.isEmpty ? "/" : String(parent), &info) == 0, info.st_mode & S_IFMT == S_IFDIR,
                Self.isRootOnly(info)
            else { return false }
        }
        return true
    }

    /// Owned by root, and writable by neither its group nor others.
    private static func isRootOnly(_ info: stat) -> Bool {
        info.st_uid == 0 && info.st_mode & (S_IWGRP | S_IWOTH) == 0
    }

    /// Whether `caller` is still running as the same process (its pid not reused since).
    package func isRunning(_ caller: Caller) -> Bool {
        (try? startTime(of: caller.pid)) == caller.startTime
    }

    /// The start time of `pid`, from `/proc/PID/stat`.
    package func startTime(of pid: pid_t) throws(CallerIdentityError) -> UInt64 {
        let text: String
        do {
            text = try readText("\(procRoot)/\(pid)/stat")
        } catch .unreadable(_, errno: ENOENT), .unreadable(_, errno: ESRCH) {
            throw .processGone(pid)
        }
        // The command name (field 2) is in parentheses and may hold spaces and parentheses: fields resume after
        // the last ')'. Field 3 is the first after it, so field 22 is the 20th.
        guard let close = text.lastIndex(of: ")") else { throw .malformed("/proc/\(pid)/stat") }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count >= 20, let ticks = UInt64(fields[19]) else { throw .malformed("/proc/\(pid)/stat") }
        return ticks
    }

    private func realAndEffectiveUID(_ directory: String) throws(CallerIdentityError) -> (real: uid_t, effective: uid_t)
    {
        let status = try readText(directory + "/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }) else {
            throw .malformed(directory + "/status")
        }
        let ids = line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { uid_t($0) }
        guard ids.count >= 2 else { throw .malformed(directory + "/status") }
        return (ids[0], ids[1])
    }

    private func application(in directory: String) throws(CallerIdentityError) -> Application {
        if let appID = try flatpakAppID(directory) { return .flatpak(appID: appID) }
        let link = try readLink(directory + "/exe")
        let executable = link.hasSuffix(" (deleted)") ? String(link.dropLast(" (deleted)".count)) : link
        let arguments = try commandLine(directory)
        switch InterpreterCommandLine.target(of: arguments, executable: executable) {
        case .file(let script)?:
            let path = script.hasPrefix("/") ? script : try readLink(directory + "/cwd") + "/" + script
            // Opened through the process's root, as the process sees its files.
            let digest = try digester.digest(ofFileAt: directory + "/root" + path)
            return .script(interpreter: executable, path: Self.normalized(path), digest: digest)
        case .module, .inline, nil:
            // The running file itself, even if its path now holds another (an upgrade in progress).
            return .executable(path: executable, digest: try digester.digest(ofFileAt: directory + "/exe"))
        }
    }

    /// The app id a Flatpak sandbox declares in its `/.flatpak-info` (`[Application]`, `name=`), nil outside one.
    private func flatpakAppID(_ directory: String) throws(CallerIdentityError) -> String? {
        let text: String
        do {
            text = try readText(directory + "/root/.flatpak-info")
        } catch .unreadable(_, errno: ENOENT) {
            return nil
        }
        var section = ""
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingWhitespace
            if trimmed.hasPrefix("[") {
                section = String(trimmed)
            } else if section == "[Application]", trimmed.hasPrefix("name=") {
                let name = trimmed.dropFirst("name=".count).trimmingWhitespace
                guard !name.isEmpty else { break }
                return String(name)
            }
        }
        throw .malformed(directory + "/root/.flatpak-info")
    }

    private func commandLine(_ directory: String) throws(CallerIdentityError) -> [String] {
        let bytes = try readBytes(directory + "/cmdline")
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast(bytes.last == 0 ? 1 : 0).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// `/a/./b/../c` → `/a/c`, without touching the file system.
    static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    private func readLink(_ path: String) throws(CallerIdentityError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count >= 0 else { throw .unreadable(path, errno: errno) }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func readText(_ path: String) throws(CallerIdentityError) -> String {
        String(decoding: try readBytes(path), as: UTF8.self)
    }

    /// A small file's bytes (procfs files, `.flatpak-info`): at most 1 MiB.
    private func readBytes(_ path: String) throws(CallerIdentityError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw .unreadable(path, errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let count = read(fd, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path, errno: errno)
            }
            if count == 0 { break }
            bytes += chunk.prefix(count)
        }
        return bytes
    }
}

extension StringProtocol {
    fileprivate var trimmingWhitespace: Substring {
        let view = self[...]
        let start = view.firstIndex { !$0.isWhitespace } ?? view.endIndex
        let end = view.lastIndex { !$0.isWhitespace }.map { view.index(after: $0) } ?? start
        return Substring(view[start..<Swift.max(start, end)])
    }
}
