import FoundationEssentials
import KeychainCore
import Posix

/// The secret of an item with a password of its own (`kSecAccessControlApplicationPassword`,
/// docs/secitem-semantics.md, "An item's own password"): the secret encrypted under a key derived by scrypt from
/// the item's password, stored as the item's secret (which the keychain then seals as any other). The keychain
/// key alone does not open it: the item's password is needed at each read.
///
/// Layout (version 1), all integers big-endian:
///
///     "lkip" (4) ‖ version (1) ‖ scrypt log2 N (1) ‖ r (4) ‖ p (4) ‖ salt length (1) ‖ salt ‖
///     nonce (12) ‖ ciphertext ‖ tag (16)
///
/// AES-256-GCM, with associated data
///
///     "latchkey item password v1" ‖ the header (from "lkip" to the salt) ‖ class name ("genp", …) ‖
///     item identifier (16)
///
/// so that the parameters cannot be changed and the envelope opens for its own item only: copied onto another
/// item, it does not open.
package enum ItemPasswordEnvelope {
    /// The 4 bytes that start an envelope.
    static let magic: [UInt8] = Array("lkip".utf8)
    /// The version written.
    static let version: UInt8 = 1
    /// The salt's length: 16 random bytes per envelope.
    static let saltLength = 16
    /// The bytes before the salt: magic, version, the scrypt parameters, the salt's length.
    private static let fixedHeaderLength = 4 + 1 + 1 + 4 + 4 + 1

    /// A new random reference of `itemClass`, for an item whose envelope is sealed before it is added.
    package static func newReference(of itemClass: ItemClass) throws(KeychainError) -> ItemReference {
        ItemReference(itemClass: itemClass, identifier: try SecureRandom.data(count: 16))
    }

    /// Whether `bytes` starts as an envelope does (not that it opens).
    package static func looksLikeEnvelope(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count > fixedHeaderLength && Array(bytes.prefix(4)) == magic
    }

    /// `secret` sealed under a key scrypt (`kdf`, a fresh random salt) derives from `password`, for the item
    /// `item`. Slow (one scrypt): run it off the serving thread.
    package static func seal(
        _ secret: UnsafeRawBufferPointer, password: UnsafeRawBufferPointer, item: ItemReference, kdf: KDFParameters
    ) throws(KeychainError) -> Data {
        let salt = try SecureRandom.data(count: saltLength)
        var header = Data(magic)
        header.append(version)
        header.append(kdf.logN)
        withUnsafeBytes(of: kdf.r.bigEndian) { header.append(contentsOf: $0) }
        withUnsafeBytes(of: kdf.p.bigEndian) { header.append(contentsOf: $0) }
        header.append(UInt8(saltLength))
        header.append(salt)
        let key = try kdf.deriveKey(password: password, salt: salt)
        let box = try AuthenticatedCipher.seal(unowned: secret, key: key, context: context(header, item))
        return header + box
    }

    /// The secret in `envelope`, for the item `item`, opened with `password` into secret memory. Slow (one
    /// scrypt): run it off the serving thread.
    ///
    /// - Throws: `errSecDecode` for bytes that are not an envelope (too short, another magic, an unknown
    ///   version, scrypt parameters out of bounds); `errSecAuthFailed` when it does not open: a wrong password,
    ///   or an envelope altered or made for another item.
    package static func open(_ envelope: Data, password: UnsafeRawBufferPointer, item: ItemReference)
        throws(KeychainError) -> SecretBytes
    {
        try open(envelope, password: password, item: item, keepingKey: { _ in })
    }

    /// ``open(_:password:item:)``, handing the key the password gave to `keep` once it opened the envelope (to
    /// seal a new secret of the item under the same password: ``ItemPasswordKey``).
    static func open(
        _ envelope: Data, password: UnsafeRawBufferPointer, item: ItemReference,
        keepingKey keep: (ItemPasswordKey) -> Void
    ) throws(KeychainError) -> SecretBytes {
        let (kdf, salt, headerLength) = try header(of: envelope)
        let header = Data(envelope.prefix(headerLength))
        let box = Data(envelope.dropFirst(headerLength))
        let key = try kdf.deriveKey(password: password, salt: salt)
        do {
            let secret = try AuthenticatedCipher.openSecret(box, key: key, context: context(header, item))
            keep(ItemPasswordKey(key: key, header: header, item: item))
            return secret
        } catch  where error.status == .allocate {
            throw error
        } catch {
            throw KeychainError(
                .authFailed, "the item's password is not correct (or its stored secret was altered or moved)")
        }
    }

    /// The scrypt parameters, the salt and the header's length of `envelope`; `errSecDecode` when it is not one
    /// this version reads.
    static func header(of envelope: Data) throws(KeychainError) -> (KDFParameters, Data, Int) {
        let bytes = [UInt8](envelope.prefix(fixedHeaderLength + 255))
        guard bytes.count >= fixedHeaderLength, Array(bytes[0..<4]) == magic else {
            throw KeychainError(.decode, "the item's stored secret is not sealed under a password of its own")
        }
        guard bytes[4] == version else {
            throw KeychainError(.decode, "the item's password envelope has an unknown version (\(bytes[4]))")
        }
        let r = bytes[6..<10].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let p = bytes[10..<14].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let kdf = KDFParameters(logN: bytes[5], r: r, p: p)
        let saltLength = Int(bytes[14])
        let headerLength = fixedHeaderLength + saltLength
        guard kdf.isAcceptable, saltLength == Self.saltLength,
            envelope.count >= headerLength + AuthenticatedCipher.nonceLength + AuthenticatedCipher.tagLength
        else {
            throw KeychainError(.decode, "the item's password envelope is damaged (its header or its length)")
        }
        return (kdf, Data(bytes[fixedHeaderLength..<headerLength]), headerLength)
    }

    /// The associated data of the envelope's box.
    fileprivate static func context(_ header: Data, _ item: ItemReference) -> Data {
        Data("latchkey item password v1".utf8) + header + Data(item.itemClass.rawValue.utf8) + item.identifier
    }
}

/// The key an item's password gave when it opened the item's envelope (``Keychain/openItemSecret(_:password:item:)``),
/// in secret memory: seals a new secret of that item under the same password (its salt and parameters kept, a fresh
/// nonce), without asking for the password again or running scrypt. Kept for one reply only.
package final class ItemPasswordKey: @unchecked Sendable {
    private let key: SecretKey
    private let header: Data
    private let item: ItemReference

    fileprivate init(key: SecretKey, header: Data, item: ItemReference) {
        self.key = key
        self.header = header
        self.item = item
    }

    /// `secret` sealed for the same item under the same password: a new envelope.
    package func seal(_ secret: UnsafeRawBufferPointer) throws(KeychainError) -> Data {
        header
            + (try AuthenticatedCipher.seal(
                unowned: secret, key: key, context: ItemPasswordEnvelope.context(header, item)))
    }
}

/// An item's secret opened with its own password, and the key that opened it (to seal a new secret under it).
package struct OpenedItemSecret: Sendable {
    /// The secret, in secret memory.
    package let secret: SharedSecret
    /// The key the password gave.
    package let key: ItemPasswordKey
}
