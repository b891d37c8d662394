import Glibc
import Posix

/// The final answer to an Assuan command.
enum AssuanReply: Equatable {
    /// `OK`.
    case ok
    /// `ERR code text`.
    case error(code: UInt32, text: String)
}

/// One running pinentry child and the Assuan conversation with it.
///
/// The child's stdin and stdout are one end of a socket pair, so writes can use `MSG_NOSIGNAL` and a child that
/// dies early gives an error instead of a `SIGPIPE`. Every read and write waits at most until the deadline.
/// Not thread-safe; each call of `Pinentry` makes its own.
final class AssuanSession {
    private let pid: pid_t
    private var socket: Int32
    private let timeout: Duration
    private var deadline: Deadline
    /// Bytes read but not yet consumed as lines; zeroed as they are consumed.
    private var storage = [UInt8](repeating: 0, count: AssuanText.maxLineLength)
    private var filled = 0
    private var reaped = false
    /// Ends the exchange from another thread; nil: only the deadline does.
    private let cancellation: PinentryCancellation?
    /// The keywords of the status lines (`S KEYWORD …`) the last command's response carried, in order
    /// (`PIN_REPEATED` after a `GETPIN` whose repeat matched).
    private(set) var statusKeywords: [String] = []
    /// The terminal the child shows on (its descriptor 3), and its modes before the child started: put back
    /// when the child is ended rather than left to say `BYE` (withdrawn, timed out, killed), so that the shell
    /// the person types in gets its terminal as it was.
    private let terminal: (descriptor: Int32, modes: termios?)?

    /// How long a child told to stop (`SIGTERM`) may take before it is killed (`SIGKILL`).
    static let terminationGraceMilliseconds = 300

    /// Starts `executable` with `environment` and no arguments; `cancellation` may end the exchange early.
    init(
        executable: String, environment: [String: String], timeout: Duration,
        cancellation: PinentryCancellation? = nil, terminal: Int32? = nil
    ) throws(PinentryError) {
        self.timeout = timeout
        self.cancellation = cancellation
        self.terminal = terminal.map { descriptor in
            var modes = termios()
            return (descriptor, tcgetattr(descriptor, &modes) == 0 ? modes : nil)
        }
        deadline = Deadline(millisecondsFromNow: Self.milliseconds(timeout))
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw PinentryError(reason: "cannot create a socket pair: \(Self.describe(errno))")
        }
        // The daemon may block or ignore signals; the child starts with the defaults.
        let variables = environment.compactMap { key, value in
            key.isEmpty || key.contains("=") ? nil : "\(key)=\(value)"
        }
        let child: pid_t
        do {
            child = try Posix.spawn(
                executable, [], environment: variables, input: pair[1], output: pair[1], third: terminal)
        } catch {
            close(pair[1])
            close(pair[0])
            throw PinentryError(reason: "cannot start \(executable): \(Self.describe(error.errno))")
        }
        close(pair[1])
        pid = child
        socket = pair[0]
    }

    /// A conversation over `socket`, already connected to a server this process did not start: nothing to
    /// reap or kill. For the fuzz harness of Assuan replies (Fuzz/), which plays the pinentry from a socket pair.
    init(connectedSocket socket: Int32, timeout: Duration) {
        self.timeout = timeout
        cancellation = nil
        terminal = nil
        deadline = Deadline(millisecondsFromNow: Self.milliseconds(timeout))
        pid = 0
        self.socket = socket
        reaped = true
    }

    deinit {
        if !reaped {
            terminate()
        }
    }

    /// Whole seconds until the deadline.
    var secondsLeft: Int {
        Int(deadline.remainingMilliseconds / 1000)
    }

    /// `duration` in whole milliseconds, rounded up.
    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    /// Reads the server's greeting, which must be `OK`.
    func expectGreeting() throws(PinentryError) {
        var ignored: [UInt8] = []
        defer { AssuanText.wipe(&ignored) }
        if case .error(let code, let text) = try transact(nil, data: &ignored) {
            throw PinentryError(reason: "the program refused to start with error \(code): \(text)")
        }
    }

    /// Sends `name text` with the text percent-escaped and returns the reply.
    func command(_ name: String, text: String) throws(PinentryError) -> AssuanReply {
        var ignored: [UInt8] = []
        defer { AssuanText.wipe(&ignored) }
        return try transact(Array(AssuanText.commandLine(name, text: text).dropLast()), data: &ignored)
    }

    /// Sends `name argument` as it is (the caller made sure it has no control characters) and returns the reply.
    func command(_ name: String, raw argument: String) throws(PinentryError) -> AssuanReply {
        var ignored: [UInt8] = []
        defer { AssuanText.wipe(&ignored) }
        return try transact(Array("\(name) \(argument)".utf8.prefix(AssuanText.maxLineLength - 1)), data: &ignored)
    }

    /// Sends `line` (without its newline), if any, then reads until `OK` or `ERR`, appending the decoded payload
    /// of `D` lines to `data`, skipping status and comment lines, and answering inquiries with an empty `END`.
    func transact(_ line: [UInt8]?, data: inout [UInt8]) throws(PinentryError) -> AssuanReply {
        try transact(line) { (encoded) throws(PinentryError) in
            var chunk = AssuanText.unescape(encoded)
            AssuanText.append(chunk, to: &data)
            AssuanText.wipe(&chunk)
        }
    }

    /// As ``transact(_:data:)``, with the data lines (a password) decoded straight into `secret`, which grows
    /// in secret memory without leaving a copy behind; more than ``maximumSecretLength`` bytes is an error.
    func transact(_ line: [UInt8]?, secret: inout SecretBytes) throws(PinentryError) -> AssuanReply {
        try transact(line) { (encoded) throws(PinentryError) in
            // Encoded, the bytes are at least as many as decoded.
            guard secret.count + encoded.count <= Self.maximumSecretLength else {
                throw PinentryError(reason: "the program answered more than \(Self.maximumSecretLength) bytes")
            }
            do {
                try AssuanText.unescape(encoded, appendingTo: &secret)
            } catch {
                throw PinentryError(reason: "\(error)")
            }
        }
    }

    /// The longest answer taken (a password of 64 KiB is far beyond any real one).
    static let maximumSecretLength = 65_536

    /// Sends `line` and reads the response up to its `OK` or `ERR`, giving each data line's encoded bytes
    /// to `receive` (the line is wiped after).
    private func transact(
        _ line: [UInt8]?, receivingData receive: (ArraySlice<UInt8>) throws(PinentryError) -> Void
    ) throws(PinentryError) -> AssuanReply {
        if let line {
            try send(line + [UInt8(ascii: "\n")])
        }
        statusKeywords = []
        while true {
            var response = try readLine()
            defer { AssuanText.wipe(&response) }
            if Self.keyword(response, is: "OK") {
                return .ok
            } else if Self.keyword(response, is: "ERR") {
                let rest = response.dropFirst(4)
                let code = rest.prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
                let text = rest.dropFirst(code.count).drop { $0 == UInt8(ascii: " ") }
                return .error(code: UInt32(String(decoding: code, as: UTF8.self)) ?? 0, text: Self.printable(text))
            } else if Self.keyword(response, is: "D") {
                try receive(response.dropFirst(2))
            } else if Self.keyword(response, is: "INQUIRE") {
                try send(Array("END\n".utf8))
            } else if Self.keyword(response, is: "S") {
                // The keyword only: a status line's arguments may be anything.
                let keyword = response.dropFirst(2).prefix { $0 != UInt8(ascii: " ") }
                statusKeywords.append(Self.printable(keyword))
            } else if response.first != UInt8(ascii: "#") {
                throw PinentryError(reason: "unexpected line from the program: \"\(Self.printable(response))\"")
            }
        }
    }

    /// Ends the conversation politely: `BYE`, a short wait for the child to exit, then `SIGKILL` if it did not.
    func finish() {
        deadline = min(deadline, Deadline(millisecondsFromNow: 1000))
        var ignored: [UInt8] = []
        _ = try? transact(Array("BYE".utf8), data: &ignored)
        AssuanText.wipe(&ignored)
        closeAndReap(graceMilliseconds: 1000)
    }

    /// Ends the child at once and reaps it: `SIGTERM` (a graphical pinentry lets go of the keyboard and
    /// the screen), then `SIGKILL` if it has not exited within ``terminationGraceMilliseconds``.
    func terminate() {
        if !reaped {
            kill(pid, SIGTERM)
        }
        closeAndReap(graceMilliseconds: Self.terminationGraceMilliseconds)
        restoreTerminal()
    }

    /// Puts the terminal's modes back as they were before the child started (pinentry-curses restores them
    /// itself on `SIGTERM`; not after `SIGKILL`).
    private func restoreTerminal() {
        guard let terminal, var modes = terminal.modes else { return }
        _ = tcsetattr(terminal.descriptor, TCSANOW, &modes)
    }

    private func closeAndReap(graceMilliseconds: Int) {
        storage.withUnsafeMutableBytes { bytes in
            if let base = bytes.baseAddress {
                explicit_bzero(base, bytes.count)
            }
        }
        filled = 0
        if socket >= 0 {
            close(socket)
            socket = -1
        }
        guard !reaped else { return }
        reaped = true
        let giveUp = Deadline(millisecondsFromNow: graceMilliseconds)
        while true {
            // Reaped, or already reaped elsewhere (ECHILD): done.
            guard let result = try? Posix.waitpid(pid, options: WNOHANG), result.pid == 0 else { return }
            if giveUp.hasPassed { break }
            usleep(5_000)
        }
        kill(pid, SIGKILL)
        _ = try? Posix.waitpid(pid)
    }

    /// The next line, without its line ending.
    private func readLine() throws(PinentryError) -> [UInt8] {
        while true {
            if let newline = storage[0..<filled].firstIndex(of: UInt8(ascii: "\n")) {
                let end = newline > 0 && storage[newline - 1] == UInt8(ascii: "\r") ? newline - 1 : newline
                let line = Array(storage[0..<end])
                consume(newline + 1)
                return line
            }
            guard filled < storage.count else {
                throw PinentryError(reason: "the program sent a line longer than \(AssuanText.maxLineLength) bytes")
            }
            try waitUntilReady(Int16(POLLIN))
            let count = storage.withUnsafeMutableBytes { bytes in
                Result { () throws(SystemError) in
                    try Posix.read(socket, bytes.baseAddress.map { $0 + filled }, bytes.count - filled)
                }
            }
            switch count {
            case .success(0): throw PinentryError(reason: "the program closed the connection or exited")
            case .success(let count): filled += count
            case .failure(let error) where error.errno == EAGAIN: continue
            case .failure(let error):
                throw PinentryError(reason: "cannot read from the program: \(Self.describe(error.errno))")
            }
        }
    }

    /// Drops the first `count` bytes of `storage`, zeroing the bytes left behind.
    private func consume(_ count: Int) {
        storage.withUnsafeMutableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            memmove(base, base + count, filled - count)
            explicit_bzero(base + filled - count, count)
        }
        filled -= count
    }

    private func send(_ bytes: [UInt8]) throws(PinentryError) {
        var offset = 0
        while offset < bytes.count {
            try waitUntilReady(Int16(POLLOUT))
            let count = bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemError) in
                    try Posix.send(
                        socket, buffer.baseAddress.map { $0 + offset }, buffer.count - offset, Int32(MSG_DONTWAIT))
                }
            }
            switch count {
            case .success(let count): offset += count
            case .failure(let error) where error.errno == EAGAIN: continue
            case .failure(let error):
                throw PinentryError(reason: "cannot write to the program: \(Self.describe(error.errno))")
            }
        }
    }

    /// Waits until the socket is ready for `events`, or throws when the deadline passes or the exchange is
    /// cancelled.
    private func waitUntilReady(_ events: Int16) throws(PinentryError) {
        guard let cancellation else {
            guard deadline.waitUntil(socket, isReadyFor: events) else {
                throw PinentryError(reason: "no answer within \(timeout)")
            }
            return
        }
        while true {
            guard !cancellation.isCancelled else { throw PinentryError.cancelled }
            let left = deadline.remainingMilliseconds
            guard left > 0 else { throw PinentryError(reason: "no answer within \(timeout)") }
            var entries = [
                pollfd(fd: socket, events: events, revents: 0),
                pollfd(fd: cancellation.fileDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            guard (try? Posix.poll(&entries, timeoutMilliseconds: left)) != nil else {
                throw PinentryError(reason: "cannot wait for the program")
            }
            if entries[1].revents != 0 { throw PinentryError.cancelled }
            if entries[0].revents != 0 { return }
        }
    }

    /// Whether `line` is `word` alone or `word` followed by a space.
    private static func keyword(_ line: [UInt8], is word: String) -> Bool {
        let word = Array(word.utf8)
        return line.starts(with: word) && (line.count == word.count || line[word.count] == UInt8(ascii: " "))
    }

    /// `bytes` as text fit for an error message: at most 200 bytes, control characters replaced by `?`.
    private static func printable<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        String(decoding: bytes.prefix(200).map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
    }

    private static func describe(_ error: Int32) -> String {
        String(cString: strerror(error))
    }
}
