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

    /// The pinentry runs outside any sandbox and reads what is typed into it: a session may name only a program
    /// that only root can change.
    @Test func aPinentryAProcessOfTheUserCouldHaveWrittenIsRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinentry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = directory.appendingPathComponent("pinentry").path
        try "#!/bin/sh\n".write(toFile: program, atomically: true, encoding: .utf8)
        chmod(program, 0o755)
        chmod(directory.path, 0o700)
        var session = SessionEnvironment()
        #expect(getuid() != 0 || SessionEnvironment.isProtectedProgram(program), "root's own file, root's directory")
        chmod(directory.path, 0o777)
        #expect(!SessionEnvironment.isProtectedProgram(program), "a directory anyone can write")
        chmod(directory.path, 0o700)
        chmod(program, 0o757)
        #expect(!SessionEnvironment.isProtectedProgram(program), "a file anyone can write")
        for refused in [program, "relative/pinentry", "no-such-pinentry-program", "/nonexistent/pinentry"] {
            #expect(throws: SessionEnvironmentError.unprotectedProgram(refused)) {
                try session.apply(["PINENTRY": refused, "DISPLAY": ":9"])
            }
        }
        #expect(session.values.isEmpty)
        try session.apply(["PINENTRY": "sh"])
        #expect(session.values["PINENTRY"] == "sh")
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
        let chosen = Pinentry.fromEnvironment(["PATH": "/usr/bin", "DISPLAY": ":0", "PINENTRY": "pinentry-gnome3"])
        let shown = chosen.inSession(session)
        #expect(shown.program == "pinentry-tty")
        #expect(shown.environment == ["PATH": "/usr/bin", "DISPLAY": ":3", "PINENTRY": "pinentry-tty"])
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
