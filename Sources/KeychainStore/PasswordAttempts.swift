import FoundationEssentials
import KeychainCore

#if canImport(Glibc)
    import Glibc
#endif

/// The count of wrong passwords that programs sent, kept in the keychain file itself (row `attempts` of
/// `meta`), so that a restart does not reset it and every program that tries the keychain's password counts
/// against it: the daemon's interfaces (`Keychain1.Unlock`, `ChangePassword`, gnome-keyring's
/// `*WithMasterPassword`, the control socket), the `latchkey` command on the file. Three wrong passwords are
/// free; after that a password is not tried until 2 s after the last wrong one, doubling up to a minute. A
/// right password resets the count.
///
/// What the person types into the daemon's own prompt is outside this count (`counted: false`): never refused
/// because programs sent wrong passwords, never counted, never clearing it. A program cannot answer that
/// prompt (the pinentry is a program only root can change), so guessing through it needs the person at each
/// try; and with the prompt outside the count, a program that keeps sending wrong passwords cannot keep the
/// person from unlocking (docs/threat-model.md, "Whose wrong passwords wait").
///
/// The count is not authenticated: every key available while the keychain is locked is in the file, so a
/// process that can write the file can reset it. What bounds guessing with a copy of the file is scrypt's
/// cost, not this count; the count bounds guessing through the daemon and the command, and keeps a burst of
/// wrong passwords from being retried at full speed.
struct PasswordAttempts: Equatable {
    var failures: UInt32 = 0
    /// Wall-clock seconds of the last wrong password (the count outlives the process).
    var lastFailure: Int64 = 0

    static let freeAttempts: UInt32 = 3
    static let rowName = "attempts"

    /// Seconds still to wait before the next try, 0 if it may be tried now.
    func secondsToWait(now: Int64 = Int64(time(nil))) -> Int64 {
        guard failures >= Self.freeAttempts else { return 0 }
        let delay = min(Int64(1) << min(Int64(failures - Self.freeAttempts) + 1, 6), 60)
        // The row is not authenticated: a time planted near either end of Int64 must not trap. A wait that
        // overflows is the longest one; a last failure so far back that the difference overflows is no wait.
        let (until, past) = lastFailure.addingReportingOverflow(delay)
        if past { return 60 }
        let (left, overflowed) = until.subtractingReportingOverflow(now)
        if overflowed { return until < now ? 0 : 60 }
        // A clock set back must not make the wait longer than the longest one.
        return min(max(0, left), 60)
    }

    var encoded: Data {
        withUnsafeBytes(of: failures.bigEndian) { Data($0) } + withUnsafeBytes(of: lastFailure.bigEndian) { Data($0) }
    }

    init() {}

    /// Reads a stored count; a damaged row counts as the most restrictive one.
    init(stored: Data) {
        let bytes = [UInt8](stored)
        guard bytes.count == 12 else {
            self.failures = UInt32.max
            self.lastFailure = Int64(time(nil))
            return
        }
        failures = bytes[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
        lastFailure = Int64(bitPattern: bytes[4..<12].reduce(0) { $0 << 8 | UInt64($1) })
    }
}
