import COpenSSL
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
    /// What tells that program apart from one the process executes later (``ProcessInspector/runsSameProgram(_:)``).
    package let image: ProgramImage
    /// Whether it runs, outside any sandbox, a program only root could have installed
    /// (``ProcessInspector/runsSystemProgram(_:executable:)``): what the Secret portal's backend asks of
    /// xdg-desktop-portal. False for a script and a Flatpak app.
    package var runsSystemProgram = false
}

/// What a process's `execve` changes, read when it is identified and again at each secret request: a process
/// that executed another program since it was identified (with the same pid and start time) is no longer the
/// application identified (docs/threat-model.md, "Who is asking").
package struct ProgramImage: Hashable, Sendable {
    /// The device and inode of the file running (`stat` through `/proc/PID/exe`).
    package let device: UInt64
    /// See ``device``.
    package let inode: UInt64
    /// Where the process's stack starts (`/proc/PID/stat`, field 28): set by each `execve`, at a random place
    /// (address-space layout randomisation), so that the same interpreter executed again is told apart too.
    package let stackStart: UInt64
    /// What an interpreter's command line runs, nil for a compiled program.
    package let target: InterpreterCommandLine.Target?
    /// The process's name (`/proc/PID/stat`, field 2: the executable's file name, set by `execve`) and the
    /// SHA-256 of its command line: all that is left to compare once the process has made itself non-dumpable,
    /// which hides the rest from other processes of its user. The command line is kept as a digest only: a
    /// client's arguments may hold a secret (`latchkey add-generic-password -w`), and the daemon keeps this for
    /// the connection's life (docs/threat-model.md, "In memory").
    package let command: String
    /// See ``command``.
    package let commandLineDigest: [UInt8]
}

/// What a process runs at one moment, as ``ProcessInspector/firstLook(at:)`` reads it: enough to tell that it
/// executed another program (or ended) since.
package struct ProcessLook: Hashable, Sendable {
    /// Its start time (`/proc/PID/stat`, field 22).
    package let startTime: UInt64
    /// The device and inode of the file it runs.
    package let device: UInt64
    /// See ``device``.
    package let inode: UInt64
    /// Where its stack starts (`/proc/PID/stat`, field 28): set at random by each `execve`.
    package let stackStart: UInt64
    /// The SHA-256 of its command line (as ``ProgramImage/commandLineDigest``: a command line is not kept).
    package let commandLineDigest: [UInt8]
}

extension Caller {
    /// Whether `look` saw the process and the program identified: the same process, running the same file
    /// from the same `execve` (the start of its stack), and for an interpreter the same command line (what it
    /// runs; the stack alone does not tell one `execve` from another where the process turned address-space
    /// randomisation off for itself). As ``ProcessInspector/runsSameProgram(_:sameProcess:)``, a compiled
    /// program's command line is not compared: it may rewrite it. A Flatpak app: the same process.
    package func matches(_ look: ProcessLook?) -> Bool {
        guard let look else { return false }
        // A Flatpak app is its sandbox whatever program runs in it.
        if case .flatpak = application { return look.startTime == startTime }
        return look.startTime == startTime && look.device == image.device && look.inode == image.inode
            && look.stackStart == image.stackStart
            && (image.target == nil || look.commandLineDigest == image.commandLineDigest)
    }
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
        let before = try status(of: pid)
        let processUID = try realAndEffectiveUID(directory)
        guard processUID.real == expectedUID, processUID.effective == expectedUID else {
            throw .otherUser(uid: processUID.effective == expectedUID ? processUID.real : processUID.effective)
        }
        let executable = try executableFile(directory)
        let rawCommandLine = try readBytes(directory + "/cmdline")
        let arguments = Self.arguments(rawCommandLine)
        let (application, target) = try self.application(in: directory, arguments: arguments)
        // Ended (its pid perhaps reused), or executed another program while it was read: what was read may mix
        // two programs.
        let after = try status(of: pid)
        guard after.startTime == before.startTime else { throw .processGone(pid) }
        guard after.stackStart == before.stackStart, after.command == before.command,
            try executableFile(directory) == executable
        else { throw .programChanged(pid) }
        let image = ProgramImage(
            device: executable.device, inode: executable.inode, stackStart: before.stackStart, target: target,
            command: before.command, commandLineDigest: Self.sha256(rawCommandLine))
        var caller = Caller(pid: pid, uid: uid, startTime: before.startTime, application: application, image: image)
        if case .executable(let path, _) = application {
            caller.runsSystemProgram = runsSystemProgram(directory, executable: path)
        }
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
        guard hasOurRoot(directory) else { return false }
        var running = stat()
        guard stat(directory + "/exe", &running) == 0, running.st_mode & S_IFMT == S_IFREG,
            Self.isRootOnly(running)
        else { return false }
        let deleted = (try? readLink(directory + "/exe"))?.hasSuffix(" (deleted)") ?? false
        if !deleted {
            guard names(executable, fileRunIn: directory) else { return false }
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

    /// Whether the process in `directory` (`/proc/PID`) has the daemon's root directory (same device and inode):
    /// not a container's, a sandbox's or a chroot's.
    private func hasOurRoot(_ directory: String) -> Bool {
        var root = stat()
        var ours = stat()
        return stat(directory + "/root", &root) == 0 && stat("/", &ours) == 0 && root.st_dev == ours.st_dev
            && root.st_ino == ours.st_ino
    }

    /// Whether the process in `directory` (`/proc/PID`) is in the daemon's own mount namespace.
    private func sharesOurMountNamespace(_ directory: String) -> Bool {
        guard let theirs = try? readLink(directory + "/ns/mnt") else { return false }
        return theirs == (try? readLink("/proc/self/ns/mnt"))
    }

    /// Whether `path` names here the very file the process in `directory` runs (same device and inode as
    /// `/proc/PID/exe`), and not another file a mount of the process's own hid it behind.
    private func names(_ path: String, fileRunIn directory: String) -> Bool {
        var running = stat()
        var named = stat()
        return stat(directory + "/exe", &running) == 0 && lstat(path, &named) == 0 && named.st_dev == running.st_dev
            && named.st_ino == running.st_ino
    }

    /// Owned by root, and writable by neither its group nor others.
    private static func isRootOnly(_ info: stat) -> Bool {
        info.st_uid == 0 && info.st_mode & (S_IWGRP | S_IWOTH) == 0
    }

    /// What process `pid` runs now, for as little as a `stat` and two small reads (`/proc/PID/stat`,
    /// `/proc/PID/cmdline`): taken the moment the bus gives a new connection's pid, before the identification
    /// (which may wait behind other callers' hashes), and compared with what the identification read
    /// (``Caller/matches(_:)``), so that a process that executed another program in between is not taken for it.
    /// Nil when it cannot be read (gone, or non-dumpable: such a process is not identified either).
    package func firstLook(at pid: pid_t) -> ProcessLook? {
        let directory = "\(procRoot)/\(pid)"
        guard let status = try? status(of: pid), let file = try? executableFile(directory),
            let commandLine = try? readBytes(directory + "/cmdline")
        else { return nil }
        return ProcessLook(
            startTime: status.startTime, device: file.device, inode: file.inode, stackStart: status.stackStart,
            commandLineDigest: Self.sha256(commandLine))
    }

    /// Whether `caller` is still running as the same process (its pid not reused since).
    package func isRunning(_ caller: Caller) -> Bool {
        (try? startTime(of: caller.pid)) == caller.startTime
    }

    /// Whether `caller` still runs the program it was identified running: the same process (its pid not reused)
    /// that has not executed another program since (its executable's file and, for an interpreter, what its
    /// command line runs are unchanged; unless `sameProcess`, the start of its stack too). A Flatpak app is its
    /// sandbox whatever program runs in it: only the process is compared.
    ///
    /// `sameProcess`: the caller knows the process is the one identified (a pidfd on it has not signalled its
    /// end), so `/proc/PID/stat` (about 15 µs of the kernel's time here, more than the rest together) is not read. The
    /// start of the stack then goes uncompared: it tells apart only the same executable run again with the same
    /// script, which is the same application.
    ///
    /// A process that has made itself non-dumpable since it was identified (the `latchkey` command does, once
    /// the daemon has identified it) hides its executable and its stack from other processes of its user: it
    /// is taken to run the same program when its name and its whole command line are unchanged.
    package func runsSameProgram(_ caller: Caller, sameProcess: Bool = false) -> Bool {
        let directory = "\(procRoot)/\(caller.pid)"
        let image = caller.image
        if case .flatpak = caller.application { return sameProcess || isRunning(caller) }
        let file: (device: UInt64, inode: UInt64)
        do {
            file = try executableFile(directory)
        } catch .unreadable(_, errno: EACCES) {
            guard let now = try? status(of: caller.pid) else { return false }
            return now.startTime == caller.startTime && now.stackStart == 0 && now.command == image.command
                && (try? readBytes(directory + "/cmdline")).map(Self.sha256) == image.commandLineDigest
        } catch {
            return false
        }
        guard file.device == image.device, file.inode == image.inode else { return false }
        if !sameProcess {
            guard let now = try? status(of: caller.pid), now.startTime == caller.startTime,
                now.stackStart == image.stackStart
            else { return false }
        }
        guard let target = image.target, case .script(let interpreter, _, _) = caller.application.program else {
            return true
        }
        guard let arguments = try? commandLine(directory) else { return false }
        return InterpreterCommandLine.target(of: arguments, executable: interpreter) == target
    }

    /// The start time of `pid`, from `/proc/PID/stat`.
    package func startTime(of pid: pid_t) throws(CallerIdentityError) -> UInt64 {
        try status(of: pid).startTime
    }

    /// The name of `pid`, its start time and where its stack starts, from `/proc/PID/stat` (fields 2, 22 and 28;
    /// field 28 reads 0 for a process that is not dumpable).
    private func status(
        of pid: pid_t
    ) throws(CallerIdentityError) -> (command: String, startTime: UInt64, stackStart: UInt64) {
        // Read and parsed as bytes, without the general reader's copies: this runs at every secret request.
        let path = "\(procRoot)/\(pid)/stat"
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ESRCH { throw .processGone(pid) }
            throw .unreadable(path, errno: errno)
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 2048)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress.map { $0 + count }, $0.count - count) }
            if got < 0 {
                if errno == EINTR { continue }
                if errno == ESRCH { throw .processGone(pid) }
                throw .unreadable(path, errno: errno)
            }
            if got == 0 { break }
            count += got
        }
        guard let parsed = Self.parseStat(bytes[..<count]) else { throw .malformed(path) }
        return parsed
    }

    /// Fields 2, 22 and 28 of a `/proc/PID/stat` line. The command name (field 2) is in parentheses and may hold
    /// spaces and parentheses: fields resume after the last ')', field 3 first.
    static func parseStat(_ line: ArraySlice<UInt8>) -> (command: String, startTime: UInt64, stackStart: UInt64)? {
        guard let open = line.firstIndex(of: UInt8(ascii: "(")), let close = line.lastIndex(of: UInt8(ascii: ")")),
            open < close
        else { return nil }
        var field = 2
        var value: UInt64 = 0
        var startTime: UInt64?
        for byte in line[(close + 1)...] {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") {
                if field == 22 { startTime = value }
                if field == 28, let startTime {
                    return (String(decoding: line[(open + 1)..<close], as: UTF8.self), startTime, value)
                }
                field += 1
                value = 0
            } else if field == 22 || field == 28 {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
                guard !overflow else { return nil }
                value = shifted &+ UInt64(byte - UInt8(ascii: "0"))
            }
        }
        return nil
    }

    /// The device and inode of the file a process runs.
    private func executableFile(_ directory: String) throws(CallerIdentityError) -> (device: UInt64, inode: UInt64) {
        var status = stat()
        guard stat(directory + "/exe", &status) == 0 else { throw .unreadable(directory + "/exe", errno: errno) }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
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

    /// The program in `directory` (`/proc/PID`) whose command line is `arguments`, and what that command line
    /// runs when the program is an interpreter.
    private func application(
        in directory: String, arguments: [String]
    ) throws(CallerIdentityError) -> (Application, InterpreterCommandLine.Target?) {
        if let appID = try flatpakAppID(directory) { return (.flatpak(appID: appID), nil) }
        let link = try readLink(directory + "/exe")
        let executable = link.hasSuffix(" (deleted)") ? String(link.dropLast(" (deleted)".count)) : link
        let target = InterpreterCommandLine.target(of: arguments, executable: executable)
        let program: Application
        switch target {
        case .file(let script)?:
            let path = script.hasPrefix("/") ? script : try readLink(directory + "/cwd") + "/" + script
            // Opened through the process's root, as the process sees its files.
            let digest = try digester.digest(ofFileAt: directory + "/root" + path)
            program = .script(interpreter: executable, path: Self.normalized(path), digest: digest)
        case .module, .inline, nil:
            // The running file itself, even if its path now holds another (an upgrade in progress).
            program = .executable(path: executable, digest: try digester.digest(ofFileAt: directory + "/exe"))
        }
        let deleted = link.hasSuffix(" (deleted)")
        guard let container = container(of: directory, executable: executable, deleted: deleted) else {
            return (program, target)
        }
        return (.inContainer(container, program), target)
    }

    /// The container the process in `directory` (`/proc/PID`), running `executable` (its `exe` link without
    /// " (deleted)"), runs in; nil when it runs on the host: its root is the daemon's (same device and inode)
    /// and `executable` names here the very file it runs (or that file was deleted, in the daemon's own mount
    /// namespace: an upgrade while it ran). A mount namespace of the process's own that puts another file at
    /// the path is a container too: its path names another program on the host, even when the file it bound
    /// there was deleted since (`unshare -rm`, a bind mount over a host program's path, exec, unlink).
    func container(of directory: String, executable: String, deleted: Bool) -> Container? {
        if hasOurRoot(directory),
            (deleted && sharesOurMountNamespace(directory)) || names(executable, fileRunIn: directory)
        {
            return nil
        }
        let marker = { (path: String) -> String? in
            (try? self.readBytes(directory + "/root" + path)).map { String(decoding: $0, as: UTF8.self) }
        }
        let cgroup = (try? readText(directory + "/cgroup")) ?? ""
        let cgroupID = Container.cgroupContainerID(cgroup)
        let engine: Container.Engine
        var name: String?
        if let environment = marker("/run/.containerenv") {
            engine = marker("/run/.toolboxenv") != nil ? .toolbox : .podman
            name = Container.containerEnvironmentName(environment)
        } else if marker("/.dockerenv") != nil {
            engine = .docker
        } else if let snap = Container.cgroupSnapName(cgroup) {
            engine = .snap
            name = snap
        } else {
            engine = .other
        }
        name = name ?? cgroupID
        if name == nil, let namespace = try? readLink(directory + "/ns/mnt") {
            // A chroot in the daemon's mount namespace: its directory; else the namespace ("mnt:[4026532177]").
            name =
                namespace == (try? readLink("/proc/self/ns/mnt"))
                ? (try? readLink(directory + "/root")).flatMap { Container.sanitized($0[...]) }
                : "mnt-" + namespace.filter(\.isNumber)
        }
        return Container(engine: engine, name: name ?? "unknown")
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
        Self.arguments(try readBytes(directory + "/cmdline"))
    }

    /// The arguments of a command line as `/proc/PID/cmdline` holds it (each ended by a NUL).
    private static func arguments(_ bytes: [UInt8]) -> [String] {
        bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast(bytes.last == 0 ? 1 : 0).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// The SHA-256 of `bytes` (empty in the unlikely case that OpenSSL fails).
    private static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(bytes, bytes.count, &output, &length, EVP_sha256(), nil) == 1 else { return [] }
        return Array(output.prefix(Int(length)))
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
