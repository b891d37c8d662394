import Foundation
import KeychainCore

/// The conditions of a `SecAccessControl` (Apple's `SecAccessControlCreateFlags`),
/// with Apple's members and raw values.
///
/// Latchkey records every flag with the item and returns it as given; it
/// enforces none of them yet (the keychain's lock is what protects an item),
/// and it has no biometry, paired watch or Secure Enclave to ever enforce
/// those. ``SecAccessControl/unenforcedFlags`` says so for each object. See
/// docs/secitem-semantics.md.
public struct SecAccessControlCreateFlags: OptionSet, Hashable, Sendable {
    /// The raw bits, as in Apple's header.
    public let rawValue: CFOptionFlags

    /// Wraps raw bits.
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    /// Biometry or the device passcode (recorded, not enforced yet).
    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    /// Any enrolled biometry (recorded; Linux has no biometry to check).
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// The old name of ``biometryAny``.
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// The biometry enrolled now (recorded; Linux has no biometry to check).
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The old name of ``biometryCurrentSet``.
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The device passcode (recorded, not enforced yet).
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
    /// An application password that adds to the item's encryption (recorded, not applied).
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

    init(protection: String, flags: SecAccessControlCreateFlags) {
        self.protection = protection
        self.flags = flags
    }

    /// The constraints Latchkey records but does not enforce: today every
    /// constraint given (the logic bits `.or` and `.and` aside). The item is
    /// as safe as its keychain's lock makes it, no more.
    public var unenforcedFlags: SecAccessControlCreateFlags {
        flags.subtracting(SecAccessControlCreateFlags.logic)
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

    /// The 4-byte mark that starts the stored form.
    private static let magic: [UInt8] = Array("lkac".utf8)

    /// The bytes stored as the item's `kSecAttrAccessControl`: "lkac", a
    /// version byte (1), the flags as 8 big-endian bytes, then the protection in UTF-8.
    var storedForm: Data {
        var bytes = Self.magic
        bytes.append(1)
        withUnsafeBytes(of: UInt64(flags.rawValue).bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: protection.utf8)
        return Data(bytes)
    }

    /// Reads the stored form; nil for other bytes.
    convenience init?(storedForm data: Data) {
        let bytes = [UInt8](data)
        guard bytes.count > 13, Array(bytes[0..<4]) == Self.magic, bytes[4] == 1 else { return nil }
        let raw = bytes[5..<13].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let protection = String(validating: bytes[13...], as: UTF8.self),
            ItemSchema.accessibilityLevels.contains(protection)
        else { return nil }
        self.init(protection: protection, flags: SecAccessControlCreateFlags(rawValue: CFOptionFlags(raw)))
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
