import Foundation
import Glibc
import Posix
import Testing

@testable import Pinentry

/// The desktop session's variables a prompt shows with: which are taken, how a change is refused whole, what
/// `systemctl --user show-environment` output gives, and how a pinentry takes them.
@Suite struct SessionEnvironmentTests {
    @Test func applySetsRemovesAndRefusesAWholeChangeWithAnUnknownNameOrABadValue() throws {
        var session = SessionEnvironment()
        try session.apply(["DISPLAY": ":1", "LANG": "de_DE.UTF-8", "WAYLAND_DISPLAY": ""])
        #expect(session.values == ["DISPLAY": ":1", "LANG": "de_DE.UTF-8"])
        #expect(session.hasDisplay)
        #expect(throws: SessionEnvironmentError.unknownNames(["LD_PRELOAD", "PATH"])) {
            try session.apply(["DISPLAY": ":2", "LD_PRELOAD": "/x.so", "PATH": "/tmp"])
        }
        #expect(throws: SessionEnvironmentError.badValue("DISPLAY")) { try session.apply(["DISPLAY": ":2\n"]) }
        let long = String(repeating: "x", count: SessionEnvironment.maxValueBytes + 1)
        #expect(throws: SessionEnvironmentError.badValue("XAUTHORITY")) { try session.apply(["XAUTHORITY": long]) }
        #expect(session.values == ["DISPLAY": ":1", "LANG": "de_DE.UTF-8"], "refused changes change nothing")
        try session.apply(["DISPLAY": ""])
        #expect(!session.hasDisplay)
    }

    /// A new scratch directory of mode `directoryMode` holding `pinentry`, a shell script of mode 0755 (the
    /// caller removes the directory).
    static func plantedProgram(directoryMode: mode_t) throws -> (directory: URL, program: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinentry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let program = directory.appendingPathComponent("pinentry").path
        try "#!/bin/sh\n".write(toFile: program, atomically: true, encoding: .utf8)
        chmod(program, 0o755)
        chmod(directory.path, directoryMode)
        return (directory, program)
    }

    /// The pinentry runs outside any sandbox and reads what is typed into it: a session may name only a program
    /// that only root can change.
    @Test func aPinentryAProcessOfTheUserCouldHaveWrittenIsRefused() throws {
        let (directory, program) = try Self.plantedProgram(directoryMode: 0o700)
        defer { try? FileManager.default.removeItem(at: directory) }
        var session = SessionEnvironment()
        #expect(
            getuid() != 0 || SessionEnvironment.protectedProgram(program) != nil, "root's own file, root's directory")
        chmod(directory.path, 0o777)
        #expect(SessionEnvironment.protectedProgram(program) == nil, "a directory anyone can write")
        chmod(directory.path, 0o700)
        chmod(program, 0o757)
        #expect(SessionEnvironment.protectedProgram(program) == nil, "a file anyone can write")
        for refused in [program, "relative/pinentry", "no-such-pinentry-program", "/nonexistent/pinentry"] {
            #expect(throws: SessionEnvironmentError.unprotectedProgram(refused)) {
                try session.apply(["PINENTRY": refused, "DISPLAY": ":9"])
            }
        }
        #expect(session.values.isEmpty)
        try session.apply(["PINENTRY": "sh"])
        #expect(session.values["PINENTRY"] == URL(fileURLWithPath: "/usr/bin/sh").resolvingSymlinksInPath().path)
    }

    /// A symlink its owner can repoint, in a directory anyone can write (as in /tmp), is resolved when it is
    /// handed over: the program it pointed at then is kept, and repointing it later changes nothing.
    @Test func aPinentryIsKeptAsTheProgramItNamedWhenHandedOver() throws {
        guard getuid() == 0 else { return }  // The link must belong to another user: made with lchown.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        chmod(directory.path, 0o1777)
        let link = directory.appendingPathComponent("pinentry").path
        #expect(symlink("/usr/bin/pinentry-tty", link) == 0 && lchown(link, 65534, 65534) == 0)
        var session = SessionEnvironment()
        try session.apply(["PINENTRY": link])
        #expect(session.values["PINENTRY"] == "/usr/bin/pinentry-tty")
        let planted = directory.appendingPathComponent("planted").path
        try "#!/bin/sh\n".write(toFile: planted, atomically: true, encoding: .utf8)
        chmod(planted, 0o755)
        #expect(unlink(link) == 0 && symlink(planted, link) == 0 && lchown(link, 65534, 65534) == 0)
        #expect(session.values["PINENTRY"] == "/usr/bin/pinentry-tty")
        let shown = Pinentry.fromEnvironment(["PATH": "/usr/bin"], requiringProtectedProgram: true).inSession(session)
        #expect(try shown.resolved().program == "/usr/bin/pinentry-tty")
        // Named now, the link leads to a file in a directory anyone can write: refused.
        chown(planted, 65534, 65534)
        #expect(throws: SessionEnvironmentError.unprotectedProgram(link)) { try session.apply(["PINENTRY": link]) }
        #expect(SessionEnvironment.protectedProgram(link) == nil)
    }

    /// Any process of the user can set the systemd user manager's environment: its `PINENTRY` is taken only
    /// when only root can change the program, and then as its real path.
    @Test func theUserManagersPinentryIsCheckedAsAHandedOverOneIs() throws {
        let (directory, planted) = try Self.plantedProgram(directoryMode: 0o777)
        defer { try? FileManager.default.removeItem(at: directory) }
        let refused = SessionEnvironment(showEnvironmentOutput: "DISPLAY=:4\nPINENTRY=\(planted)\n")
        #expect(refused.values == ["DISPLAY": ":4"])
        let taken = SessionEnvironment(showEnvironmentOutput: "PINENTRY=pinentry-tty\n")
        #expect(taken.values == ["PINENTRY": "/usr/bin/pinentry-tty"])
    }

    /// The daemon's own `PINENTRY` follows the same rule, checked where it is started; a program named outright
    /// (`--pinentry`) is resolved once too, its owner the choice of whoever started the daemon.
    @Test func theDaemonsPinentryIsResolvedOnceAndCheckedWhenItComesFromAnEnvironment() throws {
        let (directory, planted) = try Self.plantedProgram(directoryMode: 0o777)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fromEnvironment = Pinentry.fromEnvironment(["PINENTRY": planted], requiringProtectedProgram: true)
        #expect(throws: PinentryError.self) { try fromEnvironment.resolved() }
        #expect(throws: PinentryError.self) {
            try fromEnvironment.askPassword(PinentryRequest(title: "", description: ""))
        }
        let link = directory.appendingPathComponent("link").path
        #expect(symlink("/usr/bin/pinentry-tty", link) == 0)
        #expect(try Pinentry(program: link, environment: [:]).resolved().program == "/usr/bin/pinentry-tty")
    }

    @Test func pickingKeepsOnlySessionVariables() {
        let picked = SessionEnvironment(picking: ["WAYLAND_DISPLAY": "wayland-0", "HOME": "/root", "LC_ALL": ""])
        #expect(picked.values == ["WAYLAND_DISPLAY": "wayland-0"])
        #expect(picked.hasDisplay)
        #expect(
            picked.over(SessionEnvironment(picking: ["WAYLAND_DISPLAY": "w-9", "LANG": "C"])).values
                == ["WAYLAND_DISPLAY": "wayland-0", "LANG": "C"])
    }

    @Test func showEnvironmentOutputGivesTheSessionVariablesLeavingQuotedValuesOut() {
        let output = "HOME=/home/me\nDISPLAY=:0\nXAUTHORITY=$'/run/odd\\nname'\nLANG=en_GB.UTF-8\nnot a line\n"
        #expect(SessionEnvironment(showEnvironmentOutput: output).values == ["DISPLAY": ":0", "LANG": "en_GB.UTF-8"])
    }

    /// A stand-in for `systemctl` (the systemd user manager does not run here) with `body` as its script.
    static func systemctl(_ body: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("systemctl-\(UUID().uuidString)").path
        try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }

    @Test func theUserManagerIsAskedWithTheRuntimeDirectoryAndBounded() throws {
        let answering = try Self.systemctl(
            #"[ "$*" = "--user show-environment" ] && printf 'WAYLAND_DISPLAY=%s\n' "$XDG_RUNTIME_DIR""#)
        #expect(
            SessionEnvironment.fromSystemdUserManager(systemctl: answering, runtimeDirectory: "/run/user/7").values
                == ["WAYLAND_DISPLAY": "/run/user/7"])
        let failing = try Self.systemctl("echo DISPLAY=:0; exit 1")
        #expect(SessionEnvironment.fromSystemdUserManager(systemctl: failing, runtimeDirectory: "/r").values.isEmpty)
        #expect(
            SessionEnvironment.fromSystemdUserManager(systemctl: "/nonexistent/systemctl", runtimeDirectory: "/r")
                .values.isEmpty)
        let hanging = try Self.systemctl("echo DISPLAY=:0; exec sleep 30")
        let started = MonotonicClock.nanoseconds()
        #expect(SessionEnvironment.fromSystemdUserManager(systemctl: hanging, runtimeDirectory: "/r").values.isEmpty)
        #expect(MonotonicClock.nanoseconds() - started < 10_000_000_000, "killed after its 2-second bound")
    }

    @Test func aPinentryTakesTheSessionsVariablesAndItsPinentryUnlessOneWasNamed() throws {
        var session = SessionEnvironment()
        try session.apply(["DISPLAY": ":3", "PINENTRY": "pinentry-tty"])
        let tty = "/usr/bin/pinentry-tty"
        let chosen = Pinentry.fromEnvironment(["PATH": "/usr/bin", "DISPLAY": ":0", "PINENTRY": "pinentry-gnome3"])
        let shown = chosen.inSession(session)
        #expect(shown.program == tty)
        #expect(shown.environment == ["PATH": "/usr/bin", "DISPLAY": ":3", "PINENTRY": tty])
        let named = Pinentry(program: "/opt/my-pinentry", environment: ["PATH": "/usr/bin"])
        #expect(named.inSession(session).program == "/opt/my-pinentry")
        #expect(named.inSession(session).environment["DISPLAY"] == ":3")
        #expect(chosen.inSession(SessionEnvironment()).program == "pinentry-gnome3")
        // A variable the session says it does not have is unset for the pinentry, even when the daemon has it.
        try session.apply(["DISPLAY": "", "WAYLAND_DISPLAY": "wayland-1"])
        #expect(chosen.inSession(session).environment["DISPLAY"] == nil)
        #expect(chosen.inSession(session).environment["WAYLAND_DISPLAY"] == "wayland-1")
        #expect(!session.over(SessionEnvironment(picking: ["DISPLAY": ":0"])).values.keys.contains("DISPLAY"))
        #expect(session.over(SessionEnvironment(picking: ["LANG": "C"])).values["LANG"] == "C")
    }
}
