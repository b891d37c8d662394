import AccessControl
import AgeEncryption
import CredentialExchange
import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import KeychainExchange
import KeychainRegistry
import KeychainStore
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
            call.message.member == "Export" || call.message.member == "Import"
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
        try refuse(unlessAllowed: .importItems, by: call.sender)
        guard !isWaitingForConfirmation(call.sender) else {
            throw DBusError(.accessDenied, "a confirmation asked by this caller is still waiting for the person")
        }
        guard sealedFile.count <= ExchangeImport.maximumFileBytes + SecretSession.sealingOverhead else {
            throw Keychain1Interface.dbusError(
                KeychainError(.dataTooLarge, "the file is larger than \(ExchangeImport.maximumFileBytes >> 20) MiB"))
        }
        let session = keychainSession(of: call.sender)
        // The file holds secrets (or is opened by the key that comes with it): both cross the bus only sealed.
        guard session.isSealing else {
            throw DBusError(.accessDenied, "a file to import crosses the bus only in a Keychain1 session (OpenSession)")
        }
        let file = try session.unseal(sealedFile)
        let key: ImportKey
        switch keyKind {
        case "passphrase": key = .passphrase(try session.unseal(sealedKey))
        case "identity": key = .identities(try session.unseal(sealedKey))
        case "none": key = .none
        default: throw DBusError(.invalidArgs, "keyKind is passphrase, identity or none")
        }
        let limits = limits
        let requester = application(of: call.sender)?.description
        let client = promptClient(of: call.sender)
        let keychain = held.keychain
        // Read and tried as a dry run first (on the worker): the person is asked about what the file holds.
        let run = { [self] (dry: Bool, then: @escaping (Result<ImportSummary, KeychainError>) -> Void) in
            registry.offLoop(
                { () -> Result<ImportSummary, KeychainError> in
                    Result { () throws(KeychainError) in
                        let reading = try ExchangeImport.read(file, key: key, scrypt: ExchangeExport.scryptInDeriver)
                        for item in reading.items { try Self.checkImported(item, limits: limits) }
                        return try ExchangeImport.add(reading, to: keychain, replacing: replace, dryRun: dry)
                    }
                }, then: then)
        }
        let fail = { [self] (error: KeychainError) in reply(to: call, .failure(Keychain1Interface.dbusError(error))) }
        let finish = { [self] (result: Result<ImportSummary, KeychainError>) in
            switch result {
            case .failure(let error): fail(error)
            case .success(let summary):
                if !summary.dryRun && summary.added + summary.replaced > 0 { itemsChanged(in: held) }
                reply(to: call, .success([Keychain1Interface.encode(summary)]))
            }
        }
        // Tried as a dry run first, then, once the person said yes to what it would do, for real.
        let proceed = { [self] in
            run(true) { [self] trial in
                guard case .success(let planned) = trial, !dryRun else { return finish(trial) }
                let total = planned.added + planned.replaced
                guard total > 0 else { return finish(trial) }
                do throws(DBusError) {
                    let usage = try Result { () throws(KeychainError) in try keychain.usage() }
                        .mapError(Keychain1Interface.dbusError).get()
                    try limits.check(
                        usage: (usage.items + planned.added - 1, usage.bytes), adding: 0, isNew: true,
                        in: held.path)
                } catch {
                    return reply(to: call, .failure(error))
                }
                _ = trackConfirmation(
                    for: call,
                    { completion in
                        registry.confirmImport(
                            into: held, adding: total, replacing: planned.replaced, requester: requester,
                            client: client, completion: completion)
                    },
                    completion: { outcome in
                        if case .failure(let error) = outcome { return fail(error) }
                        run(false, finish)
                    })
            }
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
