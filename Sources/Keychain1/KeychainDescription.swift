import DBus
import KeychainCore

/// What the daemon tells of one keychain it holds (`Status`, `List`).
package struct KeychainDescription: Hashable, Sendable {
    /// How the keychain is unlocked.
    package enum Protection: String, Hashable, Sendable {
        /// With its own password (the login keychain: the login password).
        case password
        /// With the login keychain's key, whenever the login keychain is unlocked.
        case loginKeychain = "login-keychain"
        /// Held in memory only, with a key the daemon keeps (the `session` collection).
        case memory
    }

    /// The collection id (`login`, `session`, …).
    package var id: String
    /// The keychain file; empty for a keychain in memory.
    package var file: String
    /// The collection's label.
    package var label: String
    /// Whether it is locked.
    package var isLocked: Bool
    /// How it is unlocked.
    package var protection: Protection
    /// When it locks by itself.
    package var settings: KeychainSettings
    /// Its access policy; nil when the stored one fails its check (altered in the file).
    package var accessPolicy: KeychainAccessPolicy?
    /// Whether ``accessPolicy`` was checked under the keychain key (false while it is locked).
    package var accessPolicyChecked: Bool

    /// A description.
    package init(
        id: String, file: String, label: String, isLocked: Bool, protection: Protection, settings: KeychainSettings,
        accessPolicy: KeychainAccessPolicy? = .prompt, accessPolicyChecked: Bool = false
    ) {
        self.id = id
        self.file = file
        self.label = label
        self.isLocked = isLocked
        self.protection = protection
        self.settings = settings
        self.accessPolicy = accessPolicy
        self.accessPolicyChecked = accessPolicyChecked
    }
}

extension Keychain1Interface {
    /// The path of the object that lists the keychains (`List`).
    package static let rootPath = "/org/latchkey/keychain"

    /// A description as `a{sv}`: `Id` s, `File` s, `Label` s, `Locked` b,
    /// `Protection` s, `LockTimeout` u (0 for never), `LockOnSleep` b, `LockOnScreenLock` b, `AccessPolicy` s
    /// (`prompt`, `allow-all`, or `altered` when the stored one fails its check) and `AccessPolicyChecked` b.
    package static func encode(_ description: KeychainDescription) -> DBusValue {
        let pairs: [String: DBusValue] = [
            "Id": .string(description.id), "File": .string(description.file), "Label": .string(description.label),
            "Locked": .bool(description.isLocked), "Protection": .string(description.protection.rawValue),
            "AccessPolicy": .string(description.accessPolicy?.rawValue ?? alteredPolicyName),
            "AccessPolicyChecked": .bool(description.accessPolicyChecked),
        ]
        return .variantDictionary(pairs.merging(settingsPairs(description.settings)) { $1 })
    }

    /// Reads a description.
    package static func decodeDescription(_ value: DBusValue) throws(KeychainError) -> KeychainDescription {
        guard let pairs = value.unwrapped.variantPairs, case .string(let id)? = pairs["Id"],
            case .bool(let locked)? = pairs["Locked"]
        else { throw KeychainError(.decode, "a keychain description from the daemon lacks its id or lock state") }
        var protection = KeychainDescription.Protection.password
        if case .string(let name)? = pairs["Protection"], let known = KeychainDescription.Protection(rawValue: name) {
            protection = known
        }
        // A daemon that does not tell its policy (an older one) is described as asking, unchecked.
        var accessPolicy: KeychainAccessPolicy? = .prompt
        if case .string(let name)? = pairs["AccessPolicy"]?.unwrapped {
            accessPolicy = KeychainAccessPolicy(rawValue: name)
        }
        var checked = false
        if case .bool(let flag)? = pairs["AccessPolicyChecked"]?.unwrapped { checked = flag }
        return KeychainDescription(
            id: id, file: pairs["File"]?.text ?? "", label: pairs["Label"]?.text ?? id, isLocked: locked,
            protection: protection, settings: decodeSettings(pairs), accessPolicy: accessPolicy,
            accessPolicyChecked: checked)
    }

    /// What `AccessPolicy` says of a stored policy that fails its check.
    package static let alteredPolicyName = "altered"

    /// The error a client reports for a policy the daemon found altered.
    package static let alteredPolicyError = KeychainError(
        .decode, "the keychain's access policy was altered outside Latchkey (a row missing, or its MAC does not match)")

    /// Settings as `a{sv}` (`LockTimeout` u, `LockOnSleep` b, `LockOnScreenLock` b), for `SetSettings`.
    package static func encode(_ settings: KeychainSettings) -> DBusValue {
        .variantDictionary(settingsPairs(settings))
    }

    private static func settingsPairs(_ settings: KeychainSettings) -> [String: DBusValue] {
        [
            "LockTimeout": .uint32(settings.lockTimeout ?? 0), "LockOnSleep": .bool(settings.lockOnSleep),
            "LockOnScreenLock": .bool(settings.lockOnScreenLock),
        ]
    }

    /// Reads settings from `a{sv}`; absent entries keep the default.
    package static func decodeSettings(_ value: DBusValue) throws(KeychainError) -> KeychainSettings {
        guard let pairs = value.unwrapped.variantPairs else { throw KeychainError.param("settings are a{sv}") }
        return decodeSettings(pairs)
    }

    private static func decodeSettings(_ pairs: [String: DBusValue]) -> KeychainSettings {
        var settings = KeychainSettings()
        if case .uint32(let seconds)? = pairs["LockTimeout"]?.unwrapped, seconds > 0 { settings.lockTimeout = seconds }
        if case .bool(let flag)? = pairs["LockOnSleep"]?.unwrapped { settings.lockOnSleep = flag }
        if case .bool(let flag)? = pairs["LockOnScreenLock"]?.unwrapped { settings.lockOnScreenLock = flag }
        return settings
    }
}
