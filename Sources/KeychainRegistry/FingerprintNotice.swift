import Glibc
import Pinentry

/// Tells the person to touch the fingerprint reader once fprintd waits for their finger (docs/fingerprint.md,
/// "Telling the person"), or their security key while the daemon waits for its touch (docs/key-slots.md): always a line in the daemon's log, and a line on the caller's terminal when the
/// request's prompts show there. Nothing is shown on the desktop yet.
struct FingerprintNotice: Sendable {
    /// The log line: who asks, how long the reader waits.
    let logLine: String
    /// The terminal line (with its line ends), when the request's place is a terminal.
    let terminalLine: String
    /// The caller's terminal, when its prompts show there.
    let terminal: PromptTerminal?

    /// The notice of `request`, whose prompts show at `place` (nil: not known, or one pinentry for every
    /// prompt), for a reader that waits `seconds`.
    init(_ request: ItemAuthenticationRequest, place: PromptPlace?, seconds: Int) {
        let who = PromptText.field(request.who)
        let items = AccessQuestion.itemList(request.labels)
        logLine = "fprintd waits for a finger: touch the fingerprint reader to allow \(who) to read \(items)"
        terminalLine =
            "\r\nLatchkey: touch the fingerprint reader within \(seconds) s to allow the read of \(items)"
            + " by \(who).\r\n"
        if case .terminal(let open)? = place { terminal = open } else { terminal = nil }
    }

    /// A notice of the daemon's own (a security key's touch awaited, …): `logLine`, and `terminalLine` on the
    /// terminal of `place` when it is one.
    init(logLine: String, terminalLine: String, place: PromptPlace?) {
        self.logLine = logLine
        self.terminalLine = terminalLine
        if case .terminal(let open)? = place { terminal = open } else { terminal = nil }
    }

    /// Says it: the log line, then the terminal line. The terminal is opened again without blocking (its
    /// descriptor blocks, for pinentry): a terminal whose output is stopped (Ctrl-S) loses the line instead of
    /// holding the fingerprint check.
    func tell() {
        KeychainRegistry.log(logLine)
        guard let terminal else { return }
        let descriptor = Glibc.open(
            "/proc/self/fd/\(terminal.descriptor)", O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { Glibc.close(descriptor) }
        let bytes = Array(terminalLine.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
    }
}
