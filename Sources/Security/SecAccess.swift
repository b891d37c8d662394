import CallerIdentity
import Foundation
import Glibc
import KeychainCore

/// The key whose value is an item's access object (a ``SecAccess``): which applications may read its secret
/// without the user being asked. Given to `SecItemAdd` only, as on macOS; returned by `SecItemCopyMatching`
/// with `kSecReturnAttributes` for an item that has a list. Apple's value, `"acls"`.
nonisolated(unsafe) public let kSecAttrAccess: CFString = "acls"

/// An application an item trusts (Apple's `SecTrustedApplicationRef`): a program's path with the SHA-256 its
/// file had when the object was made, so that a changed program is asked again. Made with
/// ``SecTrustedApplicationCreateFromPath(_:_:)``.
///
/// Two trusted applications are equal when their name and digest are.
public final class SecTrustedApplication: Hashable, Sendable, CustomStringConvertible {
    /// The program's absolute path, links resolved (as the daemon sees a running program), or `flatpak:APP-ID`.
    public let name: String
    /// The SHA-256 of the program's file in lower-case hexadecimal; nil for a Flatpak app (its files are its
    /// sandbox's) and for an entry stored without one.
    public let digest: String?

    init(name: String, digest: String?) {
        self.name = name
        self.digest = digest
    }

    /// Equal name and digest.
    public static func == (lhs: SecTrustedApplication, rhs: SecTrustedApplication) -> Bool {
        lhs.name == rhs.name && lhs.digest == rhs.digest
    }

    /// Hashes the name and digest.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(digest)
    }

    /// The name and the start of the digest.
    public var description: String {
        "<SecTrustedApplication \(name)\(digest.map { " sha256:" + $0.prefix(16) } ?? "")>"
    }

    var trustedApplication: TrustedApplication { TrustedApplication(name: name, digest: digest) }
}

/// Makes a trusted application from a program's file, as Apple's `SecTrustedApplicationCreateFromPath`: the
/// path is made absolute with its links resolved, and the file is hashed now (SHA-256, up to 512 MiB; the
/// daemon identifies running programs the same way).
///
/// - Parameters:
///   - path: the program's path; nil for the calling program (`/proc/self/exe`). `flatpak:APP-ID` names a
///     Flatpak application, trusted by its app id.
///   - app: receives the object.
/// - Returns: `errSecSuccess`; `errSecParam` when the path does not name a readable regular file (or one
///   larger than 512 MiB), or names one whose path holds a newline or a tab.
public func SecTrustedApplicationCreateFromPath(
    _ path: UnsafePointer<CChar>?, _ app: UnsafeMutablePointer<SecTrustedApplication?>
) -> OSStatus {
    let given = path.map { String(cString: $0) } ?? "/proc/self/exe"
    if given.hasPrefix("flatpak:") {
        guard given.count > "flatpak:".count, TrustedApplication.isStorable(given) else { return errSecParam }
        app.pointee = SecTrustedApplication(name: given, digest: nil)
        return errSecSuccess
    }
    guard let resolved = realpath(given, nil) else { return errSecParam }
    let absolute = String(cString: resolved)
    free(resolved)
    guard TrustedApplication.isStorable(absolute),
        let digest = try? FileDigester(capacity: 1).digest(ofFileAt: absolute)
    else { return errSecParam }
    let name = Application.trustedName(ofProgramAt: absolute, searchPath: getenv("PATH").map { String(cString: $0) })
    app.pointee = SecTrustedApplication(name: name, digest: digest.description)
    return errSecSuccess
}

/// An item's access object (Apple's `SecAccessRef`): the applications that may read its secret without the
/// user being asked, or any application. Given as the value of ``kSecAttrAccess`` to `SecItemAdd`; made with
/// ``SecAccessCreate(_:_:_:)`` or ``SecAccessCreateForAnyApplication(_:_:)``.
///
/// macOS keeps several ACL entries per object (owner, safe and restricted operations); Latchkey keeps the one
/// that matters for a password, who may read the secret. Two access objects are equal when their lists are
/// (the descriptor is not stored: prompts name an item by its label).
public final class SecAccess: Hashable, Sendable, CustomStringConvertible {
    /// The name the object was made with (Apple shows it in prompts); not stored with the item: an access
    /// object read back carries the item's label.
    public let descriptor: String
    /// Whether any application may read the secret.
    public let allowsAnyApplication: Bool
    /// The applications that may, in the order given.
    public let trustedApplications: [SecTrustedApplication]

    init(descriptor: String, allowsAnyApplication: Bool, trustedApplications: [SecTrustedApplication]) {
        self.descriptor = descriptor
        self.allowsAnyApplication = allowsAnyApplication
        self.trustedApplications = trustedApplications
    }

    /// The access list an item's stored attributes hold, described by `descriptor`.
    convenience init(_ access: ItemAccess, descriptor: String) {
        self.init(
            descriptor: descriptor, allowsAnyApplication: access.anyApplication,
            trustedApplications: access.trustedApplications.map {
                SecTrustedApplication(name: $0.name, digest: $0.digest)
            }
        )
    }

    /// The list as the store keeps it.
    var itemAccess: ItemAccess {
        ItemAccess(
            anyApplication: allowsAnyApplication, trustedApplications: trustedApplications.map(\.trustedApplication))
    }

    /// Equal lists.
    public static func == (lhs: SecAccess, rhs: SecAccess) -> Bool {
        lhs.allowsAnyApplication == rhs.allowsAnyApplication && lhs.trustedApplications == rhs.trustedApplications
    }

    /// Hashes the lists.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(allowsAnyApplication)
        hasher.combine(trustedApplications)
    }

    /// Any application, or the trusted applications.
    public var description: String {
        allowsAnyApplication
            ? "<SecAccess any application>"
            : "<SecAccess trusted: \(trustedApplications.map(\.name).joined(separator: ", "))>"
    }
}

/// Makes an access object trusting the applications of `trustedlist`, as Apple's `SecAccessCreate`.
///
/// - Parameters:
///   - descriptor: a name for the item (Apple shows it in prompts; Latchkey's prompts show the item's label).
///   - trustedlist: ``SecTrustedApplication`` objects; nil for the calling program alone (as on macOS); an
///     empty array for no application (the user is asked whoever reads the secret).
///   - accessRef: receives the object.
/// - Returns: `errSecSuccess`; `errSecParam` when an element is not a ``SecTrustedApplication`` (or, with nil,
///   when the calling program's file cannot be hashed).
public func SecAccessCreate(
    _ descriptor: CFString, _ trustedlist: CFArray?, _ accessRef: UnsafeMutablePointer<SecAccess?>
) -> OSStatus {
    var applications: [SecTrustedApplication] = []
    if let trustedlist {
        for element in trustedlist {
            guard let application = element as? SecTrustedApplication else { return errSecParam }
            applications.append(application)
        }
    } else {
        var calling: SecTrustedApplication?
        let status = SecTrustedApplicationCreateFromPath(nil, &calling)
        guard status == errSecSuccess, let calling else { return status == errSecSuccess ? errSecParam : status }
        applications = [calling]
    }
    accessRef.pointee = SecAccess(
        descriptor: descriptor as String, allowsAnyApplication: false, trustedApplications: applications)
    return errSecSuccess
}

/// Makes an access object that lets any application read the secret without asking (what `security
/// add-generic-password -A` does). Not an Apple function: macOS reaches the same by setting an ACL entry's
/// application list to nil (`SecACLSetContents`), and Latchkey has no separate ACL entries.
///
/// - Parameters:
///   - descriptor: a name for the item.
///   - accessRef: receives the object.
/// - Returns: `errSecSuccess`.
public func SecAccessCreateForAnyApplication(_ descriptor: CFString, _ accessRef: UnsafeMutablePointer<SecAccess?>)
    -> OSStatus
{
    accessRef.pointee = SecAccess(descriptor: descriptor as String, allowsAnyApplication: true, trustedApplications: [])
    return errSecSuccess
}

/// The trusted applications of an access object, as Apple's `SecACLCopyContents` gives an entry's list: an
/// array of ``SecTrustedApplication``, or nil when any application may read the secret.
///
/// - Returns: `errSecSuccess`.
public func SecAccessCopyTrustedApplications(_ access: SecAccess, _ applicationList: UnsafeMutablePointer<CFArray?>)
    -> OSStatus
{
    applicationList.pointee = access.allowsAnyApplication ? nil : NSArray(array: access.trustedApplications)
    return errSecSuccess
}
