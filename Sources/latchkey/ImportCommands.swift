import ArgumentParser
import FoundationEssentials
import Glibc
import GnomeKeyringImport
import KeychainClient
import KeychainCore
import KeychainStore
import Posix

struct ImportGnomeKeyring: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-gnome-keyring",
        abstract: "Copy gnome-keyring's keyrings into a keychain; the keyring files are never changed.",
        usage: "latchkey import-gnome-keyring [<options>] [<paths> ...]",
        discussion: """
            Reads gnome-keyring's binary keyrings (asking each one's password) and its plain-text keyrings (empty \
            password), by default every $XDG_DATA_HOME/keyrings/*.keyring, and adds their items as Secret Service \
            items (label, attributes with xdg:schema, secret and dates kept). Into a login keychain (the default), \
            login.keyring goes into it and every other keyring into a collection of its own beside it, and the keyring \
            named in gnome-keyring's `default` file becomes the default alias; into any other --keychain, everything \
            goes into that one.

            One keyring is one transaction, with the record of its import. A keyring imported before (same path, same \
            contents) is skipped, and an item already there is not added twice. When latchkeyd holds the keychain, it \
            imports each keyring this command read and opened (asking you to allow it), and no keychain password is \
            needed while it holds the keychain unlocked; else this process writes the keychain file, and its password \
            is asked too. With --stdin, standard input holds passwords, one per line: each keyring (and the keychain) \
            is opened with the first line that fits.

            Exit status: 0 when every keyring was imported or had been, 1 when one could not be read or opened.

            Examples:
              latchkey import-gnome-keyring --dry-run
              latchkey import-gnome-keyring
              printf '%s\\n' "$LOGIN_PASSWORD" "$OTHER_PASSWORD" |
                latchkey import-gnome-keyring --stdin
            """)

    @OptionGroup var importing: ImportOptions

    @Argument(help: "Keyring files (default: every *.keyring in $XDG_DATA_HOME/keyrings).")
    var paths: [String] = []

    func run() throws {
        var failed = false
        try reportingFailures { () throws(KeychainError) in
            var passwords = PasswordPool(lines: importing.stdin ? try SecretInput.linesFromStandardInput() : nil)
            defer { passwords.wipe() }
            let files = ImportPaths.resolve(paths)
            guard !files.isEmpty else {
                print("no gnome-keyring keyrings in \(ImportPaths.directory)")
                return
            }
            let keychainPath = KeychainPaths.resolve(importing.keychain)
            let target = try ImportPaths.openKeychain(keychainPath)
            let places = ImportPlaces(target: target)
            let defaultKeyring = GnomeKeyringImporter.defaultKeyringPath(inDirectory: ImportPaths.directory)

            var ready: [ReadyKeyring] = []
            // Before the pool's wipe: what each keyring kept in ordinary arrays (its file, its items' secrets, the
            // password that opened it), wiped in the storage every copy shares once the import is done.
            defer { for entry in ready { entry.wipe() } }
            for path in files {
                do throws(GnomeKeyringError) {
                    let file = try KeyringFile(path: path)
                    var kept = false
                    // A file not kept for the import (imported before, or not opened): its bytes wiped now.
                    defer { if !kept { wipeSharedStorage(of: file.bytes) } }
                    if let earlier = GnomeKeyringImporter.earlierImport(of: file, in: places.recorded) {
                        print("\(path): already imported \(ImportPaths.date(earlier.imported)); nothing to do")
                        continue
                    }
                    let (keyring, password) = try passwords.openWithPassword(file)
                    // The keys gnome-keyring's Secret portal kept for Flatpak apps open their libsecret files.
                    passwords.addPortalSecrets(of: keyring)
                    ready.append(
                        ReadyKeyring(
                            file: file, keyring: keyring, password: password,
                            destination: places.destination(of: file, named: keyring.name)))
                    kept = true
                } catch {
                    StandardError.write("latchkey: \(error); nothing imported from it")
                    failed = true
                }
            }
            if importing.dryRun {
                for (file, keyring, destination) in ready.map({ ($0.file, $0.keyring, $0.destination) }) {
                    print(
                        "would import \(keyring.items.count) items of keyring \"\(keyring.name)\" from \(file.path) "
                            + "into \(places.describe(destination))")
                    for item in keyring.items {
                        print("    \"\(item.label)\" \(item.attributes["xdg:schema"] ?? "(no schema)")")
                    }
                }
                return
            }
            guard !ready.isEmpty else { return }
            // Held by the daemon: it imports them (no keychain password while it holds the keychain unlocked).
            if let daemon = try Self.daemon(holding: keychainPath) {
                failed =
                    try Self.importThroughDaemon(
                        ready, daemon: daemon, defaultKeyring: defaultKeyring, passwords: &passwords,
                        stdin: importing.stdin) || failed
                return
            }
            try passwords.unlock(target)
            defer { target.lock() }
            var collections = CollectionMaker(places: places)
            for (file, keyring, destination) in ready.map({ ($0.file, $0.keyring, $0.destination) }) {
                let into = try collections.keychain(for: destination, source: file.path, passwords: &passwords)
                defer { if into !== target { into.lock() } }
                switch try GnomeKeyringImporter.importKeyring(keyring, from: file, into: into) {
                case .imported(let record):
                    let present = record.alreadyPresent > 0 ? " (\(record.alreadyPresent) were there already)" : ""
                    print(
                        "imported \(record.added) items of keyring \"\(keyring.name)\" from \(file.path) into "
                            + "\(into.path)\(present)")
                    // The first import of the keyring gnome-keyring's `default` names: the default here too.
                    if case .newCollection = destination, file.path == defaultKeyring {
                        try collections.makeDefault(into)
                        print("the default collection is now \(into.path)")
                    }
                case .alreadyImported(let earlier):
                    print("\(file.path): already imported \(ImportPaths.date(earlier.imported)); nothing to do")
                }
            }
        }
        if failed { throw ExitCode.failure }
    }
}

/// A keyring file read and opened, with the password that opened it and where its items go.
struct ReadyKeyring {
    var file: KeyringFile
    var keyring: GnomeKeyring
    var password: [UInt8]
    var destination: KeyringDestination

    /// Wipes its password, its file's bytes and its items' secrets in place, in the storage every copy shares:
    /// for the end of the import.
    func wipe() {
        wipeSharedStorage(of: password)
        wipeSharedStorage(of: file.bytes)
        for item in keyring.items { wipeSharedStorage(of: item.secret) }
    }
}

extension ImportGnomeKeyring {
    /// The daemon's keychain at `path` when latchkeyd holds it, else nil.
    static func daemon(holding path: String) throws(KeychainError) -> (
        target: KeychainTarget, keychain: DaemonKeychain
    )? {
        let target = try KeychainTarget.reach(path, daemonKeychains: KeychainTarget.daemonKeychains())
        guard let daemon = target.backend as? DaemonKeychain else { return nil }
        return (target, daemon)
    }

    /// Imports `ready` through the daemon (`Keychain1.ImportKeyring`, one call per keyring, each asked of the
    /// person): the keyring file's bytes and its password go sealed, the daemon writes its items and import record
    /// in one transaction. A new collection is made with `CreateCollection`. Returns whether a keyring failed.
    static func importThroughDaemon(
        _ ready: [ReadyKeyring], daemon: (target: KeychainTarget, keychain: DaemonKeychain),
        defaultKeyring: String?, passwords: inout PasswordPool, stdin: Bool
    ) throws(KeychainError) -> Bool {
        // Locked: unlocked with the passwords known (the lines of standard input, the keyrings' passwords), else
        // asked; unlocked, no keychain password is needed.
        if stdin && daemon.target.held?.protection != .loginKeychain {
            try passwords.unlock(daemon.keychain, path: daemon.target.path)
        } else {
            try daemon.target.unlock()
        }
        var failed = false
        let held = KeychainTarget.daemonKeychains() ?? []
        for entry in ready {
            let file = entry.file
            let into: (path: String, keychain: DaemonKeychain, id: String)
            switch entry.destination {
            case .login:
                into = (daemon.target.path, daemon.keychain, daemon.target.held?.id ?? "login")
            case .keychain(let path):
                guard
                    let found = held.first(where: {
                        !$0.file.isEmpty && KeychainPaths.canonical($0.file) == KeychainPaths.canonical(path)
                    }), let keychain = DaemonKeychain.connect(collection: found.id)
                else {
                    StandardError.write(
                        "latchkey: \(path) is not held by latchkeyd; nothing imported from \(file.path)")
                    failed = true
                    continue
                }
                into = (path, keychain, found.id)
            case .newCollection(let label):
                let made = try daemon.keychain.createCollection(label: label)
                guard let keychain = DaemonKeychain.connect(collection: made.id) else {
                    throw KeychainError(.noSuchKeychain, "latchkeyd does not serve the collection it made for \(label)")
                }
                into = (made.file, keychain, made.id)
            }
            let summary = try into.keychain.importKeyring(
                file.bytes, password: entry.password, path: file.path, modified: file.modified, dryRun: false)
            let present = summary.duplicates.isEmpty ? "" : " (\(summary.duplicates.count) were there already)"
            print(
                "imported \(summary.added) items of keyring \"\(entry.keyring.name)\" from \(file.path) into "
                    + "\(into.path)\(present)")
            // The first import of the keyring gnome-keyring's `default` names: the default here too.
            if case .newCollection = entry.destination, file.path == defaultKeyring {
                try daemon.keychain.setAlias("default", to: into.id)
                print("the default collection is now \(into.path)")
            }
        }
        return failed
    }
}

/// Where an import's keyrings can go: into the login keychain of a keychain directory, each keyring
/// but `login.keyring` becomes a collection of its own beside it (protected by its key, as the
/// daemon makes one); into any other keychain, every keyring goes into that one.
struct ImportPlaces {
    /// The keychain the command targets.
    let target: Keychain
    /// Whether keyrings become collections of their own (the target is a login keychain).
    let collectionPerKeyring: Bool
    /// The target and the collections beside it, with their import records.
    let recorded: [RecordedKeychain]

    init(target: Keychain) {
        self.target = target
        let loginPath = KeychainLocation.loginKeychainPath(inDirectory: ImportPaths.parent(of: target.path))
        collectionPerKeyring =
            target.parentIdentifier == nil && KeychainPaths.canonical(target.path) == KeychainPaths.canonical(loginPath)
        recorded =
            collectionPerKeyring
            ? GnomeKeyringImporter.recordedKeychains(login: target, inDirectory: ImportPaths.parent(of: target.path))
            : [RecordedKeychain(path: target.path, keychain: target)]
    }

    /// Where the items of the keyring `name` read from `file` go.
    func destination(of file: KeyringFile, named name: String) -> KeyringDestination {
        guard collectionPerKeyring else { return .login }
        return GnomeKeyringImporter.destination(of: file, named: name, login: target.path, among: recorded)
    }

    /// `destination` in words.
    func describe(_ destination: KeyringDestination) -> String {
        switch destination {
        case .login: target.path
        case .keychain(let path): path
        case .newCollection(let label): "a new collection \"\(label)\" beside \(target.path)"
        }
    }
}

/// Makes the collections an import needs: through the daemon's Secret Service (`CreateCollection`, so that
/// it serves them at once) when it holds the login keychain, else as files beside it.
struct CollectionMaker {
    let places: ImportPlaces
    /// The daemon holding the login keychain, looked up once; nil: none.
    private let daemon: DaemonKeychain?

    init(places: ImportPlaces) {
        self.places = places
        let canonical = KeychainPaths.canonical(places.target.path)
        let held = places.collectionPerKeyring ? KeychainTarget.daemonKeychains() : nil
        daemon =
            held?.first { !$0.file.isEmpty && KeychainPaths.canonical($0.file) == canonical }
            .flatMap { DaemonKeychain.connect(collection: $0.id) }
        // Answered once (identified), and keyrings' secrets come next.
        SecretsAhead.prepare()
    }

    /// The keychain, unlocked, that `destination` names; a new collection is made for the keyring at `source`.
    mutating func keychain(
        for destination: KeyringDestination, source: String, passwords: inout PasswordPool
    ) throws(KeychainError) -> Keychain {
        let login = places.target
        switch destination {
        case .login:
            return login
        case .keychain(let path):
            let keychain = try ImportPaths.openKeychain(path)
            try keychain.unlock(using: login)
            return keychain
        case .newCollection(let label):
            guard let daemon else {
                return try GnomeKeyringImporter.createCollection(
                    label: label, source: source, inDirectory: ImportPaths.parent(of: login.path), protectedBy: login)
            }
            try passwords.unlock(daemon, path: login.path)
            let made = try daemon.createCollection(label: label)
            let keychain = try ImportPaths.openKeychain(made.file)
            try keychain.unlock(using: login)
            try keychain.setMetadata(GnomeKeyringImporter.sourceName, Data(source.utf8))
            return keychain
        }
    }

    /// Makes `collection` the target of the `default` alias.
    func makeDefault(_ collection: Keychain) throws(KeychainError) {
        let file = collection.path.split(separator: "/").last.map(String.init) ?? ""
        let id = String(file.dropLast(".keychain-db".count))
        if let daemon {
            try daemon.setAlias("default", to: id)
        } else {
            let directory = ImportPaths.parent(of: collection.path)
            var aliases = CollectionAliases.load(inDirectory: directory)
            aliases["default"] = id
            CollectionAliases.save(aliases, inDirectory: directory)
        }
    }
}

struct MigrationStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migration-status",
        abstract: "Show which gnome-keyring keyrings and KWallet wallets were imported and which are left.",
        discussion: """
            Lists the imports recorded in the default keychain (or --keychain) and the collections beside it, with the \
            collection each keyring went to (no password needed), then every keyring file (by default \
            $XDG_DATA_HOME/keyrings/*.keyring) that is left: never imported, changed since its import, or unreadable. \
            Then the same for KWallet's wallets ($XDG_DATA_HOME/kwalletd/*.kwl), as "imported wallet" and "left \
            wallet" lines (under "kwallet" in the JSON).

            Example:
              latchkey migration-status
            """)

    @Option(
        help: ArgumentHelp("The keychain holding the records (default: the default keychain).", valueName: "keychain"))
    var keychain: String?

    @Flag(help: "Print {\"imported\": [...], \"left\": [...]} as JSON.")
    var json = false

    @Argument(help: "Keyring files to check (default: every *.keyring in $XDG_DATA_HOME/keyrings).")
    var paths: [String] = []

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let keychainPath = KeychainPaths.resolve(keychain)
            let recorded: [RecordedKeychain]
            SecretsAhead.prepare()
            do throws(KeychainError) {
                recorded = ImportPlaces(target: try Keychain(opening: keychainPath)).recorded
            } catch  where error.status == .noSuchKeychain {
                recorded = []
            }
            let placed = recorded.flatMap { keychain in keychain.records.map { (record: $0, keychain: keychain) } }
                .sorted { $0.record.imported < $1.record.imported }
            let records = placed.map(\.record)
            var left: [(path: String, reason: String)] = []
            for path in ImportPaths.resolve(paths) {
                do throws(GnomeKeyringError) {
                    let file = try KeyringFile(path: path)
                    if GnomeKeyringImporter.earlierImport(of: file, in: records) != nil { continue }
                    if let earlier = records.last(where: { $0.path == path }) {
                        left.append((path, "changed since it was imported \(ImportPaths.date(earlier.imported))"))
                    } else {
                        left.append((path, "not imported"))
                    }
                } catch {
                    left.append((path, "cannot be read: \(error)"))
                }
            }
            if json {
                let imported = placed.map { (record, keychain) -> JSONValue in
                    .object([
                        "path": .string(record.path), "keyring": .string(record.keyring),
                        "added": .number(Int64(record.added)), "alreadyPresent": .number(Int64(record.alreadyPresent)),
                        "imported": .string(ImportPaths.date(record.imported)), "sha256": .string(record.digest),
                        "keychain": .string(keychain.path),
                        "collection": .string(ImportPaths.collectionLabel(keychain)),
                    ])
                }
                let remaining = left.map { JSONValue.object(["path": .string($0.path), "reason": .string($0.reason)]) }
                print(
                    JSONValue.object([
                        "imported": .array(imported), "left": .array(remaining),
                        "kwallet": KWalletMigrationStatus.json(of: recorded),
                    ]).text)
                return
            }
            for (record, keychain) in placed {
                print(
                    "imported \(record.path) (keyring \"\(record.keyring)\", \(record.added) items added) "
                        + "into collection \"\(ImportPaths.collectionLabel(keychain))\" (\(keychain.path)) "
                        + ImportPaths.date(record.imported))
            }
            for entry in left { print("left \(entry.path): \(entry.reason)") }
            if records.isEmpty && left.isEmpty { print("no gnome-keyring keyrings in \(ImportPaths.directory)") }
            for line in KWalletMigrationStatus.lines(of: recorded) { print(line) }
        }
    }
}

/// Where the import verbs find keyrings and the keychain.
enum ImportPaths {
    /// gnome-keyring's directory for this user.
    static var directory: String { KeyringFile.keyringDirectory(environment: ProcessInfo.processInfo.environment) }

    /// The given paths made absolute, or the user's keyring files.
    static func resolve(_ paths: [String]) -> [String] {
        let environment = ProcessInfo.processInfo.environment
        guard !paths.isEmpty else {
            return KeyringFile.defaultPaths(environment: environment)
                + KeyringFile.flatpakPaths(environment: environment)
        }
        return paths.map { $0.hasPrefix("/") ? $0 : FileManager.default.currentDirectoryPath + "/" + $0 }
    }

    /// The keychain file, opened in this process (locked).
    static func openKeychain(_ path: String) throws(KeychainError) -> Keychain {
        SecretsAhead.prepare()
        do {
            return try Keychain(opening: path)
        } catch  where error.status == .noSuchKeychain {
            throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
        }
    }

    /// A keychain's collection label: `Login` for a login keychain, else its label (its file name when it has none).
    static func collectionLabel(_ keychain: RecordedKeychain) -> String {
        if keychain.keychain.parentIdentifier == nil { return "Login" }
        if let label = try? keychain.keychain.metadata("label") { return String(decoding: label, as: UTF8.self) }
        return String((keychain.path.split(separator: "/").last ?? "").dropLast(".keychain-db".count))
    }

    /// The directory holding `path`.
    static func parent(of path: String) -> String {
        String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
    }

    /// Unix seconds as an ISO 8601 UTC time.
    static func date(_ seconds: UInt64) -> String {
        ItemListing.isoTimestamp(Date(timeIntervalSince1970: TimeInterval(seconds))) ?? String(seconds)
    }
}

/// The passwords an import tries: the lines of standard input with `--stdin`, else those typed so
/// far (a keyring's password is often the keychain's too) and, when none fits, a prompt.
struct PasswordPool {
    private var known: [[UInt8]]
    private let fromStandardInput: Bool

    /// A pool of `lines` (from `--stdin`), or an empty one that asks when `lines` is nil.
    init(lines: [[UInt8]]?) {
        known = lines ?? []
        fromStandardInput = lines != nil
    }

    /// Adds the secrets gnome-keyring's Secret portal kept in `keyring` for Flatpak apps (items with
    /// the attribute `app_id`): the keys of the apps' libsecret files.
    mutating func addPortalSecrets(of keyring: GnomeKeyring) {
        for item in keyring.items where item.attributes["app_id"] != nil { known.append(item.secret) }
    }

    /// Wipes every password in place, in the storage every copy shares (the lines `import-kwallet` gives this
    /// pool and its ``WalletPasswords`` both): for the end of the import.
    mutating func wipe() {
        for password in known { wipeSharedStorage(of: password) }
        known = []
    }

    /// The keyring in `file`, opened with the first password that fits.
    mutating func open(_ file: KeyringFile) throws(GnomeKeyringError) -> GnomeKeyring {
        try openWithPassword(file).keyring
    }

    /// The keyring in `file` and the password that opened it (empty for a keyring without one): the first that
    /// fits.
    mutating func openWithPassword(_ file: KeyringFile) throws(GnomeKeyringError) -> (
        keyring: GnomeKeyring, password: [UInt8]
    ) {
        guard file.needsPassword else { return (try file.keyring(password: []), []) }
        for password in known {
            do {
                return (try file.keyring(password: password), password)
            } catch  where error.kind == .wrongPassword {
                continue
            }
        }
        if fromStandardInput {
            // Named as a wrong password: none of the lines opened it (or the encrypted part is damaged).
            throw GnomeKeyringError(file.path, .wrongPassword)
        }
        if file.format == .libsecretFile, LibsecretFile.flatpakApp(of: file.path) != nil {
            // Its key is the Secret portal's secret for the app, which nobody can type.
            throw GnomeKeyringError(
                file.path, .unreadable("its key, the Secret portal's secret for the app, is in no keyring read"))
        }
        var complaint: String?
        for _ in 0..<3 {
            var password: [UInt8]
            do {
                password = try SecretInput.keychainPassword(for: file.path, error: complaint)
            } catch {
                throw GnomeKeyringError(file.path, .unreadable("no password: \(error.reason)"))
            }
            do {
                let keyring = try file.keyring(password: password)
                known.append(password)
                return (keyring, password)
            } catch  where error.kind == .wrongPassword {
                wipeBytes(&password)
                complaint = "wrong password; try again"
            }
        }
        throw GnomeKeyringError(file.path, .wrongPassword)
    }

    /// Unlocks the keychain file `keychain` (through the login keychain beside it when it opens with
    /// that one's key), trying the known passwords first.
    mutating func unlock(_ keychain: Keychain) throws(KeychainError) {
        if let parent = keychain.parentIdentifier {
            let directory = String(keychain.path[..<(keychain.path.lastIndex(of: "/") ?? keychain.path.startIndex)])
            let loginPath = KeychainLocation.loginKeychainPath(inDirectory: directory)
            guard let login = try? Keychain(opening: loginPath), login.identifier == parent else {
                throw KeychainError(.noSuchKeychain, "\(keychain.path) opens with the login keychain beside it")
            }
            try unlock(login)
            try keychain.unlock(using: login)
            login.lock()
            return
        }
        for password in known {
            do {
                try keychain.unlock(password: password)
                return
            } catch  where error.status == .authFailed {
                continue
            }
        }
        if fromStandardInput {
            throw KeychainError(.authFailed, "no line of standard input is the password of \(keychain.path)")
        }
        var typed: [UInt8] = []
        try KeychainTarget.askUntilUnlocked(keychain.path) { (password) throws(KeychainError) in
            try keychain.unlock(password: password)
            typed = password
        }
        known.append(typed)
    }

    /// Unlocks the daemon's login keychain (`path`) if it is locked, with the known passwords first.
    mutating func unlock(_ daemon: DaemonKeychain, path: String) throws(KeychainError) {
        guard daemon.isLocked else { return }
        for password in known {
            do {
                try daemon.unlock(withPassword: password)
                return
            } catch  where error.status == .authFailed {
                continue
            }
        }
        if fromStandardInput {
            throw KeychainError(.authFailed, "no line of standard input is the password of \(path)")
        }
        try KeychainTarget.askUntilUnlocked(path) { (password) throws(KeychainError) in
            try daemon.unlock(withPassword: password)
        }
    }
}

/// The options every import command takes.
struct ImportOptions: ParsableArguments {
    @Flag(help: "List what would be imported and change nothing (the files' passwords are still needed).")
    var dryRun = false

    @Flag(help: "Read passwords from standard input, one per line, instead of asking.")
    var stdin = false

    @Option(help: ArgumentHelp("The keychain to import into (default: the default keychain).", valueName: "keychain"))
    var keychain: String?
}
