import FoundationEssentials
import KeychainCore

/// The access-policy rows of `meta`: `x-access-policy` (the policy's name, `prompt` or `allow-all`, in clear)
/// and `access_policy_mac` (an AES-256-GCM tag under the keychain key over the keychain identity and those
/// bytes). Neither row: the default, ``KeychainAccessPolicy/prompt``. Written together, only while unlocked.
enum AccessPolicyRecord {
    static let record = AuthenticatedMetaRecord(
        valueName: "x-access-policy", macName: "access_policy_mac", purpose: "latchkey access policy v1")

    /// Writes `policy` with its MAC, in one transaction.
    static func save(_ policy: KeychainAccessPolicy, key: SecretKey, keychain: Data, _ db: SQLiteDatabase)
        throws(KeychainError)
    {
        try db.transaction { () throws(KeychainError) in
            try record.save(Data(policy.rawValue.utf8), key: key, keychain: keychain, db)
        }
    }

    /// The policy the rows name, unchecked: nil when only one row is there or the name is not known.
    static func named(_ rows: (encoded: Data?, mac: Data?)) -> KeychainAccessPolicy?? {
        guard rows.encoded != nil || rows.mac != nil else { return .some(nil) }
        guard let encoded = rows.encoded, rows.mac != nil,
            let policy = KeychainAccessPolicy(rawValue: String(decoding: encoded, as: UTF8.self))
        else { return nil }
        return .some(policy)
    }

    /// The policy the rows hold, checked under `key` (the default when neither row is there); `errSecDecode`
    /// when one row is missing, the name unknown or the MAC does not match (altered, or rows of another
    /// keychain).
    static func verified(_ rows: (encoded: Data?, mac: Data?), key: SecretKey, keychain: Data) throws(KeychainError)
        -> KeychainAccessPolicy
    {
        guard let encoded = rows.encoded, let mac = rows.mac else {
            guard rows.encoded == nil, rows.mac == nil else { throw altered }
            return .prompt
        }
        guard record.isAuthentic(encoded, mac: mac, key: key, keychain: keychain) else { throw altered }
        guard let policy = KeychainAccessPolicy(rawValue: String(decoding: encoded, as: UTF8.self)) else {
            throw KeychainError(.decode, "the keychain's access policy is not one this version knows")
        }
        return policy
    }

    static let altered = KeychainError(
        .decode, "the keychain's access policy was altered outside Latchkey (a row missing, or its MAC does not match)")

}

extension Keychain {
    /// Whether the keychain asks before handing a secret to an application its item does not trust, checked
    /// under the keychain key: ``KeychainAccessPolicy/prompt`` when none was stored (new keychains, and those
    /// made before there was a choice).
    ///
    /// - Throws: `errSecDecode` when the stored policy was altered, removed in part, or copied from another
    ///   keychain (treat the keychain as ``KeychainAccessPolicy/prompt``, never as allowing all);
    ///   `errSecInteractionNotAllowed` while locked: the policy only matters when a secret is handed out, which
    ///   needs the key anyway (``storedAccessPolicy()`` shows it unchecked).
    ///
    /// While locked with the keys of classes that outlast a lock held (`AfterFirstUnlock` items can be read), it
    /// is the policy checked when the keychain locked, as long as the file's rows are still those it checked.
    public func accessPolicy() throws(KeychainError) -> KeychainAccessPolicy {
        let identifier = identifier
        return try state.withLock { (state) throws(KeychainError) in
            let db = state.db
            guard let key = state.key == nil ? nil : try state.unlockedKey() else {
                if let checked = state.policyAtLock, !state.classKeys.isEmpty,
                    try AccessPolicyRecord.record.load(from: db) == checked.rows
                {
                    return checked.policy
                }
                throw KeychainError(
                    .interactionNotAllowed, "the keychain is locked: its access policy cannot be checked")
            }
            return try AccessPolicyRecord.verified(
                AccessPolicyRecord.record.load(from: db), key: key, keychain: identifier)
        }
    }

    /// The access policy for showing it: checked (as ``accessPolicy()``) while unlocked; while locked, as the
    /// file holds it, unchecked (`checked` false).
    ///
    /// - Throws: `errSecDecode` when the rows were altered (while locked: when a row is missing or the name
    ///   unknown; a MAC cannot be checked without the key).
    public func storedAccessPolicy() throws(KeychainError) -> (policy: KeychainAccessPolicy, checked: Bool) {
        let identifier = identifier
        return try withDatabase { (db, key) throws(KeychainError) in
            let rows = try AccessPolicyRecord.record.load(from: db)
            if let key {
                return (try AccessPolicyRecord.verified(rows, key: key, keychain: identifier), true)
            }
            guard let named = AccessPolicyRecord.named(rows) else { throw AccessPolicyRecord.altered }
            return (named ?? .prompt, false)
        }
    }

    /// Stores the keychain's access policy, authenticated under the keychain key.
    ///
    /// - Throws: `errSecInteractionNotAllowed` while locked.
    public func setAccessPolicy(_ policy: KeychainAccessPolicy) throws(KeychainError) {
        let identifier = identifier
        try withDatabase { (db, key) throws(KeychainError) in
            guard let key else { throw KeychainError(.interactionNotAllowed, "the keychain is locked") }
            try AccessPolicyRecord.save(policy, key: key, keychain: identifier, db)
        }
    }
}
