import AgeEncryption
import CredentialExchange
import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// How an export's file is protected (docs/export-import.md).
package enum ExportProtection: Sendable {
    /// age with a passphrase (scrypt, age's work factor 18).
    case passphrase(SharedSecret)
    /// age to X25519 recipients (`age1…`).
    case recipients([AgeRecipient])
    /// No encryption: the CXF JSON as it is (`--unencrypted`).
    case none

    /// Whether the file is encrypted.
    package var isEncrypted: Bool {
        if case .none = self { return false }
        return true
    }
}

/// An export's file and what went into it.
package struct ExportedFile: Sendable {
    /// The file's bytes: an age file, or, unencrypted, the CXF JSON (in secret memory either way).
    package let bytes: SharedSecret
    /// How many items it holds.
    package let itemCount: Int
    /// How many items were left out: `…ThisDeviceOnly` items never leave the machine.
    package let leftOut: Int
}

/// Writes keychains into a CXF 1.0 document, encrypted with age unless asked not to: the one way an export is
/// made, by the daemon (`Keychain1.Export`) and by `latchkey export` on a keychain file alike.
package enum ExchangeExport {
    /// The name the file gives as its exporter.
    package static let exporter = "Latchkey"

    /// Every item of `keychain` with its attributes, its secret in secret memory.
    package static func items(of keychain: Keychain) throws(KeychainError) -> [(
        item: KeychainItem, secret: SharedSecret?
    )] {
        var all: [(item: KeychainItem, secret: SharedSecret?)] = []
        for itemClass in ItemClass.allCases {
            let query = ItemQuery(
                itemClass, synchronizable: .any, limit: .all, returning: [.attributes, .data, .reference])
            all += try keychain.itemsWithSecrets(matching: query)
        }
        return all
    }

    /// The file of `keychains` (each a name and its items, as ``items(of:)`` reads them), protected as asked.
    package static func file(
        of keychains: [ExportedKeychain], protection: ExportProtection, at date: Date = Date(),
        scrypt: AgeFile.ScryptFunction = AgeFile.scryptInThisProcess
    ) throws(KeychainError) -> ExportedFile {
        let total = keychains.reduce(0) { $0 + $1.items.count }
        let encoded: CXFExport
        do throws(ExchangeError) {
            encoded = try CXFDocument.encode(keychains, exporter: exporter, at: date)
        } catch {
            throw KeychainError(.internalComponent, "cannot write the CXF document: \(error.message)")
        }
        let leftOut = encoded.leftOut
        let sealed: [UInt8]
        do throws(AgeError) {
            switch protection {
            case .none:
                // Copied within secret memory: a value of another module's noncopyable type is not taken apart.
                let bytes: SecretBytes
                do {
                    bytes = try encoded.document.withUnsafeBytes { (raw) throws(SecretMemoryError) in
                        try SecretBytes(copying: raw)
                    }
                } catch {
                    throw AgeError(.noSecretMemory, "no secret memory for the export: \(error)")
                }
                return ExportedFile(bytes: SharedSecret(bytes), itemCount: total - leftOut, leftOut: leftOut)
            case .passphrase(let passphrase):
                sealed = try AgeFile.encrypt(encoded.document, passphrase: passphrase.bytes, scrypt: scrypt)
            case .recipients(let recipients):
                sealed = try AgeFile.encrypt(encoded.document, to: recipients)
            }
        } catch {
            throw ExchangeErrors.keychainError(error)
        }
        do {
            return ExportedFile(bytes: try SharedSecret(copying: sealed), itemCount: total - leftOut, leftOut: leftOut)
        } catch {
            throw KeychainError(.allocate, "no secret memory for the export: \(error)")
        }
    }
}

extension ExchangeExport {
    /// age's passphrase scrypt in a worker of the daemon's deriver (so that its 256 MiB are not the daemon's
    /// own: docs/threat-model.md, "scrypt in a process of its own"), or in this process when none serves.
    package static func scryptInDeriver(passphrase: borrowing SecretBytes, salt: [UInt8], logN: Int)
        throws(AgeError) -> SecretBytes
    {
        let derived: SecretBytes?
        do throws(KeychainError) {
            derived = try KeyDerivationProcess.deriveAgeKey(logN: logN, password: passphrase, salt: salt)
        } catch {
            throw AgeError(.cryptoFailure, "the key derivation failed: \(error.reason)")
        }
        if let derived { return derived }
        return try AgeFile.scryptInThisProcess(passphrase: passphrase, salt: salt, logN: logN)
    }
}
