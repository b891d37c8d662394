/// Which applications may read an item's secret without the user being asked: the item's access list, as
/// macOS keeps one per item. The application that created an item is on it; `-T` adds others, `-A` opens
/// the item to any application, and "Always allow" in an access prompt adds the application that asked.
///
/// Kept among the item's own attributes (sealed with them, so a file-writer cannot add an application
/// without the keychain key) under two extension names, ``trustedApplicationsKey`` and
/// ``anyApplicationKey``; the daemon keeps them out of what clients see and change.
public struct ItemAccess: Hashable, Sendable {
    /// Whether any application may read the secret (`-A`, or `kSecAttrAccess` from `SecAccessCreateForAnyApplication`).
    public var anyApplication: Bool
    /// The applications that may, in the order they were trusted.
    public private(set) var trustedApplications: [TrustedApplication]

    /// The attribute holding the trusted applications, one per line: the name, a tab and the SHA-256 of
    /// the file trusted (the name alone: any bytes at that path, as stored before digests were kept).
    public static let trustedApplicationsKey: AttributeKey = "lk:trusted-apps"
    /// The attribute set to "1" when any application may read the item.
    public static let anyApplicationKey: AttributeKey = "lk:any-app"
    /// The attributes that carry an item's access list.
    public static let keys: Set<AttributeKey> = [trustedApplicationsKey, anyApplicationKey]

    /// An access list.
    public init(anyApplication: Bool = false, trustedApplications: [TrustedApplication] = []) {
        self.anyApplication = anyApplication
        self.trustedApplications = []
        for application in trustedApplications { trust(application) }
    }

    /// The access list an item's attributes hold (empty when they hold none).
    public init(attributes: ItemAttributes) {
        var anyApplication = false
        switch attributes[Self.anyApplicationKey] {
        case .string(let text)?: anyApplication = text == "1"
        case .bool(let flag)?: anyApplication = flag
        case .number(let number)?: anyApplication = number != 0
        default: break
        }
        var trusted: [TrustedApplication] = []
        if case .string(let text)? = attributes[Self.trustedApplicationsKey] {
            for line in text.split(separator: "\n") where !line.isEmpty {
                let fields = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
                trusted.append(
                    TrustedApplication(name: String(fields[0]), digest: fields.count > 1 ? String(fields[1]) : nil))
            }
        }
        self.init(anyApplication: anyApplication, trustedApplications: trusted)
    }

    /// The list as attributes to store: both keys, an absent list as an empty text and "0".
    public var attributes: ItemAttributes {
        let lines = trustedApplications.map { application in
            application.digest.map { application.name + "\t" + $0 } ?? application.name
        }
        return [
            Self.trustedApplicationsKey: .string(lines.joined(separator: "\n")),
            Self.anyApplicationKey: .string(anyApplication ? "1" : "0"),
        ]
    }

    /// Whether the list holds anything at all (an item stored before access lists, or imported, holds none).
    public var isEmpty: Bool { !anyApplication && trustedApplications.isEmpty }

    /// What the list says of the application named `name` whose file has `digest` (nil: a Flatpak app).
    public func verdict(forApplication name: String, digest: String?) -> AccessVerdict {
        if anyApplication { return .trusted }
        guard let entry = trustedApplications.first(where: { $0.name == name }) else { return .unknown }
        guard let trustedDigest = entry.digest, trustedDigest != digest else { return .trusted }
        return .changed
    }

    /// Adds `application`, replacing the entry of the same name (an upgrade trusted again).
    public mutating func trust(_ application: TrustedApplication) {
        trustedApplications.removeAll { $0.name == application.name }
        trustedApplications.append(application)
    }

    /// Removes the application named `name`; whether it was there.
    @discardableResult
    public mutating func remove(applicationNamed name: String) -> Bool {
        let before = trustedApplications.count
        trustedApplications.removeAll { $0.name == name }
        return trustedApplications.count != before
    }
}

/// One application an item trusts: its name (an executable's or a script's path, or `flatpak:APP-ID`) and
/// the SHA-256 of its file when it was trusted, in lower-case hexadecimal.
public struct TrustedApplication: Hashable, Sendable {
    /// The path, or `flatpak:` and the app id.
    public var name: String
    /// The file's SHA-256 when it was trusted; nil to trust whatever is at the path (a Flatpak app, or an
    /// entry stored before digests were kept).
    public var digest: String?

    /// An application.
    public init(name: String, digest: String?) {
        self.name = name
        self.digest = digest
    }

    /// Whether `name` can be kept in an access list: not empty, no newline or tab.
    public static func isStorable(_ name: String) -> Bool {
        !name.isEmpty && !name.contains("\n") && !name.contains("\t")
    }
}

/// What an item's access list says of an application.
public enum AccessVerdict: Hashable, Sendable {
    /// It may read the secret.
    case trusted
    /// It is on the list, but its file has changed since it was trusted (an upgrade, or a replacement): the
    /// user is asked again, and told so.
    case changed
    /// It is not on the list: the user is asked.
    case unknown
}

/// Whether a keychain asks before handing a secret to an application its item does not trust.
public enum KeychainAccessPolicy: String, Hashable, Sendable, CaseIterable {
    /// Ask the user (the default).
    case prompt
    /// Hand every secret to any application of the user, as gnome-keyring does.
    case allowAll = "allow-all"
}
