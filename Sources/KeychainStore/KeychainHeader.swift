import FoundationEssentials
import KeychainCore
import Posix

/// How a keychain key is wrapped: under a password (through scrypt) or under
/// the key of another keychain (a collection created over D-Bus is wrapped by
/// the login keychain's key, so it needs no password of its own).
enum KeyWrapping: Hashable, Sendable {
    case password(KDFParameters)
    case parent(identifier: Data)
}

/// What the `meta` table of a keychain file holds: the file's identity, how
/// the keychain key is wrapped, the wrapped key and the index key.
struct KeychainHeader: Sendable {
    static let formatName = Data("latchkey-keychain".utf8)

    var identifier: Data
    var wrapping: KeyWrapping
    var salt: Data
    var wrappedKey: Data
    var indexKey: Data

    var kdf: KDFParameters? {
        if case .password(let kdf) = wrapping { return kdf }
        return nil
    }

    /// What the wrapped keychain key is bound to: the wrap version and the keychain identity.
    var wrapContext: Data { ItemSealing.headerKeyWrap(keychain: identifier) }

    /// A fresh header: random identity, salt and index key; `keychainKey` wrapped under `password`.
    static func create(
        keychainKey: SecretKey, password: some Collection<UInt8>, kdf: KDFParameters
    ) throws(KeychainError) -> KeychainHeader {
        var header = try blank(wrapping: .password(kdf))
        try header.wrap(keychainKey, password: password, kdf: kdf)
        return header
    }

    /// A fresh header whose keychain key is wrapped by `parentKey`, the key of the keychain `parentIdentifier`.
    static func create(keychainKey: SecretKey, parentKey: SecretKey, parentIdentifier: Data)
        throws(KeychainError) -> KeychainHeader
    {
        var header = try blank(wrapping: .parent(identifier: parentIdentifier))
        header.wrappedKey = try AuthenticatedCipher.seal(
            keychainKey.unownedData, key: parentKey, context: header.wrapContext)
        return header
    }

    private static func blank(wrapping: KeyWrapping) throws(KeychainError) -> KeychainHeader {
        KeychainHeader(
            identifier: try SecureRandom.data(count: 16), wrapping: wrapping, salt: Data(), wrappedKey: Data(),
            indexKey: try SecretKey.random().data)
    }

    /// Re-wraps `keychainKey` under `password` with a new salt.
    mutating func wrap(
        _ keychainKey: SecretKey, password: some Collection<UInt8>, kdf: KDFParameters
    ) throws(KeychainError) {
        let salt = try SecureRandom.data(count: 16)
        let wrappingKey = try kdf.deriveKey(password: password, salt: salt)
        let wrapped = try AuthenticatedCipher.seal(keychainKey.unownedData, key: wrappingKey, context: wrapContext)
        self.wrapping = .password(kdf)
        self.salt = salt
        self.wrappedKey = wrapped
    }

    /// The keychain key, or `errSecAuthFailed` when `password` is not the keychain's.
    func unwrap(password: some Collection<UInt8>) throws(KeychainError) -> SecretKey {
        guard let kdf else {
            throw KeychainError(.authFailed, "this keychain is unlocked by its parent keychain, not a password")
        }
        guard !wrappedKey.isEmpty else {
            throw KeychainError(.authFailed, "this keychain has no password slot: unlock it with another slot")
        }
        return try unwrap(with: try kdf.deriveKey(password: password, salt: salt))
    }

    /// The keychain key, or `errSecAuthFailed` when `wrappingKey` does not open it.
    func unwrap(with wrappingKey: SecretKey) throws(KeychainError) -> SecretKey {
        guard (try? AuthenticatedCipher.plaintextLength(of: wrappedKey)) == SecretKey.length else {
            // Not what this format wraps: a wrong password is still told as such.
            guard var opened = try? AuthenticatedCipher.open(wrappedKey, key: wrappingKey, context: wrapContext) else {
                throw KeychainError(.authFailed, "the password does not unlock this keychain")
            }
            opened.withUnsafeMutableBytes { wipeBytes($0) }
            throw KeychainError(.invalidKeychain, "the keychain key has the wrong length")
        }
        // Decrypted straight into the key's secret pages.
        return try SecretKey.filled { (keyBytes) throws(KeychainError) in
            do {
                try AuthenticatedCipher.open(wrappedKey, key: wrappingKey, context: wrapContext, into: keyBytes)
            } catch {
                throw KeychainError(.authFailed, "the password does not unlock this keychain")
            }
        }
    }

    func save(to db: SQLiteDatabase) throws(KeychainError) {
        let kdfBytes: Data =
            switch wrapping {
            case .password(let kdf): Data([1, kdf.logN]) + Self.bigEndian(kdf.r) + Self.bigEndian(kdf.p)
            case .parent(let parent): Data([2]) + parent
            }
        let rows: [(String, Data)] = [
            ("format", Self.formatName), ("uuid", identifier), ("kdf", kdfBytes), ("salt", salt),
            ("wrapped_key", wrappedKey), ("index_key", indexKey),
        ]
        for (name, value) in rows { try db.setMetaRow(name, value) }
    }

    static func load(from db: SQLiteDatabase) throws(KeychainError) -> KeychainHeader {
        let values = try db.withStatement("SELECT name, value FROM meta") {
            (select) throws(KeychainError) -> [String: Data] in
            var values: [String: Data] = [:]
            while try select.step() {
                if let name = select.string(0) { values[name] = select.data(1) ?? Data() }
            }
            return values
        }
        let damaged = KeychainError(.invalidKeychain, "the file is not a Latchkey keychain or its header is damaged")
        guard values["format"] == formatName, let identifier = values["uuid"], identifier.count == 16,
            let kdfBytes = values["kdf"], let salt = values["salt"], let wrappedKey = values["wrapped_key"],
            let indexKey = values["index_key"], indexKey.count == SecretKey.length
        else { throw damaged }
        let bytes = [UInt8](kdfBytes)
        let wrapping: KeyWrapping
        switch (bytes.first, bytes.count) {
        case (1, 10):
            let kdf = KDFParameters(
                logN: bytes[1], r: UInt32(bigEndian: bytes[2..<6]), p: UInt32(bigEndian: bytes[6..<10]))
            guard kdf.isAcceptableInFile else {
                throw KeychainError(.invalidKeychain, "the keychain's KDF parameters \(kdf) are out of range")
            }
            wrapping = .password(kdf)
        case (2, 17):
            wrapping = .parent(identifier: Data(bytes[1...]))
        default:
            throw damaged
        }
        return KeychainHeader(
            identifier: identifier, wrapping: wrapping, salt: salt, wrappedKey: wrappedKey, indexKey: indexKey)
    }

    private static func bigEndian(_ value: UInt32) -> Data {
        withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }
}

extension UInt32 {
    fileprivate init(bigEndian bytes: ArraySlice<UInt8>) {
        self = bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }
}
