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

    /// The interval Apple's `set-keychain-settings -u` uses when no `-t` is given: five minutes.
    public static let defaultTimeout: UInt32 = 300
}
