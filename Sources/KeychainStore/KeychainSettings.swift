import FoundationEssentials
import KeychainCore

extension KeychainSettings {
    /// As stored: `timeout=SECONDS` (0 for never), `sleep=0|1` and `screen=0|1`, one per line.
    fileprivate var encoded: Data {
        Data("timeout=\(lockTimeout ?? 0)\nsleep=\(lockOnSleep ? 1 : 0)\nscreen=\(lockOnScreenLock ? 1 : 0)\n".utf8)
    }

    /// Reads the stored form; unknown lines are skipped, missing ones keep the default.
    fileprivate init(encoded data: Data) {
        self.init()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let number = UInt32(parts[1]) else { continue }
            switch parts[0] {
            case "timeout": lockTimeout = number == 0 ? nil : number
            case "sleep": lockOnSleep = number != 0
            case "screen": lockOnScreenLock = number != 0
            default: break
            }
        }
    }
}

extension Keychain {
    private static let settingsName = "settings"

    /// The keychain's lock settings (the default when none were stored).
    public func settings() throws(KeychainError) -> KeychainSettings {
        guard let stored = try metadata(Self.settingsName) else { return KeychainSettings() }
        return KeychainSettings(encoded: stored)
    }

    /// Stores the keychain's lock settings.
    public func setSettings(_ settings: KeychainSettings) throws(KeychainError) {
        try setMetadata(Self.settingsName, settings.encoded)
    }
}
