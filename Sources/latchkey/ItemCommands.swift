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
            "An application that may read the item's secret without asking: a program's path, or flatpak:APP-ID "
                + "(repeatable; its file is fingerprinted now).",
            valueName: "app"))
    var trustedApplications: [String] = []

    @Flag(name: .customShort("A"), help: "Any application may read the item's secret without asking.")
    var anyApplication = false

    @Argument(help: "The keychain (a name in the keychain directory, or a path); the default keychain if omitted.")
    var keychain: String?

    /// The item's access list from `-T` and `-A`, as attributes to store beside the item's own (none without
    /// either: through latchkeyd the creating program is trusted, as for every client).
    func accessAttributes() throws(KeychainError) -> ItemAttributes {
        guard anyApplication || !trustedApplications.isEmpty else { return [:] }
        var access = ItemAccess(anyApplication: anyApplication)
        for argument in trustedApplications { access.trust(try TrustedApplicationArgument.resolve(argument)) }
        return access.attributes
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

/// `add-generic-password` and `add-internet-password`.
struct AddPassword<Options: PasswordClassOptions>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "add-\(Options.verbNoun)", abstract: "Add \(Options.article) \(Options.className) item.",
            discussion: "Examples:\n" + Options.addExamples)
    }

    @OptionGroup var attributes: Options
    @OptionGroup var password: PasswordSourceOptions
    @OptionGroup var add: AddOptions

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.add(
                Options.itemClass, attributes: try attributes.attributes().merging(add.accessAttributes()) { $1 },
                defaultLabel: attributes.defaultLabel, secret: try password.secret(), update: add.update,
                keychain: add.keychain)
        }
    }
}

/// `find-generic-password` and `find-internet-password`.
struct FindPassword<Options: PasswordClassOptions>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "find-\(Options.verbNoun)",
            abstract: "Find \(Options.article) \(Options.className) item and print its attributes (and password).",
            usage: "latchkey find-\(Options.verbNoun) [<options>] [<keychain>]",
            discussion: "Exits with 44 when no item matches.\n\nExamples:\n" + Options.findExamples)
    }

    @OptionGroup var attributes: Options
    @OptionGroup var find: FindOptions

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.find(
                Options.itemClass, attributes: try attributes.attributes(), keychain: find.keychain,
                output: find.output)
        }
    }
}

/// `delete-generic-password` and `delete-internet-password`.
struct DeletePassword<Options: PasswordClassOptions>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "delete-\(Options.verbNoun)",
            abstract: "Delete the first \(Options.className) item that matches.",
            usage: "latchkey delete-\(Options.verbNoun) [<options>] [<keychain>]",
            discussion: "Exits with 44 when no item matches.\n\nExample:\n" + Options.deleteExample)
    }

    @OptionGroup var attributes: Options

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            try ItemVerbs.delete(Options.itemClass, attributes: try attributes.attributes(), keychain: keychain)
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
