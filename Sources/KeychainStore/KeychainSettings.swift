import FoundationEssentials
import KeychainCore

extension KeychainSettings {
    /// As stored: `timeout=SECONDS` (0 for never), `sleep=0|1` and `screen=0|1`, one per line.
    var encoded: Data {
        Data("timeout=\(lockTimeout ?? 0)\nsleep=\(lockOnSleep ? 1 : 0)\nscreen=\(lockOnScreenLock ? 1 : 0)\n".utf8)
    }

    /// Reads the stored form; unknown lines are skipped, missing ones keep the default.
    init(encoded data: Data) {
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

    /// What a daemon applies when a keychain's stored settings fail their check: lock after five minutes,
    /// on sleep and with the screen, so that altering the settings never makes a keychain stay unlocked longer.
    public static let afterTampering = KeychainSettings(
        lockTimeout: defaultTimeout, lockOnSleep: true, lockOnScreenLock: true)
}

/// The settings rows of `meta`: `x-settings` (the encoded settings, in clear: they are read while the
/// keychain is locked) and, from format 2, `settings_mac` (an AES-256-GCM tag under the keychain key over
/// the keychain identity and those bytes). Every format-2 file has both (the defaults when nothing was set).
enum SettingsRecord {
    static let record = AuthenticatedMetaRecord(
        valueName: "x-settings", macName: "settings_mac", purpose: "latchkey settings v2")

    /// The settings the rows hold, checked under `key`; `errSecDecode` when a row is missing or altered.
    static func verified(_ rows: (encoded: Data?, mac: Data?), key: SecretKey, keychain: Data) throws(KeychainError)
        -> KeychainSettings
    {
        let altered = KeychainError(
            .decode, "the keychain's settings were altered outside Latchkey (missing, or their MAC does not match)")
        guard let encoded = rows.encoded, let mac = rows.mac,
            record.isAuthentic(encoded, mac: mac, key: key, keychain: keychain)
        else { throw altered }
        return KeychainSettings(encoded: encoded)
    }
}

extension Keychain {
    /// The keychain's lock settings (the default when none were stored).
    ///
    /// While the keychain is unlocked they are checked under its key: `errSecDecode` when someone altered or
    /// removed them in the file (a daemon then applies ``KeychainSettings/afterTampering``). While it is
    /// locked they are read as the file holds them, unchecked: they matter only once it is unlocked.
    public func settings() throws(KeychainError) -> KeychainSettings {
        let identifier = identifier
        return try withDatabase { (db, key) throws(KeychainError) in
            let rows = try SettingsRecord.record.load(from: db)
            guard let key else { return rows.encoded.map { KeychainSettings(encoded: $0) } ?? KeychainSettings() }
            return try SettingsRecord.verified(rows, key: key, keychain: identifier)
        }
    }

    /// Stores the keychain's lock settings, authenticated under the keychain key.
    ///
    /// - Throws: `errSecInteractionNotAllowed` while locked.
    public func setSettings(_ settings: KeychainSettings) throws(KeychainError) {
        let identifier = identifier
        try withDatabase { (db, key) throws(KeychainError) in
            guard let key else { throw KeychainError(.interactionNotAllowed, "the keychain is locked") }
            try db.transaction { () throws(KeychainError) in
                try SettingsRecord.record.save(settings.encoded, key: key, keychain: identifier, db)
            }
        }
    }
}
