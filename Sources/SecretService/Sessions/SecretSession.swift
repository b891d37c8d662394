import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import Posix

/// An open session: which client owns it and how secrets are protected in transit.
final class SecretSession {
    /// The session algorithms.
    enum Algorithm {
        /// `plain`: secrets travel as they are.
        case plain
        /// `dh-ietf1024-sha256-aes128-cbc-pkcs7`.
        case diffieHellman(DHSessionCipher)
    }

    static let plainName = "plain"
    static let diffieHellmanName = Keychain1Interface.sessionAlgorithm

    let path: String
    /// The unique bus name of the client that opened it.
    let owner: String
    let algorithm: Algorithm

    init(path: String, owner: String, algorithm: Algorithm) {
        self.path = path
        self.owner = owner
        self.algorithm = algorithm
    }

    /// The `(oayays)` secret structure for `secret`, lent from secret memory, encrypted for this session. A
    /// DH session encrypts it from its pages; a plain session's reply must carry it as an array (the D-Bus
    /// layer's type), freed (and overwritten by the allocator) once the reply is built.
    func encode(_ secret: borrowing SecretBytes, contentType: String) throws(DBusError) -> DBusValue {
        try secret.withUnsafeBytes { (bytes) throws(DBusError) in try encode(bytes: bytes, contentType: contentType) }
    }

    /// The `(oayays)` secret structure for `secret`'s bytes, encrypted for this session.
    private func encode(bytes secret: UnsafeRawBufferPointer, contentType: String) throws(DBusError) -> DBusValue {
        let parameters: [UInt8]
        let value: [UInt8]
        switch algorithm {
        case .plain:
            parameters = []
            value = [UInt8](secret)
        case .diffieHellman(let cipher):
            do {
                (parameters, value) = try cipher.encrypt(secret)
            } catch {
                throw DBusError(.failed, "cannot encrypt the secret for the session: \(error)")
            }
        }
        return .structure([.objectPath(path), .bytes(parameters), .bytes(value), .string(contentType)])
    }

    /// An item's secret, which the store decrypted straight into secret memory, with the item's content type
    /// (`text/plain` when it has none), encrypted for this session. An item without a secret gives an empty
    /// one.
    func encode(_ item: KeychainItem, secret: SharedSecret?) throws(DBusError) -> DBusValue {
        var contentType = "text/plain"
        if case .string(let type) = item.attributes?[.contentType] { contentType = type }
        guard let secret else {
            return try encode(bytes: UnsafeRawBufferPointer(start: nil, count: 0), contentType: contentType)
        }
        return try encode(secret.bytes, contentType: contentType)
    }

    /// Reads a secret a client sent in this session into secret memory: a DH session decrypts it straight
    /// into its pages; a plain session's bytes are copied there and the decoded array's own storage (shared
    /// with the message's decoded value) is wiped in place.
    func decode(parameters: [UInt8], value: [UInt8]) throws(DBusError) -> SharedSecret {
        switch algorithm {
        case .plain:
            defer { wipeSharedStorage(of: value) }
            return try SecretServiceError.inSecretMemory { () throws(SecretMemoryError) in
                try SharedSecret(copying: value)
            }
        case .diffieHellman(let cipher):
            return try Self.decrypting { () throws(SessionCryptoError) in
                try cipher.decrypt(parameters: parameters, value: value)
            }
        }
    }

    /// What `decrypt` decrypted into secret memory; `InvalidArgs` when it does not decrypt.
    private static func decrypting(_ decrypt: () throws(SessionCryptoError) -> SecretBytes) throws(DBusError)
        -> SharedSecret
    {
        do {
            return SharedSecret(try decrypt())
        } catch .noSecretMemory(let failure) {
            throw DBusError(.noMemory, "\(failure)")
        } catch {
            throw SecretServiceError.invalidArgs("the secret could not be decrypted with the session key")
        }
    }
}

/// A `(oayays)` secret as a client sent it.
struct TransportSecret: DBusType {
    let session: String
    let parameters: [UInt8]
    let value: [UInt8]
    let contentType: String

    static var dbusSignature: String { "(oayays)" }

    init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .structure(let members) = value, members.count == 4,
            case .objectPath(let session) = members[0], case .bytes(let parameters) = members[1],
            case .bytes(let bytes) = members[2], case .string(let contentType) = members[3]
        else { throw SecretServiceError.invalidArgs("a secret is a (oayays) structure") }
        self.session = session
        self.parameters = parameters
        self.value = bytes
        self.contentType = contentType
    }

    var dbusValue: DBusValue {
        .structure([.objectPath(session), .bytes(parameters), .bytes(value), .string(contentType)])
    }
}

// MARK: org.latchkey.Keychain1

extension SecretSession {
    /// How many bytes longer a secret is sealed under Diffie-Hellman at most: its IV and a block of padding.
    static let sealingOverhead = 2 * DHSessionCipher.blockLength

    /// Whether secrets are encrypted in this session (not plain).
    var isSealing: Bool {
        if case .diffieHellman = algorithm { return true }
        return false
    }

    /// A secret as `org.latchkey.Keychain1` carries it (`ay`) on a connection with this session: a plain
    /// session's bytes as they are; under Diffie-Hellman the 16-byte IV followed by the ciphertext
    /// (docs/dbus-mapping.md, "Keychain1 sessions").
    func seal(_ secret: UnsafeRawBufferPointer) throws(DBusError) -> [UInt8] {
        switch algorithm {
        case .plain:
            return [UInt8](secret)
        case .diffieHellman(let cipher):
            do {
                return try cipher.seal(secret)
            } catch {
                throw DBusError(.failed, "cannot encrypt the secret for the session: \(error)")
            }
        }
    }

    /// Reads a secret a client sealed as ``seal(_:)`` does, into secret memory (`InvalidArgs` when it does not
    /// decrypt under this session's key).
    func unseal(_ sealed: [UInt8]) throws(DBusError) -> SharedSecret {
        guard case .diffieHellman(let cipher) = algorithm else { return try decode(parameters: [], value: sealed) }
        return try Self.decrypting { () throws(SessionCryptoError) in try cipher.unseal(sealed) }
    }
}

extension SecretServiceDaemon {
    /// Opens a session of `algorithm` for `caller` (the Secret Service's `OpenSession`, and `Keychain1`'s): the
    /// reply's output (the server package key for Diffie-Hellman) and the session, which lasts until its owner
    /// closes it or leaves the bus.
    func openSession(_ algorithm: String, _ input: DBusValue, caller: String) throws(DBusError) -> (
        output: DBusValue, session: SecretSession
    ) {
        let path = ObjectPaths.sessionPrefix + "s\(nextSerial())"
        let session: SecretSession
        let output: DBusValue
        switch algorithm {
        case SecretSession.plainName:
            session = SecretSession(path: path, owner: caller, algorithm: .plain)
            output = .string("")
        case SecretSession.diffieHellmanName:
            guard case .bytes(let clientKey) = input else {
                throw SecretServiceError.invalidArgs("\(algorithm) takes the client's package key as ay")
            }
            let cipher: DHSessionCipher
            do {
                cipher = try DHSessionCipher(clientPublicKey: clientKey)
            } catch {
                throw SecretServiceError.invalidArgs("the client package key is not valid: \(error)")
            }
            session = SecretSession(path: path, owner: caller, algorithm: .diffieHellman(cipher))
            output = .bytes(cipher.serverPublicKey)
        default:
            throw DBusError(.notSupported, "session algorithm '\(algorithm)' is not supported")
        }
        sessions[path] = session
        return (output, session)
    }

    /// `Keychain1`'s `OpenSession`: a session under which every secret `caller`'s `Keychain1` calls carry is
    /// sealed from now on, replacing the one it opened before (closed).
    func openKeychainSession(_ algorithm: String, _ input: DBusValue, caller: String) throws(DBusError)
        -> [DBusValue]
    {
        let opened = try openSession(algorithm, input, caller: caller)
        if let previous = keychainSessions[caller] { close(previous) }
        keychainSessions[caller] = opened.session
        return [.variant(opened.output), .objectPath(opened.session.path)]
    }

    /// The session `caller` opened with `Keychain1`'s `OpenSession`, under which every secret its
    /// `Keychain1` calls carry is sealed; a plain one when it opened none (an older client).
    func keychainSession(of caller: String) -> SecretSession {
        keychainSessions[caller] ?? SecretSession(path: ObjectPaths.none, owner: caller, algorithm: .plain)
    }

    /// Ends `session`: the Secret Service's `Close`, and for `Keychain1` its caller's secrets are plain again.
    func close(_ session: SecretSession) {
        sessions[session.path] = nil
        if keychainSessions[session.owner] === session { keychainSessions[session.owner] = nil }
    }
}
