/// Finds the script an interpreter runs from its command line (`/proc/PID/cmdline`): `python3 -u sync.py`
/// runs `sync.py`; `python3 -c CODE`, `perl -e CODE` and an interpreter reading standard input run no file.
///
/// The command line is what the process was started with; a process can rewrite it later, which is one of
/// the reasons caller identity is a barrier against careless or compromised applications and not against a
/// determined same-user attacker (docs/threat-model.md).
package struct InterpreterCommandLine: Sendable {
    /// An interpreter family: how its options are read.
    struct Family: Sendable {
        /// Options that take the next argument as their value.
        let optionsWithValue: Set<String>
        /// Options whose value is code to run: no script file follows.
        let inlineCode: Set<String>
        /// Options after which the next argument names a module, not a file (`python3 -m`).
        let module: Set<String>
    }

    /// Interpreter families by the executable's name with its version stripped (`python3.11` → `python`).
    static let families: [String: Family] = {
        let python = Family(
            optionsWithValue: ["-W", "-X", "--check-hash-based-pycs"], inlineCode: ["-c"], module: ["-m"])
        let perl = Family(optionsWithValue: ["-I", "-M", "-m", "-x", "-C"], inlineCode: ["-e", "-E"], module: [])
        let node = Family(
            optionsWithValue: ["-r", "--require", "--import", "--loader", "--experimental-loader", "--input-type"],
            inlineCode: ["-e", "--eval", "-p", "--print"], module: [])
        let shell = Family(optionsWithValue: ["-o", "+o", "-O", "+O"], inlineCode: ["-c"], module: [])
        let ruby = Family(optionsWithValue: ["-I", "-r", "-C", "-E", "-F"], inlineCode: ["-e"], module: [])
        let plain = Family(optionsWithValue: [], inlineCode: ["-e", "-c"], module: [])
        return [
            "python": python, "pypy": python, "perl": perl, "node": node, "nodejs": node, "ruby": ruby,
            "sh": shell, "bash": shell, "dash": shell, "zsh": shell, "ksh": shell, "mksh": shell, "fish": shell,
            "lua": plain, "luajit": plain, "php": plain, "tclsh": plain, "wish": plain, "gjs": plain,
            "osascript": plain,
        ]
    }()

    /// What an interpreter's command line runs.
    package enum Target: Equatable, Sendable {
        /// A script file, as written on the command line (relative to the process's working directory
        /// unless absolute).
        case file(String)
        /// A module (`python3 -m name`), found through the interpreter's own search path.
        case module(String)
        /// Code given on the command line or read from standard input: no file to name.
        case inline
    }

    /// The family of the executable at `path`, nil when it is not a known interpreter.
    static func family(ofExecutable path: String) -> Family? {
        let base = path.split(separator: "/").last.map(String.init) ?? path
        let name = String(base.prefix { !$0.isNumber && $0 != "." && $0 != "-" })
        return families[name]
    }

    /// What the command line `arguments` (argv, the interpreter's own name first) runs, for the interpreter
    /// at `executable`; nil when `executable` is not a known interpreter.
    package static func target(of arguments: [String], executable: String) -> Target? {
        guard let family = family(ofExecutable: executable) else { return nil }
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                return index + 1 < arguments.count ? .file(arguments[index + 1]) : .inline
            }
            if argument == "-" || !(argument.hasPrefix("-") || argument.hasPrefix("+")) || argument.count == 1 {
                return argument == "-" ? .inline : .file(argument)
            }
            if family.inlineCode.contains(argument) { return .inline }
            if family.module.contains(argument) {
                return index + 1 < arguments.count ? .module(arguments[index + 1]) : .inline
            }
            // Short options may be bundled (`python3 -uc CODE`, `sh -ec CODE`): the last letter decides.
            if !argument.hasPrefix("--"), argument.count > 2, let last = argument.last {
                let tail = "-" + String(last)
                if family.inlineCode.contains(tail) { return .inline }
                if family.module.contains(tail) {
                    return index + 1 < arguments.count ? .module(arguments[index + 1]) : .inline
                }
            }
            index += family.optionsWithValue.contains(argument) ? 2 : 1
        }
        return .inline
    }
}
