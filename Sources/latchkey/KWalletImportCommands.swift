import ArgumentParser
import FoundationEssentials
import GnomeKeyringImport
import KWalletImport
import KeychainCore
import KeychainStore
import Posix

struct ImportKWallet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-kwallet",
        abstract: "Copy KWallet's wallets into a keychain; the wallet files are never changed.",
        usage: "latchkey import-kwallet [<options>] [<paths> ...]",
        discussion: """
            Reads KWallet's wallets (asking each one's password), by default every \
            $XDG_DATA_HOME/kwalletd/*.kwl, and adds each entry as an item in KDE's own scheme: attribute server = \
            the folder, user = the key, type = plaintext, base64 or map, label folder/key. Entries kwalletd5's \
            Secret Service made get their attributes back from NAME_attributes.json. Into a login keychain (the \
            default), the wallet kwalletrc's Default Wallet names (kdewallet) goes into it and every other \
            wallet into the collection with its name; into any other --keychain, everything goes into that one. \
            GnuPG wallets are skipped.

            One wallet is one transaction. A wallet imported before (same path, size, time and contents) is \
            skipped, and an entry already there is not added twice. With --stdin, standard input holds \
            passwords, one per line: each wallet and the keychain are opened with the first line that fits.

            Exit status: 0 when every wallet was imported or had been, 1 when one could not be read or opened.

            Examples:
              latchkey import-kwallet --dry-run
              printf '%s\\n' "$WALLET_PASSWORD" "$LOGIN_PASSWORD" |
                latchkey import-kwallet --stdin
            """)

    @OptionGroup var importing: ImportOptions

    @Argument(help: "Wallet files (default: every *.kwl in $XDG_DATA_HOME/kwalletd).")
    var paths: [String] = []

    func run() throws {
        var failed = false
        try reportingFailures { () throws(KeychainError) in
            let lines = importing.stdin ? try SecretInput.linesFromStandardInput() : nil
            var wallets = WalletPasswords(lines: lines)
            var passwords = PasswordPool(lines: lines)
            defer {
                wallets.wipe()
                passwords.wipe()
            }
            let locations = KWalletLocations(environment: ProcessInfo.processInfo.environment)
            let files = paths.isEmpty ? locations.walletPaths() : ImportPaths.resolve(paths)
            guard !files.isEmpty else {
                print("no KWallet wallets in \(locations.directory)")
                return
            }
            let target = try ImportPaths.openKeychain(KeychainPaths.resolve(importing.keychain))
            let places = ImportPlaces(target: target)
            let keychains = places.recorded.map(\.keychain)
            let defaultWallet = locations.defaultWallet()
            var ready: [OpenedWallet] = []
            for path in files {
                do throws(KWalletError) {
                    let file = try KWalletFile(path: path)
                    if let earlier = KWalletImporter.earlierImport(of: file, in: keychains) {
                        print("\(path): already imported \(ImportPaths.date(earlier.imported)); nothing to do")
                        continue
                    }
                    let contents = try wallets.open(file)
                    let destination =
                        places.collectionPerKeyring
                        ? KWalletDestination(wallet: file.walletName, defaultWallet: defaultWallet) : .login
                    ready.append(
                        OpenedWallet(
                            file: file, contents: contents, attributes: KWalletAttributes(besides: file),
                            destination: destination))
                } catch {
                    StandardError.write("latchkey: \(error); nothing imported from it")
                    failed = true
                }
            }
            if importing.dryRun {
                for wallet in ready {
                    print(
                        "would import \(wallet.contents.entries.count) entries of wallet \"\(wallet.file.walletName)\" "
                            + "from \(wallet.file.path) into \(describe(wallet.destination, places))")
                    for entry in wallet.contents.entries { print("    \(entry.folder)/\(entry.key) (\(entry.type))") }
                }
                return
            }
            guard !ready.isEmpty else { return }
            try passwords.unlock(target)
            defer { target.lock() }
            var collections = CollectionMaker(places: places)
            for wallet in ready {
                let into = try keychain(for: wallet, places: places, collections: &collections, passwords: &passwords)
                defer { if into !== target { into.lock() } }
                switch try KWalletImporter.importWallet(
                    wallet.contents, from: wallet.file, attributes: wallet.attributes, into: into)
                {
                case .imported(let record):
                    let present = record.alreadyPresent > 0 ? " (\(record.alreadyPresent) were there already)" : ""
                    print(
                        "imported \(record.added) entries of wallet \"\(record.wallet)\" from \(record.path) into "
                            + "\(into.path)\(present)")
                case .alreadyImported(let earlier):
                    print("\(wallet.file.path): already imported \(ImportPaths.date(earlier.imported)); nothing to do")
                }
            }
        }
        if failed { throw ExitCode.failure }
    }

    /// `destination` in words.
    private func describe(_ destination: KWalletDestination, _ places: ImportPlaces) -> String {
        switch destination {
        case .login: places.target.path
        case .collection(let label):
            places.recorded.first { ImportPaths.collectionLabel($0) == label }?.path
                ?? "a new collection \"\(label)\" beside \(places.target.path)"
        }
    }

    /// The keychain, unlocked, a wallet's entries go into: the target, the collection labelled with the wallet's
    /// name, or a new one.
    private func keychain(
        for wallet: OpenedWallet, places: ImportPlaces, collections: inout CollectionMaker,
        passwords: inout PasswordPool
    ) throws(KeychainError) -> Keychain {
        guard case .collection(let label) = wallet.destination else { return places.target }
        if let existing = places.recorded.first(where: {
            $0.keychain.parentIdentifier != nil && ImportPaths.collectionLabel($0) == label
        }) {
            return try collections.keychain(
                for: .keychain(existing.path), source: wallet.file.path, passwords: &passwords)
        }
        return try collections.keychain(
            for: .newCollection(label: label), source: wallet.file.path, passwords: &passwords)
    }
}

/// The passwords wallets are tried with: the lines of standard input with `--stdin`, else those typed so far and,
/// when none fits, a prompt.
struct WalletPasswords {
    private var known: [[UInt8]]
    private let fromStandardInput: Bool

    /// A pool of `lines` (from `--stdin`), or an empty one that asks when `lines` is nil.
    init(lines: [[UInt8]]?) {
        known = lines ?? []
        fromStandardInput = lines != nil
    }

    /// Wipes every password in place, in the storage every copy shares (the lines this and the keychains'
    /// ``PasswordPool`` both hold): for the end of the import.
    mutating func wipe() {
        for password in known { wipeSharedStorage(of: password) }
        known = []
    }

    /// The wallet in `file`, opened with the first password that fits (each asked for up to three times).
    mutating func open(_ file: KWalletFile) throws(KWalletError) -> KWalletContents {
        let salt = file.needsSalt ? try file.salt() : nil
        for password in known {
            if let contents = try Self.open(file, salt: salt, password: password) { return contents }
        }
        if fromStandardInput { throw KWalletError(file.path, .wrongPassword) }
        var complaint: String?
        for _ in 0..<3 {
            var password: [UInt8]
            do {
                password = try SecretInput.keychainPassword(for: file.path, error: complaint)
            } catch {
                throw KWalletError(file.path, .unreadable("no password: \(error.reason)"))
            }
            if let contents = try Self.open(file, salt: salt, password: password) {
                known.append(password)
                return contents
            }
            wipeBytes(&password)
            complaint = "wrong password; try again"
        }
        throw KWalletError(file.path, .wrongPassword)
    }

    /// The wallet opened with `password`; nil when it is the wrong one.
    private static func open(_ file: KWalletFile, salt: [UInt8]?, password: [UInt8]) throws(KWalletError)
        -> KWalletContents?
    {
        let secret: SecretBytes
        do { secret = try SecretBytes(copying: password) } catch { throw KWalletError(file.path, .crypto("\(error)")) }
        let key = try secret.withUnsafeBytes { (bytes) throws(KWalletError) in
            try file.key(password: bytes, salt: salt)
        }
        do {
            return try file.open(key: key)
        } catch  where error.kind == .wrongPassword {
            return nil
        }
    }
}

/// What `latchkey migration-status` says of KWallet's wallets: those imported (recorded in `keychains`) and those
/// left (never imported, changed since, unreadable).
enum KWalletMigrationStatus {
    /// The imported wallets' records with the keychain each is in, oldest first, and the wallet files left.
    static func status(of keychains: [RecordedKeychain]) -> (
        imported: [(record: KWalletImportRecord, keychain: RecordedKeychain)], left: [(path: String, reason: String)]
    ) {
        let placed = keychains.flatMap { keychain in
            ((try? KWalletImporter.records(in: keychain.keychain)) ?? []).map { (record: $0, keychain: keychain) }
        }.sorted { $0.record.imported < $1.record.imported }
        let records = placed.map(\.record)
        var left: [(path: String, reason: String)] = []
        for path in KWalletLocations(environment: ProcessInfo.processInfo.environment).walletPaths() {
            do throws(KWalletError) {
                let file = try KWalletFile(path: path)
                if KWalletImporter.earlierImport(of: file, in: records) != nil { continue }
                if let earlier = records.last(where: { $0.path == path }) {
                    left.append((path, "changed since it was imported \(ImportPaths.date(earlier.imported))"))
                } else {
                    left.append((path, "not imported (latchkey import-kwallet)"))
                }
            } catch {
                left.append((path, "cannot be imported: \(error)"))
            }
        }
        return (placed, left)
    }

    /// The lines `migration-status` prints.
    static func lines(of keychains: [RecordedKeychain]) -> [String] {
        let (imported, left) = status(of: keychains)
        return imported.map { record, keychain in
            "imported wallet \(record.path) (wallet \"\(record.wallet)\", \(record.added) entries added) "
                + "into collection \"\(ImportPaths.collectionLabel(keychain))\" (\(keychain.path)) "
                + ImportPaths.date(record.imported)
        } + left.map { "left wallet \($0.path): \($0.reason)" }
    }

    /// The same as JSON: `{"imported": [...], "left": [...]}`.
    static func json(of keychains: [RecordedKeychain]) -> JSONValue {
        let (imported, left) = status(of: keychains)
        return .object([
            "imported": .array(
                imported.map { record, keychain in
                    .object([
                        "path": .string(record.path), "wallet": .string(record.wallet),
                        "added": .number(Int64(record.added)), "alreadyPresent": .number(Int64(record.alreadyPresent)),
                        "skipped": .number(Int64(record.skipped)),
                        "imported": .string(ImportPaths.date(record.imported)),
                        "sha256": .string(record.digest), "keychain": .string(keychain.path),
                        "collection": .string(ImportPaths.collectionLabel(keychain)),
                    ])
                }),
            "left": .array(left.map { .object(["path": .string($0.path), "reason": .string($0.reason)]) }),
        ])
    }
}
