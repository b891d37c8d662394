import AgeEncryption
import CredentialExchange
import FoundationEssentials
import Keychain1
import KeychainCore
import KeychainStore
import Posix

/// What opens an import's file.
package enum ImportKey: Sendable {
    /// The passphrase of an age file made with `age -p` (or `latchkey export`).
    case passphrase(SharedSecret)
    /// An age identity file (`AGE-SECRET-KEY-1…` lines) for a file made with `age -r`.
    case identities(SharedSecret)
    /// Nothing: the file is plain CXF JSON or a password CSV.
    case none
}

/// What a file to import needs to be opened.
package enum ImportFileKind: String, Sendable {
    /// An age file encrypted to a passphrase.
    case agePassphrase = "age-passphrase"
    /// An age file encrypted to recipients: needs an identity.
    case ageRecipients = "age-recipients"
    /// Not an age file: CXF JSON or a CSV, read as it is.
    case plain
}

/// Reads an exchange file (age-encrypted or not; CXF JSON or a known CSV) and adds its items to a keychain in
/// one transaction: the one way an import is made, by the daemon (`Keychain1.Import`) and by `latchkey import`
/// on a keychain file alike. Every failure is one line, and leaves the keychain as it was.
package enum ExchangeImport {
    /// The largest file read (a 10,000-item export is about 5 MB).
    package static let maximumFileBytes = 64 << 20
    /// The highest scrypt work factor (log2 N) of a passphrase file opened: age's default, 256 MiB.
    package static let maximumWorkFactor = 18

    /// What `file` needs: a passphrase, an identity, or nothing; an error for an age file that cannot be opened.
    package static func kind(of file: SharedSecret) throws(KeychainError) -> ImportFileKind {
        guard let encrypted = ageBytes(of: file) else { return .plain }
        switch AgeFile.requirement(of: encrypted) {
        case nil: return .plain
        case .passphrase?: return .agePassphrase
        case .identity?: return .ageRecipients
        case .unreadable(let error)?: throw ExchangeErrors.keychainError(error)
        }
    }

    /// The credentials of `file`, opened with `key`.
    package static func read(
        _ file: SharedSecret, key: ImportKey, scrypt: AgeFile.ScryptFunction = AgeFile.scryptInThisProcess
    ) throws(KeychainError) -> ExchangeReading {
        guard file.count <= maximumFileBytes else {
            throw KeychainError(.dataTooLarge, "the file is larger than \(maximumFileBytes >> 20) MiB")
        }
        let kind = try kind(of: file)
        // An age file is ciphertext: read as plain bytes. Anything else is read where it is, in secret memory.
        guard kind != .plain, let encrypted = ageBytes(of: file) else { return try decode(file.bytes) }
        switch (kind, key) {
        case (.agePassphrase, .passphrase), (.ageRecipients, .identities): break
        case (.agePassphrase, _): throw KeychainError(.authFailed, "the file is encrypted with a passphrase")
        default: throw KeychainError(.authFailed, "the file is encrypted to an age recipient: give its --identity")
        }
        let plain: SecretBytes
        do throws(AgeError) {
            if case .passphrase(let passphrase) = key {
                plain = try AgeFile.decrypt(
                    encrypted, passphrase: passphrase.bytes, maximumWorkFactor: maximumWorkFactor, scrypt: scrypt)
            } else if case .identities(let keyFile) = key {
                let identities = try AgeIdentities(parsingKeyFile: keyFile.bytes)
                plain = try AgeFile.decrypt(encrypted, identities: identities)
            } else {
                throw AgeError(.invalidArgument, "no key for the file")
            }
        } catch {
            throw ExchangeErrors.keychainError(error)
        }
        return try decode(plain)
    }

    /// The CXF document or CSV file in `plain`.
    private static func decode(_ plain: borrowing SecretBytes) throws(KeychainError) -> ExchangeReading {
        do {
            return try ExchangeFile.decode(plain)
        } catch {
            throw ExchangeErrors.keychainError(error)
        }
    }

    /// `file` as bytes when it starts as an age file does (binary or armored), else nil (it stays in secret memory).
    private static func ageBytes(of file: SharedSecret) -> [UInt8]? {
        let isAge = file.withUnsafeBytes { bytes in
            ageMagics.contains { magic in bytes.starts(with: magic.utf8) }
        }
        return isAge ? file.withUnsafeBytes { [UInt8]($0) } : nil
    }

    /// How an age file starts: the binary header, the armor.
    private static let ageMagics = ["age-encryption.org/", "-----BEGIN AGE ENCRYPTED FILE-----"]

    /// Adds `reading`'s items to `keychain` in one transaction (``Keychain/importItems(_:replacing:dryRun:expecting:)``):
    /// duplicates by primary key are reported, or replaced with `replacing`; `dryRun` writes nothing; with
    /// `approved` (a dry run's summary the person said yes to), nothing is written unless it adds and replaces
    /// exactly as many items. (No item of a reading carries `lk:portal-key`: the CXF reader drops it, so a file
    /// cannot choose an application's key.)
    package static func add(
        _ reading: ExchangeReading, to keychain: Keychain, replacing: Bool, dryRun: Bool = false,
        approved: ImportSummary? = nil
    ) throws(KeychainError) -> ImportSummary {
        try tried(reading, in: keychain, replacing: replacing, dryRun: dryRun, approved: approved).summary
    }

    /// What adding `reading`'s items to `keychain` would do, written nothing, and the bytes the items it adds or
    /// puts in place take (their secrets and attribute text, as a collection's byte quota counts them).
    package static func plan(
        _ reading: ExchangeReading, in keychain: Keychain, replacing: Bool
    ) throws(KeychainError) -> (summary: ImportSummary, bytes: Int) {
        let (summary, written) = try tried(reading, in: keychain, replacing: replacing, dryRun: true, approved: nil)
        return (summary, estimatedBytes(of: written))
    }

    /// The bytes `items` take as a collection's byte quota counts them: each secret and its attributes' text.
    package static func estimatedBytes(of items: [NewItem]) -> Int {
        items.reduce(0) { total, item in
            item.attributes.reduce(total + (item.secret?.count ?? 0)) { sum, attribute in
                let value: Int
                switch attribute.value {
                case .string(let text): value = text.utf8.count
                case .data(let bytes): value = bytes.count
                default: value = 8
                }
                return sum + attribute.key.rawValue.utf8.count + value
            }
        }
    }

    private static func tried(
        _ reading: ExchangeReading, in keychain: Keychain, replacing: Bool, dryRun: Bool, approved: ImportSummary?
    ) throws(KeychainError) -> (summary: ImportSummary, written: [NewItem]) {
        let items = reading.items
        let outcome = try keychain.importItems(
            items, replacing: replacing, dryRun: dryRun, expecting: approved.map { ($0.added, $0.replaced) })
        let duplicates = zip(items, outcome.dispositions).filter { $0.1 == .duplicate }.map { (item, _) in
            if case .string(let label)? = item.attributes[.label] { return label }
            return "(no label)"
        }
        let written = zip(items, outcome.dispositions).filter { $0.1 != .duplicate }.map(\.0)
        let summary = ImportSummary(
            format: reading.format, added: outcome.added, replaced: outcome.replaced, duplicates: duplicates,
            skipped: reading.skipped, dryRun: dryRun)
        return (summary, written)
    }
}

/// The keychain errors the format targets' errors become: a wrong passphrase or key `errSecAuthFailed`, a
/// damaged or unknown file `errSecDecode`, a file too large `errSecDataTooLarge`; the message stays one line.
enum ExchangeErrors {
    static func keychainError(_ error: AgeError) -> KeychainError {
        switch error.kind {
        case .wrongPassphrase, .noMatchingIdentity: KeychainError(.authFailed, error.message)
        case .tooLarge, .workFactorTooHigh: KeychainError(.dataTooLarge, error.message)
        case .invalidRecipient, .invalidIdentity, .invalidArgument: KeychainError(.param, error.message)
        case .noSecretMemory: KeychainError(.allocate, error.message)
        default: KeychainError(.decode, error.message)
        }
    }

    static func keychainError(_ error: ExchangeError) -> KeychainError {
        switch error.kind {
        case .tooLarge: KeychainError(.dataTooLarge, error.message)
        case .outOfMemory: KeychainError(.allocate, error.message)
        default: KeychainError(.decode, error.message)
        }
    }
}
