import AccessControl
import AgeEncryption
import CredentialExchange
import DBus
import FoundationEssentials
import GnomeKeyringImport
import Keychain1
import KeychainCore
import KeychainExchange
import KeychainRegistry
import KeychainStore
import Pinentry
import Posix

/// `org.latchkey.Keychain1`'s `Export` (on `/org/latchkey/keychain`) and `Import` (on a keychain's object):
/// files in the Credential Exchange Format, age-encrypted (docs/export-import.md). The daemon never opens a path: the
/// client reads and writes the files. Every export and every import is asked of the person (after the usual
/// unlock prompt when a keychain is locked); a Flatpak application or an unidentified caller is refused outright
/// (docs/threat-model.md, "Export and import"). The file's bytes cross sealed under the caller's `Keychain1`
/// session: an import, a passphrase export and an unencrypted export are refused to a caller without one (an
/// export to age recipients may cross in a plain session: only the recipients open it). The encryption, the
/// reading and the writing run on the worker, never on the serving thread.
extension SecretServiceDaemon {
    /// Exports and imports under way at once, of all clients: each holds a file of up to 64 MiB, parses it and may
    /// run age's scrypt, on the worker every client's unlock also waits for.
    static let exchangesAtOnce = 2

    /// Counts `call` (an Export or an Import about to be answered later) as under way until its reply: refused
    /// (`LimitsExceeded`) when its connection has one under way already, or ``exchangesAtOnce`` are.
    func beginExchange(_ call: DBusMethodCall) throws(DBusError) {
        guard !exchangesUnderWay.contains(call.sender) else {
            throw DBusError(.limitsExceeded, "this connection's export or import is still under way")
        }
        guard exchangesUnderWay.count < Self.exchangesAtOnce else {
            throw DBusError(
                .limitsExceeded, "\(Self.exchangesAtOnce) exports or imports are under way: try again later")
        }
        exchangesUnderWay.insert(call.sender)
    }

    /// Ends what ``beginExchange(_:)`` counted, at `call`'s reply (any reply: other calls count nothing).
    func endExchange(_ call: DBusMethodCall) {
        guard call.message.interface == Keychain1Interface.interface,
            ["Export", "Import", "ImportKeyring"].contains(call.message.member)
        else { return }
        exchangesUnderWay.remove(call.sender)
    }

    /// `Export(keychains as, recipients as, passphrase ay, unencrypted b) → (file ay, items u, leftOut u)`: the keychains named (every
    /// keychain held in a file when none is), to the age recipients given, else to the passphrase (sealed under
    /// the session), else, with `unencrypted`, in clear.
    func export(
        keychains names: [String], recipients: [String], passphrase: [UInt8], unencrypted: Bool,
        call: DBusMethodCall
    ) throws(DBusError) -> DBusMethodResult {
        defer { wipeSharedStorage(of: passphrase) }
        try refuse(unlessAllowed: .exportItems, by: call.sender)
        guard !isWaitingForConfirmation(call.sender) else {
            throw DBusError(.accessDenied, "a confirmation asked by this caller is still waiting for the person")
        }
        let session = keychainSession(of: call.sender)
        let protection: ExportProtection
        switch (recipients.isEmpty, passphrase.isEmpty, unencrypted) {
        case (false, true, false):
            do throws(AgeError) {
                protection = .recipients(
                    try recipients.map { (text) throws(AgeError) in try AgeRecipient(parsing: text) })
            } catch {
                throw DBusError(.invalidArgs, error.message)
            }
        case (true, false, false):
            // A passphrase crosses the bus only sealed: a bus monitor (any process of the user may be one) would
            // otherwise see it, and the file it opens.
            guard session.isSealing else {
                throw DBusError(.accessDenied, "a passphrase crosses the bus only in a Keychain1 session (OpenSession)")
            }
            let secret = try session.unseal(passphrase)
            guard secret.count > 0 else { throw DBusError(.invalidArgs, "the passphrase is empty") }
            protection = .passphrase(secret)
        case (true, true, true):
            // The file is every secret in clear: it crosses the bus only sealed under the caller's session.
            guard session.isSealing else {
                throw DBusError(.accessDenied, "an unencrypted export needs a Keychain1 session (OpenSession)")
            }
            protection = .none
        default:
            throw DBusError(.invalidArgs, "give recipients, or a passphrase, or unencrypted: exactly one")
        }
        let held: [HeldKeychain]
        if names.isEmpty {
            held = registry.keychains.filter { !$0.keychain.path.isEmpty && $0.id != KeychainRegistry.sessionID }
        } else {
            held = try names.map { (name) throws(DBusError) in
                guard let found = registry.keychain(id: name) else {
                    throw Keychain1Interface.dbusError(KeychainError(.noSuchKeychain, "no keychain '\(name)'"))
                }
                return found
            }
        }
        guard !held.isEmpty else {
            throw Keychain1Interface.dbusError(KeychainError(.noSuchKeychain, "no keychain to export"))
        }
        let requester = application(of: call.sender)?.description
        try beginExchange(call)
        _ = trackConfirmation(
            for: call,
            { [self] completion in
                registry.confirmExport(
                    of: held, itemCount: { Self.itemCount(of: held) }, encrypted: protection.isEncrypted,
                    requester: requester, client: promptClient(of: call.sender), completion: completion)
            },
            completion: { [self] outcome in
                if case .failure(let error) = outcome {
                    return reply(to: call, .failure(Keychain1Interface.dbusError(error)))
                }
                let sources = held.map { (name: $0.id, keychain: $0.keychain) }
                registry.offLoop({ () -> Result<(SharedSecret, Int, Int), KeychainError> in
                    Result { () throws(KeychainError) in
                        let keychains = try sources.map { (source) throws(KeychainError) in
                            ExportedKeychain(name: source.name, items: try ExchangeExport.items(of: source.keychain))
                        }
                        let file = try ExchangeExport.file(
                            of: keychains, protection: protection, scrypt: ExchangeExport.scryptInDeriver)
                        return (file.bytes, file.itemCount, file.leftOut)
                    }
                }) { [self] result in
                    switch result {
                    case .failure(let error): reply(to: call, .failure(Keychain1Interface.dbusError(error)))
                    case .success(let (file, count, leftOut)):
                        do throws(DBusError) {
                            let sealed = try file.withUnsafeBytes { (bytes) throws(DBusError) in try session.seal(bytes)
                            }
                            reply(
                                to: call,
                                .success([
                                    .bytes(sealed), .uint32(UInt32(clamping: count)),
                                    .uint32(UInt32(clamping: leftOut)),
                                ]))
                        } catch {
                            reply(to: call, .failure(error))
                        }
                    }
                }
            })
        return .deferred
    }

    /// `Import(file ay, key ay, keyKind s, dryRun b, replace b) → summary a{sv}` into `held`: the file (sealed
    /// under the session) opened with the key (`passphrase`, `identity`: the age identity file; `none`), its
    /// items added in one transaction. A dry run asks nothing and writes nothing.
    func importFile(
        _ sealedFile: [UInt8], key sealedKey: [UInt8], keyKind: String, dryRun: Bool, replace: Bool,
        into held: HeldKeychain, call: DBusMethodCall
    ) throws(DBusError) -> DBusMethodResult {
        defer {
            wipeSharedStorage(of: sealedKey)
            wipeSharedStorage(of: sealedFile)
        }
        let session = try importingSession(of: call, fileBytes: sealedFile.count)
        let file = try session.unseal(sealedFile)
        let key: ImportKey
        switch keyKind {
        case "passphrase": key = .passphrase(try session.unseal(sealedKey))
        case "identity": key = .identities(try session.unseal(sealedKey))
        case "none": key = .none
        default: throw DBusError(.invalidArgs, "keyKind is passphrase, identity or none")
        }
        let limits = limits
        let keychain = held.keychain
        // Read once (one scrypt for a passphrase file), tried as a dry run; once the person said yes to what it
        // would do, that same reading is written, and only if it adds and replaces exactly what was shown.
        return try importPlanned(into: held, dryRun: dryRun, source: "a file", command: "latchkey import", call: call) {
            () throws(KeychainError) -> PlannedImport in
            let reading = try ExchangeImport.read(file, key: key, scrypt: ExchangeExport.scryptInDeriver)
            for item in reading.items { try Self.checkImported(item, limits: limits) }
            let (planned, bytes) = try ExchangeImport.plan(reading, in: keychain, replacing: replace)
            return PlannedImport(summary: planned, bytes: bytes) { () throws(KeychainError) in
                try ExchangeImport.add(reading, to: keychain, replacing: replace, approved: planned)
            }
        }
    }

    /// `ImportKeyring(file ay, password ay, path s, modified t, dryRun b) → summary a{sv}` into `held`: a
    /// gnome-keyring keyring file the client read at `path` (the daemon never opens it), modified then (Unix
    /// seconds), both the file and its password (empty for a keyring without one) sealed under the session;
    /// its items and the import record the first-login import keeps (so neither imports it again) added in one
    /// transaction, as `latchkey import-gnome-keyring` does on a keychain file. A file imported before (same
    /// path, same contents) adds nothing: every item is reported as a duplicate.
    func importKeyring(
        _ sealedFile: [UInt8], password sealedPassword: [UInt8], path: String, modified: UInt64, dryRun: Bool,
        into held: HeldKeychain, call: DBusMethodCall
    ) throws(DBusError) -> DBusMethodResult {
        defer {
            wipeSharedStorage(of: sealedPassword)
            wipeSharedStorage(of: sealedFile)
        }
        // Refused to a Flatpak application or an unidentified caller before anything is looked at.
        try refuse(unlessAllowed: .importItems, by: call.sender)
        // The path names the file in the record and in messages: one line, absolute.
        guard path.hasPrefix("/"), path.utf8.count <= 4096, !path.unicodeScalars.contains(where: { $0.value < 0x20 })
        else { throw DBusError(.invalidArgs, "path is the keyring file's absolute path, on one line") }
        let session = try importingSession(of: call, fileBytes: sealedFile.count)
        let file = try session.unseal(sealedFile)
        let password = try session.unseal(sealedPassword)
        let limits = limits
        let keychain = held.keychain
        // A collection made for the keyring (no records, no source yet) remembers it, as the login import's do.
        let recordSource =
            keychain.parentIdentifier != nil
            && (try? keychain.metadata(GnomeKeyringImporter.sourceName)) == nil
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return try importPlanned(
            into: held, dryRun: dryRun, source: "the gnome-keyring keyring “\(PromptText.field(name, bytes: 60))”",
            command: "latchkey import-gnome-keyring", call: call
        ) { () throws(KeychainError) -> PlannedImport in
            // The file's bytes leave secret memory only to be read (a keyring without a password is plain text,
            // secrets in clear), and its items' secrets as they are read: both wiped, in the storage every copy
            // shares (the plan's file and keyring too), as soon as the plan is made, before anyone is asked.
            let contents = file.withUnsafeBytes { [UInt8]($0) }
            var read: GnomeKeyring?
            defer {
                wipeSharedStorage(of: contents)
                for item in read?.items ?? [] { wipeSharedStorage(of: item.secret) }
            }
            let keyring: GnomeKeyring
            let opened = KeyringFile(path: path, bytes: contents, modified: modified)
            do throws(GnomeKeyringImport.GnomeKeyringError) {
                var copy = password.withUnsafeBytes { [UInt8]($0) }
                defer { wipeBytes(&copy) }
                keyring = try opened.keyring(password: copy)
                read = keyring
            } catch {
                throw KeychainError(error.kind == .wrongPassword ? .authFailed : .decode, error.description)
            }
            // Until the person answered, only the items to add keep their secrets, wiped when the plan goes.
            let held = KeptKeyringPlan(try GnomeKeyringImporter.plan(keyring, from: opened, in: keychain))
            let planned = held.plan
            for item in planned.added { try Self.checkImported(item, limits: limits) }
            let labels = planned.earlier == nil ? planned.present : keyring.items.map(\.label)
            let summary = ImportSummary(
                format: "gnome-keyring", added: planned.added.count, replaced: 0, duplicates: labels, skipped: [],
                dryRun: true)
            return PlannedImport(summary: summary, bytes: ExchangeImport.estimatedBytes(of: planned.added)) {
                () throws(KeychainError) in
                guard held.plan.earlier == nil else { return summary }
                let record = try GnomeKeyringImporter.apply(held.plan, into: keychain, source: recordSource)
                return ImportSummary(
                    format: "gnome-keyring", added: record.added, replaced: 0, duplicates: planned.present,
                    skipped: [], dryRun: false)
            }
        }
    }

    /// The caller's `Keychain1` session, for an import of a file of `fileBytes` sealed bytes: refused to a Flatpak
    /// application or an unidentified caller, to one with a confirmation waiting, to a file too large, and without
    /// a session that seals (the file holds secrets, or the key that opens it comes with it).
    private func importingSession(of call: DBusMethodCall, fileBytes: Int) throws(DBusError) -> SecretSession {
        try refuse(unlessAllowed: .importItems, by: call.sender)
        guard !isWaitingForConfirmation(call.sender) else {
            throw DBusError(.accessDenied, "a confirmation asked by this caller is still waiting for the person")
        }
        guard fileBytes <= ExchangeImport.maximumFileBytes + SecretSession.sealingOverhead else {
            throw Keychain1Interface.dbusError(
                KeychainError(.dataTooLarge, "the file is larger than \(ExchangeImport.maximumFileBytes >> 20) MiB"))
        }
        let session = keychainSession(of: call.sender)
        guard session.isSealing else {
            throw DBusError(.accessDenied, "a file to import crosses the bus only in a Keychain1 session (OpenSession)")
        }
        return session
    }

    /// Runs an import into `held`: `plan` on the worker (after the usual unlock prompt when `held` is locked);
    /// then, unless a dry run or nothing to write, the collection's quotas checked against what it adds, the person
    /// asked about exactly those counts, and the plan's own `apply` (on the worker) writes what was shown.
    private func importPlanned(
        into held: HeldKeychain, dryRun: Bool, source: String, command: String, call: DBusMethodCall,
        plan: @escaping @Sendable () throws(KeychainError) -> PlannedImport
    ) throws(DBusError) -> DBusMethodResult {
        let limits = limits
        let requester = application(of: call.sender)?.description
        let client = promptClient(of: call.sender)
        let keychain = held.keychain
        let fail = { [self] (error: KeychainError) in reply(to: call, .failure(Keychain1Interface.dbusError(error))) }
        let finish = { [self] (summary: ImportSummary) in
            if !summary.dryRun && summary.added + summary.replaced > 0 { itemsChanged(in: held) }
            reply(to: call, .success([Keychain1Interface.encode(summary)]))
        }
        let proceed = { [self] in
            registry.offLoop(
                { Result { () throws(KeychainError) in try plan() } },
                then: { [self] tried in
                    let planned: PlannedImport
                    switch tried {
                    case .failure(let error): return fail(error)
                    case .success(let plan): planned = plan
                    }
                    let total = planned.summary.added + planned.summary.replaced
                    guard !dryRun, total > 0 else {
                        var summary = planned.summary
                        summary.dryRun = dryRun
                        return finish(summary)
                    }
                    do throws(DBusError) {
                        let usage = try Result { () throws(KeychainError) in try keychain.usage() }
                            .mapError(Keychain1Interface.dbusError).get()
                        try limits.check(
                            usage: (usage.items + planned.summary.added - 1, usage.bytes), adding: planned.bytes,
                            isNew: true, in: held.path)
                    } catch {
                        return reply(to: call, .failure(error))
                    }
                    _ = trackConfirmation(
                        for: call,
                        { completion in
                            registry.confirmImport(
                                into: held, adding: total, replacing: planned.summary.replaced, from: source,
                                command: command, requester: requester, client: client, completion: completion)
                        },
                        completion: { [self] outcome in
                            if case .failure(let error) = outcome { return fail(error) }
                            let apply = planned.apply
                            registry.offLoop({ Result { () throws(KeychainError) in try apply() } }) { result in
                                switch result {
                                case .failure(let error): fail(error)
                                case .success(let summary): finish(summary)
                                }
                            }
                        })
                })
        }
        try beginExchange(call)
        guard held.isLocked else {
            proceed()
            return .deferred
        }
        // Locked: the person unlocks it first (the usual prompt), then the file is read.
        _ = trackConfirmation(
            for: call,
            { [self] completion in
                registry.promptForPasswords(unlocking: [held]) { unlocked in
                    completion(
                        unlocked && !held.isLocked
                            ? .success(()) : .failure(KeychainError(.userCanceled, "the keychain was not unlocked")))
                }
            },
            completion: { outcome in
                if case .failure(let error) = outcome { return fail(error) }
                proceed()
            })
        return .deferred
    }

    /// How many items `keychains` hold (references only: no secret is opened to count).
    private static func itemCount(of keychains: [HeldKeychain]) -> Int {
        keychains.reduce(0) { total, held in
            total
                + ItemClass.allCases.reduce(0) { count, itemClass in
                    let query = ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: [.reference])
                    return count + ((try? held.keychain.items(matching: query).count) ?? 0)
                }
        }
    }

    /// The bounds an item added through `Keychain1.Add` keeps, for an item of a file.
    private static func checkImported(_ item: NewItem, limits: InputLimits) throws(KeychainError) {
        guard (item.secret?.count ?? 0) <= limits.secretBytes else {
            throw KeychainError(
                .dataTooLarge, "an item of the file has a secret larger than \(limits.secretBytes) bytes")
        }
        do {
            try limits.check(item.attributes)
        } catch {
            throw KeychainError(error.status, "an item of the file: \(error.reason)")
        }
    }
}

/// A keyring import's plan as kept until the person answered: its items to add, secrets and all, wiped in place
/// when the last reference goes (the import written, refused, or its caller gone). Read only meanwhile (on the
/// worker, one at a time); written only by `deinit`, when nothing else holds it.
private final class KeptKeyringPlan: @unchecked Sendable {
    /// The plan.
    private(set) var plan: KeyringImportPlan

    /// Keeps `plan`.
    init(_ plan: KeyringImportPlan) { self.plan = plan }

    deinit {
        for index in plan.added.indices { plan.added[index].secret?.withUnsafeMutableBytes { wipeBytes($0) } }
    }
}

/// An import worked out on the worker, written nothing yet: what it would do, what it adds to the collection's
/// bytes, and how to write exactly that once the person allowed it.
struct PlannedImport: Sendable {
    /// What it would do (a dry run's summary).
    var summary: ImportSummary
    /// The bytes it adds (``ExchangeImport/estimatedBytes(of:)``).
    var bytes: Int
    /// Writes what `summary` says, in one transaction, or nothing.
    var apply: @Sendable () throws(KeychainError) -> ImportSummary
}
