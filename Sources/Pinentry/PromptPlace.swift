import Glibc
import Posix

/// Where a prompt for one request shows, chosen from the process that asked (docs/prompts-in-terminals.md):
/// the desktop session's display, the caller's controlling terminal, or nowhere (and why).
///
/// `latchkeyd --pinentry PROGRAM` names one prompter for every prompt, and no place is chosen then.
package enum PromptPlace: Sendable {
    /// A window on the desktop session's display (the display the daemon knows: handed over by the session,
    /// its own environment or the systemd user manager's; never one the caller names).
    case desktop
    /// The caller's controlling terminal, opened already.
    case terminal(PromptTerminal)
    /// No prompt can be shown to the caller: why, in words ("no display, no terminal").
    case nowhere(String)

    /// Whether it is a terminal: answers typed there may come from a program that holds the terminal (its own
    /// pseudo-terminal, say), so they count as a program's password attempts (the wrong-password limit).
    package var isTerminal: Bool {
        if case .terminal = self { return true }
        return false
    }

    /// Whether it is the terminal of a caller in an SSH session, where the person's security key is not reachable.
    package var terminalOverSSH: Bool {
        if case .terminal(let terminal) = self { return terminal.overSSH }
        return false
    }

    /// The queue a prompt for this place waits in: "desktop", "terminal:ID" (one per terminal), "nowhere".
    package var queueKey: String {
        switch self {
        case .desktop: "desktop"
        case .terminal(let terminal): "terminal:" + terminal.id
        case .nowhere: "nowhere"
        }
    }

    /// What the daemon says to the caller (in its D-Bus error) and in its log when nothing can be shown to it:
    /// `subject` ("The login keychain is locked") and what to do.
    package static func nothingShown(_ subject: String, because reason: String) -> String {
        "\(subject) and no prompt can be shown to this program (\(reason)): run \"latchkey unlock-keychain\" in a"
            + " terminal, or run the program in a terminal or in the desktop session"
    }

    /// The reason a caller with neither a display nor a terminal gets.
    package static let noDisplayNoTerminal = "no display, no terminal"

    /// The reason a caller in the background of its terminal (not its foreground process group) gets when no
    /// display is known.
    package static let backgroundJob = "a background job of its terminal; run it in the foreground"

    /// The place for a request of process `pid`: see docs/prompts-in-terminals.md, "Where a prompt shows".
    /// `startTime` (field 22 of its stat when the bus gave its pid) tells a later process given the same pid
    /// apart. `session` holds the display the daemon knows (``SessionEnvironment``); `displayIsKnown` false
    /// says that no display is known at all (nil: not known yet, the systemd user manager still to be asked
    /// when the prompt shows). Reads `/proc` (bounded; files a descriptor of the caller names are looked at only on devpts and
    /// devtmpfs: see ``PromptTerminal/open(of:device:procRoot:)``).
    package static func of(
        pid: pid_t, startTime: UInt64?, session: SessionEnvironment, displayIsKnown: Bool?, procRoot: String = "/proc"
    ) -> PromptPlace {
        guard let caller = ProcessStat(pid: pid, procRoot: procRoot), startTime == nil || caller.startTime == startTime
        else { return .nowhere("the program that asked has ended") }
        let desktopOrNowhere: PromptPlace =
            displayIsKnown == false ? .nowhere(noDisplayNoTerminal) : .desktop
        guard caller.terminal != 0 else { return desktopOrNowhere }
        let environment = CallerEnvironment(pid: pid, procRoot: procRoot)
        // A terminal of the desktop (its emulator's window on the session's display): the desktop's prompt.
        if let display = session.values["DISPLAY"], environment.display == display { return .desktop }
        if let wayland = session.values["WAYLAND_DISPLAY"], environment.waylandDisplay == wayland {
            return .desktop
        }
        // A background job of its terminal: a prompt there would read the keystrokes the shell reads too.
        guard caller.processGroup == caller.foregroundGroup else {
            return displayIsKnown == false ? .nowhere(backgroundJob) : .desktop
        }
        // The caller's own descriptors, then its session leader's (git's credential helper runs with pipes).
        var holders = [pid]
        if caller.session > 0, caller.session != pid { holders.append(caller.session) }
        for holder in holders {
            guard let descriptor = PromptTerminal.open(of: holder, device: caller.terminal, procRoot: procRoot) else {
                continue
            }
            let leader = holder == pid ? environment : CallerEnvironment(pid: holder, procRoot: procRoot)
            return .terminal(
                PromptTerminal(
                    descriptor: descriptor, device: caller.terminal,
                    id: "\(caller.terminal):\(caller.session)",
                    type: environment.terminalType ?? leader.terminalType ?? PromptTerminal.defaultType,
                    characterType: environment.characterType ?? leader.characterType,
                    overSSH: environment.overSSH || leader.overSSH))
        }
        return displayIsKnown == false
            ? .nowhere("its terminal could not be opened, and there is no display") : .desktop
    }
}

/// A caller's controlling terminal, open (never reopened by name), for a pinentry to show on: the child gets
/// it as descriptor 3 and `OPTION ttyname=/dev/fd/3`. Closed when the last holder lets go.
package final class PromptTerminal: Sendable {
    /// The open terminal (close-on-exec; above 9, so that it is never one of the child's first descriptors).
    package let descriptor: Int32
    /// Its device number (`tty_nr`, field 7 of the caller's stat).
    package let device: UInt64
    /// What tells this terminal apart from another with the same device number in another devpts instance: the
    /// device number and the caller's session.
    package let id: String
    /// `TERM` for pinentry's `ttytype`.
    package let type: String
    /// `LC_CTYPE` for pinentry's `lc-ctype`, nil for none.
    package let characterType: String?
    /// Whether the caller (or its session leader) runs in an SSH session (`SSH_CONNECTION` set).
    package let overSSH: Bool

    /// The `TERM` taken when the caller names none (or one with other characters than a terminfo name has).
    package static let defaultType = "vt100"

    /// Takes over `descriptor`.
    package init(
        descriptor: Int32, device: UInt64, id: String, type: String, characterType: String?, overSSH: Bool = false
    ) {
        self.descriptor = descriptor
        self.device = device
        self.id = id
        self.type = type
        self.characterType = characterType
        self.overSSH = overSSH
    }

    deinit { close(descriptor) }

    /// The longest list of a process's descriptors looked through.
    static let maxDescriptorsLooked = 256

    /// The filesystems a terminal is looked for on: pseudo-terminals (devpts) and the kernel's `/dev`
    /// (devtmpfs, where the virtual consoles are). Neither calls out to a server, as FUSE does.
    static let terminalFilesystems: Set<String> = ["devpts", "devtmpfs"]

    /// The most of a process's `mountinfo` read: a mount listed past it is not a place a terminal is found.
    static let maxMountInfoBytes = 1 << 20

    /// `O_PATH` (Linux's value; Glibc's module leaves it out): a descriptor naming a file, never opening it.
    static let openPathOnly: Int32 = 0o10_000_000

    /// A descriptor of the terminal `device`, opened through `/proc/PID/fd/K` for a `K` of `holder` that is a
    /// character device with that number on a devpts or devtmpfs mount; nil when `holder` holds none (or its
    /// descriptors cannot be read).
    ///
    /// The file behind `K` is never stat()ed or opened before its filesystem is known: following the link to a
    /// file on FUSE (sshfs, or a FUSE server the caller runs itself) waits on that server, and with it the
    /// daemon. The filesystem comes from what the kernel writes, never from the file: `K`'s `mnt_id` in
    /// `/proc/PID/fdinfo/K`, looked up in the holder's `mountinfo`. The link is then opened with `O_PATH`
    /// (no open of the file itself), its `mnt_id` checked again (the holder may have put another file at `K`
    /// since), and only then is the terminal opened, through `/proc/self/fd`.
    static func open(of holder: pid_t, device: UInt64, procRoot: String) -> Int32? {
        let directory = "\(procRoot)/\(holder)/fd"
        guard let listing = opendir(directory) else { return nil }
        var numbers: [Int32] = []
        while numbers.count < maxDescriptorsLooked, let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let number = Int32(name) { numbers.append(number) }
        }
        closedir(listing)
        guard !numbers.isEmpty,
            let mountInfo = BoundedFile.read("\(procRoot)/\(holder)/mountinfo", limit: maxMountInfoBytes)
        else { return nil }
        let terminalMounts = Self.mounts(in: mountInfo, of: terminalFilesystems)
        for number in numbers.sorted() {
            guard let mount = Self.mountID(fdinfo: "\(procRoot)/\(holder)/fdinfo/\(number)"),
                terminalMounts.contains(mount)
            else { continue }
            let handle = Glibc.open("\(directory)/\(number)", Self.openPathOnly | O_CLOEXEC)
            guard handle >= 0 else { continue }
            defer { close(handle) }
            var named = stat()
            guard Self.mountID(fdinfo: "/proc/self/fdinfo/\(handle)") == mount, fstat(handle, &named) == 0,
                named.st_mode & S_IFMT == S_IFCHR, UInt64(named.st_rdev) == device
            else { continue }
            let opened = Glibc.open("/proc/self/fd/\(handle)", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
            guard opened >= 0 else { continue }
            var held = stat()
            guard fstat(opened, &held) == 0, held.st_mode & S_IFMT == S_IFCHR, held.st_rdev == named.st_rdev,
                held.st_dev == named.st_dev, held.st_ino == named.st_ino, isatty(opened) == 1
            else {
                close(opened)
                continue
            }
            let moved = fcntl(opened, F_DUPFD_CLOEXEC, 10)
            close(opened)
            guard moved >= 0 else { return nil }
            // Blocking from here: pinentry reads and writes it as a terminal.
            _ = fcntl(moved, F_SETFL, fcntl(moved, F_GETFL) & ~O_NONBLOCK)
            return moved
        }
        return nil
    }

    /// The `mnt_id` an fdinfo file (`/proc/PID/fdinfo/K`, written by the kernel) gives, nil for none.
    static func mountID(fdinfo path: String) -> Int? {
        guard let bytes = BoundedFile.read(path, limit: 4096) else { return nil }
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix("mnt_id:") else { continue }
            return Int(String(text.dropFirst("mnt_id:".count).filter { $0 != " " && $0 != "\t" }))
        }
        return nil
    }

    /// The ids of the mounts in `mountInfo` (a `/proc/PID/mountinfo`) whose filesystem type is one of `types`;
    /// a last line cut by the bound is left out.
    static func mounts(in mountInfo: [UInt8], of types: Set<String>) -> Set<Int> {
        var lines = mountInfo.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if mountInfo.last != UInt8(ascii: "\n"), !lines.isEmpty { lines.removeLast() }
        var found: Set<Int> = []
        for line in lines {
            // "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS"
            let fields = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            guard let id = fields.first.flatMap({ Int($0) }), let dash = fields.firstIndex(of: "-"), dash >= 6,
                dash + 1 < fields.count, types.contains(fields[dash + 1])
            else { continue }
            found.insert(id)
        }
        return found
    }
}

/// The fields of `/proc/PID/stat` a place is chosen by.
struct ProcessStat {
    /// Field 5: its process group.
    let processGroup: pid_t
    /// Field 6: the session id (its leader's pid).
    let session: pid_t
    /// Field 7: the controlling terminal's device number, 0 for none.
    let terminal: UInt64
    /// Field 8: the foreground process group of its controlling terminal (-1 for none).
    let foregroundGroup: pid_t
    /// Field 22: when it started.
    let startTime: UInt64

    init?(pid: pid_t, procRoot: String) {
        guard let bytes = BoundedFile.read("\(procRoot)/\(pid)/stat", limit: 1024) else { return nil }
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " ")).map {
            String(decoding: $0, as: UTF8.self)
        }
        // Fields resume at 3 after the command name.
        guard fields.count >= 20, let processGroup = pid_t(fields[5 - 3]), let session = pid_t(fields[6 - 3]),
            let terminal = Int64(fields[7 - 3]), let foregroundGroup = pid_t(fields[8 - 3]),
            let startTime = UInt64(fields[22 - 3])
        else { return nil }
        self.processGroup = processGroup
        self.foregroundGroup = foregroundGroup
        self.session = session
        self.terminal = UInt64(bitPattern: terminal)
        self.startTime = startTime
    }
}

/// What a caller's environment (`/proc/PID/environ`, its first ``maxBytes`` bytes) says of where it runs: its
/// display and its terminal's type and character set. Values with control characters, or characters a name of
/// that kind never has, are left out.
struct CallerEnvironment {
    /// The most read of an environment: a variable past it is not seen.
    static let maxBytes = 65_536

    var display: String?
    var waylandDisplay: String?
    var terminalType: String?
    var characterType: String?
    /// Whether `SSH_CONNECTION` is set: the caller runs in an SSH session (its claim; it only keeps the daemon
    /// from waiting for a security key the person cannot reach).
    var overSSH = false

    init(pid: pid_t, procRoot: String) {
        self.init(environ: BoundedFile.read("\(procRoot)/\(pid)/environ", limit: Self.maxBytes) ?? [])
    }

    init(environ bytes: [UInt8]) {
        var values: [String: String] = [:]
        // An entry cut by the bound has no NUL after it and is dropped.
        var entries = bytes.split(separator: 0, omittingEmptySubsequences: false)
        if bytes.last != 0, !entries.isEmpty { entries.removeLast() }
        for entry in entries {
            guard let equals = entry.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = String(decoding: entry[..<equals], as: UTF8.self)
            if name == "SSH_CONNECTION" { overSSH = true }
            guard ["DISPLAY", "WAYLAND_DISPLAY", "TERM", "LC_ALL", "LC_CTYPE", "LANG"].contains(name) else { continue }
            let value = entry[(equals + 1)...]
            guard !value.isEmpty, value.count <= 256, !value.contains(where: { $0 < 0x20 || $0 >= 0x7F }) else {
                continue
            }
            values[name] = String(decoding: value, as: UTF8.self)
        }
        display = values["DISPLAY"]
        waylandDisplay = values["WAYLAND_DISPLAY"]
        terminalType = values["TERM"].flatMap { Self.only($0, extra: "._+-") }
        characterType = (values["LC_ALL"] ?? values["LC_CTYPE"] ?? values["LANG"]).flatMap {
            Self.only($0, extra: "._@-")
        }
    }

    /// `value` when it has only ASCII letters, digits and `extra`.
    private static func only(_ value: String, extra: String) -> String? {
        let allowed = value.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII
                && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                    || extra.unicodeScalars.contains(scalar))
        }
        return allowed ? value : nil
    }
}
