import Glibc

extension Application {
    /// The name an access list gives the program at `path` (absolute, links resolved) when it is named on a
    /// command line (`latchkey … -T PATH`, `SecTrustedApplicationCreateFromPath`): a script whose first line
    /// (`#!`) names a known interpreter is named with that interpreter, as the daemon names the script running
    /// (``name``); any other file by its path.
    ///
    /// The interpreter is found as the kernel and `env` find it when the script is run: the `#!` line's
    /// program, or for `#!/usr/bin/env NAME` the first `NAME` in `searchPath` (`PATH`), its links resolved
    /// (as `/proc/PID/exe` names it).
    package static func trustedName(ofProgramAt path: String, searchPath: String?) -> String {
        guard let interpreter = shebangInterpreter(ofFileAt: path, searchPath: searchPath),
            InterpreterCommandLine.family(ofExecutable: interpreter) != nil
        else { return path }
        return scriptName(interpreter: interpreter, script: path)
    }

    /// The interpreter the `#!` line of the file at `path` names, resolved; nil without one.
    static func shebangInterpreter(ofFileAt path: String, searchPath: String?) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = read(fd, &bytes, bytes.count)
        guard count > 2, bytes[0] == UInt8(ascii: "#"), bytes[1] == UInt8(ascii: "!") else { return nil }
        let line = bytes[2..<count].prefix { $0 != UInt8(ascii: "\n") }
        var words = line.split { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }.map {
            String(decoding: $0, as: UTF8.self)
        }[...]
        guard var program = words.popFirst() else { return nil }
        if program.split(separator: "/").last == "env" {
            // `env -S python3 -u`, `env python3`: the first word that is not an option.
            guard let name = words.first(where: { !$0.hasPrefix("-") }) else { return nil }
            guard let found = name.contains("/") ? name : lookUp(name, in: searchPath) else { return nil }
            program = found
        }
        guard let resolved = realpath(program, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The first executable `name` in the directories of `searchPath`.
    private static func lookUp(_ name: String, in searchPath: String?) -> String? {
        for directory in (searchPath ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where !directory.isEmpty {
            let candidate = directory + "/" + name
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
