import Foundation
import Glibc
import Testing

@testable import Pinentry

/// Where a prompt shows, chosen from the caller's `/proc` (docs/prompts-in-terminals.md): read here from a
/// directory laid out as `/proc` is, with a real pseudo-terminal where a terminal is needed.
@Suite struct PromptPlaceTests {
    /// A directory standing in for `/proc`, holding process `pid`.
    struct FakeProc {
        let root: URL
        let pid: pid_t = 4242

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("proc-\(UUID().uuidString)")
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent("\(pid)/fd"), withIntermediateDirectories: true)
        }

        /// Writes the process's stat: its session, terminal number and start time (the command name holds
        /// spaces and a parenthesis, as a hostile one may).
        func stat(
            session: pid_t, terminal: UInt64, startTime: UInt64 = 777, group: pid_t = 0, foreground: pid_t = 0
        ) throws {
            var fields = (3...52).map { _ in "0" }
            fields[0] = "S"
            fields[5 - 3] = "\(group)"
            fields[8 - 3] = "\(foreground)"
            fields[6 - 3] = "\(session)"
            fields[7 - 3] = "\(terminal)"
            fields[22 - 3] = "\(startTime)"
            try "\(pid) (a) b (c) \(fields.joined(separator: " "))\n".write(
                to: root.appendingPathComponent("\(pid)/stat"), atomically: true, encoding: .utf8)
        }

        func environ(_ bytes: [UInt8]) throws {
            try Data(bytes).write(to: root.appendingPathComponent("\(pid)/environ"))
        }

        /// Makes descriptor `number` a link to `target`, with the fdinfo the kernel writes for it (its
        /// `mnt_id`, or `mount` in its place), and the process's mountinfo this test's own
        /// (`filesystem` as the type of `target`'s mount when given).
        func descriptor(_ number: Int, to target: String, mount: Int? = nil, filesystem: String? = nil) throws {
            try FileManager.default.createSymbolicLink(
                atPath: root.appendingPathComponent("\(pid)/fd/\(number)").path, withDestinationPath: target)
            let handle = open(target, PromptTerminal.openPathOnly | O_CLOEXEC)
            try #require(handle >= 0)
            defer { close(handle) }
            let real = try #require(PromptTerminal.mountID(fdinfo: "/proc/self/fdinfo/\(handle)"))
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent("\(pid)/fdinfo"), withIntermediateDirectories: true)
            try "pos:\t0\nflags:\t02\nmnt_id:\t\(mount ?? real)\nino:\t5\n".write(
                to: root.appendingPathComponent("\(pid)/fdinfo/\(number)"), atomically: true, encoding: .utf8)
            var mountInfo = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
            if let filesystem {
                mountInfo =
                    mountInfo.split(separator: "\n").map { line in
                        var fields = line.split(separator: " ").map(String.init)
                        guard fields.first == "\(real)", let dash = fields.firstIndex(of: "-") else {
                            return String(line)
                        }
                        fields[dash + 1] = filesystem
                        return fields.joined(separator: " ")
                    }.joined(separator: "\n") + "\n"
            }
            try mountInfo.write(
                to: root.appendingPathComponent("\(pid)/mountinfo"), atomically: true, encoding: .utf8)
        }

        func place(display: String? = nil, displayIsKnown: Bool?, startTime: UInt64? = nil) throws -> PromptPlace {
            var session = SessionEnvironment()
            if let display { try session.apply(["DISPLAY": display]) }
            return PromptPlace.of(
                pid: pid, startTime: startTime, session: session, displayIsKnown: displayIsKnown, procRoot: root.path)
        }

        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    /// A new pseudo-terminal: its controlling side's descriptor, its name and its device number.
    static func pseudoTerminal() throws -> (master: Int32, name: String, device: UInt64) {
        // posix_openpt and friends are not visible from Swift; these are the ioctls they use on Linux.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlocked: Int32 = 0
        var number: UInt32 = 0
        try #require(master >= 0)
        try #require(ioctl(master, UInt(0x4004_5431), &unlocked) == 0)  // TIOCSPTLCK
        try #require(ioctl(master, UInt(0x8004_5430), &number) == 0)  // TIOCGPTN
        let name = "/dev/pts/\(number)"
        var info = Glibc.stat()
        let found = stat(name, &info)
        try #require(found == 0)
        return (master, name, UInt64(info.st_rdev))
    }

    @Test func aCallerWithNoTerminalGetsTheDesktopOrNowhere() throws {
        let proc = try FakeProc()
        defer { proc.remove() }
        try proc.stat(session: proc.pid, terminal: 0)
        #expect(try proc.place(displayIsKnown: true).queueKey == "desktop")
        // Not known yet (the systemd user manager still to answer): the desktop, decided when it shows.
        #expect(try proc.place(displayIsKnown: nil).queueKey == "desktop")
        guard case .nowhere(let reason) = try proc.place(displayIsKnown: false) else {
            Issue.record("a caller with no terminal and no display has a place")
            return
        }
        #expect(reason == "no display, no terminal")
        // A later process given the same pid is not the caller.
        #expect(try proc.place(displayIsKnown: true, startTime: 778).queueKey == "nowhere")
    }

    @Test func theTerminalIsTheOneWhoseNumberTheCallerHasNotAnotherFileItHolds() throws {
        let proc = try FakeProc()
        defer { proc.remove() }
        let (master, name, device) = try Self.pseudoTerminal()
        defer { close(master) }
        let (otherMaster, otherName, _) = try Self.pseudoTerminal()
        defer { close(otherMaster) }
        try proc.stat(session: proc.pid, terminal: device)
        // Standard input another terminal, a file and /dev/null before it: none of them is opened.
        try proc.descriptor(0, to: otherName)
        try proc.descriptor(1, to: "/dev/null")
        try proc.descriptor(2, to: proc.root.appendingPathComponent("\(proc.pid)/stat").path)
        try proc.descriptor(7, to: name)
        try proc.environ(Array("DISPLAY=:99\0TERM=xterm-256color\0LC_CTYPE=de_DE.UTF-8\0".utf8))
        // The caller's display is not the session's (:0): not the desktop, whatever it names.
        guard case .terminal(let terminal) = try proc.place(display: ":0", displayIsKnown: true) else {
            Issue.record("the caller's terminal was not chosen")
            return
        }
        var opened = Glibc.stat()
        #expect(fstat(terminal.descriptor, &opened) == 0 && UInt64(opened.st_rdev) == device)
        #expect(terminal.descriptor >= 10 && fcntl(terminal.descriptor, F_GETFD) & FD_CLOEXEC != 0)
        #expect(terminal.type == "xterm-256color" && terminal.characterType == "de_DE.UTF-8")
        #expect(terminal.id == "\(device):\(proc.pid)")
        // The session's own display named by the caller: a terminal of the desktop, the desktop's prompt.
        #expect(try proc.place(display: ":99", displayIsKnown: true).queueKey == "desktop")
    }

    @Test func aCallerHoldingNoDescriptorOfItsTerminalHasNone() throws {
        let proc = try FakeProc()
        defer { proc.remove() }
        let (master, _, device) = try Self.pseudoTerminal()
        defer { close(master) }
        // Its session leader (pid 1 here, not laid out) cannot be looked at either.
        try proc.stat(session: 1, terminal: device)
        try proc.descriptor(0, to: "/dev/null")
        #expect(try proc.place(displayIsKnown: false).queueKey == "nowhere")
        #expect(try proc.place(displayIsKnown: true).queueKey == "desktop")
    }

    @Test func hostileEnvironmentValuesAreLeftOut() {
        let escape = CallerEnvironment(environ: Array("TERM=xterm\u{1B}[2J\0LC_CTYPE=C\n.UTF-8\0LANG=C.UTF-8\0".utf8))
        #expect(escape.terminalType == nil)
        // LC_CTYPE with a line break is refused; LANG, the next in line, is taken.
        #expect(escape.characterType == "C.UTF-8")
        let spaces = CallerEnvironment(environ: Array("TERM=xterm color\0DISPLAY=:0\0".utf8))
        #expect(spaces.terminalType == nil && spaces.display == ":0")
        // An entry cut by the 64 KiB bound (no NUL after it) is not taken.
        let cut = CallerEnvironment(environ: Array("DISPLAY=:1\0TERM=xte".utf8))
        #expect(cut.display == ":1" && cut.terminalType == nil)
        let long = CallerEnvironment(environ: Array("TERM=\(String(repeating: "x", count: 300))\0".utf8))
        #expect(long.terminalType == nil)
    }

    /// A caller in an SSH session says so (its claim: it only keeps the daemon from waiting for a security key).
    @Test func anSSHSessionIsSeen() {
        #expect(CallerEnvironment(environ: Array("TERM=xterm\0SSH_CONNECTION=192.0.2.1 5 192.0.2.2 22\0".utf8)).overSSH)
        #expect(!CallerEnvironment(environ: Array("TERM=xterm\0SSH_CONNECTIONS=x\0".utf8)).overSSH)
        // Cut by the bound (no NUL after it): not taken, as any other entry.
        #expect(!CallerEnvironment(environ: Array("TERM=xterm\0SSH_CONNECTION=1".utf8)).overSSH)
    }

    /// A terminal of the caller's number on a mount whose filesystem is not one a terminal is looked for on
    /// (FUSE, say, whose server may never answer) is never looked at: the file behind a descriptor is
    /// followed only once the kernel's fdinfo and mountinfo say it is on devpts or devtmpfs.
    @Test func aDescriptorOnAnotherFilesystemIsNeverFollowed() throws {
        let proc = try FakeProc()
        defer { proc.remove() }
        let (master, name, device) = try Self.pseudoTerminal()
        defer { close(master) }
        try proc.stat(session: proc.pid, terminal: device)
        try proc.descriptor(0, to: name, filesystem: "fuse.sshfs")
        #expect(try proc.place(displayIsKnown: false).queueKey == "nowhere")
    }

    /// The descriptor swapped after its fdinfo was read (fdinfo naming a devpts mount, the file at the link on
    /// another): the mount of what was opened (`O_PATH`) is checked again, and the terminal is not opened.
    @Test func aDescriptorSwappedAfterItsMountWasReadIsNotOpened() throws {
        let proc = try FakeProc()
        defer { proc.remove() }
        let (master, name, device) = try Self.pseudoTerminal()
        defer { close(master) }
        try proc.stat(session: proc.pid, terminal: device)
        let handle = open(name, PromptTerminal.openPathOnly | O_CLOEXEC)
        try #require(handle >= 0)
        let real = try #require(PromptTerminal.mountID(fdinfo: "/proc/self/fdinfo/\(handle)"))
        close(handle)
        // The fdinfo names another mount, also devpts in this mountinfo: what is found at the link is not it.
        try proc.descriptor(0, to: name, mount: real + 100_000)
        let line = "\(real + 100_000) 1 0:99 / /elsewhere rw - devpts devpts rw\n"
        let mountInfo = proc.root.appendingPathComponent("\(proc.pid)/mountinfo")
        try (String(contentsOf: mountInfo, encoding: .utf8) + line).write(
            to: mountInfo, atomically: true, encoding: .utf8)
        #expect(try proc.place(displayIsKnown: false).queueKey == "nowhere")
    }

    @Test func mountInfoLinesGiveTheirTypeAfterTheSeparator() {
        let text =
            "22 1 0:20 / /dev/pts rw,nosuid shared:3 - devpts devpts rw\n"
            + "23 1 0:21 / /mnt/a\\040b rw master:1 shared:7 - fuse.sshfs host: rw\n"
            + "24 1 0:22 / /dev rw - devtmpfs udev rw\n" + "25 1 0:23 / /cut rw - devpts"
        #expect(PromptTerminal.mounts(in: Array(text.utf8), of: PromptTerminal.terminalFilesystems) == [22, 24])
    }

    /// A background job of its terminal (its process group not the terminal's foreground one) does not get
    /// the terminal: pinentry and the shell would read the same keystrokes.
    @Test func aBackgroundJobDoesNotGetItsTerminal() throws {
        let proc = try FakeProc()
        defer { proc.remove() }
        let (master, name, device) = try Self.pseudoTerminal()
        defer { close(master) }
        try proc.descriptor(0, to: name)
        try proc.stat(session: proc.pid, terminal: device, group: 4300, foreground: 4301)
        guard case .nowhere(let reason) = try proc.place(displayIsKnown: false) else {
            Issue.record("a background job got a place")
            return
        }
        #expect(reason == PromptPlace.backgroundJob)
        #expect(try proc.place(displayIsKnown: true).queueKey == "desktop")
        try proc.stat(session: proc.pid, terminal: device, group: 4301, foreground: 4301)
        #expect(try proc.place(displayIsKnown: false).queueKey == "terminal:\(device):\(proc.pid)")
    }
}
