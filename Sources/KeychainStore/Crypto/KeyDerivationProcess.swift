import FoundationEssentials
import Glibc
import KeychainCore
import Posix
import Synchronization

/// Where latchkeyd runs scrypt: in a one-shot process of its own program, so that the 64 MiB one derivation
/// needs is the helper's and goes back to the system when it exits, instead of raising the daemon's peak
/// (docs/robustness.md, "Memory of a prompt storm"). The cost of a guess is unchanged: the same scrypt with
/// the same parameters runs, only elsewhere.
///
/// The daemon starts its own executable (opened at start through `/proc/self/exe`, so the password goes to
/// the very program already running even if the file is replaced meanwhile) with ``helperArgument`` alone,
/// writes the request (parameters, salt, password) on a socket that is the helper's standard input and
/// output, and reads the 32-byte key back. The helper makes itself non-dumpable and checks that nothing
/// traces it before it reads the password (``serveHelperRequest(hardenedAtStart:)``). The password is sent from secret memory
/// and read into secret memory; it is never in the helper's arguments or environment.
package enum KeyDerivationProcess {
    /// The one argument that starts the helper: not a documented option of `latchkeyd`.
    package static let helperArgument = "--derive-password-key"

    /// Derivations that need at least this much memory run in the helper once ``runInHelperProcesses(report:)``
    /// was called: 16 MiB (``KDFParameters/production`` needs 64 MiB; the in-memory session keychain's 1 MiB
    /// derivation stays in the process).
    package static let minimumBytesForHelper: UInt64 = 16 << 20

    /// The longest password the helper takes: 16 MiB (a longer one is derived in the process).
    static let maximumPasswordBytes = 16 << 20

    /// The longest salt the helper takes (keychain files carry 16 bytes).
    static let maximumSaltBytes = 4_096

    /// How long a derivation may take, helper start included, before the helper is killed: 120 s. The
    /// largest work a keychain file may ask for (``KDFParameters/maximumWork``) takes about 5 s on an idle
    /// 2-core machine.
    static let timeoutMilliseconds = 120_000

    /// The helper's exit statuses.
    enum ExitStatus: Int32 {
        case derived = 0
        case badRequest = 2
        case traced = 3
        case hardeningFailed = 4
        case derivationFailed = 5
    }

    private static let magic: [UInt8] = Array("LKD1".utf8)
    private static let headerLength = 4 + 1 + 4 + 4 + 4 + 4

    /// The program the helper runs and where failures are reported, once installed.
    private struct Helper: Sendable {
        let executable: Int32
        let report: @Sendable (String) -> Void
        var path: String { "/proc/self/fd/\(executable)" }
    }

    private static let installed = Mutex<Helper?>(nil)

    /// From now on, derivations of at least ``minimumBytesForHelper`` run in a helper process; `report` gets a
    /// line when one cannot start and the derivation runs in this process instead. The reason when the
    /// program cannot be opened (nothing changes then).
    package static func runInHelperProcesses(report: @escaping @Sendable (String) -> Void) -> String? {
        let opened = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        guard opened >= 0 else { return "cannot open /proc/self/exe: \(String(cString: strerror(errno)))" }
        // Above the helper's standard descriptors, which the spawn sets (a daemon started with one closed
        // would get it here).
        let executable = opened > 2 ? opened : fcntl(opened, F_DUPFD_CLOEXEC, 3)
        if executable != opened { close(opened) }
        guard executable >= 0 else { return "cannot keep /proc/self/exe open: \(String(cString: strerror(errno)))" }
        let previous = installed.withLock { helper in
            defer { helper = Helper(executable: executable, report: report) }
            return helper
        }
        if let previous { close(previous.executable) }
        return nil
    }

    /// The helper for a derivation needing `memoryBytes`, if one is installed and it is that large.
    private static func helper(for memoryBytes: UInt64) -> Helper? {
        guard memoryBytes >= minimumBytesForHelper else { return nil }
        return installed.withLock { $0 }
    }

    /// Derives in the helper when one is installed and `kdf` needs at least ``minimumBytesForHelper``; nil when
    /// the derivation is to run in this process (no helper, a small derivation, or the helper could not start:
    /// reported).
    static func derive(_ kdf: KDFParameters, password: some Collection<UInt8>, salt: Data) throws(KeychainError)
        -> SecretKey?
    {
        guard let helper = helper(for: kdf.memoryBytes), password.count <= maximumPasswordBytes else { return nil }
        guard salt.count <= maximumSaltBytes else {
            throw KeychainError(.invalidKeychain, "the keychain's salt is \(salt.count) bytes long")
        }
        var request = try KeychainError.allocating { () throws(SecretMemoryError) in
            try SecretBytes(capacity: headerLength + salt.count + password.count)
        }
        var header = magic + [kdf.logN]
        for value in [kdf.r, kdf.p, UInt32(salt.count), UInt32(password.count)] {
            withUnsafeBytes(of: value.bigEndian) { header += $0 }
        }
        header.withUnsafeBytes { request.append($0) }
        [UInt8](salt).withUnsafeBytes { request.append($0) }
        let passwordCopy = try KeychainError.allocating { () throws(SecretMemoryError) in
            try SecretBytes(copying: password)
        }
        passwordCopy.withUnsafeBytes { request.append($0) }
        return try run(helper, request: request)
    }

    /// Starts the helper, hands it `request` and reads the key; the helper is reaped whatever happens, and
    /// killed first when it has not ended by the deadline. Nil when it could not start (reported).
    private static func run(_ helper: Helper, request: borrowing SecretBytes) throws(KeychainError) -> SecretKey? {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            helper.report("key derivation runs in this process: socketpair: \(String(cString: strerror(errno)))")
            return nil
        }
        let ours = ends[0]
        defer { close(ours) }
        let child: pid_t
        do {
            child = try Posix.spawn(
                helper.path, [helperArgument], environment: [], input: ends[1], output: ends[1], name: "latchkeyd")
        } catch {
            close(ends[1])
            helper.report("key derivation runs in this process: cannot start the helper: \(error)")
            return nil
        }
        close(ends[1])
        _ = fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) | O_NONBLOCK)
        let deadline = Deadline(millisecondsFromNow: timeoutMilliseconds)
        var ended = false
        defer { if !ended { reap(child, killing: true) } }
        let sent = request.withUnsafeBytes { send($0, to: ours, by: deadline) }
        let key = try SecretKey.filled { (out) throws(KeychainError) in
            let received = sent && receive(into: out, from: ours, by: deadline)
            // The helper has ended (its end of the socket closed) or has overrun.
            let status = reap(child, killing: !received || !deadline.waitUntil(ours, isReadyFor: Int16(POLLIN)))
            ended = true
            guard received, let status, status == ExitStatus.derived.rawValue else {
                let reason = "the key derivation process failed: \(describe(status))"
                helper.report(reason)
                throw KeychainError(.internalComponent, reason)
            }
        }
        return key
    }

    /// Writes all of `bytes` to the non-blocking `socket`; false when the peer went or the deadline passed.
    private static func send(_ bytes: UnsafeRawBufferPointer, to socket: Int32, by deadline: Deadline) -> Bool {
        var offset = 0
        while offset < bytes.count {
            guard deadline.waitUntil(socket, isReadyFor: Int16(POLLOUT)), let base = bytes.baseAddress else {
                return false
            }
            let count = Glibc.send(socket, base + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return shutdown(socket, Int32(SHUT_WR)) == 0
    }

    /// Fills `out` from the non-blocking `socket`; false at an early end of file or when the deadline passed.
    private static func receive(into out: UnsafeMutableRawBufferPointer, from socket: Int32, by deadline: Deadline)
        -> Bool
    {
        var offset = 0
        while offset < out.count {
            guard deadline.waitUntil(socket, isReadyFor: Int16(POLLIN)), let base = out.baseAddress else {
                return false
            }
            let count = Glibc.read(socket, base + offset, out.count - offset)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    /// Reaps `child` (killed first when `killing`); its raw wait status, nil when it could not be had.
    @discardableResult
    private static func reap(_ child: pid_t, killing: Bool) -> Int32? {
        if killing { kill(child, SIGKILL) }
        var status: Int32 = 0
        while true {
            let reaped = waitpid(child, &status, 0)
            if reaped == child { return status }
            if reaped < 0 && errno == EINTR { continue }
            return nil
        }
    }

    /// Words for the helper's wait status.
    private static func describe(_ status: Int32?) -> String {
        guard let status else { return "its status is unknown" }
        let signal = status & 0x7f
        guard signal == 0 else { return "it was ended by signal \(signal)" }
        switch ExitStatus(rawValue: (status >> 8) & 0xff) {
        case .derived: return "it gave no key"
        case .badRequest: return "it refused the request"
        case .traced: return "it was being traced, and refused"
        case .hardeningFailed: return "it could not protect its memory"
        case .derivationFailed: return "scrypt failed in it"
        case nil: return "it exited with status \((status >> 8) & 0xff)"
        }
    }

    // MARK: The helper's side

    /// The helper: started as `latchkeyd` ``helperArgument`` with a socket as standard input and output. It
    /// forbids core dumps and tracing and checks that no tracer attached before (a process of the same user
    /// could between `exec` and `prctl`), asks to be killed with its parent and to end within the time
    /// limit, and only then reads the request, derives and writes the key. A bad request gets a line on
    /// standard error and a non-zero status; nothing is written to standard output but a derived key.
    /// `hardenedAtStart` says whether the program's start-up constructor (latchkeyd's `CStartHardening`) made
    /// the process non-dumpable before any Swift code ran; when it did not, the helper refuses. Returns the
    /// exit status.
    package static func serveHelperRequest(hardenedAtStart: Bool) -> Int32 {
        func fail(_ status: ExitStatus, _ reason: String) -> Int32 {
            let line = Array("latchkeyd \(helperArgument): \(reason)\n".utf8)
            _ = line.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
            return status.rawValue
        }
        guard hardenedAtStart else { return fail(.hardeningFailed, "not made non-dumpable at image start") }
        if let problem = ProcessHardening.forbidCoreDumps() { return fail(.hardeningFailed, problem) }
        ProcessHardening.setProcessName("latchkeyd-kdf")
        ProcessHardening.endOnFatalSignals()
        guard let tracer = ProcessHardening.tracerPID() else {
            return fail(.hardeningFailed, "cannot read /proc/self/status")
        }
        guard tracer == 0 else { return fail(.traced, "traced by process \(tracer): refused") }
        if let problem = ProcessHardening.endWithParent() { return fail(.hardeningFailed, problem) }
        // SIGALRM's default action ends the process: a stalled request cannot keep it.
        alarm(UInt32(timeoutMilliseconds / 1_000))
        var header = [UInt8](repeating: 0, count: headerLength)
        guard readAll(from: 0, into: &header) else { return fail(.badRequest, "the request is incomplete") }
        guard Array(header[0..<4]) == magic else { return fail(.badRequest, "not a key derivation request") }
        func field(_ at: Int) -> UInt32 { header[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        let kdf = KDFParameters(logN: header[4], r: field(5), p: field(9))
        let saltCount = Int(field(13))
        let passwordCount = Int(field(17))
        guard kdf.isAcceptable else { return fail(.badRequest, "parameters \(kdf) are out of range") }
        guard saltCount <= maximumSaltBytes, passwordCount <= maximumPasswordBytes else {
            return fail(.badRequest, "the salt or the password is too long")
        }
        var salt = [UInt8](repeating: 0, count: saltCount)
        guard readAll(from: 0, into: &salt) else { return fail(.badRequest, "the request is incomplete") }
        guard var password = try? SecretBytes(zeros: passwordCount) else {
            return fail(.derivationFailed, "no memory for the password")
        }
        let complete = password.withUnsafeMutableBytes { readAll(from: 0, into: $0) }
        guard complete else { return fail(.badRequest, "the request is incomplete") }
        var extra: UInt8 = 0
        guard (try? Posix.read(0, &extra, 1)) == 0 else { return fail(.badRequest, "the request is too long") }
        do {
            let key = try password.withUnsafeBytes { (bytes) throws(KeychainError) in
                try kdf.deriveInThisProcess(password: bytes, salt: Data(salt))
            }
            var written = 0
            while written < key.bytes.count {
                guard
                    let count = try? Posix.write(
                        1, key.bytes.baseAddress.map { $0 + written }, key.bytes.count - written),
                    count > 0
                else { return fail(.derivationFailed, "cannot write the key") }
                written += count
            }
            return ExitStatus.derived.rawValue
        } catch {
            return fail(.derivationFailed, error.description)
        }
    }

    /// Fills `buffer` from `descriptor`; false at an early end of file or an error.
    private static func readAll(from descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        var offset = 0
        while offset < buffer.count {
            guard let base = buffer.baseAddress,
                let count = try? Posix.read(descriptor, base + offset, buffer.count - offset), count > 0
            else { return false }
            offset += count
        }
        return true
    }

    private static func readAll(from descriptor: Int32, into buffer: inout [UInt8]) -> Bool {
        buffer.withUnsafeMutableBytes { readAll(from: descriptor, into: $0) }
    }
}
