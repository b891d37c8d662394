import Posix

/// The environment of the `latchkeyd` the module starts: an allow-list, never the PAM environment wholesale.
///
/// The PAM environment holds what the stack's modules put there, and on some stacks what the user wrote
/// (`pam_env.so user_readenv=1` reads `~/.pam_environment`, as Debian's gdm-password does before the session
/// lines). Passed whole it gave the dynamic loader and libc the user's `LD_PRELOAD`, `GCONV_PATH`, `LOCPATH` and
/// the like, in a process started as root. The daemon gets the account's basics from the password database, a
/// fixed `PATH`, glibc's tunables of the module's own, and from the PAM environment only the variables below,
/// each value checked (docs/control-socket.md, "The daemon's environment").
enum DaemonEnvironment {
    /// Taken from the PAM environment when set: where the session is and how prompts show there, the user's
    /// directories, the session bus, and the TPM.
    static let passedNames: Set<String> = [
        "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_ID",
        "XDG_SESSION_DESKTOP", "XDG_CURRENT_DESKTOP", "DESKTOP_SESSION", "XDG_SEAT", "XDG_VTNR",
        "DBUS_SESSION_BUS_ADDRESS", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
        "XDG_DATA_DIRS", "XDG_CONFIG_DIRS", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE",
        "LC_NUMERIC", "LC_TIME", "LC_MONETARY", "PINENTRY", "LATCHKEY_TPM_TCTI",
    ]

    /// The daemon's environment for `account`, from `pam` (the PAM environment as `NAME=value` strings) and the
    /// runtime directory the module uses.
    static func entries(pam: [String], account: UserAccount, runtimeDirectory: String) -> [String] {
        var entries = [
            "HOME=\(account.home)", "USER=\(account.name)", "LOGNAME=\(account.name)", "SHELL=\(account.shell)",
            "PATH=/usr/local/bin:/usr/bin:/bin", "XDG_RUNTIME_DIR=\(runtimeDirectory)",
        ]
        for entry in pam {
            guard let equals = entry.firstIndex(of: "=") else { continue }
            let name = String(entry[..<equals])
            let value = String(entry[entry.index(after: equals)...])
            guard passedNames.contains(name), isAcceptable(value, for: name) else { continue }
            // The program checked is the program run: the real path, resolved once here.
            if name == "PINENTRY", let resolved = try? ProtectedProgram.resolve(value, onlyRoot: true) {
                entries.append("PINENTRY=\(resolved)")
            } else if name != "PINENTRY" {
                entries.append(entry)
            }
        }
        // glibc's settings for freed memory, read at start (latchkeyd need not start itself again for them);
        // never the PAM environment's GLIBC_TUNABLES.
        return entries + ProcessHardening.mallocEnvironment
    }

    /// Whether `value` may be passed as `name`: no control character, at most 4 KiB, and nothing that names code
    /// or files a library would load: a locale is a name, not a path (glibc reads locale files from a path); the
    /// bus is a `unix:` address (libdbus runs the program of a `unixexec:` one); the directories are absolute;
    /// the TPM's TCTI is a library by name, not a path; `PINENTRY` is a program only root can change.
    static func isAcceptable(_ value: String, for name: String) -> Bool {
        guard !value.isEmpty, value.utf8.count <= 4_096, !value.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            return false
        }
        switch name {
        case "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME",
            "LC_MONETARY":
            return !value.contains("/")
        case "DBUS_SESSION_BUS_ADDRESS":
            return value.split(separator: ";", omittingEmptySubsequences: false).allSatisfy { $0.hasPrefix("unix:") }
        case "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XAUTHORITY":
            return value.hasPrefix("/")
        case "LATCHKEY_TPM_TCTI":
            return !value.prefix(while: { $0 != ":" }).contains("/")
        case "PINENTRY":
            return (try? ProtectedProgram.resolve(value, onlyRoot: true)) != nil
        default:
            return true
        }
    }
}
