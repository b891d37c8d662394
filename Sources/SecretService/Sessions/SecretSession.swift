import DBus
import FoundationEssentials
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
    static let diffieHellmanName = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    let path: String
    /// The unique bus name of the client that opened it.
    let owner: String
    let algorithm: Algorithm

    init(path: String, owner: String, algorithm: Algorithm) {
        self.path = path
        self.owner = owner
        self.algorithm = algorithm
    }

    /// The `(oayays)` secret structure for `secret`, encrypted for this session. The decrypted secret is
    /// moved into secret memory for the session cipher and the buffer it was decrypted into is wiped (it is
    /// this reply's own: the store decrypts a secret afresh for each read); a plain session's reply must
    /// carry it as an array (the D-Bus layer's type), freed once the reply is built.
    func encode(_ secret: Data, contentType: String) throws(DBusError) -> DBusValue {
        let plaintext = SecretBytes(copying: secret)
        secret.withUnsafeBytes { raw in
            wipeBytes(UnsafeMutableRawBufferPointer(mutating: raw))
        }
        let parameters: [UInt8]
        let value: [UInt8]
        switch algorithm {
        case .plain:
            parameters = []
            value = plaintext.withUnsafeBytes { [UInt8]($0) }
        case .diffieHellman(let cipher):
            do {
                (parameters, value) = try plaintext.withUnsafeBytes {
                    (bytes) throws(SessionCryptoError) in try cipher.encrypt(bytes)
                }
            } catch {
                throw DBusError(.failed, "cannot encrypt the secret for the session: \(error)")
            }
        }
        return .structure([.objectPath(path), .bytes(parameters), .bytes(value), .string(contentType)])
    }

    /// An item's secret, with its content type (`text/plain` when it has none), encrypted for this session.
    func encode(_ item: KeychainItem) throws(DBusError) -> DBusValue {
        var contentType = "text/plain"
        if case .string(let type) = item.attributes?[.contentType] { contentType = type }
        return try encode(item.secret ?? Data(), contentType: contentType)
    }

    /// Reads a secret a client sent in this session.
    func decode(parameters: [UInt8], value: [UInt8]) throws(DBusError) -> Data {
        switch algorithm {
        case .plain:
            return Data(value)
        case .diffieHellman(let cipher):
            do {
                return Data(try cipher.decrypt(parameters: parameters, value: value))
            } catch {
                throw SecretServiceError.invalidArgs("the secret could not be decrypted with the session key")
            }
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
