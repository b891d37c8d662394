import COpenSSL
import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// What a fido2 slot holds besides its wrapped key (docs/key-slots.md, "FIDO2 security key slot"): the credential
/// the security key made for this keychain, the salt its `hmac-secret` is asked for, whether the key's PIN is
/// part of it, and the key's AAGUID and product name (so that `list-slots` tells keys apart).
///
/// Read from a file anyone who can write it may have made: ``init(encoded:)`` is bounded and versioned, and the
/// whole is bound to the wrapped key (a changed byte opens nothing).
package struct Fido2SlotParameters: Sendable, Equatable {
    /// The encoding's version.
    static let version: UInt8 = 1
    /// The salt's length: `hmac-secret` takes one or two 32-byte salts.
    package static let saltLength = 32
    /// An AAGUID's length.
    package static let aaguidLength = 16
    /// The longest credential id read (CTAP2 keys make ids of 16 to a few hundred bytes).
    package static let maximumCredentialLength = 1024
    /// The prefix of the relying party id: `latchkey:` and the keychain's id in hexadecimal.
    package static let relyingPartyPrefix = "latchkey:"
    private static let pinFlag: UInt8 = 1

    /// The relying party id the credential was made for (`latchkey:` + the keychain's id).
    package var relyingParty: String
    /// The non-resident credential's id (the key needs it back: it holds nothing per credential).
    package var credentialID: [UInt8]
    /// The random salt the `hmac-secret` output is asked for (32 bytes).
    package var salt: [UInt8]
    /// Whether the key's PIN is asked (user verification): fixed at enrollment, since the key derives another
    /// secret with it than without.
    package var usesPIN: Bool
    /// The key's model (16 bytes; zeros for a key that does not tell).
    package var aaguid: [UInt8]
    /// The key's product name as it gave it at enrollment (printable: no control, format or separator
    /// characters; at most 255 bytes, cut on a character's boundary).
    package var product: String

    /// Parameters from their fields.
    package init(
        relyingParty: String, credentialID: [UInt8], salt: [UInt8], usesPIN: Bool, aaguid: [UInt8], product: String
    ) {
        self.relyingParty = relyingParty
        self.credentialID = credentialID
        self.salt = salt
        self.usesPIN = usesPIN
        self.aaguid = aaguid
        self.product = Self.truncated(Self.printable(product), toUTF8Bytes: 255)
    }

    /// The relying party id of `keychain`'s credentials.
    package static func relyingParty(of keychain: Keychain) -> String {
        relyingPartyPrefix + keychain.identifier.map { hexByte($0) }.joined()
    }

    /// The bytes the slot stores: version, flags, salt, AAGUID, then the relying party id (1-byte length), the
    /// credential id (2-byte big-endian length) and the product name (1-byte length).
    package func encoded() -> [UInt8] {
        let party = Array(relyingParty.utf8.prefix(255))
        let name = Array(product.utf8.prefix(255))
        var bytes: [UInt8] = [Self.version, usesPIN ? Self.pinFlag : 0]
        bytes += salt + aaguid
        bytes.append(UInt8(party.count))
        bytes += party
        bytes += [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xFF)]
        bytes += credentialID
        bytes.append(UInt8(name.count))
        bytes += name
        return bytes
    }

    /// Parameters from the slot's bytes; nil for another version, unknown flags, a length out of bounds, a
    /// relying party id that is not `latchkey:`'s, a name that is not printable UTF-8, or bytes left over.
    package init?(encoded bytes: [UInt8]) {
        var reader = BoundedReader(bytes)
        guard reader.byte() == Self.version, let flags = reader.byte(), flags & ~Self.pinFlag == 0,
            let salt = reader.bytes(Self.saltLength), let aaguid = reader.bytes(Self.aaguidLength),
            let partyLength = reader.byte(), let party = reader.bytes(Int(partyLength)),
            let high = reader.byte(), let low = reader.byte()
        else { return nil }
        let credentialLength = Int(high) << 8 | Int(low)
        guard (1...Self.maximumCredentialLength).contains(credentialLength),
            let credential = reader.bytes(credentialLength),
            let nameLength = reader.byte(), let name = reader.bytes(Int(nameLength)), reader.isAtEnd,
            let relyingParty = String(validating: party, as: UTF8.self),
            relyingParty.hasPrefix(Self.relyingPartyPrefix),
            relyingParty.allSatisfy({ $0.isASCII && !$0.isWhitespace }),
            let product = String(validating: name, as: UTF8.self), Self.printable(product) == product
        else { return nil }
        self.relyingParty = relyingParty
        self.credentialID = credential
        self.salt = salt
        self.usesPIN = flags & Self.pinFlag != 0
        self.aaguid = aaguid
        self.product = product
    }

    /// The AAGUID as `list-slots` shows it: 8-4-4-4-12 hexadecimal digits.
    package var aaguidText: String {
        let hex = aaguid.map { hexByte($0) }
        return [0..<4, 4..<6, 6..<8, 8..<10, 10..<16].map { hex[$0].joined() }.joined(separator: "-")
    }

    /// `text` with control characters (a terminal's escape sequences among them), line and paragraph separators
    /// and format characters (bidi overrides and isolates, zero-width ones) replaced by spaces: one line, shown as
    /// written.
    static func printable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map {
                    switch $0.properties.generalCategory {
                    case .control, .format, .lineSeparator, .paragraphSeparator: " "
                    default: $0
                    }
                }))
    }

    /// The longest start of `text` of at most `limit` UTF-8 bytes that ends on a character's boundary (a cut in
    /// the middle of one would not decode back).
    static func truncated(_ text: String, toUTF8Bytes limit: Int) -> String {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let next = text.index(after: index)
            used += text[index..<next].utf8.count
            guard used <= limit else { break }
            end = next
        }
        return String(text[..<end])
    }
}

/// Two lower-case hexadecimal digits.
private func hexByte(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
}

/// Reads fields off a byte array, never past its end.
private struct BoundedReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }
}

/// The fido2 slot: the keychain key wrapped under HKDF-SHA-256 of a security key's 32-byte `hmac-secret` output
/// for the slot's salt, with the slot's salt and an info naming the keychain and the slot's credential. The
/// device work (enrolling, probing, the assertion with a touch) is the caller's; this is the keychain's side.
package enum Fido2Slot {
    /// The length of an `hmac-secret` output for one salt.
    package static let secretLength = 32
    static let infoLabel = Array("latchkey fido2 slot v1\0".utf8)

    /// The fido2 slots of `keychain` whose parameters read and name the keychain's own relying party
    /// (``Fido2SlotParameters/relyingParty(of:)``; a row naming another is skipped, ``foreignSlots(of:)``), in id
    /// order.
    package static func slots(of keychain: Keychain) -> [(slot: KeySlot, parameters: Fido2SlotParameters)] {
        let relyingParty = Fido2SlotParameters.relyingParty(of: keychain)
        return readableSlots(of: keychain).filter { $0.parameters.relyingParty == relyingParty }
    }

    /// The ids of `keychain`'s fido2 slots whose parameters read but name another relying party than the
    /// keychain's: a row copied from another keychain or altered, never used.
    package static func foreignSlots(of keychain: Keychain) -> [Int] {
        let relyingParty = Fido2SlotParameters.relyingParty(of: keychain)
        return readableSlots(of: keychain).filter { $0.parameters.relyingParty != relyingParty }.map { Int($0.slot.id) }
    }

    private static func readableSlots(of keychain: Keychain) -> [(slot: KeySlot, parameters: Fido2SlotParameters)] {
        ((try? keychain.keySlots().slots) ?? []).compactMap { slot in
            parameters(of: slot).map { (slot, $0) }
        }
    }

    /// The parameters a fido2 slot holds, nil for another kind or unreadable ones.
    package static func parameters(of slot: KeySlot) -> Fido2SlotParameters? {
        guard slot.kind == .fido2 else { return nil }
        return Fido2SlotParameters(encoded: [UInt8](slot.parameters))
    }

    /// Adds a fido2 slot to `keychain` (unlocked) with the credential of `parameters` (made for
    /// ``Fido2SlotParameters/relyingParty(of:)``), whose `hmac-secret` output for the slot's salt is `secret`.
    package static func add(
        to keychain: Keychain, parameters: Fido2SlotParameters, secret: borrowing SecretBytes
    ) throws(KeySlotError) -> KeySlot {
        guard !keychain.isLocked else {
            throw .keychain(KeychainError(.interactionNotAllowed, "the keychain is locked"))
        }
        guard parameters.relyingParty == Fido2SlotParameters.relyingParty(of: keychain),
            Fido2SlotParameters(encoded: parameters.encoded()) == parameters
        else { throw .keychain(KeychainError.param("the security key's credential is not one for this keychain")) }
        let slotKey = try wrappingKey(keychain, parameters, secret: secret)
        do throws(KeychainError) {
            return try keychain.addKeySlot(.fido2, parameters: Data(parameters.encoded()), slotKey: slotKey)
        } catch {
            throw .keychain(error)
        }
    }

    /// The keychain key from the fido2 slot `slot`, given its key's `hmac-secret` output `secret`.
    ///
    /// - Throws: `errSecAuthFailed` when the output does not open the slot (another key, or the PIN used
    ///   otherwise than at enrollment), `errSecDecode` for a slot not in the authenticated list.
    package static func unwrapKey(_ keychain: Keychain, slot: KeySlot, secret: borrowing SecretBytes)
        throws(KeySlotError) -> UnwrappedKeychainKey
    {
        guard let parameters = parameters(of: slot) else {
            throw .noSlot("slot \(slot.id) is not a fido2 slot that can be read")
        }
        let slotKey = try wrappingKey(keychain, parameters, secret: secret)
        do throws(KeychainError) {
            return try keychain.unwrapKey(slot: slot.id, slotKey: slotKey)
        } catch {
            throw .keychain(error)
        }
    }

    /// HKDF-SHA-256 of the output with the slot's salt; the info names the keychain (its id) and the slot (its
    /// credential id, which the key made for it alone).
    static func wrappingKey(_ keychain: Keychain, _ parameters: Fido2SlotParameters, secret: borrowing SecretBytes)
        throws(KeySlotError) -> SecretBytes
    {
        guard secret.count == secretLength else {
            throw .keychain(KeychainError(.authFailed, "the security key's secret is not 32 bytes"))
        }
        let info = infoLabel + [UInt8](keychain.identifier) + parameters.credentialID
        return try secret.withUnsafeBytes { (bytes) throws(KeySlotError) in
            try SlotKeyDerivation.hkdfSHA256(secret: bytes, salt: parameters.salt, info: info)
        }
    }

    /// 32 random bytes for a new slot's salt.
    package static func newSalt() throws(KeySlotError) -> [UInt8] {
        var salt = [UInt8](repeating: 0, count: Fido2SlotParameters.saltLength)
        guard RAND_bytes(&salt, Int32(salt.count)) == 1 else { throw .recoveryKey(.noRandomness) }
        return salt
    }
}
