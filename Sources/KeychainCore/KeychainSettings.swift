/// When a keychain locks itself (`security set-keychain-settings`): after a
/// time without use, when the machine sleeps, and when the screen locks.
/// Stored in the file, in clear, so that whoever holds the keychain applies them.
public struct KeychainSettings: Hashable, Sendable {
    /// Seconds without use after which the keychain locks; nil for never.
    public var lockTimeout: UInt32?
    /// Whether the keychain locks when the machine goes to sleep.
    public var lockOnSleep: Bool
    /// Whether the keychain locks when the user's screen locks (logind's `Lock` for one of the user's
    /// sessions, or the desktop's screen saver activating).
    public var lockOnScreenLock: Bool

    /// Settings; the default never locks by itself.
    public init(lockTimeout: UInt32? = nil, lockOnSleep: Bool = false, lockOnScreenLock: Bool = false) {
        self.lockTimeout = lockTimeout
        self.lockOnSleep = lockOnSleep
        self.lockOnScreenLock = lockOnScreenLock
    }

    /// Whether these settings lock less than `current` in any way: a lock on sleep or on screen lock turned
    /// off, a lock timeout removed or made longer (even when something else is made stricter at once).
    package func loosens(_ current: KeychainSettings) -> Bool {
        if current.lockOnSleep, !lockOnSleep { return true }
        if current.lockOnScreenLock, !lockOnScreenLock { return true }
        guard let before = current.lockTimeout else { return false }
        guard let after = lockTimeout else { return true }
        return after > before
    }

    /// The interval Apple's `set-keychain-settings -u` uses when no `-t` is given: five minutes.
    public static let defaultTimeout: UInt32 = 300
}
