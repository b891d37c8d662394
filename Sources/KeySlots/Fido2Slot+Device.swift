import FoundationEssentials
import Glibc
import KeychainCore
import KeychainStore
import Posix
import SecurityKeys

/// A fido2 slot of a keychain and the plugged-in security key that holds its credential (found by the
/// touch-free probe).
package struct HeldFido2Slot: Sendable {
    /// The key that holds it.
    package let device: SecurityKeyDevice
    /// The slot.
    package let slot: KeySlot
    /// The slot's parameters.
    package let parameters: Fido2SlotParameters
}

/// Which of a keychain's fido2 slots the security keys reachable now hold.
package struct Fido2SlotSearch: Sendable {
    /// The slots without a PIN found by the touch-free probe, at most one per key (a key holds one slot of a
    /// keychain).
    package let held: [HeldFido2Slot]
    /// The slots with a PIN, on each reachable key: their credentials (credProtect "user verification
    /// required") are hidden from a probe without the PIN, so which key holds which is found once the PIN is
    /// known (``Fido2Slot/find(_:pin:)``).
    package let withPIN: [HeldFido2Slot]
    /// Why none was found, when none was (no key plugged in, only other keys, over SSH…).
    package let reason: String?
}

extension Fido2Slot {
    /// Enrolls the security key `device` in `keychain` (unlocked): a new non-resident credential with
    /// `hmac-secret` for the keychain's relying party (with the key's `pin` when given: then also credProtect "user
    /// verification required"), then its output for a new random salt, which wraps the keychain key. Two touches:
    /// `touchRequested` runs before each. Refused when the key already holds one of the keychain's fido2 slots (one
    /// with a PIN is seen only when `pin` is given: its credential is hidden from a probe without it).
    /// Blocks (a touch waits for a person): not on a serving loop.
    package static func enroll(
        _ keychain: Keychain, device: SecurityKeyDevice, pin: SharedSecret?,
        touchTimeout: Duration = SecurityKeyDevice.defaultTouchTimeout, touchRequested: () -> Void
    ) throws(KeySlotError) -> KeySlot {
        guard !keychain.isLocked else {
            throw .keychain(KeychainError(.interactionNotAllowed, "the keychain is locked"))
        }
        let relyingParty = Fido2SlotParameters.relyingParty(of: keychain)
        for (slot, parameters) in slots(of: keychain) {
            // A slot with a PIN is seen only with the PIN (credProtect): without one it cannot be checked here.
            // Only "not held" goes on: a wrong or blocked PIN is reported at once (the key counted it; it is not
            // sent again), and a key that cannot answer must not be enrolled twice.
            let holds: Bool
            do throws(SecurityKeyError) {
                if parameters.usesPIN {
                    guard let pin else { continue }
                    holds = try device.probe(
                        relyingParty: relyingParty, credentialID: parameters.credentialID, pin: pin.bytes)
                } else {
                    holds = try device.probe(relyingParty: relyingParty, credentialID: parameters.credentialID)
                }
            } catch {
                throw .securityKey(error)
            }
            if holds {
                throw .keychain(
                    KeychainError.param(
                        "this security key holds slot \(slot.id) of the keychain already: one slot per key"))
            }
        }
        let salt = try newSalt()
        let parameters: Fido2SlotParameters
        let secret: SecretBytes
        do throws(SecurityKeyError) {
            touchRequested()
            let credential: EnrolledCredential
            let userName = String(keychain.path.split(separator: "/").last ?? "keychain")
            let userID = [UInt8](keychain.identifier)
            if let pin {
                credential = try device.enroll(
                    relyingParty: relyingParty, userID: userID, userName: userName, pin: pin.bytes,
                    touchTimeout: touchTimeout)
            } else {
                credential = try device.enroll(
                    relyingParty: relyingParty, userID: userID, userName: userName, touchTimeout: touchTimeout)
            }
            parameters = Fido2SlotParameters(
                relyingParty: relyingParty, credentialID: credential.credentialID, salt: salt,
                usesPIN: pin != nil, aaguid: credential.aaguid, product: credential.productName)
            touchRequested()
            secret = try hmacSecret(device, parameters, pin: pin, touchTimeout: touchTimeout)
        } catch {
            throw .securityKey(error)
        }
        return try add(to: keychain, parameters: parameters, secret: secret)
    }

    /// Which of `keychain`'s fido2 slots the reachable keys hold (`devices`: the plugged-in keys, or the one
    /// `LATCHKEY_FIDO2_DEVICE` names), asked with no touch and no PIN; `remote`: the person is in an SSH session
    /// (said when no key is found). Blocks for the probes (a few milliseconds a key): not on a serving loop.
    package static func search(
        _ keychain: Keychain, remote: Bool,
        devices: () throws(SecurityKeyError) -> [SecurityKeyDevice] = SecurityKeyDevice.available
    ) -> Fido2SlotSearch {
        let slots = slots(of: keychain)
        guard !slots.isEmpty else {
            let foreign = foreignSlots(of: keychain)
            return Fido2SlotSearch(
                held: [], withPIN: [],
                reason: foreign.isEmpty
                    ? "the keychain has no fido2 slot"
                    : "fido2 slot \(foreign.map(String.init).joined(separator: ", ")) names another keychain's"
                        + " relying party: skipped")
        }
        let reachable: [SecurityKeyDevice]
        do throws(SecurityKeyError) {
            reachable = try devices()
        } catch {
            return Fido2SlotSearch(held: [], withPIN: [], reason: error.description)
        }
        guard !reachable.isEmpty else {
            return Fido2SlotSearch(
                held: [], withPIN: [],
                reason: remote ? "no security key is reachable over SSH" : "no security key is plugged in")
        }
        let relyingParty = Fido2SlotParameters.relyingParty(of: keychain)
        var held: [HeldFido2Slot] = []
        var failure: String?
        for device in reachable {
            for (slot, parameters) in slots where !parameters.usesPIN {
                do throws(SecurityKeyError) {
                    guard try device.probe(relyingParty: relyingParty, credentialID: parameters.credentialID)
                    else { continue }
                    held.append(HeldFido2Slot(device: device, slot: slot, parameters: parameters))
                    break
                } catch {
                    failure = error.description
                    break
                }
            }
        }
        // A PIN goes only to a key that could hold the slot: one with a PIN set, of the slot's model (AAGUID).
        // Another key would count it as a wrong PIN (and block its PIN after a few).
        let pinSlots = slots.filter(\.parameters.usesPIN)
        let withPIN = reachable.flatMap { device -> [HeldFido2Slot] in
            guard !pinSlots.isEmpty, let identity = try? device.identity(), identity.hasPIN else { return [] }
            return pinSlots.filter { $0.parameters.aaguid == identity.aaguid }.map {
                HeldFido2Slot(device: device, slot: $0.slot, parameters: $0.parameters)
            }
        }
        guard held.isEmpty, withPIN.isEmpty else { return Fido2SlotSearch(held: held, withPIN: withPIN, reason: nil) }
        return Fido2SlotSearch(
            held: [], withPIN: [],
            reason: failure
                ?? (reachable.count == 1
                    ? "the security key plugged in is not one of this keychain's (or it was reset)"
                    : "none of the security keys plugged in is one of this keychain's (or they were reset)"))
    }

    /// Which of `candidates` (slots with a PIN, on the reachable keys) a key holds, probed with the key's `pin`
    /// (no touch); nil when none. A wrong PIN (``SecurityKeyError/wrongPIN(triesLeft:)``) or a blocked one is thrown
    /// at once and the PIN goes to no other key: the key counted it. A key with no PIN set, one that cannot be used
    /// or does not hold the credential is not the slot's key: the next candidate is tried.
    package static func find(_ candidates: [HeldFido2Slot], pin: SharedSecret) throws(KeySlotError) -> HeldFido2Slot? {
        for candidate in candidates {
            do throws(SecurityKeyError) {
                if try candidate.device.probe(
                    relyingParty: candidate.parameters.relyingParty, credentialID: candidate.parameters.credentialID,
                    pin: pin.bytes)
                {
                    return candidate
                }
            } catch {
                switch error {
                case .noPINSet, .unsupported, .otherKey, .unreachable: continue
                default: throw .securityKey(error)
                }
            }
        }
        return nil
    }

    /// The keychain key from the slot `held` names: one assertion with a touch (and the key's `pin` when the slot
    /// uses it). Blocks up to `touchTimeout` for the touch: not on a serving loop.
    package static func unwrapKey(
        _ keychain: Keychain, held: HeldFido2Slot, pin: SharedSecret?,
        touchTimeout: Duration = SecurityKeyDevice.defaultTouchTimeout
    ) throws(KeySlotError) -> UnwrappedKeychainKey {
        let secret = try hmacSecret(held, pin: pin, touchTimeout: touchTimeout)
        return try unwrapKey(keychain, slot: held.slot, secret: secret)
    }

    /// The `hmac-secret` output of the slot `held` names: one assertion with a touch (and the key's `pin` when the
    /// slot uses it), for ``unwrapKey(_:slot:secret:)``. Blocks up to `touchTimeout`, or until `cancellation` is
    /// cancelled from another thread: not on a serving loop.
    package static func hmacSecret(
        _ held: HeldFido2Slot, pin: SharedSecret?, touchTimeout: Duration = SecurityKeyDevice.defaultTouchTimeout,
        cancellation: SecurityKeyCancellation? = nil
    ) throws(KeySlotError) -> SecretBytes {
        guard held.parameters.usesPIN == (pin != nil) else {
            throw .securityKey(held.parameters.usesPIN ? .pinRequired : .invalidInput("this slot takes no PIN"))
        }
        do throws(SecurityKeyError) {
            return try hmacSecret(
                held.device, held.parameters, pin: pin, touchTimeout: touchTimeout, cancellation: cancellation)
        } catch {
            throw .securityKey(error)
        }
    }

    private static func hmacSecret(
        _ device: SecurityKeyDevice, _ parameters: Fido2SlotParameters, pin: SharedSecret?, touchTimeout: Duration,
        cancellation: SecurityKeyCancellation? = nil
    ) throws(SecurityKeyError) -> SecretBytes {
        if let pin {
            return try device.hmacSecret(
                relyingParty: parameters.relyingParty, credentialID: parameters.credentialID, salt: parameters.salt,
                pin: pin.bytes, touchTimeout: touchTimeout, cancellation: cancellation)
        }
        return try device.hmacSecret(
            relyingParty: parameters.relyingParty, credentialID: parameters.credentialID, salt: parameters.salt,
            touchTimeout: touchTimeout, cancellation: cancellation)
    }

    /// The environment variable that sets how long a touch is waited for, in whole seconds (tests shorten it).
    package static let touchTimeoutVariable = "LATCHKEY_FIDO2_TOUCH_TIMEOUT"
    /// The bounds of ``touchTimeoutVariable``: a value outside them, or not a number, is ignored.
    package static let touchTimeoutBounds = 1...120

    /// How long a touch is waited for: ``touchTimeoutVariable`` when it is a whole number of seconds within
    /// ``touchTimeoutBounds``, else ``SecurityKeyDevice/defaultTouchTimeout``. It only moves when the wait gives
    /// up: a touch is needed whatever it says.
    package static func touchTimeout() -> Duration {
        guard let value = getenv(touchTimeoutVariable), let seconds = Int(String(cString: value)),
            touchTimeoutBounds.contains(seconds)
        else { return SecurityKeyDevice.defaultTouchTimeout }
        return .seconds(seconds)
    }

    /// Whether this process runs in an SSH session (`SSH_CONNECTION`), where the person's security key is not
    /// reachable.
    package static var inSSHSession: Bool {
        getenv("SSH_CONNECTION").map { $0.pointee != 0 } ?? false
    }
}
