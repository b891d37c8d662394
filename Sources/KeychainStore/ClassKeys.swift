import COpenSSL
import FoundationEssentials
import KeychainCore
import Posix
import Synchronization

/// Seals a secret to this machine (its TPM 2.0: `KeySlots.TPMDeviceSealing`), for the class keys of the
/// `…ThisDeviceOnly` classes: a copy of the keychain file on another machine cannot open them, even with the
/// password. Set once at start by the programs on a machine with a TPM (``Keychain/defaultDeviceSealing``).
package protocol DeviceSealing: Sendable {
    /// `secret` sealed so that only this machine unseals it.
    func seal(_ secret: borrowing SecretBytes) throws(KeychainError) -> Data
    /// The secret `sealed` holds; an error when this machine cannot unseal it (another TPM, no TPM).
    func unseal(_ sealed: Data) throws(KeychainError) -> SecretBytes
}

/// The class keys of a keychain (format 3, docs/file-format.md, "Class keys"): one random 256-bit key per accessibility
/// class, each kept in a `meta` row `class-key-PDMN` sealed (AES-256-GCM) under the keychain key, bound to the
/// keychain and the class (``ItemSealing/classKeyWrap(keychain:accessibility:)``). An item's attributes and
/// secret are sealed under its class's key; `items.pclass` says which.
///
/// A row that is missing or fails authentication leaves its class unreadable (`errSecDecode`, saying so) and
/// never replaced while items of the class exist: nothing is lost that a restored row would give back.
enum ClassKeys {
    /// The `meta` row of `accessibility`'s key.
    static func rowName(_ accessibility: Accessibility) -> String { "class-key-" + accessibility.rawValue }

    /// The `meta` row of the device secret: 32 random bytes sealed to this machine's TPM (``DeviceSealing``),
    /// made when the class keys are; absent in a keychain made where no TPM was. The key of a `…ThisDeviceOnly`
    /// class is then SHA-256(its row's key ‖ the device secret).
    static let deviceRowName = "class-device"

    /// SHA-256 of `rowKey` ‖ `device`, straight into a key's secret pages.
    static func bound(_ rowKey: SecretKey, to device: SecretKey) throws(KeychainError) -> SecretKey {
        var input = try KeychainError.allocating { () throws(SecretMemoryError) in
            try SecretBytes(capacity: 2 * SecretKey.length)
        }
        input.append(UnsafeRawBufferPointer(rowKey.bytes))
        input.append(UnsafeRawBufferPointer(device.bytes))
        return try SecretKey.filled { (out) throws(KeychainError) in
            let ok = input.withUnsafeBytes { (raw) -> Bool in
                guard let target = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
                var length = 0
                return EVP_Q_digest(nil, "SHA256", nil, raw.baseAddress, raw.count, target, &length) == 1
                    && length == SecretKey.length
            }
            guard ok else { throw KeychainError(.internalComponent, "SHA-256 failed") }
        }
    }

    /// The device secret of a keychain whose class keys are being made, sealed by `sealing` into its row (the
    /// caller holds a transaction); nil without a sealing (no TPM).
    static func createDeviceSecret(_ sealing: (any DeviceSealing)?, _ db: SQLiteDatabase) throws(KeychainError)
        -> SecretKey?
    {
        guard let sealing else { return nil }
        var secret = try KeychainError.allocating { () throws(SecretMemoryError) in try SecretBytes(zeros: 32) }
        try secret.withUnsafeMutableBytes { (bytes) throws(KeychainError) in try SecureRandom.fill(bytes) }
        // A TPM that is there but cannot seal (an owner hierarchy with a password, a TPM error) must not make the
        // keychain unusable: its ThisDeviceOnly classes are then made as where there is no TPM.
        guard let sealed = try? sealing.seal(secret) else { return nil }
        try db.setMetaRow(deviceRowName, sealed)
        return try secret.withUnsafeBytes { (bytes) throws(KeychainError) in
            try SecretKey.filled { $0.copyMemory(from: bytes) }
        }
    }

    /// The device secret the file's row holds, unsealed by `sealing`: nil when the keychain has none (made where
    /// no TPM was); an error when this machine cannot unseal it.
    static func deviceSecret(_ sealing: (any DeviceSealing)?, _ db: SQLiteDatabase) throws(KeychainError)
        -> SecretKey?
    {
        let row = try db.withStatement("SELECT value FROM meta WHERE name = \(deviceRowName)") {
            (select) throws(KeychainError) -> Data? in try select.step() ? select.data(0) ?? Data() : nil
        }
        guard let row else { return nil }
        guard let sealing else {
            throw KeychainError(.decode, "the ThisDeviceOnly class keys are sealed to a TPM, and this machine has none")
        }
        let secret = try sealing.unseal(row)
        guard secret.count == SecretKey.length else {
            throw KeychainError(.decode, "the device secret the TPM unsealed is not \(SecretKey.length) bytes")
        }
        return try secret.withUnsafeBytes { (bytes) throws(KeychainError) in
            try SecretKey.filled { $0.copyMemory(from: bytes) }
        }
    }

    /// Seals a new random key for `accessibility` under `keychainKey` into its row (the caller holds a
    /// transaction) and returns it.
    static func create(
        _ accessibility: Accessibility, keychainKey: SecretKey, keychain: Data, device: SecretKey?,
        _ db: SQLiteDatabase
    ) throws(KeychainError) -> SecretKey {
        let key = try SecretKey.random()
        let sealed = try AuthenticatedCipher.seal(
            key.unownedData, key: keychainKey,
            context: ItemSealing.classKeyWrap(keychain: keychain, accessibility: accessibility))
        try db.setMetaRow(rowName(accessibility), sealed)
        guard !accessibility.mayLeaveThisDevice, let device else { return key }
        return try bound(key, to: device)
    }

    /// The class keys the file's rows give under `keychainKey`: a row missing or failing authentication is left
    /// out (its class is then unreadable, ``missing(_:)`` says why).
    static func load(
        keychainKey: SecretKey, keychain: Data, device: SecretKey?, _ db: SQLiteDatabase
    ) throws(KeychainError) -> [Accessibility: SecretKey] {
        var keys: [Accessibility: SecretKey] = [:]
        let rows = try db.withStatement("SELECT name, value FROM meta WHERE name LIKE 'class-key-%'") {
            (select) throws(KeychainError) -> [String: Data] in
            var rows: [String: Data] = [:]
            while try select.step() {
                if let name = select.string(0) { rows[name] = select.data(1) ?? Data() }
            }
            return rows
        }
        for accessibility in Accessibility.allCases {
            guard let sealed = rows[rowName(accessibility)],
                (try? AuthenticatedCipher.plaintextLength(of: sealed)) == SecretKey.length
            else { continue }
            let context = ItemSealing.classKeyWrap(keychain: keychain, accessibility: accessibility)
            guard
                let key = try? SecretKey.filled({ (bytes) throws(KeychainError) in
                    try AuthenticatedCipher.open(sealed, key: keychainKey, context: context, into: bytes)
                })
            else { continue }
            if !accessibility.mayLeaveThisDevice, let device {
                keys[accessibility] = try bound(key, to: device)
            } else {
                keys[accessibility] = key
            }
        }
        return keys
    }

    /// `errSecDecode` for an item of `accessibility` whose class key the file does not give.
    static func missing(_ accessibility: Accessibility) -> KeychainError {
        KeychainError(
            .decode,
            "the class key of \(accessibility.name) (meta row \(rowName(accessibility))) is missing or failed"
                + " authentication: the keychain file was altered; its items of that class cannot be read or"
                + " changed, the others can")
    }

    /// `errSecDecode` for a `…ThisDeviceOnly` class whose key is sealed to another machine's TPM.
    static func otherDevice(_ accessibility: Accessibility, _ why: KeychainError) -> KeychainError {
        KeychainError(
            .decode,
            "the items of \(accessibility.name) can be read only on the machine whose TPM sealed their class key"
                + " (this keychain file was copied from another machine): \(why.reason)")
    }

    /// `errSecDecode` for an item row whose `pclass` is not a class.
    static func unknownClass(_ text: String) -> KeychainError {
        KeychainError(
            .decode, "an item row names the accessibility class '\(text)', which does not exist: the file was altered")
    }
}

extension Keychain {
    /// What seals the `…ThisDeviceOnly` class keys of the keychains made or opened from now on, in this process:
    /// set at start by a program on a machine with a TPM (`KeySlots.TPMDeviceSealing.installIfPresent()`).
    package static let defaultDeviceSealing = Mutex<(any DeviceSealing)?>(nil)

    /// A sealing for the keychains made or opened within one scope (tests: one software TPM per test, as
    /// ``defaultDeviceSealing`` is for a process).
    @TaskLocal package static var deviceSealingHere: (any DeviceSealing)?

    /// Of `references`, those whose attributes and secret can be read now: all of them while unlocked; while
    /// locked, those whose class key outlasted the lock (read from the items' class column, nothing decrypted).
    public func readable(among references: [ItemReference]) throws(KeychainError) -> Set<ItemReference> {
        try state.withLock { (state) throws(KeychainError) -> Set<ItemReference> in
            if state.key != nil { return Set(references) }
            let held = state.classKeys.keys.map(\.rawValue)
            guard !held.isEmpty, state.formatVersion >= 3, !references.isEmpty else { return [] }
            var readable: Set<ItemReference> = []
            for (itemClass, group) in Dictionary(grouping: references, by: \.itemClass) {
                let sql: SQL = """
                    SELECT uuid FROM items WHERE class = \(itemClass.rawValue) AND pclass IN (\(list: held))
                        AND uuid IN (\(list: group.map(\.identifier)))
                    """
                try state.db.withStatement(sql) { (select) throws(KeychainError) in
                    while try select.step() {
                        if let uuid = select.data(0) {
                            readable.insert(ItemReference(itemClass: itemClass, identifier: uuid))
                        }
                    }
                }
            }
            return readable
        }
    }

    /// Whether `reference` can be read now (see ``readable(among:)``).
    public func isReadable(_ reference: ItemReference) -> Bool {
        (try? readable(among: [reference]).isEmpty == false) ?? false
    }
}

extension Keychain.State {
    /// The key to seal or open items of `accessibility` with. A class whose row is absent and which has no items
    /// gets a new key here while the keychain is unlocked (a `WhenPasscodeSetThisDeviceOnly` key after a password
    /// was removed and set again); one whose row fails authentication, or that has items, does not.
    ///
    /// - Throws: `errSecInteractionNotAllowed` while the key is not in memory and the keychain is locked;
    ///   `errSecDecode` when the file does not give it (``ClassKeys/missing(_:)``).
    mutating func classKey(for accessibility: Accessibility, identifier: Data) throws(KeychainError) -> SecretKey {
        if let key = classKeys[accessibility] { return key }
        let keychainKey = try unlockedKey()
        if !accessibility.mayLeaveThisDevice, let deviceFailure {
            throw ClassKeys.otherDevice(accessibility, deviceFailure)
        }
        let db = db
        let present = try db.withStatement(
            """
            SELECT (SELECT count(*) FROM meta WHERE name = \(ClassKeys.rowName(accessibility)))
                + (SELECT count(*) FROM items WHERE pclass = \(accessibility.rawValue))
            """
        ) { (select) throws(KeychainError) in try select.step() ? select.int64(0) : 0 }
        guard present == 0 else { throw ClassKeys.missing(accessibility) }
        // A class made anew (WhenPasscodeSet after a password came back) is bound to the device secret the
        // keychain has, if any.
        let device = accessibility.mayLeaveThisDevice ? nil : try ClassKeys.deviceSecret(deviceSealing, db)
        let key = try db.transaction { () throws(KeychainError) in
            try ClassKeys.create(accessibility, keychainKey: keychainKey, keychain: identifier, device: device, db)
        }
        classKeys[accessibility] = key
        return key
    }

    /// Refuses `WhenPasscodeSetThisDeviceOnly` in a keychain without a password (one opened by key slots alone):
    /// `errSecNotAvailable`, Apple's answer on a device without a passcode. A keychain wrapped by a parent
    /// keychain has its parent's password.
    func requirePasscode(for accessibility: Accessibility) throws(KeychainError) {
        guard accessibility == .whenPasscodeSetThisDeviceOnly, header.kdf != nil, !header.hasPasswordSlot else {
            return
        }
        throw KeychainError(
            .notAvailable,
            "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly needs a keychain with a password; this one has none"
                + " (it opens with key slots only)")
    }

    /// Installs the keychain key: brings the file to the current format (creating the class keys and resealing
    /// every item under its class's key, the first time) and loads the class keys.
    mutating func install(_ key: SecretKey, identifier: Data) {
        self.key = key
        // When this fails (a read-only file), every use of the key says so (see `unlockedKey`).
        try? upgradeToCurrent(identifier: identifier)
        guard formatVersion >= FileSchema.currentVersion else { return }
        // A device secret this machine cannot unseal (the file was copied from another machine): the
        // …ThisDeviceOnly classes stay unreadable (errSecDecode saying why), the others open.
        let device: SecretKey?
        do {
            device = try ClassKeys.deviceSecret(deviceSealing, db)
            deviceFailure = nil
        } catch {
            device = nil
            deviceFailure = error
        }
        guard let loaded = try? ClassKeys.load(keychainKey: key, keychain: identifier, device: device, db) else {
            return
        }
        classKeys = deviceFailure == nil ? loaded : loaded.filter { $0.key.mayLeaveThisDevice }
    }

    /// Locks: wipes the keychain key and the class keys that do not outlast a lock, or every class key when
    /// `allClasses`.
    mutating func lock(allClasses: Bool) {
        if allClasses {
            policyAtLock = nil
        } else if let key {
            // Checked now, under the key about to go, for the reads of the classes that stay readable.
            let identifier = header.identifier
            policyAtLock = (try? AccessPolicyRecord.record.load(from: db)).flatMap { rows in
                (try? AccessPolicyRecord.verified(rows, key: key, keychain: identifier)).map { (rows, $0) }
            }
        }
        key = nil
        classKeys = allClasses ? [:] : classKeys.filter { $0.key.outlastsLock }
    }

    /// Seals every item of a file being brought to format 3 under its class's key, a new version each (the
    /// caller holds the upgrade's transaction and has added `pclass` and the class keys). An item that does not
    /// open under the keychain key (altered before) is left as it is, unreadable as it was.
    func resealItemsUnderClassKeys(keychainKey: SecretKey, classKeys: [Accessibility: SecretKey], identifier: Data)
        throws(KeychainError)
    {
        struct Row {
            let id: Int64
            let reference: ItemReference
            let attributes: Data
            let secret: Data?
            let version: Int64
        }
        let rows = try db.withStatement("SELECT id, uuid, class, attributes, secret, version FROM items ORDER BY id") {
            (select) throws(KeychainError) -> [Row] in
            var rows: [Row] = []
            while try select.step() {
                guard let uuid = select.data(1), uuid.count == 16, let name = select.string(2),
                    let itemClass = ItemClass(rawValue: name)
                else { continue }
                rows.append(
                    Row(
                        id: select.int64(0), reference: ItemReference(itemClass: itemClass, identifier: uuid),
                        attributes: select.data(3) ?? Data(), secret: select.data(4), version: select.int64(5)))
            }
            return rows
        }
        for row in rows where row.version < Int64.max {
            func context(_ field: ItemSealing.Field, _ version: Int64) -> Data {
                ItemSealing.itemField(keychain: identifier, item: row.reference, field, version: version)
            }
            guard let encoded = try? ItemSealing.open(row.attributes, keychainKey, context(.attributes, row.version)),
                let attributes = try? AttributeCodec.decode(encoded)
            else { continue }
            let accessibility = Accessibility(of: attributes)
            guard let classKey = classKeys[accessibility] else { throw ClassKeys.missing(accessibility) }
            let version = row.version + 1
            var sealedSecret: Data?
            if let sealed = row.secret {
                // Opened straight into secret memory and sealed again from there.
                let secret: SecretBytes
                do {
                    secret = try ItemSealing.openSecret(sealed, keychainKey, context(.secret, row.version))
                } catch  where error.status == .decode {
                    continue
                }
                sealedSecret = try secret.withUnsafeBytes { (raw) throws(KeychainError) in
                    try AuthenticatedCipher.seal(unowned: raw, key: classKey, context: context(.secret, version))
                }
            }
            let sealedAttributes = try AuthenticatedCipher.seal(
                encoded, key: classKey, context: context(.attributes, version))
            try db.run(
                """
                UPDATE items SET attributes = \(sealedAttributes), secret = \(sealedSecret), version = \(version),
                    pclass = \(accessibility.rawValue)
                WHERE id = \(row.id)
                """)
        }
    }
}
