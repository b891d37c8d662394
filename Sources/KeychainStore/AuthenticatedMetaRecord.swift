import FoundationEssentials
import KeychainCore

/// A value kept in `meta` in clear (it is read while the keychain is locked) beside a MAC that binds it to
/// the keychain: an AES-256-GCM tag under the keychain key over `purpose`, the keychain's identity and the
/// value. An edit of the value, a row removed, or rows copied from another keychain fail the check. The
/// settings (``SettingsRecord``) and the access policy (``AccessPolicyRecord``) are kept this way.
struct AuthenticatedMetaRecord: Sendable {
    /// The row holding the value.
    let valueName: String
    /// The row holding the MAC.
    let macName: String
    /// What the value is, bound into the MAC (a MAC of one record never checks out as another's).
    let purpose: String

    /// The two rows as the file holds them (nil where a row is missing).
    func load(from db: SQLiteDatabase) throws(KeychainError) -> (encoded: Data?, mac: Data?) {
        try db.withStatement("SELECT name, value FROM meta WHERE name IN (\(valueName), \(macName))") {
            (select) throws(KeychainError) in
            var rows: (encoded: Data?, mac: Data?) = (nil, nil)
            while try select.step() {
                if select.string(0) == valueName { rows.encoded = select.data(1) ?? Data() }
                if select.string(0) == macName { rows.mac = select.data(1) ?? Data() }
            }
            return rows
        }
    }

    /// Writes `encoded` with its MAC (the caller holds a transaction).
    func save(_ encoded: Data, key: SecretKey, keychain: Data, _ db: SQLiteDatabase) throws(KeychainError) {
        let mac = try AuthenticatedCipher.seal(Data(), key: key, context: context(keychain, encoded))
        try db.setMetaRow(valueName, encoded)
        try db.setMetaRow(macName, mac)
    }

    /// Whether `mac` is this record's MAC of `encoded` for `keychain` under `key`.
    func isAuthentic(_ encoded: Data, mac: Data, key: SecretKey, keychain: Data) -> Bool {
        (try? AuthenticatedCipher.open(mac, key: key, context: context(keychain, encoded))) != nil
    }

    private func context(_ keychain: Data, _ encoded: Data) -> Data {
        ItemSealing.metaRecord(purpose: purpose, keychain: keychain, value: encoded)
    }
}
