import ArgumentParser
import FoundationEssentials
import KeychainCore

/// The attributes every password class has, with `security(1)`'s letters.
struct PasswordAttributeOptions: ParsableArguments {
    @Option(name: .customShort("a"), help: ArgumentHelp("The account name (kSecAttrAccount).", valueName: "account"))
    var account: String?

    @Option(
        name: .customShort("c"),
        help: ArgumentHelp("The creator, a four-character code (kSecAttrCreator).", valueName: "creator"))
    var creator: String?

    @Option(
        name: .customShort("C"),
        help: ArgumentHelp("The type, a four-character code (kSecAttrType).", valueName: "type"))
    var type: String?

    @Option(name: .customShort("D"), help: ArgumentHelp("The kind (kSecAttrDescription).", valueName: "kind"))
    var kind: String?

    @Option(name: .customShort("j"), help: ArgumentHelp("A comment (kSecAttrComment).", valueName: "comment"))
    var comment: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("The label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Option(
        help: ArgumentHelp(
            "The accessibility class (kSecAttrAccessible): WhenUnlocked, AfterFirstUnlock,"
                + " WhenUnlockedThisDeviceOnly, AfterFirstUnlockThisDeviceOnly, WhenPasscodeSetThisDeviceOnly"
                + " (or Apple's value, such as ck).",
            valueName: "class"))
    var accessible: String?

    /// The attributes given.
    func attributes() throws(KeychainError) -> ItemAttributes {
        var attributes: ItemAttributes = [:]
        attributes[.account] = account.map(AttributeValue.string)
        attributes[.creator] = try creator.map { (code) throws(KeychainError) in
            .number(try fourCharacterCode(code, "-c"))
        }
        attributes[.type] = try type.map { (code) throws(KeychainError) in .number(try fourCharacterCode(code, "-C")) }
        attributes[.itemDescription] = kind.map(AttributeValue.string)
        attributes[.comment] = comment.map(AttributeValue.string)
        attributes[.label] = label.map(AttributeValue.string)
        if let accessible {
            guard let level = Accessibility(named: accessible) else {
                throw KeychainError.param(
                    "--accessible takes an accessibility class such as AfterFirstUnlock, not '\(accessible)'")
            }
            attributes[.accessible] = .string(level.rawValue)
        }
        return attributes
    }
}

/// A four-character code (`aapl`) as the number Apple stores.
func fourCharacterCode(_ text: String, _ option: String) throws(KeychainError) -> Int64 {
    let bytes = Array(text.utf8)
    guard bytes.count == 4, bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else {
        throw KeychainError.param("\(option) takes four characters, not '\(text)'")
    }
    return bytes.reduce(Int64(0)) { $0 << 8 | Int64($1) }
}

/// A four-character code kept as text (protocol, authentication type): one to four characters, padded with spaces.
func paddedCode(_ text: String, _ option: String) throws(KeychainError) -> String {
    let bytes = Array(text.utf8)
    guard (1...4).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
        throw KeychainError.param("\(option) takes a code of one to four characters (such as htps), not '\(text)'")
    }
    return text + String(repeating: " ", count: 4 - bytes.count)
}

/// The attribute options of one password class, and what its three verbs (`add-`, `find-`, `delete-`) say
/// about it in their help.
protocol PasswordClassOptions: ParsableArguments {
    /// The class the verbs work on.
    static var itemClass: ItemClass { get }
    /// The verbs' common suffix: `generic-password`.
    static var verbNoun: String { get }
    /// The class in help text: `generic password`.
    static var className: String { get }
    /// The article before ``className``.
    static var article: String { get }
    /// Example command lines for `add-`, `find-` and `delete-`, each line indented by two spaces.
    static var addExamples: String { get }
    static var findExamples: String { get }
    static var deleteExample: String { get }

    /// The attributes given.
    func attributes() throws(KeychainError) -> ItemAttributes
    /// What a label defaults to when none is given.
    var defaultLabel: String? { get }
}

/// Generic password attributes: service and generic value.
struct GenericPasswordOptions: PasswordClassOptions {
    static let itemClass = ItemClass.genericPassword
    static let verbNoun = "generic-password"
    static let className = "generic password"
    static let article = "a"
    static let addExamples = """
          latchkey add-generic-password -a alice -s backup.example -w
              (asks for the password without echo)
          printf '%s' "$TOKEN" |
            latchkey add-generic-password -a ci -s registry --stdin -U
        """
    static let findExamples = """
          latchkey find-generic-password -s backup.example
          latchkey find-generic-password -a alice -s backup.example -w
          latchkey find-generic-password -s backup.example -g --json
        """
    static let deleteExample = """
          latchkey delete-generic-password -a alice -s backup.example
        """

    @OptionGroup var common: PasswordAttributeOptions

    @Option(name: .customShort("s"), help: ArgumentHelp("The service name (kSecAttrService).", valueName: "service"))
    var service: String?

    @Option(
        name: .customShort("G"),
        help: ArgumentHelp("The generic attribute value (kSecAttrGeneric).", valueName: "value"))
    var generic: String?

    /// The attributes given.
    func attributes() throws(KeychainError) -> ItemAttributes {
        var attributes = try common.attributes()
        attributes[.service] = service.map(AttributeValue.string)
        attributes[.generic] = generic.map { .data(Data($0.utf8)) }
        return attributes
    }

    /// What a label defaults to when none is given: the service, as macOS does.
    var defaultLabel: String? { service }
}

/// Internet password attributes: server, protocol, port, path, domain, authentication type.
struct InternetPasswordOptions: PasswordClassOptions {
    static let itemClass = ItemClass.internetPassword
    static let verbNoun = "internet-password"
    static let className = "Internet password"
    static let article = "an"
    static let addExamples = """
          latchkey add-internet-password -a alice -s mail.example -r imps -P 993 -w
          latchkey add-internet-password -a alice -s git.example -r htps -p /org/repo \\
            --stdin < token
        """
    static let findExamples = """
          latchkey find-internet-password -s mail.example -a alice -g
          latchkey find-internet-password -s git.example -r htps -w
        """
    static let deleteExample = """
          latchkey delete-internet-password -s mail.example -a alice
        """

    @OptionGroup var common: PasswordAttributeOptions

    @Option(name: .customShort("s"), help: ArgumentHelp("The server name (kSecAttrServer).", valueName: "server"))
    var server: String?

    @Option(
        name: .customShort("r"),
        help: ArgumentHelp(
            "The protocol, a four-character code such as htps or ftp (kSecAttrProtocol).", valueName: "protocol"))
    var `protocol`: String?

    @Option(name: .customShort("P"), help: ArgumentHelp("The port number (kSecAttrPort).", valueName: "port"))
    var port: UInt16?

    @Option(name: .customShort("p"), help: ArgumentHelp("The path (kSecAttrPath).", valueName: "path"))
    var path: String?

    @Option(
        name: .customShort("d"),
        help: ArgumentHelp("The security domain (kSecAttrSecurityDomain).", valueName: "domain"))
    var domain: String?

    @Option(
        name: .customShort("t"),
        help: ArgumentHelp(
            "The authentication type, a four-character code such as dflt or form (kSecAttrAuthenticationType).",
            valueName: "authtype"))
    var authenticationType: String?

    /// The attributes given.
    func attributes() throws(KeychainError) -> ItemAttributes {
        var attributes = try common.attributes()
        attributes[.server] = server.map(AttributeValue.string)
        attributes[.protocol] = try `protocol`.map { (code) throws(KeychainError) in .string(try paddedCode(code, "-r"))
        }
        attributes[.port] = port.map { .number(Int64($0)) }
        attributes[.path] = path.map(AttributeValue.string)
        attributes[.securityDomain] = domain.map(AttributeValue.string)
        attributes[.authenticationType] = try authenticationType.map { (code) throws(KeychainError) in
            .string(try paddedCode(code, "-t"))
        }
        return attributes
    }

    /// What a label defaults to when none is given: the server, as macOS does.
    var defaultLabel: String? { server }
}

/// How `add-*` verbs get the item's password.
struct PasswordSourceOptions: ParsableArguments {
    @Option(
        name: .customShort("w"),
        help: ArgumentHelp(
            "The password. Put -w last, with no value, to be asked for it without echo.",
            discussion: "A value given here is visible to other users in the process list; a warning says so.",
            valueName: "password"))
    var password: String?

    @Option(
        name: .customShort("X"),
        help: ArgumentHelp(
            "The password in hexadecimal.",
            discussion: "A value given here is visible to other users in the process list; a warning says so.",
            valueName: "hex"))
    var hexPassword: String?

    @Flag(help: "Read the password from standard input (all of it, but a final newline).")
    var stdin = false

    /// Set when -w came last, with no value: ask on the terminal.
    @Flag(name: .customLong(PasswordSourceOptions.promptFlag), help: .hidden)
    var prompt = false

    /// The hidden flag a trailing `-w` becomes.
    static let promptFlag = "prompt-for-password"

    /// The password, from wherever it was given; nil when none was (the item then has an empty one).
    func secret() throws(KeychainError) -> Data? {
        let given = [password != nil, hexPassword != nil, stdin, prompt].filter { $0 }.count
        guard given <= 1 else { throw KeychainError.param("give the password one way: -w, -X or --stdin") }
        if let password {
            StandardError.write(
                "latchkey: warning: a password given with -w is visible to other users; put -w last to be asked, or use --stdin"
            )
            return Data(password.utf8)
        }
        if let hexPassword {
            StandardError.write(
                "latchkey: warning: a password given with -X is visible to other users; put -w last to be asked, or use --stdin"
            )
            var bytes: [UInt8] = []
            var digits = Array(hexPassword.utf8)
            if digits.count >= 2, digits[0] == UInt8(ascii: "0"), digits[1] | 0x20 == UInt8(ascii: "x") {
                digits.removeFirst(2)
            }
            guard digits.count % 2 == 0 else { throw KeychainError.param("-X takes an even number of hex digits") }
            for index in stride(from: 0, to: digits.count, by: 2) {
                guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                    throw KeychainError.param("-X takes hexadecimal digits only")
                }
                bytes.append(byte)
            }
            return Data(bytes)
        }
        if stdin { return Data(try SecretInput.fromStandardInput(count: 1)[0]) }
        if prompt {
            guard let typed = try SecretInput.fromTerminal(prompt: "password data for new item: ") else {
                throw KeychainError(.interactionNotAllowed, "no terminal to ask the password on: use --stdin")
            }
            return Data(typed)
        }
        return nil
    }

    /// `arguments` with a trailing `-w` (a request to be asked) turned into the hidden prompt flag.
    static func rewritingTrailingPasswordFlag(_ arguments: [String]) -> [String] {
        guard let verb = arguments.first, verb.hasPrefix("add-"), arguments.last == "-w" else { return arguments }
        return arguments.dropLast() + ["--" + promptFlag]
    }
}
