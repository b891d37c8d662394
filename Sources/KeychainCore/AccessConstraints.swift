import FoundationEssentials

/// An item's `kSecAttrAccessControl` as the store keeps it (the value of ``AttributeKey/accessControl``): its
/// accessibility, Apple's `SecAccessControlCreateFlags` bits, and, for `biometryCurrentSet`, the digest of the
/// enrolled fingers it was made under. The `Security` module makes and reads it; latchkeyd enforces it at every
/// read of the item's secret (docs/secitem-semantics.md, "Enforced access control").
///
/// Stored form: "lkac", a version byte, the flags as 8 big-endian bytes, then (version 2 only) one byte of digest
/// length and the digest, then the protection in UTF-8. Version 1 has no digest.
public struct AccessConstraints: Hashable, Sendable {
    /// The `kSecAttrAccessible` value (`"ak"`, `"cku"`, …).
    public var protection: String
    /// Apple's `SecAccessControlCreateFlags` bits, as given.
    public var flags: UInt64
    /// The enrolled fingers' digest the item was made (or its access control last changed) under, for
    /// `biometryCurrentSet`; nil when none was recorded.
    public var enrolledFingers: [UInt8]?

    /// Constraints as given.
    public init(protection: String, flags: UInt64, enrolledFingers: [UInt8]? = nil) {
        self.protection = protection
        self.flags = flags
        self.enrolledFingers = enrolledFingers
    }

    // MARK: Apple's bits

    /// `kSecAccessControlUserPresence`.
    public static let userPresence: UInt64 = 1 << 0
    /// `kSecAccessControlBiometryAny`.
    public static let biometryAny: UInt64 = 1 << 1
    /// `kSecAccessControlBiometryCurrentSet`.
    public static let biometryCurrentSet: UInt64 = 1 << 3
    /// `kSecAccessControlDevicePasscode`.
    public static let devicePasscode: UInt64 = 1 << 4
    /// `kSecAccessControlWatch` / `…Companion`.
    public static let companion: UInt64 = 1 << 5
    /// `kSecAccessControlOr`.
    public static let or: UInt64 = 1 << 14
    /// `kSecAccessControlAnd`.
    public static let and: UInt64 = 1 << 15
    /// `kSecAccessControlPrivateKeyUsage`.
    public static let privateKeyUsage: UInt64 = 1 << 30
    /// `kSecAccessControlApplicationPassword`.
    public static let applicationPassword: UInt64 = 1 << 31
    /// Every bit Apple defines.
    public static let known: UInt64 =
        userPresence | biometryAny | biometryCurrentSet | devicePasscode | companion | or | and | privateKeyUsage
        | applicationPassword
    /// The constraints latchkeyd checks before it hands an item's secret out (`applicationPassword`: the secret
    /// is stored encrypted under the item's own password, asked at each read).
    public static let enforced: UInt64 =
        userPresence | devicePasscode | biometryAny | biometryCurrentSet | applicationPassword
    /// The constraints no Linux machine can meet: there is no paired watch, and no Secure Enclave for
    /// `privateKeyUsage` (which constrains key operations, not reads of the data, and is recorded only).
    public static let unenforceable: UInt64 = companion | privateKeyUsage

    // MARK: What a read needs

    /// One thing a read of the secret needs.
    public enum Factor: Hashable, Sendable {
        /// The person types the keychain password (`userPresence`, `devicePasscode`).
        case password
        /// A finger the reader matches; `digest`: it must be one of the fingers enrolled when the item was made
        /// (`biometryCurrentSet`; nil for `biometryAny`).
        case fingerprint(digest: [UInt8]?)
        /// A paired watch (`companion`): there is none on Linux, so it never holds.
        case companion
    }

    /// What a read of the secret needs: the factors, and whether one of them is enough (`.or`) or all are
    /// (`.and`, and Apple's default for several constraints given without either). Empty when nothing is asked.
    public var factors: (needed: [Factor], anyOne: Bool) {
        var needed: [Factor] = []
        if flags & (Self.userPresence | Self.devicePasscode) != 0 { needed.append(.password) }
        if flags & Self.biometryCurrentSet != 0 {
            needed.append(.fingerprint(digest: enrolledFingers ?? []))
        } else if flags & Self.biometryAny != 0 {
            needed.append(.fingerprint(digest: nil))
        }
        if flags & Self.companion != 0 { needed.append(.companion) }
        return (needed, flags & Self.or != 0)
    }

    /// Whether the item's secret is stored under a password of its own (`applicationPassword`), which every
    /// read needs in addition to ``factors``: it is a key, not a constraint `.or` could offer an alternative to
    /// (Apple lists it among the options, beside `privateKeyUsage`, not among the constraints).
    public var needsItemPassword: Bool { flags & Self.applicationPassword != 0 }

    /// Whether a read of the secret needs the person (a password, a finger, a watch, the item's own password).
    public var needsAuthentication: Bool { !factors.needed.isEmpty || needsItemPassword }

    // MARK: Stored form

    /// The 4-byte mark that starts the stored form.
    private static let magic: [UInt8] = Array("lkac".utf8)

    /// The bytes stored as the item's `kSecAttrAccessControl` (version 1 without a digest, 2 with one).
    public var storedForm: Data {
        var bytes = Self.magic
        bytes.append(enrolledFingers == nil ? 1 : 2)
        withUnsafeBytes(of: flags.bigEndian) { bytes.append(contentsOf: $0) }
        if let enrolledFingers {
            bytes.append(UInt8(clamping: enrolledFingers.count))
            bytes.append(contentsOf: enrolledFingers.prefix(255))
        }
        bytes.append(contentsOf: protection.utf8)
        return Data(bytes)
    }

    /// Reads the stored form; nil for other bytes, unknown flag bits, or a protection that is not a
    /// `kSecAttrAccessible` value.
    public init?(storedForm data: Data) {
        let bytes = [UInt8](data)
        guard bytes.count > 13, Array(bytes[0..<4]) == Self.magic, bytes[4] == 1 || bytes[4] == 2 else { return nil }
        let raw = bytes[5..<13].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var rest = 13
        var digest: [UInt8]? = nil
        if bytes[4] == 2 {
            let length = Int(bytes[13])
            guard bytes.count > 14 + length else { return nil }
            digest = Array(bytes[14..<(14 + length)])
            rest = 14 + length
        }
        guard raw & ~Self.known == 0, let protection = String(validating: bytes[rest...], as: UTF8.self),
            ItemSchema.accessibilityLevels.contains(protection)
        else { return nil }
        self.init(protection: protection, flags: raw, enrolledFingers: digest)
    }

    /// The constraints of an item with `attributes`: nil when it has no access control; throws when its
    /// `kSecAttrAccessControl` is not one (then nothing may be handed out: a read fails closed).
    public static func of(_ attributes: ItemAttributes) throws(KeychainError) -> AccessConstraints? {
        guard let value = attributes[.accessControl] else { return nil }
        guard case .data(let bytes) = value, let constraints = AccessConstraints(storedForm: bytes) else {
            throw KeychainError(.decode, "the item's kSecAttrAccessControl cannot be read")
        }
        return constraints
    }
}
