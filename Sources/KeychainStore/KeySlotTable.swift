import COpenSSL
import FoundationEssentials
import KeychainCore
import Posix

/// What opens a key slot (docs/key-slots.md).
package enum KeySlotKind: UInt8, Sendable, CaseIterable {
    /// The keychain password, through scrypt: the header's `kdf`, `salt` and `wrapped_key` rows (slot 0).
    case password = 1
    /// A random key sealed by the machine's TPM 2.0 (optionally with a PIN and PCR policy).
    case tpm2 = 2
    /// A key derived from a recovery key shown once to the user.
    case recovery = 3
    /// A key derived from a FIDO2 security key's `hmac-secret` output (a touch, and its PIN when enrolled so).
    case fido2 = 4

    /// The name the command uses (`password`, `tpm2`, `recovery`).
    package var name: String {
        switch self {
        case .password: "password"
        case .tpm2: "tpm2"
        case .recovery: "recovery"
        case .fido2: "fido2"
        }
    }

    /// The kind the command's `name` stands for.
    package init?(name: String) {
        guard let kind = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = kind
    }

    /// Whether a human can open it from memory or paper without this machine or a device (password, recovery
    /// key): the last of these is never removed, since a tpm2 slot dies with its TPM and a fido2 slot with its
    /// security key.
    package var isPasswordLike: Bool { self == .password || self == .recovery }
}

/// One key slot as the file holds it.
package struct KeySlot: Sendable, Equatable {
    /// The password slot's id.
    package static let passwordID: UInt8 = 0

    /// Stable id (0 for the password slot, 1–255 for the others).
    package var id: UInt8
    /// What opens it.
    package var kind: KeySlotKind
    /// When it was added (Unix seconds; 0 for the password slot, which is as old as the keychain or its last
    /// password change).
    package var created: Int64
    /// Per kind: tpm2 — the sealed key (`SealedKey.encoded()`); recovery — the HKDF salt; fido2 — the encoded
    /// `Fido2SlotParameters` (credential, salt, PIN flag, the key's AAGUID and name); password — empty
    /// (its parameters are the header's).
    package var parameters: Data

    /// A slot from its fields.
    package init(id: UInt8, kind: KeySlotKind, created: Int64, parameters: Data) {
        self.id = id
        self.kind = kind
        self.created = created
        self.parameters = parameters
    }
}

/// Whether the slot table was checked under the keychain key.
package enum KeySlotTableCheck: Sendable, Equatable {
    /// The keychain is locked: the table is shown as the file holds it.
    case unverified
    /// The table is the one Latchkey last wrote under the keychain key.
    case verified
    /// It is not: rows were removed, added, put back or edited outside Latchkey (the reason says which).
    case altered(String)
}

/// The slot rows of `meta` (docs/file-format.md, "Key slots"): `slot-ID` per slot other than the password one,
/// and `slots`, the list of those slots (id and SHA-256 of the row) authenticated under the keychain key.
enum KeySlotRecord {
    static let rowPrefix = "slot-"
    static let manifestName = "slots"
    static let rowVersion: UInt8 = 1
    static let manifestVersion: UInt8 = 1

    /// The bytes before the wrapped key: version, kind, created, parameter length and parameters.
    static func head(_ slot: KeySlot) -> Data {
        var head = Data([rowVersion, slot.kind.rawValue])
        withUnsafeBytes(of: UInt64(bitPattern: slot.created).bigEndian) { head.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(slot.parameters.count).bigEndian) { head.append(contentsOf: $0) }
        return head + slot.parameters
    }

    /// What a slot's wrapped key is bound to: keychain, slot id, and everything in the row before the wrap.
    static func wrapContext(_ slot: KeySlot, keychain: Data) -> Data {
        ItemSealing.slotKeyWrap(keychain: keychain, slot: slot.id, rowHead: head(slot))
    }

    /// A stored row: the slot and its wrapped key.
    static func decode(id: UInt8, _ row: Data) -> (slot: KeySlot, wrapped: Data)? {
        let bytes = [UInt8](row)
        guard bytes.count >= 14, bytes[0] == rowVersion, let kind = KeySlotKind(rawValue: bytes[1]), kind != .password
        else { return nil }
        let created = bytes[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let length = Int(bytes[10..<14].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard bytes.count >= 14 + length + AuthenticatedCipher.nonceLength + AuthenticatedCipher.tagLength else {
            return nil
        }
        let slot = KeySlot(
            id: id, kind: kind, created: Int64(bitPattern: created), parameters: Data(bytes[14..<14 + length]))
        return (slot, Data(bytes[(14 + length)...]))
    }

    /// Every slot row in the file, by id (rows that do not decode are left out: they open nothing).
    static func loadRows(_ db: SQLiteDatabase) throws(KeychainError) -> [UInt8: Data] {
        try db.withStatement("SELECT name, value FROM meta WHERE name LIKE 'slot-%'") {
            (select) throws(KeychainError) -> [UInt8: Data] in
            var rows: [UInt8: Data] = [:]
            while try select.step() {
                guard let name = select.string(0), name.hasPrefix(rowPrefix),
                    let id = UInt8(name.dropFirst(rowPrefix.count)), id != KeySlot.passwordID
                else { continue }
                rows[id] = select.data(1) ?? Data()
            }
            return rows
        }
    }

    static func loadManifest(_ db: SQLiteDatabase) throws(KeychainError) -> Data? {
        try db.withStatement("SELECT value FROM meta WHERE name = \(manifestName)") { (select) throws(KeychainError) in
            return try select.step() ? select.data(0) ?? Data() : nil
        }
    }

    static func sha256(_ data: Data) -> Data {
        var digest = Data(count: 32)
        var length = 0
        digest.withUnsafeMutableBytes { out in
            data.withUnsafeBytes { input in
                _ = EVP_Q_digest(nil, "SHA256", nil, input.baseAddress, input.count, out.baseAddress, &length)
            }
        }
        return digest
    }

    /// The manifest's listed part: version, count, then id and SHA-256 of each row, by id.
    static func listing(_ rows: [UInt8: Data]) -> Data {
        var listing = Data([manifestVersion, UInt8(rows.count)])
        for (id, row) in rows.sorted(by: { $0.key < $1.key }) { listing += Data([id]) + sha256(row) }
        return listing
    }

    /// The manifest for `rows`, authenticated under `key` (the caller holds a transaction to save it).
    static func manifest(_ rows: [UInt8: Data], key: SecretKey, keychain: Data) throws(KeychainError) -> Data {
        let listing = listing(rows)
        return listing
            + (try AuthenticatedCipher.seal(
                Data(), key: key, context: ItemSealing.slotList(keychain: keychain, listing: listing)))
    }

    /// The rows the authenticated manifest lists (id → row hash); nil when there is none or it fails its check.
    /// A file with no manifest and no slot rows lists none.
    static func verifiedListing(_ manifest: Data?, key: SecretKey, keychain: Data) -> [UInt8: Data]? {
        guard let manifest else { return [:] }
        let bytes = [UInt8](manifest)
        guard bytes.count >= 2, bytes[0] == manifestVersion else { return nil }
        let count = Int(bytes[1])
        let listed = 2 + 33 * count
        guard bytes.count == listed + AuthenticatedCipher.nonceLength + AuthenticatedCipher.tagLength else {
            return nil
        }
        let listing = Data(bytes[0..<listed])
        let context = ItemSealing.slotList(keychain: keychain, listing: listing)
        guard (try? AuthenticatedCipher.open(Data(bytes[listed...]), key: key, context: context)) != nil else {
            return nil
        }
        var hashes: [UInt8: Data] = [:]
        for index in 0..<count {
            let start = 2 + 33 * index
            hashes[bytes[start]] = Data(bytes[start + 1..<start + 33])
        }
        return hashes
    }

    /// Replaces the slot rows with `rows` and writes their manifest (the caller holds a transaction).
    static func save(
        _ rows: [UInt8: Data], removing removed: [UInt8], key: SecretKey, keychain: Data,
        _ db: SQLiteDatabase
    ) throws(KeychainError) {
        for id in removed {
            try db.run("DELETE FROM meta WHERE name = \(rowPrefix + String(id))")
        }
        let manifest = try manifest(rows, key: key, keychain: keychain)
        for (name, value) in rows.map({ (rowPrefix + String($0.key), $0.value) }) + [(manifestName, manifest)] {
            try db.setMetaRow(name, value)
        }
    }
}

extension Keychain {
    /// The key slots, the password slot (id 0) first when the keychain has one, and whether the table was
    /// checked: while locked it is shown as the file holds it (``KeySlotTableCheck/unverified``); while
    /// unlocked the rows are compared with the list authenticated under the keychain key.
    package func keySlots() throws(KeychainError) -> (slots: [KeySlot], check: KeySlotTableCheck) {
        let header = try currentHeader()
        let identifier = identifier
        return try withDatabase { (db, key) throws(KeychainError) in
            let rows = try KeySlotRecord.loadRows(db)
            var slots: [KeySlot] = []
            if header.hasPasswordSlot {
                slots.append(KeySlot(id: KeySlot.passwordID, kind: .password, created: 0, parameters: Data()))
            }
            var undecodable: [UInt8] = []
            for (id, row) in rows.sorted(by: { $0.key < $1.key }) {
                guard let (slot, _) = KeySlotRecord.decode(id: id, row) else {
                    undecodable.append(id)
                    continue
                }
                slots.append(slot)
            }
            guard let key else { return (slots, .unverified) }
            guard
                let listed = KeySlotRecord.verifiedListing(
                    try KeySlotRecord.loadManifest(db), key: key, keychain: identifier)
            else {
                return (slots, .altered("the list of slots is missing or fails its check under the keychain key"))
            }
            let stored = Dictionary(uniqueKeysWithValues: rows.map { ($0.key, KeySlotRecord.sha256($0.value)) })
            if stored == listed, undecodable.isEmpty { return (slots, .verified) }
            let missing = listed.keys.filter { stored[$0] == nil }.sorted()
            let unlisted = stored.filter { listed[$0.key] != $0.value }.map(\.key).sorted()
            var reasons: [String] = []
            if !missing.isEmpty { reasons.append("slots \(missing.map(String.init).joined(separator: ", ")) removed") }
            if !unlisted.isEmpty {
                reasons.append(
                    "slots \(unlisted.map(String.init).joined(separator: ", ")) added, put back or edited")
            }
            return (slots, .altered(reasons.joined(separator: "; ") + " outside Latchkey"))
        }
    }

    /// Adds a slot of `kind` with `parameters` that wraps the keychain key under `slotKey` (32 bytes) and
    /// returns it. The keychain must be unlocked (its key is what is wrapped).
    ///
    /// - Throws: `errSecInteractionNotAllowed` while locked; `errSecParam` for a keychain wrapped by another
    ///   keychain's key (it has no slots), a slot key that is not 32 bytes, a password slot (set a password
    ///   instead), or a full table.
    package func addKeySlot(_ kind: KeySlotKind, parameters: Data, slotKey: borrowing SecretBytes)
        throws(KeychainError) -> KeySlot
    {
        guard kind != .password else { throw KeychainError.param("a password slot is set with a password change") }
        guard slotKey.count == SecretKey.length else { throw KeychainError.param("a slot key is 32 bytes") }
        let wrappingKey = try slotKey.withUnsafeBytes { (bytes) throws(KeychainError) in
            try SecretKey.filled { $0.copyMemory(from: bytes) }
        }
        let header = try currentHeader()
        guard header.kdf != nil else {
            throw KeychainError.param("this keychain opens with its parent keychain; key slots are the parent's")
        }
        let identifier = identifier
        return try withDatabase { (db, key) throws(KeychainError) in
            guard let key else { throw KeychainError(.interactionNotAllowed, "the keychain is locked") }
            return try db.transaction { () throws(KeychainError) -> KeySlot in
                var rows = try KeySlotRecord.loadRows(db)
                try Self.requireListed(rows, db, key: key, keychain: identifier)
                guard let id = (1...UInt8.max).first(where: { rows[$0] == nil }) else {
                    throw KeychainError.param("the keychain has 255 slots already")
                }
                let slot = KeySlot(id: id, kind: kind, created: Int64(time(nil)), parameters: parameters)
                let wrapped = try AuthenticatedCipher.seal(
                    key.unownedData, key: wrappingKey, context: KeySlotRecord.wrapContext(slot, keychain: identifier))
                rows[id] = KeySlotRecord.head(slot) + wrapped
                try KeySlotRecord.save(rows, removing: [], key: key, keychain: identifier, db)
                return slot
            }
        }
    }

    /// Removes the slot `id` (0: the password slot). The keychain must be unlocked.
    ///
    /// - Throws: `errSecParam` when it is the last password-like slot (password or recovery) or there is no
    ///   such slot; `errSecInteractionNotAllowed` while locked.
    package func removeKeySlot(id: UInt8) throws(KeychainError) {
        let header = try currentHeader()
        let identifier = identifier
        try withDatabase { (db, key) throws(KeychainError) in
            guard let key else { throw KeychainError(.interactionNotAllowed, "the keychain is locked") }
            try db.transaction { () throws(KeychainError) in
                var rows = try KeySlotRecord.loadRows(db)
                try Self.requireListed(rows, db, key: key, keychain: identifier)
                let kinds = rows.compactMapValues { KeySlotRecord.decode(id: 0, $0)?.slot.kind }
                let passwordLike =
                    kinds.filter { $0.value.isPasswordLike }.map(\.key)
                    + (header.hasPasswordSlot ? [KeySlot.passwordID] : [])
                let removedKind: KeySlotKind
                if id == KeySlot.passwordID {
                    guard header.hasPasswordSlot else { throw KeychainError.param("the keychain has no password slot") }
                    removedKind = .password
                } else {
                    guard let kind = kinds[id] else { throw KeychainError.param("the keychain has no slot \(id)") }
                    removedKind = kind
                }
                if removedKind.isPasswordLike, passwordLike == [id] {
                    throw KeychainError.param(
                        "slot \(id) is the keychain's last password or recovery slot: a tpm2 slot alone dies with its"
                            + " TPM; add a recovery slot or a password first")
                }
                if id == KeySlot.passwordID {
                    try db.withStatement("UPDATE meta SET value = x'' WHERE name IN ('wrapped_key', 'salt')") {
                        (update) throws(KeychainError) in try update.run()
                    }
                    // As Apple deletes them when the passcode is turned off: the items of
                    // WhenPasscodeSetThisDeviceOnly and their class key go with the password.
                    let passcodeClass = Accessibility.whenPasscodeSetThisDeviceOnly
                    try db.run("DELETE FROM items WHERE pclass = \(passcodeClass.rawValue)")
                    try db.run("DELETE FROM meta WHERE name = \(ClassKeys.rowName(passcodeClass))")
                } else {
                    rows[id] = nil
                }
                try KeySlotRecord.save(
                    rows, removing: id == KeySlot.passwordID ? [] : [id], key: key, keychain: identifier, db)
            }
        }
        if id == KeySlot.passwordID { state.withLock { $0.classKeys[.whenPasscodeSetThisDeviceOnly] = nil } }
        _ = try currentHeader()
        // The removed wrap's earlier pages leave the write-ahead log (as after a password change).
        _ = Self.checkpoint(at: path, waitMilliseconds: 1_000)
    }

    /// Refuses a change to a table whose rows are not the ones its authenticated list names: writing a new
    /// list would authenticate a row someone else put there.
    private static func requireListed(_ rows: [UInt8: Data], _ db: SQLiteDatabase, key: SecretKey, keychain: Data)
        throws(KeychainError)
    {
        guard
            let listed = KeySlotRecord.verifiedListing(
                try KeySlotRecord.loadManifest(db), key: key, keychain: keychain),
            listed.keys.allSatisfy({ rows[$0] != nil }),
            rows.allSatisfy({ listed[$0.key] == KeySlotRecord.sha256($0.value) })
        else {
            throw KeychainError(
                .decode,
                "the keychain's slot table was altered outside Latchkey; nothing changed (list-slots says how)")
        }
    }

    /// Derives the keychain key from slot `id`, whose wrapping key is `slotKey` (what its TPM unsealed, or what
    /// the recovery key gives), without unlocking: apply it with ``unlock(with:)``.
    ///
    /// The slot must be one the authenticated list names, with the row it lists: a slot removed and put back
    /// from an older copy of the file, or edited, is refused (checked with the key the slot gave).
    ///
    /// - Throws: `errSecAuthFailed` when `slotKey` does not open the slot; `errSecParam` when there is no such
    ///   slot; `errSecDecode` when the slot is not in the authenticated list.
    package func unwrapKey(slot id: UInt8, slotKey: borrowing SecretBytes) throws(KeychainError)
        -> UnwrappedKeychainKey
    {
        guard slotKey.count == SecretKey.length else { throw KeychainError(.authFailed, "a slot key is 32 bytes") }
        let wrappingKey = try slotKey.withUnsafeBytes { (bytes) throws(KeychainError) in
            try SecretKey.filled { $0.copyMemory(from: bytes) }
        }
        let identifier = identifier
        let (row, manifest) = try withDatabase { (db, _) throws(KeychainError) in
            (try KeySlotRecord.loadRows(db)[id], try KeySlotRecord.loadManifest(db))
        }
        guard let row, let (slot, wrapped) = KeySlotRecord.decode(id: id, row) else {
            throw KeychainError.param("the keychain has no slot \(id)")
        }
        let context = KeySlotRecord.wrapContext(slot, keychain: identifier)
        guard (try? AuthenticatedCipher.plaintextLength(of: wrapped)) == SecretKey.length else {
            throw KeychainError(.invalidKeychain, "the \(slot.kind.name) slot \(id) does not wrap a keychain key")
        }
        // Decrypted straight into the key's secret pages.
        let key = try SecretKey.filled { (keyBytes) throws(KeychainError) in
            do {
                try AuthenticatedCipher.open(wrapped, key: wrappingKey, context: context, into: keyBytes)
            } catch {
                throw KeychainError(.authFailed, "the \(slot.kind.name) slot \(id) does not open with the key given")
            }
        }
        guard let listed = KeySlotRecord.verifiedListing(manifest, key: key, keychain: identifier),
            listed[id] == KeySlotRecord.sha256(row)
        else {
            throw KeychainError(
                .decode,
                "slot \(id) is not in the keychain's authenticated slot list (removed, then put back outside"
                    + " Latchkey); refused")
        }
        guard try opensAnItem(key) else {
            throw KeychainError(
                .decode,
                "slot \(id) gives a key that opens none of the keychain's items: it was planted in the file; refused")
        }
        return UnwrappedKeychainKey(key: key, keychain: identifier)
    }

    /// Whether `key` opens the keychain's class keys (format 3), or the sealed attributes of its first item (an
    /// older file; true when it has none): a slot planted with a key of its own (and a list authenticated under
    /// that key) gives a key that opens nothing.
    private func opensAnItem(_ key: SecretKey) throws(KeychainError) -> Bool {
        let identifier = identifier
        return try withDatabase { (db, _) throws(KeychainError) -> Bool in
            let classKeyRows = try db.withStatement("SELECT count(*) FROM meta WHERE name LIKE 'class-key-%'") {
                (select) throws(KeychainError) in try select.step() ? select.int64(0) : 0
            }
            if classKeyRows > 0 {
                return !(try ClassKeys.load(keychainKey: key, keychain: identifier, device: nil, db)).isEmpty
            }
            return try db.withStatement("SELECT uuid, class, attributes, version FROM items ORDER BY id LIMIT 1") {
                (select) throws(KeychainError) -> Bool in
                guard try select.step() else { return true }
                // A damaged row (an identifier of another length, an unknown class) opens nothing: it is refused,
                // never trusted to a precondition.
                guard let uuid = select.data(0), uuid.count == 16, let name = select.string(1),
                    let itemClass = ItemClass(rawValue: name)
                else { return false }
                let reference = ItemReference(itemClass: itemClass, identifier: uuid)
                let context = ItemSealing.itemField(
                    keychain: identifier, item: reference, .attributes, version: select.int64(3))
                return (try? AuthenticatedCipher.open(select.data(2) ?? Data(), key: key, context: context)) != nil
            }
        }
    }
}

extension KeychainHeader {
    /// Whether the password slot holds a wrapped key (``Keychain/removeKeySlot(id:)`` empties it).
    var hasPasswordSlot: Bool { kdf != nil && !wrappedKey.isEmpty }
}
