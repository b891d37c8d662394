import Foundation
import Glibc
import Testing

@testable import CallerIdentity

/// Real processes, identified through the real /proc: compiled programs, copies with other bytes, python and
/// shell scripts, a Flatpak-style sandbox made with bubblewrap, a process of another user, and a pid reused
/// by another program.
@Suite struct CallerIdentityTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("caller-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// A started process that has reached `exec` and printed its first line; ended by ``stop()``.
    final class Running {
        let process = Process()
        let input = Pipe()
        let output = Pipe()
        var pid: pid_t { process.processIdentifier }

        init(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            if let directory { process.currentDirectoryURL = directory }
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            // The first line comes from the new program: the pid runs it now, not the forked test.
            let line = output.fileHandleForReading.readLine()
            #expect(line == "ready", "the program did not start: \(line ?? "nothing")")
        }

        func stop() {
            if process.isRunning { kill(pid, SIGKILL) }
            process.waitUntilExit()
        }
    }

    /// A shell script that says it is ready and waits for its standard input to close.
    func waitingScript(_ name: String, extra: String = "") throws -> URL {
        let script = directory.appendingPathComponent(name)
        try "echo ready\n\(extra)read line\n".write(to: script, atomically: true, encoding: .utf8)
        return script
    }

    /// What `sha256sum` prints for the file: 64 lower-case hexadecimal digits.
    static func sha256sum(_ path: String) throws -> String {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [path]
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return String(text.prefix(64))
    }

    func identify(_ pid: pid_t, _ inspector: ProcessInspector = ProcessInspector()) throws -> Caller {
        try inspector.identify(pid: pid, uid: getuid(), expectedUID: getuid())
    }

    @Test func aCompiledProgramIsItsExecutableAndItsDigest() throws {
        let caller = try identify(getpid())
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        guard case .executable(executable, let digest) = caller.application else {
            Issue.record("not the executable: \(caller.application)")
            return
        }
        #expect(digest.description == (try Self.sha256sum(executable)))
        #expect(caller.uid == getuid())
        #expect(ProcessInspector().isRunning(caller))
    }

    @Test func copiesOfAProgramAreToldApartByPathAndBytes() throws {
        let original = directory.appendingPathComponent("tool")
        let changed = directory.appendingPathComponent("other-tool")
        let shell = URL(fileURLWithPath: "/usr/bin/sh").resolvingSymlinksInPath().path
        try FileManager.default.copyItem(atPath: shell, toPath: original.path)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: shell))
        bytes.append(0)
        try bytes.write(to: changed)
        chmod(changed.path, 0o755)
        let script = try waitingScript("wait.sh")
        let first = try Running(original.path, ["-c", ". \(script.path)"])
        let second = try Running(changed.path, ["-c", ". \(script.path)"])
        defer {
            first.stop()
            second.stop()
        }
        let inspector = ProcessInspector()
        let one = try identify(first.pid, inspector)
        let two = try identify(second.pid, inspector)
        #expect(one.application.name == original.path)
        #expect(two.application.name == changed.path)
        #expect(one.application.digest?.description == (try Self.sha256sum(shell)))
        #expect(two.application.digest?.description == (try Self.sha256sum(changed.path)))
        #expect(one.application.digest != two.application.digest)
    }

    @Test func aPythonScriptIsIdentifiedByItsScriptRelativeToItsDirectory() throws {
        let script = directory.appendingPathComponent("sync.py")
        try "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n".write(
            to: script, atomically: true, encoding: .utf8)
        let running = try Running("/usr/bin/python3", ["-u", "-W", "ignore", "sync.py"], in: directory)
        defer { running.stop() }
        let caller = try identify(running.pid)
        let interpreter = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(running.pid)/exe")
        guard case .script(interpreter, let path, let digest) = caller.application else {
            Issue.record("not the script: \(caller.application)")
            return
        }
        #expect(path == directory.resolvingSymlinksInPath().path + "/sync.py")
        #expect(digest.description == (try Self.sha256sum(script.path)))
        #expect(caller.application.description.hasSuffix("sync.py (python3.11 script)"))
    }

    @Test func inlineCodeIsTheInterpreterItself() throws {
        let running = try Running(
            "/usr/bin/python3", ["-c", "import sys; print('ready', flush=True); sys.stdin.read()"])
        defer { running.stop() }
        let caller = try identify(running.pid)
        let interpreter = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(running.pid)/exe")
        guard case .executable(interpreter, let digest) = caller.application else {
            Issue.record("not the interpreter: \(caller.application)")
            return
        }
        #expect(digest.description == (try Self.sha256sum(interpreter)))
    }

    @Test func aShellScriptIsItsScript() throws {
        let script = try waitingScript("backup.sh")
        let running = try Running("/bin/sh", [script.path])
        defer { running.stop() }
        let interpreter = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(running.pid)/exe")
        #expect(try identify(running.pid).application.name == interpreter + " " + script.path)
    }

    @Test func aFlatpakSandboxIsItsAppID() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/bwrap") else {
            Issue.record("bubblewrap is not installed (.ci/packages lists it)")
            return
        }
        let info = directory.appendingPathComponent("flatpak-info")
        try "[Instance]\ninstance-id=1\n\n[Application]\nname=org.example.Notes\nruntime=runtime/x\n".write(
            to: info, atomically: true, encoding: .utf8)
        let running = try Running(
            "/usr/bin/bwrap",
            [
                "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
                "/lib", "--symlink", "usr/lib64", "/lib64", "--ro-bind", info.path, "/.flatpak-info", "--proc", "/proc",
                "--dev", "/dev", "--die-with-parent", "--unshare-pid", "/bin/sh", "-c", "echo ready; read line",
            ])
        defer { running.stop() }
        // bwrap forks the sandboxed program: find it among bwrap's descendants.
        let inspector = ProcessInspector()
        var identified: [Application] = []
        for pid in Self.descendants(of: running.pid) { identified.append(try identify(pid, inspector).application) }
        #expect(identified.contains(.flatpak(appID: "org.example.Notes")))
        #expect(Application.flatpak(appID: "org.example.Notes").name == "flatpak:org.example.Notes")
    }

    /// What the Secret portal's backend asks of xdg-desktop-portal: a program only root could have installed,
    /// run outside a sandbox. The system's `sh` is one; the same bytes copied under /tmp (world-writable) are
    /// not; nor is the system's `sh` run in a bubblewrap sandbox without `.flatpak-info` (its root is the
    /// sandbox's own), nor a script.
    @Test func onlyASystemProgramOutsideASandboxRunsASystemProgram() throws {
        let shell = URL(fileURLWithPath: "/usr/bin/sh").resolvingSymlinksInPath().path
        let copy = directory.appendingPathComponent("sh").path
        try FileManager.default.copyItem(atPath: shell, toPath: copy)
        let script = try waitingScript("wait.sh")
        let system = try Running(shell, ["-c", ". \(script.path)"])
        let copied = try Running(copy, ["-c", ". \(script.path)"])
        let interpreted = try Running(shell, [script.path])
        defer {
            system.stop()
            copied.stop()
            interpreted.stop()
        }
        let inspector = ProcessInspector()
        #expect(try identify(system.pid, inspector).runsSystemProgram)
        #expect(try identify(copied.pid, inspector).runsSystemProgram == false)
        #expect(try identify(interpreted.pid, inspector).runsSystemProgram == false)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/bwrap") else {
            Issue.record("bubblewrap is not installed (.ci/packages lists it)")
            return
        }
        let sandboxed = try Running(
            "/usr/bin/bwrap",
            [
                "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
                "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--die-with-parent",
                "--unshare-pid", shell, "-c", "echo ready; read line",
            ])
        defer { sandboxed.stop() }
        var inside: [Caller] = []
        for pid in Self.descendants(of: sandboxed.pid) { inside.append(try identify(pid, inspector)) }
        let sh = inside.filter { $0.application.program.name == shell }
        #expect(!sh.isEmpty, "\(inside.map(\.application))")
        #expect(sh.allSatisfy { !$0.runsSystemProgram })
        // Its root is the sandbox's, with no marker: named as in another root, not as the host's sh.
        #expect(sh.allSatisfy { $0.application.container?.engine == .other && $0.application.name != shell })
    }

    static func descendants(of pid: pid_t) -> [pid_t] {
        let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        let direct = children.split(separator: " ").compactMap { pid_t($0) }
        return direct + direct.flatMap { descendants(of: $0) }
    }

    @Test func anotherUsersProcessIsRefused() throws {
        #expect(throws: CallerIdentityError.otherUser(uid: getuid() + 1)) {
            try ProcessInspector().identify(pid: getpid(), uid: getuid() + 1, expectedUID: getuid())
        }
        guard getuid() == 0 else { return }
        // The bus says root, the process says nobody (it changed its uid after connecting).
        let running = try Running(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", "echo ready; read line"])
        defer { running.stop() }
        #expect(throws: CallerIdentityError.otherUser(uid: 65534)) { try identify(running.pid) }
    }

    @Test func aProcessThatEndedIsGone() throws {
        let running = try Running("/bin/sh", ["-c", "echo ready; read line"])
        let pid = running.pid
        let caller = try identify(pid)
        running.stop()
        #expect(!ProcessInspector().isRunning(caller))
        #expect(throws: CallerIdentityError.processGone(pid)) { try identify(pid) }
    }

    /// The kernel hands the pid of a process that ended to the next one (ns_last_pid, as root): the first
    /// process's identity does not carry over to the second program. Start times count clock ticks (10 ms):
    /// the test waits out the tick, as a pid cannot come round the whole pid space within one.
    @Test func aReusedPidIsNotTheProcessThatHadIt() throws {
        guard getuid() == 0, FileManager.default.isWritableFile(atPath: "/proc/sys/kernel/ns_last_pid") else { return }
        let script = try waitingScript("second.sh")
        for _ in 0..<5 {
            let first = try Running("/bin/sh", ["-c", "echo ready; read line"])
            let pid = first.pid
            let caller = try identify(pid)
            first.stop()
            usleep(30_000)
            try "\(pid - 1)".write(toFile: "/proc/sys/kernel/ns_last_pid", atomically: false, encoding: .utf8)
            let second = try Running("/bin/sh", [script.path])
            defer { second.stop() }
            guard second.pid == pid else { continue }  // another process took it first: try again
            #expect(!ProcessInspector().isRunning(caller))
            let now = try identify(pid)
            #expect(now.startTime != caller.startTime)
            #expect(now.application.name.hasSuffix(" " + script.path))
            return
        }
        Issue.record("the pid was never reused in five tries")
    }

    @Test func digestsAreRememberedByInodeAndReadAgainWhenTheFileChanges() throws {
        let file = directory.appendingPathComponent("program")
        try Data("one".utf8).write(to: file)
        let digester = FileDigester()
        let first = try digester.digest(ofFileAt: file.path)
        _ = try digester.digest(ofFileAt: file.path)
        #expect(digester.filesRead == 1)
        #expect(first.description == (try Self.sha256sum(file.path)))
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("two".utf8))
        try handle.close()
        let second = try digester.digest(ofFileAt: file.path)
        #expect(digester.filesRead == 2)
        #expect(second.description == (try Self.sha256sum(file.path)))
        #expect(first != second)
        #expect(throws: CallerIdentityError.notAFile) { try digester.digest(ofFileAt: directory.path) }
    }

    /// A file above the bound is not hashed (not a byte read: the size says it), so a client cannot hold the
    /// identifying worker with a huge "program"; one at the bound is.
    @Test func filesLargerThanTheBoundAreNotHashed() throws {
        let file = directory.appendingPathComponent("big-program")
        try Data(repeating: 0x41, count: 4096).write(to: file)
        let atBound = FileDigester(maximumFileBytes: 4096)
        #expect(try atBound.digest(ofFileAt: file.path).description == (try Self.sha256sum(file.path)))
        let below = FileDigester(maximumFileBytes: 4095)
        #expect(throws: CallerIdentityError.tooLarge(bytes: 4096, limit: 4095)) {
            try below.digest(ofFileAt: file.path)
        }
        #expect(below.filesRead == 0)
        #expect(FileDigester().maximumFileBytes == 512 << 20)
    }

    @Test func interpreterCommandLinesNameTheirScript() {
        func target(_ arguments: String, _ executable: String = "/usr/bin/python3.11") -> InterpreterCommandLine.Target?
        {
            InterpreterCommandLine.target(of: arguments.split(separator: " ").map(String.init), executable: executable)
        }
        #expect(target("python3 app.py --flag") == .file("app.py"))
        #expect(target("python3 -u -X dev -W ignore app.py") == .file("app.py"))
        #expect(target("python3 -Wignore -Xdev -OO -uBEsS app.py") == .file("app.py"))
        #expect(target("python3 --check-hash-based-pycs never app.py") == .file("app.py"))
        #expect(target("python3 -c code") == .inline)
        #expect(target("python3 -uc code") == .inline)
        #expect(target("python3 -m http.server") == .module("http.server"))
        #expect(target("python3 -umhttp.server") == .module("http.server"))
        #expect(target("python3") == .inline)
        #expect(target("python3 -") == .inline)
        #expect(target("python3 -- -odd.py") == .file("-odd.py"))
        #expect(target("bash -e -o pipefail deploy.sh", "/usr/bin/bash") == .file("deploy.sh"))
        #expect(target("bash +o posix deploy.sh", "/usr/bin/bash") == .file("deploy.sh"))
        #expect(target("sh -ec code", "/usr/bin/dash") == .inline)
        #expect(target("git status", "/usr/bin/git") == nil)
    }

    /// Options that run code besides the script (inline code attached to its option, modules and libraries
    /// loaded first, directories code is loaded from, debuggers, prompts) are inline code: the command line is
    /// not the script it names (docs/threat-model.md, "Who is asking").
    @Test func codeBesidesTheScriptIsInlineCode() {
        func target(_ arguments: [String], _ executable: String) -> InterpreterCommandLine.Target? {
            InterpreterCommandLine.target(of: arguments, executable: executable)
        }
        let python = "/usr/bin/python3.11"
        #expect(target(["python3", "-cimport os", "/t.py"], python) == .inline)
        #expect(target(["python3", "-Ic", "import os", "/t.py"], python) == .inline)
        #expect(target(["python3", "-uIcimport os", "/t.py"], python) == .inline)
        #expect(target(["python3", "-i", "/t.py"], python) == .inline)
        #expect(target(["python3", "-mpdb", "/t.py"], python) == .module("pdb"))
        #expect(target(["python3", "-W", "-c", "/t.py"], python) == .file("/t.py"), "-W's value, not an option")
        #expect(target(["python3", "-X", "pycache_prefix=/tmp/evil", "/t.py"], python) == .inline)
        #expect(target(["python3", "-Xpycache_prefix=/tmp/evil", "/t.py"], python) == .inline)
        #expect(target(["python3", "-BXpycache_prefix=/tmp/evil", "/t.py"], python) == .inline)
        #expect(target(["python3", "-X", "importtime", "/t.py"], python) == .file("/t.py"))
        #expect(target(["python3", "-Ximporttime", "/t.py"], python) == .file("/t.py"))
        let perl = "/usr/bin/perl5.36.0"
        #expect(target(["perl", "-e", "code", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-Mstrict", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-M", "Evil", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-mEvil", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-I/tmp/evil", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-I", "lib", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-d:Trace", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-lne", "code", "/t.pl"], perl) == .inline)
        #expect(target(["perl", "-S", "t.pl"], perl) == .inline, "-S runs the t.pl PATH finds, not ./t.pl")
        #expect(target(["perl", "-wS", "t.pl"], perl) == .inline)
        #expect(target(["perl", "-w", "-T", "/t.pl"], perl) == .file("/t.pl"))
        #expect(target(["perl", "-l0777", "-na", "/t.pl"], perl) == .file("/t.pl"))
        let node = "/usr/bin/node"
        #expect(target(["node", "-r", "./evil.js", "/t.js"], node) == .inline)
        #expect(target(["node", "--require", "./evil.js", "/t.js"], node) == .inline)
        #expect(target(["node", "--require=./evil.js", "/t.js"], node) == .inline)
        #expect(target(["node", "--import=./evil.mjs", "/t.js"], node) == .inline)
        #expect(target(["node", "--loader", "./evil.mjs", "/t.js"], node) == .inline)
        #expect(target(["node", "--inspect=9229", "/t.js"], node) == .inline)
        #expect(target(["node", "-e", "code", "/t.js"], node) == .inline)
        #expect(target(["node", "--input-type", "module", "/t.js"], node) == .file("/t.js"))
        #expect(target(["node", "--env-file=.env", "/t.js"], node) == .inline, "NODE_OPTIONS=--require in it")
        #expect(target(["node", "--env-file-if-exists", ".env", "/t.js"], node) == .inline)
        #expect(target(["node", "--snapshot-blob=/tmp/evil.blob", "/t.js"], node) == .inline)
        #expect(target(["node", "--snapshot-blob", "/tmp/evil.blob", "/t.js"], node) == .inline)
        #expect(target(["node", "--openssl-config=/tmp/evil.cnf", "/t.js"], node) == .inline)
        #expect(target(["node", "--no-warnings", "/t.js"], node) == .file("/t.js"))
        let ruby = "/usr/bin/ruby3.1"
        #expect(target(["ruby", "-r", "evil", "/t.rb"], ruby) == .inline)
        #expect(target(["ruby", "-revil", "/t.rb"], ruby) == .inline)
        #expect(target(["ruby", "-I", "/tmp/evil", "/t.rb"], ruby) == .inline)
        #expect(target(["ruby", "-S", "t.rb"], ruby) == .inline, "-S looks the script up in PATH")
        #expect(target(["ruby", "-e", "code", "/t.rb"], ruby) == .inline)
        #expect(target(["ruby", "-w", "-C", "/srv", "/t.rb"], ruby) == .file("/t.rb"))
        #expect(target(["ruby", "-Ku", "/t.rb"], ruby) == .file("/t.rb"))
        let bash = "/usr/bin/bash"
        #expect(target(["bash", "-s", "/t.sh"], bash) == .inline)
        #expect(target(["bash", "-i", "/t.sh"], bash) == .inline)
        #expect(target(["bash", "-xc", "code", "/t.sh"], bash) == .inline)
    }

    /// A script is named with its interpreter: `/usr/bin/python3.11 /srv/t.py` is another application than
    /// `/home/me/python3 /srv/t.py`, and a `-T` given a script names it as the daemon will (its `#!` line's
    /// interpreter, through `env` and `PATH` too).
    @Test func aScriptIsNamedWithItsInterpreter() throws {
        let digest = try #require(FileDigest(Array(repeating: 7, count: 32)))
        let system = Application.script(interpreter: "/usr/bin/python3.11", path: "/srv/t.py", digest: digest)
        let copy = Application.script(interpreter: "/home/me/python3", path: "/srv/t.py", digest: digest)
        #expect(system.name == "/usr/bin/python3.11 /srv/t.py")
        #expect(system.name != copy.name)
        #expect(system.description == "/srv/t.py (python3.11 script)")

        let python = try FileManager.default.destinationOfSymbolicLink(atPath: "/usr/bin/python3")
        let interpreter = python.hasPrefix("/") ? python : "/usr/bin/" + python
        let direct = directory.appendingPathComponent("direct.py")
        try "#!/usr/bin/python3 -u\nprint(1)\n".write(to: direct, atomically: true, encoding: .utf8)
        let throughEnv = directory.appendingPathComponent("env.py")
        try "#!/usr/bin/env -S python3 -u\nprint(1)\n".write(to: throughEnv, atomically: true, encoding: .utf8)
        let plain = directory.appendingPathComponent("notes.txt")
        try "print(1)\n".write(to: plain, atomically: true, encoding: .utf8)
        let unknown = directory.appendingPathComponent("build.mk")
        try "#!/usr/bin/make -f\n".write(to: unknown, atomically: true, encoding: .utf8)
        #expect(Application.trustedName(ofProgramAt: direct.path, searchPath: nil) == interpreter + " " + direct.path)
        #expect(
            Application.trustedName(ofProgramAt: throughEnv.path, searchPath: "/nonexistent:/usr/bin")
                == interpreter + " " + throughEnv.path)
        #expect(Application.trustedName(ofProgramAt: throughEnv.path, searchPath: "/nonexistent") == throughEnv.path)
        #expect(Application.trustedName(ofProgramAt: plain.path, searchPath: nil) == plain.path)
        #expect(Application.trustedName(ofProgramAt: unknown.path, searchPath: nil) == unknown.path)
    }

    /// A process that executes another program keeps its pid and start time: what it runs is compared again
    /// (its executable's inode, where its stack starts, an interpreter's script), and a change is seen.
    @Test func aProgramExecutedSinceIdentificationIsSeen() throws {
        // sh running a script, which executes sleep in the same pid once its standard input has a line.
        let toSleep = try waitingScript("then-sleep.sh", extra: "")
        try "echo ready\nread line\nexec /bin/sleep 30\n".write(to: toSleep, atomically: true, encoding: .utf8)
        let first = try Running("/bin/sh", [toSleep.path])
        defer { first.stop() }
        let caller = try identify(first.pid)
        #expect(ProcessInspector().runsSameProgram(caller))
        first.input.fileHandleForWriting.write(Data("go\n".utf8))
        try waitUntil {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(first.pid)/exe")) == "/usr/bin/sleep"
        }
        #expect(ProcessInspector().isRunning(caller), "the same process")
        #expect(!ProcessInspector().runsSameProgram(caller), "another program")
        #expect(!ProcessInspector().runsSameProgram(caller, sameProcess: true), "another executable")

        // The same interpreter executing another script: the same executable, another script and stack.
        let second = try waitingScript("second.sh")
        let toScript = directory.appendingPathComponent("then-script.sh")
        try "echo ready\nread line\nexec /bin/sh \(second.path)\n".write(
            to: toScript, atomically: true, encoding: .utf8)
        let shell = try Running("/bin/sh", [toScript.path])
        defer { shell.stop() }
        let before = try identify(shell.pid)
        #expect(ProcessInspector().runsSameProgram(before))
        shell.input.fileHandleForWriting.write(Data("go\n".utf8))
        #expect(shell.output.fileHandleForReading.readLine() == "ready", "the second script runs")
        #expect(!ProcessInspector().runsSameProgram(before))
        #expect(!ProcessInspector().runsSameProgram(before, sameProcess: true), "another script")
        #expect(try identify(shell.pid).application.name.hasSuffix(" " + second.path))
    }

    /// `/proc/PID/stat`'s name may hold spaces and parentheses; fields 22 and 28 are read after the last ')'.
    @Test func statLinesAreReadAfterTheLastParenthesis() {
        var fields = (3...52).map { String($0) }
        fields[22 - 3] = "123456"
        fields[28 - 3] = "140737488346112"
        let line = "4242 (odd) name (x) " + fields.joined(separator: " ") + "\n"
        let parsed = ProcessInspector.parseStat(ArraySlice(Array(line.utf8)))
        #expect(parsed?.command == "odd) name (x")
        #expect(parsed?.startTime == 123456)
        #expect(parsed?.stackStart == 140_737_488_346_112)
        #expect(ProcessInspector.parseStat(ArraySlice(Array("4242 (short) S 1 2".utf8))) == nil)
        #expect(
            ProcessInspector.parseStat(ArraySlice(Array(line.replacingOccurrences(of: "123456", with: "12x").utf8)))
                == nil)
    }

    /// Waits up to 5 s for `condition`.
    func waitUntil(_ condition: () -> Bool) throws {
        for _ in 0..<500 where !condition() { usleep(10_000) }
        try #require(condition())
    }
}

extension FileHandle {
    /// One line without its newline; nil at end of file.
    fileprivate func readLine() -> String? {
        var bytes: [UInt8] = []
        while let byte = try? read(upToCount: 1), let first = byte.first {
            if first == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(first)
        }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
}

/// The Debian package an access prompt names next to an application.
@Suite struct PackageOwnerTests {
    @Test func dpkgNamesThePackageOfAnInstalledFileAndNoneOfAnother() throws {
        #expect(PackageOwner.package(of: "/usr/bin/secret-tool") == "libsecret-tools")
        // The kernel's /usr/bin/dash is dpkg's /bin/dash (a merged /usr).
        #expect(PackageOwner.package(of: "/usr/bin/dash") == "dash")
        #expect(PackageOwner.package(of: "/nonexistent/program") == nil)
        #expect(PackageOwner.package(of: "relative/path") == nil)
        #expect(PackageOwner.package(of: "/usr/bin/dash", dpkg: "/nonexistent/dpkg") == nil)
    }
}
