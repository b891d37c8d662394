import FoundationEssentials
import KeychainCore
import KeychainStore

/// What an import keeps in the keychain it wrote (a metadata row of JSON records, one per file imported),
/// so that no file is imported twice: gnome-keyring's keyrings and KWallet's wallets alike.
package enum ImportRecords {
    /// The records of type `Record` in `keychain`'s metadata row `name` (readable while it is locked); none when
    /// the row is missing; `.decode` naming `source` when it is damaged.
    package static func load<Record: Decodable>(
        _ type: Record.Type, named name: String, in keychain: Keychain, source: String
    ) throws(KeychainError) -> [Record] {
        guard let data = try keychain.metadata(name) else { return [] }
        do {
            return try JSONDecoder().decode([Record].self, from: data)
        } catch {
            throw KeychainError(.decode, "the keychain's \(source) import records are damaged: \(error)")
        }
    }

    /// Adds `items` to `keychain` together with `records` (the earlier ones and this import's) in the metadata
    /// row `name` (and the metadata rows `also`): one transaction, so the items are there exactly when the record
    /// says so.
    package static func add<Record: Encodable>(
        _ items: [NewItem], recording records: [Record], named name: String, in keychain: Keychain,
        also: [String: Data] = [:]
    ) throws(KeychainError) {
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(records)
        } catch {
            throw KeychainError(.internalComponent, "cannot encode the import records: \(error)")
        }
        try keychain.add(items, metadata: also.merging([name: encoded]) { _, record in record })
    }
}
