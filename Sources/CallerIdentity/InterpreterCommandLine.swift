/// Finds the script an interpreter runs from its command line (`/proc/PID/cmdline`): `python3 -u sync.py`
/// runs `sync.py`; `python3 -c CODE`, `perl -e CODE` and an interpreter reading standard input run no file.
///
/// An option that brings in code besides the script (`python3 -cCODE`, `perl -MModule`, `perl -I dir`,
/// `node -r module`, `ruby -r library`, a debugger or an interactive prompt) makes the command line run more
/// than the script: it is read as inline code, so that the process is identified as the interpreter and not
/// as the script it names (which it may never run, or run after code of its own).
///
/// The command line is what the process was started with; a process can rewrite it later, which is one of
/// the reasons caller identity is a barrier against careless or compromised applications and not against a
/// determined same-user attacker (docs/threat-model.md).
package struct InterpreterCommandLine: Sendable {
    /// An interpreter family: how its options are read.
    struct Family: Sendable {
        /// Short options (letters) that take a value: attached (`-Wignore`) or the next argument (`-W ignore`).
        var valueLetters: Set<Character> = []
        /// Short options that run code of their own: inline code (`-c`, `-e`), a module or library loaded
        /// first (`-M`, `-r`), a directory code is loaded from (`-I`), a debugger, an interactive prompt.
        var codeLetters: Set<Character> = []
        /// Values of a short option in ``valueLetters`` (by their start) that bring in code of their own:
        /// `python3 -X pycache_prefix=DIR` loads every imported module's bytecode from DIR, checked only against
        /// the source's size and time.
        var codeValues: [Character: [String]] = [:]
        /// The short option after which the next argument (or the attached rest) names a module (`python3 -m`).
        var moduleLetter: Character? = nil
        /// Long options that take the next argument as their value (or one attached with `=`).
        var valueOptions: Set<String> = []
        /// Long options that run code of their own, with or without a value (`--require`, `--eval`, `--inspect`).
        var codeOptions: Set<String> = []
        /// Long option prefixes that run code of their own (`--inspect` and its variants).
        var codePrefixes: [String] = []
    }

    /// Interpreter families by the executable's name with its version stripped (`python3.11` → `python`).
    static let families: [String: Family] = {
        // python: -c code, -m module, -i interactive after the script, -X pycache_prefix= bytecode from a
        // directory of the caller's; -W, -X take values.
        let python = Family(
            valueLetters: ["W", "X"], codeLetters: ["c", "i"], codeValues: ["X": ["pycache_prefix"]], moduleLetter: "m",
            valueOptions: ["--check-hash-based-pycs"])
        // perl: -e/-E code, -M/-m modules, -I library directories, -d debugger (-d:Module loads one), -S a
        // script looked up in PATH (only there, never in the working directory, where the daemon would look).
        // Its other options take only attached values (-0777, -l, -i.bak, -F:), read as letters: a code letter
        // among them makes the line inline, which only ever asks more.
        let perl = Family(codeLetters: ["e", "E", "M", "m", "I", "d", "S"])
        // node: -e/-p code, -r/--require, --import, --loader preload modules, -i a prompt, --inspect a debugger
        // any local process can drive, --env-file a file that may set NODE_OPTIONS.
        let node = Family(
            valueLetters: ["C"], codeLetters: ["e", "p", "r", "i"],
            valueOptions: ["--input-type", "--conditions", "--title", "--stack-size", "--icu-data-dir"],
            codeOptions: [
                "--eval", "--print", "--require", "--import", "--loader", "--experimental-loader", "--interactive",
                // A startup snapshot runs its own main function instead of the script; an OpenSSL configuration
                // may load engines and providers (shared libraries).
                "--snapshot-blob", "--build-snapshot", "--openssl-config",
            ],
            // --env-file (and --env-file-if-exists) may set NODE_OPTIONS, which node applies: a --require.
            codePrefixes: ["--inspect", "--debug", "--env-file"])
        // shells: -c code, -s and -i read standard input, fish's -C runs a command first; -o/+o, -O/+O take values.
        let shell = Family(
            valueLetters: ["o", "O"], codeLetters: ["c", "s", "i", "C"], valueOptions: ["--rcfile", "--init-file"])
        // ruby: -e code, -r libraries, -I library directories, -S looks the script up in PATH; -C, -E, -F take
        // values (-x, -0, -K, -W, -T only attached ones, read as letters like perl's).
        let ruby = Family(
            valueLetters: ["C", "E", "F"], codeLetters: ["e", "r", "I", "S"],
            valueOptions: ["--encoding", "--external-encoding", "--internal-encoding", "--enable", "--disable"])
        let plain = Family(codeLetters: ["e", "c", "i", "r", "l"])
        return [
            "python": python, "pypy": python, "perl": perl, "node": node, "nodejs": node, "ruby": ruby,
            "sh": shell, "bash": shell, "dash": shell, "zsh": shell, "ksh": shell, "mksh": shell, "fish": shell,
            "lua": plain, "luajit": plain, "php": plain, "tclsh": plain, "wish": plain, "gjs": plain,
            "osascript": plain,
        ]
    }()

    /// What an interpreter's command line runs.
    package enum Target: Hashable, Sendable {
        /// A script file, as written on the command line (relative to the process's working directory
        /// unless absolute).
        case file(String)
        /// A module (`python3 -m name`), found through the interpreter's own search path.
        case module(String)
        /// Code given on the command line or read from standard input, or code loaded besides the script: no
        /// one file to name.
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
            index += 1
            if argument == "--" { return index < arguments.count ? .file(arguments[index]) : .inline }
            if argument == "-" { return .inline }
            guard argument.count > 1, argument.hasPrefix("-") || argument.hasPrefix("+") else { return .file(argument) }
            if argument.hasPrefix("--") {
                let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
                if family.codeOptions.contains(name) || family.codePrefixes.contains(where: name.hasPrefix) {
                    return .inline
                }
                if family.valueOptions.contains(name), !argument.contains("=") { index += 1 }
                continue
            }
            // Short options, possibly bundled (`python3 -uc CODE`, `perl -lne CODE`): read letter by letter.
            var letters = argument.dropFirst()[...]
            while let letter = letters.first {
                letters = letters.dropFirst()
                if family.codeLetters.contains(letter) { return .inline }
                if letter == family.moduleLetter {
                    if !letters.isEmpty { return .module(String(letters)) }
                    return index < arguments.count ? .module(arguments[index]) : .inline
                }
                if family.valueLetters.contains(letter) {
                    let value = letters.isEmpty ? (index < arguments.count ? arguments[index] : "") : String(letters)
                    if family.codeValues[letter]?.contains(where: value.hasPrefix) == true { return .inline }
                    if letters.isEmpty { index += 1 }
                    break
                }
            }
        }
        return .inline
    }
}
