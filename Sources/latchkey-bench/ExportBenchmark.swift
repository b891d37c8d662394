import Foundation
import Glibc
import KeychainCore
import KeychainStore

/// `latchkey-bench --export N`: the time and peak memory of `latchkey export` of a keychain of N items (the
/// command itself, run on the keychain file with no daemon, as a person runs it), to a passphrase and unencrypted.
enum ExportBenchmark {
    static func run(items: Int) throws -> [String] {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-export-bench-\(getpid())")
        let keychains = root.appendingPathComponent("data/latchkey/keychains")
        try FileManager.default.createDirectory(at: keychains, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let keychain = try Keychain.create(
            at: keychains.appendingPathComponent("login.keychain-db").path, password: "bench")
        try keychain.add(
            (0..<items).map { index in
                NewItem(
                    .genericPassword,
                    attributes: [
                        .account: .string("user\(index)@example.org"), .service: .string("service \(index % 97)"),
                        .label: .string("Item \(index)"), .comment: .string("made for the export benchmark"),
                    ], secret: Data("secret-\(index)-0123456789abcdef".utf8))
            })
        let latchkey = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("latchkey").path
        var rows: [String] = []
        for (name, arguments, input) in [
            ("age passphrase (scrypt 2^18)", ["--stdin"], "a passphrase\nbench\n"),
            ("unencrypted", ["--unencrypted", "--yes", "--stdin"], "bench\n"),
        ] {
            let out = root.appendingPathComponent("export-\(rows.count)").path
            let (seconds, peakKiB) = try measure(
                latchkey, ["export", "login", "--to", out] + arguments, input: input,
                environment: [
                    "HOME=\(root.path)", "XDG_DATA_HOME=\(root.path)/data", "XDG_CONFIG_HOME=\(root.path)/config",
                    "DBUS_SESSION_BUS_ADDRESS=unix:path=\(root.path)/no-bus",
                ])
            let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
            rows.append(
                "| \(items) | \(name) | \(String(format: "%.2f", seconds)) | \(peakKiB / 1024) | \(size / 1024) |")
        }
        return rows
    }

    /// Runs `program` with `arguments`, `input` on its standard input: its wall time and peak resident size.
    private static func measure(_ program: String, _ arguments: [String], input: String, environment: [String])
        throws -> (Double, Int)
    {
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw POSIXError(.EPIPE) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe[0], 0)
        posix_spawn_file_actions_addclose(&actions, pipe[1])
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        let start = Date()
        var pid: pid_t = 0
        guard posix_spawn(&pid, program, &actions, nil, argv, envp) == 0 else { throw POSIXError(.ENOENT) }
        close(pipe[0])
        let bytes = Array(input.utf8)
        _ = Glibc.write(pipe[1], bytes, bytes.count)
        close(pipe[1])
        var status: Int32 = 0
        var usage = rusage()
        _ = wait4(pid, &status, 0, &usage)
        let seconds = Date().timeIntervalSince(start)
        guard status == 0 else { throw POSIXError(.ECHILD) }
        return (seconds, usage.ru_maxrss)
    }
}
