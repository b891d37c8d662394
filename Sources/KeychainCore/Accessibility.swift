/// Apple's accessibility classes (`kSecAttrAccessible`), by the values Apple stores (`pdmn`): when an item's
/// secret and attributes may be read. In the store each class has a key of its own (docs/file-format.md,
/// "Class keys"): an item is sealed under its class's key, and which class keys are in memory decides what is
/// readable.
public enum Accessibility: String, CaseIterable, Hashable, Sendable, Comparable {
    /// `kSecAttrAccessibleWhenUnlocked` (the default): readable while the keychain is unlocked.
    case whenUnlocked = "ak"
    /// `kSecAttrAccessibleAfterFirstUnlock`: readable from the keychain's first unlock in the daemon's life until
    /// the session ends (logout, `lock-keychain --all-classes`, the daemon's exit) or the machine hibernates
    /// (docs/threat-model.md), also while the keychain is locked again.
    case afterFirstUnlock = "ck"
    /// `kSecAttrAccessibleAlways` (deprecated by Apple): as ``afterFirstUnlock`` on Linux, since its key is
    /// wrapped by the keychain key, which only an unlock gives.
    case always = "dk"
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: as ``whenUnlockedThisDeviceOnly``, only in a keychain
    /// that has a password; removing the password deletes these items.
    case whenPasscodeSetThisDeviceOnly = "akpu"
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`.
    case whenUnlockedThisDeviceOnly = "aku"
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`.
    case afterFirstUnlockThisDeviceOnly = "cku"
    /// `kSecAttrAccessibleAlwaysThisDeviceOnly` (deprecated by Apple): as ``afterFirstUnlockThisDeviceOnly``.
    case alwaysThisDeviceOnly = "dku"

    /// The class of an item with `attributes`: its `kSecAttrAccessible`, ``whenUnlocked`` when it has none.
    public init(of attributes: ItemAttributes) {
        if case .string(let value) = attributes[.accessible], let level = Accessibility(rawValue: value) {
            self = level
        } else {
            self = .whenUnlocked
        }
    }

    /// Whether the class key stays in memory when the keychain locks (screen lock, idle, `lock-keychain`,
    /// sleep), so the class's items stay readable until everything is wiped.
    public var outlastsLock: Bool {
        switch self {
        case .afterFirstUnlock, .always, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly: true
        case .whenUnlocked, .whenPasscodeSetThisDeviceOnly, .whenUnlockedThisDeviceOnly: false
        }
    }

    /// Whether items of this class may leave this machine: false for the `…ThisDeviceOnly` classes. Every
    /// export of items (a backup, the Credential Exchange Format) must leave out the items for which this is
    /// false; ``KeychainItem/mayLeaveThisDevice`` is the one predicate exporters use.
    public var mayLeaveThisDevice: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: true
        case .whenPasscodeSetThisDeviceOnly, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly,
            .alwaysThisDeviceOnly:
            false
        }
    }

    /// Apple's constant name without its `kSecAttrAccessible` prefix (`WhenUnlocked`, `AfterFirstUnlock`, …):
    /// what `latchkey dump-keychain` shows and `--accessible` takes beside the `pdmn` value.
    public var name: String {
        switch self {
        case .whenUnlocked: "WhenUnlocked"
        case .afterFirstUnlock: "AfterFirstUnlock"
        case .always: "Always"
        case .whenPasscodeSetThisDeviceOnly: "WhenPasscodeSetThisDeviceOnly"
        case .whenUnlockedThisDeviceOnly: "WhenUnlockedThisDeviceOnly"
        case .afterFirstUnlockThisDeviceOnly: "AfterFirstUnlockThisDeviceOnly"
        case .alwaysThisDeviceOnly: "AlwaysThisDeviceOnly"
        }
    }

    /// The class named `text`: a `pdmn` value (`ck`) or Apple's name with or without its prefix
    /// (`AfterFirstUnlock`, `kSecAttrAccessibleAfterFirstUnlock`), case-insensitively; nil for anything else.
    public init?(named text: String) {
        if let level = Accessibility(rawValue: text) {
            self = level
            return
        }
        var name = text.lowercased()
        let prefix = "ksecattraccessible"
        if name.hasPrefix(prefix) { name.removeFirst(prefix.count) }
        guard let level = Accessibility.allCases.first(where: { $0.name.lowercased() == name }) else { return nil }
        self = level
    }

    /// Orders classes by their `pdmn` value (for stable listings).
    public static func < (lhs: Accessibility, rhs: Accessibility) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension KeychainItem {
    /// Whether this item may be exported off this machine (its class is not `…ThisDeviceOnly`); nil when its
    /// attributes were not read. Exporters must ask this of every item and leave out those for which it is not
    /// true.
    public var mayLeaveThisDevice: Bool? {
        attributes.map { Accessibility(of: $0).mayLeaveThisDevice }
    }
}
