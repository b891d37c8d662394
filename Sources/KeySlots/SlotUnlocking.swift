import COpenSSL
import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix
import SecurityKeys
import TPMSealing

/// Why a slot could not be added or opened, in the terms of the part that failed.
package enum KeySlotError: Error, CustomStringConvertible {
    /// The keychain refused (locked, wrong key, no such slot, the last password-like slot…).
    case keychain(KeychainError)
    /// The TPM refused (wrong PIN, lockout, another TPM, changed PCRs, no TPM…).
    case tpm(TPMSealingError)
    /// The recovery key as typed is not one (typo, length).
    case recoveryKey(RecoveryKeyError)
    /// The keychain has no slot of the kind asked for.
    case noSlot(String)
    /// The security key refused or could not be used (another key, wrong PIN, no touch, no key…).
    case securityKey(SecurityKeyError)

    /// One line for the user.
    package var description: String {
        switch self {
        case .keychain(let error): error.reason.isEmpty ? error.status.message : error.reason
        case .tpm(let error): error.description
        case .recoveryKey(let error): error.description
        case .noSlot(let reason): reason
        case .securityKey(let error): error.description
        }
    }

    /// The error as a keychain status: wrong PIN or recovery key, another security key `errSecAuthFailed`, no
    /// TPM or lockout, no security key or no touch `errSecInteractionNotAllowed`, cancelled at the key
    /// `errSecUserCanceled`, bad input `errSecParam`.
    package var keychainError: KeychainError {
        switch self {
        case .keychain(let error): error
        case .tpm(.wrongPIN), .tpm(.notThisTPM), .tpm(.pcrsChanged), .recoveryKey:
            KeychainError(.authFailed, description)
        case .tpm(.invalidInput): KeychainError(.param, description)
        case .tpm: KeychainError(.interactionNotAllowed, description)
        case .noSlot: KeychainError(.param, description)
        case .securityKey(.wrongPIN), .securityKey(.otherKey): KeychainError(.authFailed, description)
        case .securityKey(.cancelled): KeychainError(.userCanceled, description)
        case .securityKey(.invalidInput): KeychainError(.param, description)
        case .securityKey: KeychainError(.interactionNotAllowed, description)
        }
    }
}

/// The tpm2 slot: the keychain key wrapped under a random 32-byte key that the machine's TPM seals (with the
/// PIN as the sealed object's authorisation, and a PCR policy when asked). The TPM never sees the keychain key.
package enum TPMSlot {
    /// The sealed key a tpm2 slot holds, nil for another kind or unreadable parameters.
    package static func sealedKey(of slot: KeySlot) -> SealedKey? {
        guard slot.kind == .tpm2 else { return nil }
        return try? SealedKey(encoded: [UInt8](slot.parameters))
    }

    /// Adds a tpm2 slot to `keychain` (unlocked): a new random key sealed by the TPM `sealing` talks to, with
    /// `pin` when given and bound to `pcrs` (SHA-256 bank indices) when not empty.
    package static func add(
        to keychain: Keychain, pin: SharedSecret?, pcrs: [UInt8], sealing: KeySealing = KeySealing()
    ) throws(KeySlotError) -> KeySlot {
        guard !keychain.isLocked else {
            throw .keychain(KeychainError(.interactionNotAllowed, "the keychain is locked"))
        }
        let slotKey = try randomKey()
        let sealed: SealedKey
        do throws(TPMSealingError) {
            if let pin {
                sealed = try sealing.seal(key: slotKey, pin: pin.bytes, pcrs: pcrs)
            } else {
                sealed = try sealing.seal(key: slotKey, pcrs: pcrs)
            }
        } catch {
            throw .tpm(error)
        }
        do throws(KeychainError) {
            return try keychain.addKeySlot(.tpm2, parameters: Data(sealed.encoded()), slotKey: slotKey)
        } catch {
            throw .keychain(error)
        }
    }

    /// The keychain key from `keychain`'s tpm2 slots: those without a PIN when `pin` is nil, else those with one
    /// (tried in id order; the first that opens wins). Slow (a TPM round trip or several): not on a serving loop.
    ///
    /// - Throws: ``KeySlotError/noSlot(_:)`` when there is no such slot, else the last slot's failure.
    package static func unwrapKey(
        _ keychain: Keychain, pin: SharedSecret?, sealing: KeySealing = KeySealing()
    ) throws(KeySlotError) -> UnwrappedKeychainKey {
        let slots: [KeySlot]
        do throws(KeychainError) {
            slots = try keychain.keySlots().slots
        } catch {
            throw .keychain(error)
        }
        let candidates = slots.compactMap { slot in sealedKey(of: slot).map { (slot, $0) } }
            .filter { $0.1.needsPIN == (pin != nil) }
        guard !candidates.isEmpty else {
            throw .noSlot(
                pin == nil ? "the keychain has no tpm2 slot without a PIN" : "the keychain has no tpm2 slot with a PIN")
        }
        var failure = KeySlotError.noSlot("no tpm2 slot opened")
        for (slot, sealed) in candidates {
            do throws(TPMSealingError) {
                let slotKey: SecretBytes
                if let pin {
                    slotKey = try sealing.unseal(sealed, pin: pin.bytes)
                } else {
                    slotKey = try sealing.unseal(sealed)
                }
                do throws(KeychainError) {
                    return try keychain.unwrapKey(slot: slot.id, slotKey: slotKey)
                } catch {
                    failure = .keychain(error)
                }
            } catch {
                failure = .tpm(error)
                // A wrong PIN or a lockout counts against the TPM: one try per answer, not one per slot.
                if case .wrongPIN = error { throw failure }
                if case .lockedOut = error { throw failure }
            }
        }
        throw failure
    }

    /// Seals again, to the PCR values the machine has now, the tpm2 slots of `keychain` (unlocked) that need no
    /// PIN and are bound to PCRs that changed (a firmware, Secure Boot database or boot chain update): for each
    /// set of PCR indices whose slots the TPM now refuses for that reason, and none of which still opens, a new
    /// slot bound to the same indices is added. The old slots stay until one of the new kind has opened the
    /// keychain at a login (``removeOutdated(_:sealing:)``): PCRs that changed only for this boot (another boot
    /// entry, a PCR extended since) must not cost the slot that opens at the next one. A slot with a PIN is left
    /// as it is (its PIN is not known here), as is one that fails for another reason (another TPM, no TPM).
    /// Slow (TPM round trips): not on a serving loop. Returns the slots added.
    ///
    /// Only after the keychain was opened some other way (its password, its recovery key): whoever did that
    /// could read every secret anyway, and a slot sealed to the present state gives them nothing more.
    package static func resealChanged(_ keychain: Keychain, sealing: KeySealing = KeySealing())
        throws(KeySlotError) -> [KeySlot]
    {
        var added: [KeySlot] = []
        for (pcrs, slots) in try pcrBoundSlotsWithoutPIN(keychain) {
            let states = slots.map { state(of: $0.sealed, sealing) }
            guard !states.contains(.opens), states.contains(.pcrsChanged) else { continue }
            added.append(try add(to: keychain, pin: nil, pcrs: pcrs, sealing: sealing))
        }
        return added
    }

    /// After a tpm2 slot without a PIN opened `keychain` at a login: removes the slots without a PIN bound to
    /// the same PCR indices that the TPM now refuses because the PCRs changed (those ``resealChanged(_:sealing:)``
    /// replaced, or its replacements when the change was only for one boot). A slot is removed only if its row
    /// is still what was tried (not one made meanwhile under the same id). Returns the ids removed.
    package static func removeOutdated(_ keychain: Keychain, sealing: KeySealing = KeySealing())
        throws(KeySlotError) -> [UInt8]
    {
        var removed: [UInt8] = []
        for (_, slots) in try pcrBoundSlotsWithoutPIN(keychain) {
            let states = slots.map { (slot: $0.slot, state: state(of: $0.sealed, sealing)) }
            guard states.contains(where: { $0.state == .opens }) else { continue }
            for (slot, state) in states where state == .pcrsChanged {
                do throws(KeychainError) {
                    // Read again just before: the id must still hold the slot that was tried.
                    guard try keychain.keySlots().slots.contains(where: { $0 == slot }) else { continue }
                    try keychain.removeKeySlot(id: slot.id)
                } catch {
                    throw .keychain(error)
                }
                removed.append(slot.id)
            }
        }
        return removed
    }

    /// What the TPM says of a sealed key now.
    private enum SealedState: Equatable {
        case opens, pcrsChanged, otherwise
    }

    private static func state(of sealed: SealedKey, _ sealing: KeySealing) -> SealedState {
        do throws(TPMSealingError) {
            _ = try sealing.unseal(sealed)
            return .opens
        } catch {
            if case .pcrsChanged = error { return .pcrsChanged }
            return .otherwise
        }
    }

    /// The keychain's tpm2 slots without a PIN that are bound to PCRs, by their PCR indices.
    private static func pcrBoundSlotsWithoutPIN(_ keychain: Keychain) throws(KeySlotError)
        -> [(pcrs: [UInt8], slots: [(slot: KeySlot, sealed: SealedKey)])]
    {
        let slots: [KeySlot]
        do throws(KeychainError) {
            slots = try keychain.keySlots().slots
        } catch {
            throw .keychain(error)
        }
        var groups: [(pcrs: [UInt8], slots: [(slot: KeySlot, sealed: SealedKey)])] = []
        for slot in slots {
            guard let sealed = sealedKey(of: slot), !sealed.needsPIN, !sealed.pcrs.isEmpty else { continue }
            if let index = groups.firstIndex(where: { $0.pcrs == sealed.pcrs }) {
                groups[index].slots.append((slot, sealed))
            } else {
                groups.append((sealed.pcrs, [(slot, sealed)]))
            }
        }
        return groups
    }

    /// Whether `keychain` has a tpm2 slot that needs a PIN, and one that needs none.
    package static func kinds(of keychain: Keychain) -> (withPIN: Bool, withoutPIN: Bool) {
        let sealed = ((try? keychain.keySlots().slots) ?? []).compactMap(sealedKey(of:))
        return (sealed.contains { $0.needsPIN }, sealed.contains { !$0.needsPIN })
    }

    /// 32 random bytes from OpenSSL's generator, in secret memory.
    static func randomKey() throws(KeySlotError) -> SecretBytes {
        var key = try secretMemory(KeySealing.keyLength)
        let failed = key.withUnsafeMutableBytes { (bytes) in
            RAND_bytes(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count)) != 1
        }
        if failed { throw .recoveryKey(.noRandomness) }
        return key
    }
}

/// The recovery slot: the keychain key wrapped under HKDF-SHA-256 of the recovery key's 150 bits, with a random
/// salt the slot holds.
package enum RecoverySlot {
    static let saltLength = 16
    static let info = Array("latchkey recovery slot v1".utf8)

    /// Adds a recovery slot to `keychain` (unlocked) that `recoveryKey` (new, from ``RecoveryKey/generate()``,
    /// shown once to the user by the caller) opens.
    package static func add(to keychain: Keychain, recoveryKey: RecoveryKey) throws(KeySlotError) -> KeySlot {
        guard !keychain.isLocked else {
            throw .keychain(KeychainError(.interactionNotAllowed, "the keychain is locked"))
        }
        var salt = [UInt8](repeating: 0, count: saltLength)
        guard RAND_bytes(&salt, Int32(saltLength)) == 1 else { throw .recoveryKey(.noRandomness) }
        let slotKey = try derive(recoveryKey, salt: salt)
        do throws(KeychainError) {
            return try keychain.addKeySlot(.recovery, parameters: Data(salt), slotKey: slotKey)
        } catch {
            throw .keychain(error)
        }
    }

    /// The keychain key from the recovery slot `recoveryText` (as the user typed it) opens.
    ///
    /// - Throws: ``KeySlotError/recoveryKey(_:)`` for a mistyped key (nothing tried), `errSecAuthFailed`
    ///   when it opens no recovery slot, ``KeySlotError/noSlot(_:)`` when there is none.
    package static func unwrapKey(_ keychain: Keychain, recoveryText: [UInt8]) throws(KeySlotError)
        -> UnwrappedKeychainKey
    {
        var recoveryKey: RecoveryKey
        do throws(RecoveryKeyError) {
            recoveryKey = try RecoveryKey(parsing: recoveryText)
        } catch {
            throw .recoveryKey(error)
        }
        defer { recoveryKey.wipe() }
        let slots: [KeySlot]
        do throws(KeychainError) {
            slots = try keychain.keySlots().slots.filter { $0.kind == .recovery }
        } catch {
            throw .keychain(error)
        }
        guard !slots.isEmpty else { throw .noSlot("the keychain has no recovery slot") }
        var failure = KeySlotError.keychain(KeychainError(.authFailed, "the recovery key opens no slot"))
        for slot in slots where slot.parameters.count == saltLength {
            let slotKey = try derive(recoveryKey, salt: [UInt8](slot.parameters))
            do throws(KeychainError) {
                return try keychain.unwrapKey(slot: slot.id, slotKey: slotKey)
            } catch  where error.status == .authFailed {
                continue
            } catch {
                failure = .keychain(error)
            }
        }
        throw failure
    }

    /// HKDF-SHA-256 of the key's 150 bits with `salt`, into secret memory.
    static func derive(_ recoveryKey: RecoveryKey, salt: [UInt8]) throws(KeySlotError) -> SecretBytes {
        let secret: SecretBytes
        do {
            secret = try SecretBytes(copying: recoveryKey.secret)
        } catch {
            throw .keychain(KeychainError(.allocate, error.description))
        }
        return try secret.withUnsafeBytes { (secret) throws(KeySlotError) in
            try SlotKeyDerivation.hkdfSHA256(secret: secret, salt: salt, info: Self.info)
        }
    }
}

/// The key derivation of the slots whose key comes from a secret outside the file (the recovery key's bits, a
/// security key's `hmac-secret` output): one HKDF-SHA-256 for all of them.
enum SlotKeyDerivation {
    /// HKDF-SHA-256 (extract and expand) of `secret` with `salt` and `info`, 32 bytes into secret memory.
    static func hkdfSHA256(secret: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8]) throws(KeySlotError)
        -> SecretBytes
    {
        guard let kdf = EVP_KDF_fetch(nil, "HKDF", nil) else {
            throw .keychain(KeychainError(.internalComponent, "OpenSSL has no HKDF"))
        }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else {
            throw .keychain(KeychainError(.allocate, "cannot allocate a KDF context"))
        }
        defer { EVP_KDF_CTX_free(context) }
        var salt = salt
        var info = info
        var status: Int32 = 0
        var key = try secretMemory(KeySealing.keyLength)
        key.withUnsafeMutableBytes { (out) in
            salt.withUnsafeMutableBytes { salt in
                info.withUnsafeMutableBytes { info in
                    var parameters = [
                        OSSL_PARAM_construct_utf8_string(
                            parameterName("digest"), UnsafeMutablePointer(mutating: parameterName("SHA256")), 0),
                        OSSL_PARAM_construct_octet_string(
                            parameterName("key"), UnsafeMutableRawPointer(mutating: secret.baseAddress),
                            secret.count),
                        OSSL_PARAM_construct_octet_string(parameterName("salt"), salt.baseAddress, salt.count),
                        OSSL_PARAM_construct_octet_string(parameterName("info"), info.baseAddress, info.count),
                        OSSL_PARAM_construct_end(),
                    ]
                    status = EVP_KDF_derive(
                        context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count, &parameters)
                }
            }
        }
        guard status == 1 else { throw .keychain(KeychainError(.internalComponent, "HKDF failed")) }
        return key
    }
}

/// `count` zeroed bytes of secret memory; `errSecAllocate` when none can be mapped.
func secretMemory(_ count: Int) throws(KeySlotError) -> SecretBytes {
    do {
        return try SecretBytes(zeros: count)
    } catch {
        throw .keychain(KeychainError(.allocate, error.description))
    }
}

/// A C string that lives as long as the program (OpenSSL keeps parameter names and strings by pointer).
private func parameterName(_ name: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}
