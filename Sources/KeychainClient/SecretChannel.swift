import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import Posix

/// How secrets cross the process's connection to the daemon: sealed under the connection's `Keychain1`
/// session (dh-ietf1024-sha256-aes128-cbc-pkcs7, the Secret Service's own), so that another process of the
/// user watching the bus (`dbus-monitor`) reads none; plain only with a daemon that offers no session (one
/// older than this client). docs/dbus-mapping.md, "Keychain1 sessions".
struct SecretChannel: Sendable {
    /// The unique bus name of the daemon that opened the session; nil with a daemon that offers none.
    let daemon: String?
    /// The session's key; nil when secrets cross plain.
    let cipher: DHSessionCipher?

    /// Opens a session with the daemon that owns the Secret Service name (starting it if needed).
    static func open(on bus: DBusConnection) throws(KeychainError) -> SecretChannel {
        let key: DHClientKey
        do {
            key = try DHClientKey()
        } catch {
            throw KeychainError(.internalComponent, "cannot make a session key: \(error)")
        }
        let reply: DBusMessage
        do throws(DBusError) {
            let message = try DBusMessage.methodCall(
                destination: Keychain1Interface.busName, path: Keychain1Interface.rootPath,
                interface: Keychain1Interface.interface,
                member: "OpenSession",
                arguments: [.string(Keychain1Interface.sessionAlgorithm), .variant(.bytes(key.publicKey))])
            reply = try DaemonWait.announcing(DaemonWait.callNotice("OpenSession"), bound: 25_000) {
                () throws(DBusError) in try bus.call(message, timeoutMilliseconds: 25_000)
            }
        } catch  where DaemonWait.timedOut(error) {
            throw DaemonWait.noAnswer("OpenSession", 25_000)
        } catch  where error.name == DBusError.Name.unknownMethod.rawValue {
            // A daemon older than Keychain1 sessions: it reads and answers secrets plain, as it always did.
            return SecretChannel(daemon: nil, cipher: nil)
        } catch {
            throw Keychain1Interface.keychainError(error)
        }
        guard let daemon = reply.sender, let values = try? reply.arguments(), values.count == 2,
            case .bytes(let serverKey) = values[0].unwrapped
        else { throw KeychainError(.decode, "the daemon's OpenSession reply has no package key") }
        do {
            return SecretChannel(
                daemon: daemon, cipher: try DHSessionCipher(serverPublicKey: serverKey, clientKey: key))
        } catch {
            throw KeychainError(.decode, "the daemon's package key is not valid: \(error)")
        }
    }

    /// Whether a call failed because the daemon it was addressed to has left the bus.
    static func isGone(_ error: DBusError) -> Bool {
        error.name == "org.freedesktop.DBus.Error.ServiceUnknown"
            || error.name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }

    /// `secret` as the call carries it: its IV followed by its ciphertext (empty when there is none).
    func seal(_ secret: Data?) throws(KeychainError) -> [UInt8] {
        guard let secret else { return [] }
        return try secret.withUnsafeBytes { bytes in Result { () throws(KeychainError) in try seal(bytes) } }.get()
    }

    /// `secret` as the call carries it: its IV followed by its ciphertext.
    func seal(_ secret: [UInt8]) throws(KeychainError) -> [UInt8] {
        try secret.withUnsafeBytes { bytes in Result { () throws(KeychainError) in try seal(bytes) } }.get()
    }

    /// `secret`, held in secret memory, as the call carries it.
    func seal(_ secret: SharedSecret) throws(KeychainError) -> [UInt8] {
        try secret.withUnsafeBytes { bytes in Result { () throws(KeychainError) in try seal(bytes) } }.get()
    }

    private func seal(_ bytes: UnsafeRawBufferPointer) throws(KeychainError) -> [UInt8] {
        guard let cipher else { return [UInt8](bytes) }
        do {
            return try cipher.seal(bytes)
        } catch {
            throw KeychainError(.internalComponent, "cannot encrypt the secret for the session: \(error)")
        }
    }

    /// A secret the daemon sealed, decrypted into secret memory and kept there.
    func unsealSecret(_ sealed: [UInt8]) throws(KeychainError) -> SharedSecret {
        guard let cipher else {
            do {
                return try SharedSecret(copying: sealed)
            } catch {
                throw KeychainError(.allocate, "no secret memory for a secret: \(error)")
            }
        }
        do {
            return SharedSecret(try cipher.unseal(sealed))
        } catch .noSecretMemory(let failure) {
            throw KeychainError(.allocate, "no secret memory for a secret: \(failure)")
        } catch {
            throw KeychainError(.decode, "a secret from the daemon does not decrypt with the session key")
        }
    }

    /// A secret the daemon sealed, decrypted into secret memory and copied out as the `Data` the API returns.
    func unseal(_ sealed: [UInt8]) throws(KeychainError) -> Data {
        guard let cipher else { return Data(sealed) }
        let secret: SecretBytes
        do {
            secret = try cipher.unseal(sealed)
        } catch .noSecretMemory(let failure) {
            throw KeychainError(.allocate, "no secret memory for a secret: \(failure)")
        } catch {
            throw KeychainError(.decode, "a secret from the daemon does not decrypt with the session key")
        }
        return secret.withUnsafeBytes { Data($0) }
    }
}
