import FoundationEssentials
import Glibc
import KeychainCore
import Posix
import Synchronization

/// Where latchkeyd runs scrypt: in a process of its own, so that the 64 MiB one derivation needs is that
/// process's and goes back to the system when it exits, instead of raising the daemon's peak (docs/robustness.md,
/// "Memory of a prompt storm"). The cost of a guess is unchanged: the same scrypt with the same parameters runs,
/// only elsewhere.
///
/// At start, while it still runs one thread, the daemon forks a deriver (``startDeriver(report:)``): a copy of
/// itself that never `exec`s, so it is never dumpable (the daemon was made non-dumpable at image start, and
/// `fork` keeps that), and that holds nothing but a socket to the daemon. For each derivation the daemon makes a
/// socket pair and hands one end to the deriver; the deriver forks a worker for it, which reads the request
/// (parameters, salt, password), derives, writes the 32-byte key and exits. No process that receives a password
/// was ever dumpable, so no other process of the user can have opened its memory (docs/threat-model.md, "scrypt
/// in a process of its own"). The password is sent from secret memory and read into secret memory; it is never
/// in arguments or the environment.
///
/// `latchkeyd` ``helperArgument`` serves one request on standard input and output the same way (an scrypt
/// calculator, for tests and by hand); the daemon never starts it.
package enum KeyDerivationProcess {
    /// The one argument that makes `latchkeyd` serve one request on standard input and output: not a documented
    /// option of `latchkeyd`.
    package static let helperArgument = "--derive-password-key"

    /// Derivations that need at least this much memory run in a worker once ``startDeriver(report:)`` was
    /// called: 16 MiB (``KDFParameters/production`` needs 64 MiB; the in-memory session keychain's 1 MiB
    /// derivation stays in the process).
    package static let minimumBytesForHelper: UInt64 = 16 << 20

    /// The longest password a worker takes: 16 MiB (a longer one is derived in the process).
    static let maximumPasswordBytes = 16 << 20

    /// The longest salt a worker takes (keychain files carry 16 bytes).
    static let maximumSaltBytes = 4_096

    /// How long a derivation may take, the worker's start included, before it is given up (and the worker
    /// ends by its alarm): 120 s. The largest work a keychain file may ask for (``KDFParameters/maximumWork``)
    /// takes about 5 s on an idle 2-core machine.
    static let timeoutMilliseconds = 120_000

    /// A worker's exit statuses.
    enum ExitStatus: Int32 {
        case derived = 0
        case badRequest = 2
        case traced = 3
        case hardeningFailed = 4
        case derivationFailed = 5
    }

    private static let magic: [UInt8] = Array("LKD1".utf8)
    private static let headerLength = 4 + 1 + 4 + 4 + 4 + 4

    /// The deriver the daemon forked: its socket and pid, and where failures are reported.
    private struct Deriver: Sendable {
        let socket: Int32
        let pid: pid_t
        let report: @Sendable (String) -> Void
    }

    /// The deriver, while it serves; nil before the start and once it is gone.
    private static let deriver = Mutex<Deriver?>(nil)

    /// Forks the deriver: from now on, derivations of at least ``minimumBytesForHelper`` run in its workers;
    /// `report` gets a line when the deriver is gone and a derivation runs in this process instead. Must be
    /// called while the process runs one thread (a fork copies only the calling thread, and a lock another
    /// thread held would stay held in the copy). The reason when no deriver could be started (derivations
    /// then run in this process).
    package static func startDeriver(report: @escaping @Sendable (String) -> Void) -> String? {
        guard let threads = ProcessStatus.threadCount() else { return "cannot read /proc/self/status" }
        guard threads == 1 else { return "the process runs \(threads) threads already: it cannot fork safely" }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            return "socketpair: \(String(cString: strerror(errno)))"
        }
        let daemon = getpid()
        let child = fork()
        if child == 0 {
            close(ends[0])
            serveAsDeriver(socket: ends[1], daemon: daemon)
        }
        close(ends[1])
        guard child > 0 else {
            close(ends[0])
            return "fork: \(String(cString: strerror(errno)))"
        }
        deriver.withLock { $0 = Deriver(socket: ends[0], pid: child, report: report) }
        return nil
    }

    /// Derives in a worker of the deriver when it serves and `kdf` needs at least ``minimumBytesForHelper``; nil
    /// when the derivation is to run in this process (no deriver, a small derivation, or the deriver is gone:
    /// reported).
    static func derive(_ kdf: KDFParameters, password: some Collection<UInt8>, salt: Data) throws(KeychainError)
        -> SecretKey?
    {
        guard kdf.memoryBytes >= minimumBytesForHelper, password.count <= maximumPasswordBytes,
            let deriver = deriver.withLock({ $0 })
        else { return nil }
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
        return try run(deriver, request: request)
    }

    /// age's passphrase scrypt (N = 2^`logN`, r = 8, p = 1, 32 bytes) of `password` with `salt`, in a worker of
    /// the deriver when it serves (an export or import through the daemon: docs/export-import.md), so that its
    /// 256 MiB are not the daemon's; nil when it is to run in this process (no deriver, or it is gone).
    package static func deriveAgeKey(logN: Int, password: borrowing SecretBytes, salt: [UInt8])
        throws(KeychainError) -> SecretBytes?
    {
        guard let exponent = UInt8(exactly: logN) else { return nil }
        let key = try password.withUnsafeBytes { (bytes) throws(KeychainError) in
            try derive(KDFParameters(logN: exponent, r: 8, p: 1), password: bytes, salt: Data(salt))
        }
        guard let key else { return nil }
        return try KeychainError.allocating { () throws(SecretMemoryError) in
            try SecretBytes(copying: UnsafeRawBufferPointer(key.bytes))
        }
    }

    /// Hands the deriver one end of a new socket pair, sends `request` on the other and reads the key its worker
    /// writes back. Nil when the deriver is gone (reported, and forgotten: later derivations run in this
    /// process).
    private static func run(_ deriver: Deriver, request: borrowing SecretBytes) throws(KeychainError) -> SecretKey? {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            deriver.report("key derivation runs in this process: socketpair: \(String(cString: strerror(errno)))")
            return nil
        }
        let ours = ends[0]
        defer { close(ours) }
        do throws(SystemError) {
            defer { close(ends[1]) }
            try Posix.sendDescriptor(ends[1], over: deriver.socket)
        } catch {
            forget(deriver, because: "the key derivation process is gone (\(error))")
            return nil
        }
        _ = fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) | O_NONBLOCK)
        let deadline = Deadline(millisecondsFromNow: timeoutMilliseconds)
        let sent = request.withUnsafeBytes { send($0, to: ours, by: deadline) }
        let key = try SecretKey.filled { (out) throws(KeychainError) in
            guard sent && receive(into: out, from: ours, by: deadline) else {
                // The worker says why on standard error, the daemon's (the deriver, when it was killed).
                let reason = "the key derivation process failed: it gave no key"
                deriver.report(reason)
                throw KeychainError(.internalComponent, reason)
            }
        }
        return key
    }

    /// Stops using `deriver` (gone: killed, or ended), reaps it, and says so.
    private static func forget(_ gone: Deriver, because reason: String) {
        let forgotten = deriver.withLock { current in
            guard current?.pid == gone.pid else { return false }
            current = nil
            return true
        }
        guard forgotten else { return }
        close(gone.socket)
        var status: Int32 = 0
        _ = waitpid(gone.pid, &status, WNOHANG)
        gone.report("key derivation runs in this process from now on: \(reason)")
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

    // MARK: The deriver's and the workers' side

    /// The deriver, in the child the daemon forked: keeps only standard error and its socket (standard input and
    /// output become /dev/null: the daemon's may carry a password or the login's hand-over), ends with the
    /// daemon, and forks a worker for each socket the daemon hands it. It reaps its workers, and says on
    /// standard error when one was killed (a worker that refuses a request says why itself).
    private static func serveAsDeriver(socket: Int32, daemon: pid_t) -> Never {
        // The daemon's thread that forked is its main thread, which lives as long as the daemon.
        guard ProcessHardening.endWithParent() == nil, getppid() == daemon else { _exit(0) }
        ProcessHardening.setProcessName("latchkeyd-kdf")
        var none = sigset_t()
        sigemptyset(&none)
        sigprocmask(SIG_SETMASK, &none, nil)
        // The socket to 3 first: a daemon started with standard input or output closed may have got it as 0 or 1.
        guard dup2(socket, 3) == 3 else { _exit(ExitStatus.hardeningFailed.rawValue) }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0, dup2(null, 0) == 0, dup2(null, 1) == 1, (try? Posix.closeDescriptors(from: 4)) != nil
        else { _exit(ExitStatus.hardeningFailed.rawValue) }
        let control: Int32 = 3
        let deriverPID = getpid()
        var workers = 0
        while true {
            var ready = [pollfd(fd: control, events: Int16(POLLIN), revents: 0)]
            let polled = (try? Posix.poll(&ready, timeoutMilliseconds: workers > 0 ? 200 : -1)) ?? 0
            while workers > 0 {
                var status: Int32 = 0
                let ended = waitpid(-1, &status, WNOHANG)
                guard ended > 0 else { break }
                workers -= 1
                // A worker that exits says why itself; one killed cannot.
                if status & 0x7f != 0 {
                    sayOnStandardError(
                        "latchkeyd: the key derivation process failed: it was ended by signal \(status & 0x7f)")
                }
            }
            guard polled > 0 else { continue }
            let received: Int32?
            do throws(SystemError) {
                received = try Posix.receiveDescriptor(over: control)
            } catch {
                // A message without one descriptor is dropped; any other failure of the socket ends the deriver.
                guard error.errno == EBADMSG else { _exit(0) }
                continue
            }
            guard let descriptor = received else { _exit(0) }  // The daemon is gone.
            let worker = fork()
            if worker == 0 {
                close(control)
                guard ProcessHardening.endWithParent() == nil, getppid() == deriverPID else { _exit(0) }
                _exit(serve(input: descriptor, output: descriptor, saying: "latchkeyd: the key derivation process"))
            }
            close(descriptor)
            if worker > 0 { workers += 1 }
        }
    }

    /// Started as `latchkeyd` ``helperArgument`` with the request on standard input and the key to write on
    /// standard output: forbids core dumps, asks to be killed with its parent, and serves the request
    /// (``serve(input:output:saying:)``). `hardenedAtStart` says whether the program's start-up constructor
    /// (latchkeyd's `CStartHardening`) made the process non-dumpable before any Swift code ran; when it did not,
    /// it refuses. Returns the exit status.
    package static func serveHelperRequest(hardenedAtStart: Bool) -> Int32 {
        let saying = "latchkeyd \(helperArgument)"
        guard hardenedAtStart else { return refuse(.hardeningFailed, "not made non-dumpable at image start", saying) }
        if let problem = ProcessHardening.forbidCoreDumps() { return refuse(.hardeningFailed, problem, saying) }
        ProcessHardening.setProcessName("latchkeyd-kdf")
        ProcessHardening.endOnFatalSignals()
        if let problem = ProcessHardening.endWithParent() { return refuse(.hardeningFailed, problem, saying) }
        return serve(input: 0, output: 1, saying: saying)
    }

    /// One line on standard error and `status`.
    private static func refuse(_ status: ExitStatus, _ reason: String, _ saying: String) -> Int32 {
        sayOnStandardError("\(saying): \(reason)")
        return status.rawValue
    }

    /// Writes `line` and a newline on standard error.
    private static func sayOnStandardError(_ line: String) {
        try? Posix.writeAll(2, Array("\(line)\n".utf8))
    }

    /// Serves one request: checks that nothing traces the process, arms the time limit, and only then reads the
    /// request from `input`, derives and writes the key on `output`. A bad request gets a line on standard error
    /// (beginning with `saying`) and a non-zero status; nothing is written but a derived key. Returns the exit
    /// status.
    private static func serve(input: Int32, output: Int32, saying: String) -> Int32 {
        func fail(_ status: ExitStatus, _ reason: String) -> Int32 { refuse(status, reason, saying) }
        guard let tracer = ProcessStatus.tracerPID() else {
            return fail(.hardeningFailed, "cannot read /proc/self/status")
        }
        guard tracer == 0 else { return fail(.traced, "traced by process \(tracer): refused") }
        // SIGALRM's default action ends the process: a stalled request cannot keep it.
        alarm(UInt32(timeoutMilliseconds / 1_000))
        var header = [UInt8](repeating: 0, count: headerLength)
        guard readAll(from: input, into: &header) else { return fail(.badRequest, "the request is incomplete") }
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
        guard readAll(from: input, into: &salt) else { return fail(.badRequest, "the request is incomplete") }
        guard var password = try? SecretBytes(zeros: passwordCount) else {
            return fail(.derivationFailed, "no memory for the password")
        }
        let complete = password.withUnsafeMutableBytes { readAll(from: input, into: $0) }
        guard complete else { return fail(.badRequest, "the request is incomplete") }
        var extra: UInt8 = 0
        guard (try? Posix.read(input, &extra, 1)) == 0 else { return fail(.badRequest, "the request is too long") }
        do {
            let key = try password.withUnsafeBytes { (bytes) throws(KeychainError) in
                try kdf.deriveInThisProcess(password: bytes, salt: Data(salt))
            }
            var written = 0
            while written < key.bytes.count {
                guard
                    let count = try? Posix.write(
                        output, key.bytes.baseAddress.map { $0 + written }, key.bytes.count - written),
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
