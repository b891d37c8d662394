import Glibc
import Posix

/// The variables of the user's desktop session that decide where and how a prompt shows: the display,
/// the session type, the language, and the pinentry program the session prefers.
///
/// A daemon started at login (by pam_latchkey, before the desktop runs) or by the bus has none of them, and a
/// pinentry without `DISPLAY` or `WAYLAND_DISPLAY` cannot show a window. The session hands them over once it
/// runs (`latchkey update-environment`, from the desktop's autostart); failing that, the systemd user
/// manager's environment, where desktops export them, is asked when a prompt needs them
/// (``fromSystemdUserManager(systemctl:runtimeDirectory:)``). Only these names are taken; what a process of
/// the user can do with them is in docs/threat-model.md ("Where prompts show").
package struct SessionEnvironment: Sendable, Equatable {
    /// The names a session may set.
    package static let names: Set<String> = [
        "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP", "XDG_SESSION_DESKTOP",
        "DESKTOP_SESSION", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "PINENTRY",
    ]
    /// The longest value taken, in bytes.
    package static let maxValueBytes = 4_096

    /// Name → value, for names in ``names`` only.
    package private(set) var values: [String: String]
    /// Names the session said it does not have (given an empty value): unset for the pinentry, whatever the
    /// daemon's own environment holds.
    package private(set) var unset: Set<String> = []

    /// No variables.
    package init() {
        values = [:]
    }

    /// The variables of ``names`` that `environment` has (with a value), the others left out.
    package init(picking environment: [String: String]) {
        values = environment.filter { name, value in Self.names.contains(name) && Self.isAcceptable(value) }
    }

    /// Applies `changes`: a value sets a variable, an empty value removes it. Nothing changes when any name is
    /// not one of ``names``, any value is too long or holds a control character, or `PINENTRY` is not a program
    /// only root can change. `PINENTRY` is kept resolved to its real path (``PinentryProgram``), which is what
    /// runs: a symlink named here and repointed later changes nothing.
    package mutating func apply(_ changes: [String: String]) throws(SessionEnvironmentError) {
        let unknown = changes.keys.filter { !Self.names.contains($0) }.sorted()
        guard unknown.isEmpty else { throw .unknownNames(unknown) }
        if let bad = changes.first(where: { !$0.value.isEmpty && !Self.isAcceptable($0.value) }) {
            throw .badValue(bad.key)
        }
        var changes = changes
        if let program = changes["PINENTRY"], !program.isEmpty {
            guard let resolved = Self.protectedProgram(program) else { throw .unprotectedProgram(program) }
            changes["PINENTRY"] = resolved
        }
        for (name, value) in changes {
            values[name] = value.isEmpty ? nil : value
            if value.isEmpty { unset.insert(name) } else { unset.remove(name) }
        }
    }

    /// Whether a window can be shown: `DISPLAY` or `WAYLAND_DISPLAY` is set.
    package var hasDisplay: Bool { values["DISPLAY"] != nil || values["WAYLAND_DISPLAY"] != nil }

    /// These variables over `other`'s, which fill in the names these neither have nor say are unset.
    package func over(_ other: SessionEnvironment) -> SessionEnvironment {
        var merged = other
        merged.values.merge(values) { $1 }
        for name in unset { merged.values[name] = nil }
        merged.unset = unset.union(other.unset).subtracting(merged.values.keys)
        return merged
    }

    /// `program` resolved to its real path when that is a program only root can change, else nil.
    static func protectedProgram(_ program: String) -> String? {
        try? PinentryProgram.resolve(program, searchPath: PinentryProgram.protectedSearchPath, onlyRoot: true)
    }

    private static func isAcceptable(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= maxValueBytes && !value.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// The session variables in the systemd user manager's environment (`systemctl --user show-environment`,
    /// bounded to 2 seconds); none when there is no user manager (no systemd, a container) or it does not
    /// answer. Values systemd prints quoted (`$'…'`, for characters a display name or path never has) are
    /// left out. Blocking: call it off the serving thread.
    package static func fromSystemdUserManager(
        systemctl: String = "/usr/bin/systemctl", runtimeDirectory: String
    ) -> SessionEnvironment {
        guard
            let output = BoundedCommand.output(
                of: systemctl, ["--user", "show-environment"],
                environment: ["XDG_RUNTIME_DIR=\(runtimeDirectory)", "PATH=/usr/bin:/bin", "LC_ALL=C"])
        else { return SessionEnvironment() }
        return SessionEnvironment(showEnvironmentOutput: String(decoding: output, as: UTF8.self))
    }

    /// The variables of ``names`` in `systemctl show-environment`'s output (`NAME=value` lines). Any process
    /// of the user can set them there (`systemctl --user set-environment`), so `PINENTRY` is taken as
    /// ``apply(_:)`` takes it: resolved to its real path, and left out unless only root can change it.
    init(showEnvironmentOutput output: String) {
        var found: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            let value = String(line[line.index(after: equals)...])
            guard !value.hasPrefix("$'") else { continue }
            found[String(line[..<equals])] = value
        }
        found["PINENTRY"] = found["PINENTRY"].flatMap(Self.protectedProgram)
        self.init(picking: found)
    }
}

/// Why a session's variables were refused.
package enum SessionEnvironmentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Names that are not session variables a prompt uses.
    case unknownNames([String])
    /// A value too long or holding a control character.
    case badValue(String)
    /// A `PINENTRY` that is not a program only root can change.
    case unprotectedProgram(String)

    /// In words, naming what was refused.
    package var description: String {
        switch self {
        case .unknownNames(let names):
            "not a session variable prompts use: \(names.prefix(5).map { String($0.prefix(64)) }.joined(separator: ", "))"
                + (names.count > 5 ? " and \(names.count - 5) more" : "") + " (accepted: "
                + "\(SessionEnvironment.names.sorted().joined(separator: ", ")))"
        case .badValue(let name):
            "the value of \(name) is longer than \(SessionEnvironment.maxValueBytes) bytes or holds a control character"
        case .unprotectedProgram(let program):
            "PINENTRY must be a program only root can change (owned by root, in directories only root can change;"
                + " by name, in \(PinentryProgram.protectedSearchPath.joined(separator: ":"))): \(program) is not"
        }
    }
}
