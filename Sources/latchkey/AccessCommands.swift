import ArgumentParser
import FoundationEssentials
import KeychainCore

/// `list-access`: every item's access list.
struct ListAccess: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List which applications may read each item's secret without asking.",
        discussion: """
            One line per item (its class, label, service or server, and account), then one line per trusted \
            application: its path or flatpak:APP-ID and the start of the SHA-256 its file had when it was trusted, or \
            "any application". An item with no list asks for every application.

            Examples:
              latchkey list-access
              latchkey list-access --json work
            """)

    @Flag(help: "Print a JSON array: per item, class, label, service, server, account, anyApplication, trusted.")
    var json = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let target = try KeychainTarget.open(keychain, unlocked: true)
            var documents: [JSONValue] = []
            for item in try AccessVerbs.items(of: target) {
                let access = ItemAccess(attributes: item.attributes ?? [:])
                if json {
                    documents.append(AccessVerbs.json(item, access))
                    continue
                }
                print(AccessVerbs.itemLine(item))
                if access.anyApplication { print("    any application") }
                for application in access.trustedApplications {
                    print("    " + application.name + (application.digest.map { "  sha256:" + $0.prefix(16) } ?? ""))
                }
                if access.isEmpty { print("    (no list: every application is asked)") }
            }
            if json { print(JSONValue.array(documents).text) }
        }
    }
}

/// `remove-access`: takes an application off the access lists.
struct RemoveAccess: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Take an application off items' access lists: it is asked again next time.",
        usage: "latchkey remove-access [<options>] [<application>] [<keychain>]",
        discussion: """
            APP is a program's path (links resolved, as the lists keep it), flatpak:APP-ID, or a program in a \
            container as list-access prints it (container:ENGINE:NAME:PATH). Without -s, -a or -l every item of \
            the keychain is changed. -A removes "any application" instead of APP.

            Examples:
              latchkey remove-access /usr/bin/git
              latchkey remove-access -s backup.example /home/me/bin/sync.py
              latchkey remove-access -A -s shared.example
            """)

    @Option(name: .customShort("s"), help: ArgumentHelp("Only items of this service or server.", valueName: "name"))
    var service: String?

    @Option(name: .customShort("a"), help: ArgumentHelp("Only items of this account.", valueName: "account"))
    var account: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("Only items with this label.", valueName: "label"))
    var label: String?

    @Flag(name: .customShort("A"), help: "Remove \"any application\" from the lists instead of one application.")
    var anyApplication = false

    @Argument(help: "The application: a program's path, flatpak:APP-ID or container:ENGINE:NAME:PATH.")
    var application: String?

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func validate() throws {
        if anyApplication == (application != nil) {
            throw ValidationError("give either an application or -A")
        }
    }

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let name = try application.map(AccessVerbs.listedName)
            let target = try KeychainTarget.open(keychain, unlocked: true)
            var changed = 0
            for item in try AccessVerbs.items(of: target) where matches(item) {
                var access = ItemAccess(attributes: item.attributes ?? [:])
                if let name {
                    guard access.remove(applicationNamed: name) else { continue }
                } else {
                    guard access.anyApplication else { continue }
                    access.anyApplication = false
                }
                let query = ItemQuery(item.itemClass, synchronizable: .any, references: [item.reference])
                changed += try target.backend.update(matching: query, with: ItemChanges(attributes: access.attributes))
            }
            guard changed > 0 else {
                throw KeychainError(.itemNotFound, "no item's list holds \(name ?? "any application")")
            }
            StandardError.write("latchkey: \(changed) item\(changed == 1 ? "" : "s") changed")
        }
    }

    private func matches(_ item: KeychainItem) -> Bool {
        func text(_ key: AttributeKey) -> String? {
            if case .string(let value)? = item.attributes?[key] { return value }
            return nil
        }
        if let service, text(.service) != service, text(.server) != service { return false }
        if let account, text(.account) != account { return false }
        if let label, text(.label) != label { return false }
        return true
    }
}

/// What the access verbs share.
enum AccessVerbs {
    /// Every item of the keychain (keys, certificates and identities carry access lists too), with its attributes.
    static func items(of target: KeychainTarget) throws(KeychainError) -> [KeychainItem] {
        var items: [KeychainItem] = []
        for itemClass in ItemClass.allCases {
            items += try target.backend.items(
                matching: ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: .attributes))
        }
        return items
    }

    /// How access lists name the application `argument` gives: `flatpak:APP-ID` and a program in a container
    /// (`container:podman:dev:/usr/bin/secret-tool`, docs/containers.md) as they are, a path with its links
    /// resolved and a script with its interpreter (the file need not exist any more: a program uninstalled is
    /// still revoked; a name as `list-access` prints it is taken as it is).
    static func listedName(_ argument: String) throws(KeychainError) -> String {
        if argument.hasPrefix(TrustedApplicationArgument.flatpakPrefix) || argument.hasPrefix("container:") {
            return argument
        }
        if let path = try? TrustedApplicationArgument.canonicalPath(argument) {
            return TrustedApplicationArgument.listedName(ofProgramAt: path)
        }
        guard argument.hasPrefix("/") else {
            throw KeychainError.param("\(argument): give the program's absolute path (it does not exist here)")
        }
        return argument
    }

    static func itemLine(_ item: KeychainItem) -> String {
        func text(_ key: AttributeKey) -> String {
            if case .string(let value)? = item.attributes?[key] { return value }
            return ""
        }
        let place = item.itemClass == .internetPassword ? text(.server) : text(.service)
        return "\(kind(item)) \"\(text(.label))\" \(place) account=\"\(text(.account))\""
    }

    /// The class's word in the listing.
    private static func kind(_ item: KeychainItem) -> String {
        switch item.itemClass {
        case .genericPassword: "generic"
        case .internetPassword: "internet"
        case .key: "key"
        case .certificate: "certificate"
        case .identity: "identity"
        }
    }

    static func json(_ item: KeychainItem, _ access: ItemAccess) -> JSONValue {
        func text(_ key: AttributeKey) -> JSONValue {
            if case .string(let value)? = item.attributes?[key] { return .string(value) }
            return .null
        }
        return .object([
            "class": .string(kind(item)),
            "label": text(.label), "service": text(.service), "server": text(.server), "account": text(.account),
            "anyApplication": .bool(access.anyApplication),
            "trusted": .array(
                access.trustedApplications.map { application in
                    .object([
                        "name": .string(application.name), "sha256": application.digest.map(JSONValue.string) ?? .null,
                    ])
                }),
        ])
    }
}

extension KeychainAccessPolicy: ExpressibleByArgument {}

/// `set-access-policy`: whether the keychain asks before an application its item does not trust gets a secret.
struct SetAccessPolicy: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Choose whether a keychain asks before handing a secret to an application not on the item's list.",
        discussion: """
            prompt (the default) asks you, naming the application; allow-all hands every secret to any of your \
            applications, as gnome-keyring does. The policy is authenticated under the keychain's key, so a locked \
            keychain is unlocked first. Through the daemon, allow-all takes effect only once you confirm it in the \
            prompt the daemon shows (any of your processes can ask the daemon); on a file, its password is the \
            confirmation. show-keychain-info shows the policy.

            Examples:
              latchkey set-access-policy allow-all
              latchkey set-access-policy prompt work
            """)

    @Argument(help: ArgumentHelp("prompt or allow-all.", valueName: "policy"))
    var policy: KeychainAccessPolicy

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let target = try KeychainTarget.open(keychain, unlocked: true)
            try target.backend.setAccessPolicy(policy)
        }
    }
}
