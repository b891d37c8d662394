import AgeEncryption
import ArgumentParser
import CredentialExchange
import FoundationEssentials
import Glibc
import Keychain1
import KeychainClient
import KeychainCore
import KeychainExchange
import KeychainStore
import Posix

struct ExportKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a keychain's items, with their secrets, into a Credential Exchange Format file.",
        usage: "latchkey export [<keychain> | --all] --to <file> [<options>]",
        discussion: """
            Writes the items of the keychain (default: the default keychain), or of every keychain with --all, as \
            a CXF 1.0 JSON document (docs/export-import.md) encrypted with age: to each --recipient (an age1… public \
            key, as `age -r` takes it), else to a passphrase asked twice on the terminal (or read from standard \
            input with --stdin). Items of a …ThisDeviceOnly class never leave the machine: they are left out and \
            counted. The file is written 0600 and atomically; an existing file is kept unless --force.

            When latchkeyd holds the keychain, the export goes through it and it asks you to allow it (no \
            keychain password is needed unless the keychain is locked); otherwise the keychain file is opened \
            here with its password.

            --unencrypted writes the JSON in clear, for an importer that needs it: anyone who reads the file can \
            use every secret in it. It asks you to type a confirmation on the terminal (--yes instead, for scripts).

            Exit status: 0 when the file was written, 1 otherwise.

            Examples:
              latchkey export --to login.cxf.age
              latchkey export work --to work.age --recipient "$(age-keygen -y key.txt)"
              latchkey export --all --unencrypted --yes --to everything.json
            """)

    @Argument(help: "The keychain (default: the default keychain).")
    var keychain: String?

    @Flag(help: "Export every keychain.")
    var all = false

    @Option(help: ArgumentHelp("The file to write.", valueName: "file"))
    var to: String

    @Option(help: ArgumentHelp("Encrypt to this age public key (age1…); repeatable.", valueName: "age-public-key"))
    var recipient: [String] = []

    @Flag(help: "Write the file in clear (asks for a typed confirmation, or --yes).")
    var unencrypted = false

    @Flag(help: "With --unencrypted: do not ask for the typed confirmation.")
    var yes = false

    @Flag(help: "Read the passphrase from standard input instead of asking.")
    var stdin = false

    @Flag(help: "Replace the file if it exists.")
    var force = false

    @Flag(help: "Print a JSON summary.")
    var json = false

    func validate() throws {
        if all && keychain != nil { throw ValidationError("give a keychain or --all, not both") }
        if unencrypted && !recipient.isEmpty {
            throw ValidationError("--unencrypted and --recipient exclude each other")
        }
        if yes && !unencrypted { throw ValidationError("--yes goes with --unencrypted") }
    }

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let destination = ExchangeFiles.absolute(to)
            if !force && access(destination, F_OK) == 0 {
                throw KeychainError(.duplicateItem, "\(destination) exists: use --force to replace it")
            }
            let recipients = try recipient.map { (text) throws(KeychainError) in try ExchangeFiles.recipient(text) }
            if unencrypted { try Self.confirmUnencrypted(yes: yes) }
            var lines = try ExchangeFiles.StandardInput(reading: stdin)
            defer { lines.wipe() }
            let passphrase =
                unencrypted || !recipients.isEmpty ? nil : try ExchangeFiles.passphrase(from: &lines, twice: true)
            var passwords = lines.pool()
            defer { passwords.wipe() }
            let exported = try export(recipients: recipients, passphrase: passphrase, passwords: &passwords)
            try ExchangeFiles.write(exported.file, to: destination, replacing: force)
            let how =
                unencrypted
                ? "UNENCRYPTED"
                : recipients.isEmpty
                    ? "encrypted with a passphrase"
                    : "encrypted to \(recipients.count) recipient\(recipients.count == 1 ? "" : "s")"
            if json {
                print(
                    JSONValue.object([
                        "file": .string(destination), "exported": .number(Int64(exported.items)),
                        "leftOut": .number(Int64(exported.leftOut)), "encrypted": .bool(!unencrypted),
                        "keychains": .array(exported.keychains.map { .string($0) }),
                    ]).text)
            } else {
                print(
                    "exported \(exported.items) items of \(exported.keychains.joined(separator: ", ")) to \(destination) (\(how))"
                )
                if exported.leftOut > 0 {
                    print("left out \(exported.leftOut) ThisDeviceOnly items: they never leave this machine")
                }
            }
        }
    }

    /// The file: through the daemon when it holds the keychains, else made here from the keychain files.
    private func export(recipients: [AgeRecipient], passphrase: SharedSecret?, passwords: inout PasswordPool)
        throws(KeychainError) -> (
            file: SharedSecret, items: Int, leftOut: Int, keychains: [String]
        )
    {
        let daemonKeychains = KeychainTarget.daemonKeychains()
        let targets: [KeychainTarget]
        if all {
            if let daemonKeychains {
                // The daemon's: it unlocks them through its own prompt when one is locked.
                let (file, items, leftOut) = try DaemonKeychain.export(
                    keychains: [], recipients: recipient, passphrase: passphrase, unencrypted: unencrypted)
                let names = daemonKeychains.filter { !$0.file.isEmpty }.map(\.id)
                return (file, items, leftOut, names)
            }
            targets = try KeychainPaths.keychainFiles().map { (path) throws(KeychainError) in
                try KeychainTarget.reach(path, daemonKeychains: nil)
            }
            guard !targets.isEmpty else {
                throw KeychainError(.noSuchKeychain, "no keychain in \(KeychainPaths.directory)")
            }
        } else {
            targets = [try KeychainTarget.reach(KeychainPaths.resolve(keychain), daemonKeychains: daemonKeychains)]
        }
        for target in targets { try ExchangeFiles.unlock(target, with: &passwords, stdin: stdin) }
        if let held = targets.first?.held {
            let (file, items, leftOut) = try DaemonKeychain.export(
                keychains: [held.id], recipients: recipient, passphrase: passphrase, unencrypted: unencrypted)
            return (file, items, leftOut, [held.id])
        }
        var keychains: [ExportedKeychain] = []
        for target in targets {
            guard let file = target.backend as? Keychain else { continue }
            keychains.append(
                ExportedKeychain(
                    name: ExchangeFiles.keychainName(target.path), items: try ExchangeExport.items(of: file)))
        }
        let protection: ExportProtection =
            passphrase.map { .passphrase($0) } ?? (recipients.isEmpty ? .none : .recipients(recipients))
        let made = try ExchangeExport.file(of: keychains, protection: protection)
        return (made.bytes, made.itemCount, made.leftOut, keychains.map(\.name))
    }

    /// Warns that the file holds every secret in clear, and asks for the confirmation typed on the terminal
    /// (or takes `--yes`).
    private static func confirmUnencrypted(yes: Bool) throws(KeychainError) {
        let warning = "--unencrypted writes every secret in clear: anyone who reads the file can use them"
        guard !yes else { return StandardError.write("latchkey: warning: \(warning)") }
        let phrase = "export unencrypted"
        guard
            let typed = try SecretInput.fromTerminal(
                prompt: "warning: \(warning)\ntype \"\(phrase)\" to go on: ", echo: true)
        else {
            throw KeychainError(
                .interactionNotAllowed, "--unencrypted needs a confirmation typed on a terminal, or --yes")
        }
        guard String(decoding: typed, as: UTF8.self).split(separator: " ").joined(separator: " ") == phrase else {
            throw KeychainError(.userCanceled, "not confirmed: nothing exported")
        }
    }
}

struct ImportExchangeFile: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a Credential Exchange Format file (age-encrypted or not) or a password CSV into a keychain.",
        usage: "latchkey import <file> [<keychain>] [--identity <key-file>] [<options>]",
        discussion: """
            Reads FILE by its content: an age file encrypted to a passphrase (asked on the terminal, or read from \
            standard input with --stdin), an age file encrypted to a recipient (give --identity, an age key file \
            as age-keygen writes it), a CXF 1.0 JSON document, or a password CSV exported by Chrome/Chromium, \
            Firefox, Bitwarden, KeePassXC or Apple Passwords (docs/export-import.md). Its items are added to the \
            keychain (default: the default keychain) in one transaction: an item whose primary key is taken is \
            reported as a duplicate and left as it is, unless --replace; credentials no item can hold (passkeys, \
            one-time codes…) are listed and skipped. --dry-run says what would be added, replaced and skipped, and \
            writes nothing.

            When latchkeyd holds the keychain, the import goes through it and it asks you to allow it (no \
            keychain password is needed unless the keychain is locked); otherwise the keychain file is opened \
            here with its password.

            Exit status: 0 when the items were imported (or, with --dry-run, could be), 2 when nothing was \
            imported because every item was a duplicate, 1 on any error (then nothing was imported).

            Examples:
              latchkey import login.cxf.age
              latchkey import work.age work --identity ~/.config/age/key.txt --dry-run
              latchkey import chrome-passwords.csv --replace
            """)

    @Argument(help: "The file to import.")
    var file: String

    @Argument(help: "The keychain (default: the default keychain).")
    var keychain: String?

    @Option(help: ArgumentHelp("The age key file for a file encrypted to a recipient.", valueName: "age-key-file"))
    var identity: String?

    @Flag(help: "Say what would be imported and write nothing.")
    var dryRun = false

    @Flag(help: "Replace the items whose primary key is taken.")
    var replace = false

    @Flag(help: "Read the passphrase from standard input instead of asking.")
    var stdin = false

    @Flag(help: "Print a JSON summary.")
    var json = false

    func run() throws {
        var nothingButDuplicates = false
        try reportingFailures { () throws(KeychainError) in
            let source = ExchangeFiles.absolute(file)
            let contents = try ExchangeFiles.read(source)
            var lines = try ExchangeFiles.StandardInput(reading: stdin)
            defer { lines.wipe() }
            let key: ImportKey
            switch try ExchangeImport.kind(of: contents) {
            case .plain:
                key = .none
            case .agePassphrase:
                key = .passphrase(try ExchangeFiles.passphrase(from: &lines, twice: false))
            case .ageRecipients:
                guard let identity else {
                    throw KeychainError(.authFailed, "\(source) is encrypted to an age recipient: give its --identity")
                }
                key = .identities(try ExchangeFiles.read(ExchangeFiles.absolute(identity)))
            }
            let target = try KeychainTarget.reach(
                KeychainPaths.resolve(keychain), daemonKeychains: KeychainTarget.daemonKeychains())
            var passwords = lines.pool()
            defer { passwords.wipe() }
            try ExchangeFiles.unlock(target, with: &passwords, stdin: stdin)
            let summary: ImportSummary
            if let daemon = target.backend as? DaemonKeychain {
                let (secret, kind): (SharedSecret?, String) =
                    switch key {
                    case .passphrase(let passphrase): (passphrase, "passphrase")
                    case .identities(let keyFile): (keyFile, "identity")
                    case .none: (nil, "none")
                    }
                summary = try daemon.importFile(contents, key: secret, keyKind: kind, dryRun: dryRun, replace: replace)
            } else if let keychain = target.backend as? Keychain {
                let reading = try ExchangeImport.read(contents, key: key)
                summary = try ExchangeImport.add(reading, to: keychain, replacing: replace, dryRun: dryRun)
            } else {
                throw KeychainError(.internalComponent, "the keychain is neither the daemon's nor a file")
            }
            report(summary, into: target.path)
            nothingButDuplicates = !dryRun && summary.added + summary.replaced == 0 && !summary.duplicates.isEmpty
        }
        if nothingButDuplicates { throw ExitCode(2) }
    }

    private func report(_ summary: ImportSummary, into path: String) {
        if json {
            print(
                JSONValue.object([
                    "keychain": .string(path), "format": .string(summary.format),
                    "added": .number(Int64(summary.added)), "replaced": .number(Int64(summary.replaced)),
                    "duplicates": .array(summary.duplicates.map { .string($0) }),
                    "skipped": .array(
                        summary.skipped.map {
                            .object([
                                "title": .string($0.title), "type": .string($0.credentialType),
                                "reason": .string($0.reason),
                            ])
                        }), "dryRun": .bool(summary.dryRun),
                ]).text)
            return
        }
        let verb = summary.dryRun ? "would import" : "imported"
        var line = "\(verb) \(summary.added) items (\(summary.format)) into \(path)"
        if summary.replaced > 0 { line += "; \(summary.dryRun ? "would replace" : "replaced") \(summary.replaced)" }
        print(line)
        if !summary.duplicates.isEmpty {
            print("\(summary.duplicates.count) duplicates left as they are (--replace overwrites them):")
            for label in summary.duplicates { print("    \"\(label)\"") }
        }
        if !summary.skipped.isEmpty {
            print("skipped \(summary.skipped.count) credentials no keychain item can hold:")
            for skipped in summary.skipped {
                print("    \"\(skipped.title)\" (\(skipped.credentialType)): \(skipped.reason)")
            }
        }
    }
}

/// The files `export` and `import` read and write, and the passphrase they ask for.
enum ExchangeFiles {
    /// `path` made absolute.
    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    /// A keychain's name in an export: its file's name without `.keychain-db`.
    static func keychainName(_ path: String) -> String {
        let file = path.split(separator: "/").last.map(String.init) ?? path
        return file.hasSuffix(".keychain-db") ? String(file.dropLast(".keychain-db".count)) : file
    }

    /// An age recipient, or a one-line error.
    static func recipient(_ text: String) throws(KeychainError) -> AgeRecipient {
        do {
            return try AgeRecipient(parsing: text)
        } catch {
            throw KeychainError.param("--recipient \(text): \(error.message)")
        }
    }

    /// The lines of standard input with `--stdin` (the passphrase first when one is needed, then keychain
    /// passwords), read once.
    struct StandardInput {
        private(set) var lines: [[UInt8]]?

        init(reading: Bool) throws(KeychainError) {
            lines = reading ? try SecretInput.linesFromStandardInput() : nil
        }

        /// The next line; nil without `--stdin` or when none is left.
        mutating func next() -> [UInt8]? {
            guard var remaining = lines, !remaining.isEmpty else { return nil }
            let first = remaining.removeFirst()
            lines = remaining
            return first
        }

        /// The lines left, as the passwords an unlock tries (nil without `--stdin`: asked for).
        func pool() -> PasswordPool { PasswordPool(lines: lines) }

        mutating func wipe() {
            for line in lines ?? [] { wipeSharedStorage(of: line) }
            lines = nil
        }
    }

    /// The passphrase: the first line of standard input with `--stdin`, else asked on the terminal (`twice`: and
    /// again, until both agree, for an export).
    static func passphrase(from input: inout StandardInput, twice: Bool) throws(KeychainError) -> SharedSecret {
        SecretsAhead.prepare()
        var typed: [UInt8]
        if input.lines != nil {
            guard let line = input.next() else { throw KeychainError.param("standard input holds no passphrase") }
            typed = line
        } else if twice {
            typed = try SecretInput.newPassword(for: "the export file")
        } else {
            guard let line = try SecretInput.fromTerminal(prompt: "passphrase of the file: ") else {
                throw KeychainError(.interactionNotAllowed, "no terminal to ask the passphrase on: use --stdin")
            }
            typed = line
        }
        defer { wipeBytes(&typed) }
        guard !typed.isEmpty else { throw KeychainError.param("the passphrase is empty") }
        do {
            return try SharedSecret(copying: typed)
        } catch {
            throw KeychainError(.allocate, "no secret memory for the passphrase: \(error)")
        }
    }

    /// Unlocks `target` when locked: a file with the passwords of standard input (or asked); the daemon's keychain
    /// as other verbs do, or, with `--stdin`, with its lines when it has a password of its own (else the daemon
    /// asks in its own prompt).
    static func unlock(_ target: KeychainTarget, with passwords: inout PasswordPool, stdin: Bool)
        throws(KeychainError)
    {
        if let file = target.backend as? Keychain {
            guard file.isLocked else { return }
            return try passwords.unlock(file)
        }
        guard stdin else { return try target.unlock() }
        if let daemon = target.backend as? DaemonKeychain, target.held?.protection == .password {
            try passwords.unlock(daemon, path: target.path)
        }
    }

    /// The whole of the file at `path`, read into secret memory (at most ``ExchangeImport/maximumFileBytes``).
    static func read(_ path: String) throws(KeychainError) -> SharedSecret {
        SecretsAhead.prepare()
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw KeychainError(.noSuchKeychain, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw KeychainError.param("\(path) is not a regular file")
        }
        let limit = ExchangeImport.maximumFileBytes
        guard Int(status.st_size) <= limit else {
            throw KeychainError(.dataTooLarge, "\(path) is larger than \(limit >> 20) MiB")
        }
        do {
            var contents = try SecretBytes(capacity: max(Int(status.st_size), 1))
            var chunk = [UInt8](repeating: 0, count: 65_536)
            defer { wipeBytes(&chunk) }
            while true {
                let got = try Posix.read(fd, &chunk, chunk.count)
                if got == 0 { break }
                guard contents.count + got <= limit else {
                    throw KeychainError(.dataTooLarge, "\(path) is larger than \(limit >> 20) MiB")
                }
                try contents.reserveCapacity(forAppending: got)
                chunk.withUnsafeBytes { contents.append(UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
            }
            return SharedSecret(contents)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.io, "cannot read \(path): \(error)")
        }
    }

    /// Writes `file` to `path`, mode 0600, atomically: into a new file beside it, synced, then linked into
    /// place (refused when `path` exists, unless `replacing`: then renamed over it).
    static func write(_ file: SharedSecret, to path: String, replacing: Bool) throws(KeychainError) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        var template = Array((directory + "/.latchkey-export.XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw KeychainError(.io, "cannot write in \(directory): \(String(cString: strerror(errno)))")
        }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var linked = false
        defer {
            if !linked { unlink(temporary) }
        }
        let written = file.withUnsafeBytes { (bytes) -> Bool in
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        let synced = written && fchmod(fd, 0o600) == 0 && fsync(fd) == 0
        close(fd)
        guard synced else {
            throw KeychainError(.io, "cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        if replacing {
            guard rename(temporary, path) == 0 else {
                throw KeychainError(.io, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            linked = true
            return
        }
        guard link(temporary, path) == 0 else {
            if errno == EEXIST { throw KeychainError(.duplicateItem, "\(path) exists: use --force to replace it") }
            throw KeychainError(.io, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        unlink(temporary)
        linked = true
    }
}
