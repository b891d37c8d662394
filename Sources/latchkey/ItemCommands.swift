import ArgumentParser
import FoundationEssentials
import KeychainCore

/// `-T`, `-A` and `-U`, which both `add-*` verbs take.
struct AddOptions: ParsableArguments {
    @Flag(name: .customShort("U"), help: "Update the item if it already exists (else an existing item is an error).")
    var update = false

    @Option(
        name: .customShort("T"),
        help: ArgumentHelp(
            "An application that may use the item without asking (stored for access control; repeatable).",
            valueName: "app"))
    var trustedApplications: [String] = []

    @Flag(name: .customShort("A"), help: "Any application may use the item without asking (stored for access control).")
    var anyApplication = false

    @Argument(help: "The keychain (a name in the keychain directory, or a path); the default keychain if omitted.")
    var keychain: String?

    /// The access attributes to store beside the item's own.
    var accessAttributes: ItemAttributes {
        var attributes: ItemAttributes = [:]
        if !trustedApplications.isEmpty {
            attributes[AccessAttributes.trustedApplications] = .string(trustedApplications.joined(separator: "\n"))
        }
        if anyApplication { attributes[AccessAttributes.anyApplication] = .string("1") }
        return attributes
    }
}

/// `-g`, `-w`, `--json` and the keychain, which both `find-*` verbs take.
struct FindOptions: ParsableArguments {
    @Flag(name: .customShort("g"), help: "Show the password after the attributes (on standard error).")
    var showPassword = false

    @Flag(name: .customShort("w"), help: "Print only the password.")
    var passwordOnly = false

    @Flag(help: "Print the item as JSON (with the password under \"password\" when -g or -w is given).")
    var json = false

    @Argument(help: "The keychain to search; the default keychain if omitted.")
    var keychain: String?

    var output: FindOutput { FindOutput(showPassword: showPassword, passwordOnly: passwordOnly, json: json) }
}

struct AddGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a generic password item.",
        discussion: """
            Examples:
              latchkey add-generic-password -a alice -s backup.example -w
                  (asks for the password without echo)
              printf '%s' "$TOKEN" | latchkey add-generic-password -a ci -s registry --stdin -U
            """)

    @OptionGroup var attributes: GenericPasswordOptions
    @OptionGroup var password: PasswordSourceOptions
    @OptionGroup var add: AddOptions

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.add(
                .genericPassword, attributes: try attributes.attributes().merging(add.accessAttributes) { $1 },
                defaultLabel: attributes.defaultLabel, secret: try password.secret(), update: add.update,
                keychain: add.keychain)
        }
    }
}

struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find a generic password item and print its attributes (and password).",
        discussion: """
            Exits with 44 when no item matches.
            Examples:
              latchkey find-generic-password -s backup.example
              latchkey find-generic-password -a alice -s backup.example -w
              latchkey find-generic-password -s backup.example -g --json
            """)

    @OptionGroup var attributes: GenericPasswordOptions
    @OptionGroup var find: FindOptions

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.find(
                .genericPassword, attributes: try attributes.attributes(), keychain: find.keychain,
                output: find.output)
        }
    }
}

struct DeleteGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete the first generic password item that matches.",
        discussion: """
            Exits with 44 when no item matches.
            Example:
              latchkey delete-generic-password -a alice -s backup.example
            """)

    @OptionGroup var attributes: GenericPasswordOptions

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.delete(.genericPassword, attributes: try attributes.attributes(), keychain: keychain)
        }
    }
}

struct AddInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add an Internet password item.",
        discussion: """
            Examples:
              latchkey add-internet-password -a alice -s mail.example -r imps -P 993 -w
              latchkey add-internet-password -a alice -s git.example -r htps -p /org/repo --stdin < token
            """)

    @OptionGroup var attributes: InternetPasswordOptions
    @OptionGroup var password: PasswordSourceOptions
    @OptionGroup var add: AddOptions

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.add(
                .internetPassword, attributes: try attributes.attributes().merging(add.accessAttributes) { $1 },
                defaultLabel: attributes.defaultLabel, secret: try password.secret(), update: add.update,
                keychain: add.keychain)
        }
    }
}

struct FindInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find an Internet password item and print its attributes (and password).",
        discussion: """
            Exits with 44 when no item matches.
            Examples:
              latchkey find-internet-password -s mail.example -a alice -g
              latchkey find-internet-password -s git.example -r htps -w
            """)

    @OptionGroup var attributes: InternetPasswordOptions
    @OptionGroup var find: FindOptions

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.find(
                .internetPassword, attributes: try attributes.attributes(), keychain: find.keychain,
                output: find.output)
        }
    }
}

struct DeleteInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete the first Internet password item that matches.",
        discussion: """
            Exits with 44 when no item matches.
            Example:
              latchkey delete-internet-password -s mail.example -a alice
            """)

    @OptionGroup var attributes: InternetPasswordOptions

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.delete(.internetPassword, attributes: try attributes.attributes(), keychain: keychain)
        }
    }
}

struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every item of a keychain.",
        discussion: """
            With -d the secrets are shown too, after a confirmation (on the terminal, else through pinentry).
            Examples:
              latchkey dump-keychain
              latchkey dump-keychain --json work
            """)

    @Flag(name: .customShort("d"), help: "Show the secrets too, after a confirmation.")
    var secrets = false

    @Flag(help: "Print the items as a JSON array.")
    var json = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.dump(keychain: keychain, secrets: secrets, json: json)
        }
    }
}
