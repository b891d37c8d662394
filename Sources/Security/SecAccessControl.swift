import Foundation
import KeychainCore

/// The conditions of a `SecAccessControl` (Apple's `SecAccessControlCreateFlags`),
/// with Apple's members and raw values.
///
/// Latchkey records every flag with the item and returns it as given;
/// latchkeyd enforces `userPresence`, `devicePasscode` (the keychain password,
/// asked at each read) and the biometry flags (a fingerprint reader) with `.or`
/// and `.and` as Apple combines them, and `applicationPassword` (the secret
/// stored encrypted under the item's own password, which latchkeyd asks the
/// person for at add and at each read). It has no paired watch or Secure
/// Enclave: ``SecAccessControl/unenforcedFlags`` says so for each object. See
/// docs/secitem-semantics.md, "Enforced access control".
public struct SecAccessControlCreateFlags: OptionSet, Hashable, Sendable {
    /// The raw bits, as in Apple's header.
    public let rawValue: CFOptionFlags

    /// Wraps raw bits.
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    /// The person's confirmation: latchkeyd asks the keychain password at each read.
    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    /// Any enrolled finger, checked through the fingerprint reader.
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// The old name of ``biometryAny``.
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// A finger enrolled when the item was made; unreadable once the enrolled fingers change.
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The old name of ``biometryCurrentSet``.
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The device passcode: latchkeyd asks the keychain password at each read.
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    /// A paired watch (recorded; there is none on Linux).
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// A paired companion device, the newer name of ``watch`` (recorded; there is none on Linux).
    public static let companion = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// At least one of the constraints must be met.
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    /// Every constraint must be met.
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    /// A private key kept in the Secure Enclave (recorded; Linux has none).
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    /// An application password that adds to the item's encryption (recorded, not applied yet).
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)

    /// Every bit Apple defines.
    static let known: SecAccessControlCreateFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch, .or, .and,
        .privateKeyUsage, .applicationPassword,
    ]
    /// The bits that combine constraints rather than being constraints.
    static let logic: SecAccessControlCreateFlags = [.or, .and]
}

/// An item's access control (Apple's `SecAccessControlRef`): when it is
/// accessible (a `kSecAttrAccessible` value) and the conditions of its use.
/// Made with ``SecAccessControlCreateWithFlags(_:_:_:_:)``; given as the
/// value of `kSecAttrAccessControl` and returned the same way.
///
/// Two access controls are equal when their protection and flags are.
public final class SecAccessControl: Hashable, Sendable, CustomStringConvertible {
    /// The `kSecAttrAccessible` value (`"ak"`, `"cku"`, …); an item with this
    /// access control gets it as its `kSecAttrAccessible`.
    public let protection: String
    /// The conditions, as given.
    public let flags: SecAccessControlCreateFlags

    /// The enrolled fingers' digest the daemon recorded for `biometryCurrentSet` (kept as read, so that an
    /// update that gives the object back does not lose it).
    let enrolledFingers: [UInt8]?

    init(protection: String, flags: SecAccessControlCreateFlags, enrolledFingers: [UInt8]? = nil) {
        self.protection = protection
        self.flags = flags
        self.enrolledFingers = enrolledFingers
    }

    /// The constraints Latchkey records but does not enforce: what Linux
    /// cannot do (a paired watch or companion, `privateKeyUsage` without a
    /// Secure Enclave). latchkeyd enforces the others at each read of the
    /// secret (docs/secitem-semantics.md, "Enforced access control").
    public var unenforcedFlags: SecAccessControlCreateFlags {
        flags.intersection(SecAccessControlCreateFlags(rawValue: CFOptionFlags(AccessConstraints.unenforceable)))
    }

    /// Equal protection and flags.
    public static func == (lhs: SecAccessControl, rhs: SecAccessControl) -> Bool {
        lhs.protection == rhs.protection && lhs.flags == rhs.flags
    }

    /// Hashes the protection and flags.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(protection)
        hasher.combine(flags.rawValue)
    }

    /// The protection and flags, and which flags are not enforced.
    public var description: String {
        "<SecAccessControl protection: \(protection), flags: 0x\(String(flags.rawValue, radix: 16))"
            + (unenforcedFlags.isEmpty ? "" : ", not enforced: 0x\(String(unenforcedFlags.rawValue, radix: 16))")
            + ">"
    }

    // MARK: Stored form

    /// The bytes stored as the item's `kSecAttrAccessControl` (``AccessConstraints/storedForm``).
    var storedForm: Data {
        AccessConstraints(protection: protection, flags: UInt64(flags.rawValue), enrolledFingers: enrolledFingers)
            .storedForm
    }

    /// Reads the stored form; nil for other bytes.
    convenience init?(storedForm data: Data) {
        guard let constraints = AccessConstraints(storedForm: data) else { return nil }
        self.init(
            protection: constraints.protection,
            flags: SecAccessControlCreateFlags(rawValue: CFOptionFlags(constraints.flags)),
            enrolledFingers: constraints.enrolledFingers)
    }
}

/// Makes an access control object, as Apple's `SecAccessControlCreateWithFlags`.
///
/// - Parameters:
///   - allocator: pass `kCFAllocatorDefault` or nil.
///   - protection: one of the `kSecAttrAccessible*` values.
///   - flags: the conditions; recorded with the item, not enforced (see ``SecAccessControlCreateFlags``).
///   - error: if given, receives a retained `CFError` (domain `NSOSStatusErrorDomain`,
///     code `errSecParam`) when the protection is not a `kSecAttrAccessible`
///     value or a flag bit is not one Apple defines.
/// - Returns: the object, or nil on error.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    guard let level = (protection as? String) ?? (protection as? NSString).map({ $0 as String }),
        ItemSchema.accessibilityLevels.contains(level)
    else {
        report(errSecParam, "the protection is not a kSecAttrAccessible value", to: error)
        return nil
    }
    guard SecAccessControlCreateFlags.known.isSuperset(of: flags) else {
        report(
            errSecParam, "unknown SecAccessControlCreateFlags bits 0x\(String(flags.rawValue, radix: 16))", to: error)
        return nil
    }
    return SecAccessControl(protection: level, flags: flags)
}
