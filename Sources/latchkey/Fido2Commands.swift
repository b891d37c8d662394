import FoundationEssentials
import Glibc
import KeySlots
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import SecurityKeys

/// The security key an `add-slot fido2` enrolls: `--device` when given, else the one plugged in (or the one
/// `LATCHKEY_FIDO2_DEVICE` names); several plugged in must be told apart with `--device`.
func securityKeyToEnroll(_ named: String?) throws(KeychainError) -> SecurityKeyDevice {
    if let named { return SecurityKeyDevice(path: named) }
    let devices: [SecurityKeyDevice]
    do throws(SecurityKeyError) {
        devices = try SecurityKeyDevice.available()
    } catch {
        throw KeychainError(.interactionNotAllowed, error.description)
    }
    guard let only = devices.first else {
        throw KeychainError(
            .interactionNotAllowed,
            Fido2Slot.inSSHSession
                ? "no security key is reachable over SSH: plug it into this machine and run add-slot there"
                : "no security key is plugged in")
    }
    guard devices.count == 1 else {
        throw KeychainError.param(
            "\(devices.count) security keys are plugged in (\(devices.map { PromptText.field($0.description) }.joined(separator: ", "))):"
                + " name one with --device")
    }
    return only
}

/// Enrolls `device` in `file` (unlocked) as a new fido2 slot, with the key's PIN from `secrets` when `pin`.
func addFido2Slot(_ file: Keychain, device: SecurityKeyDevice, pin: Bool, secrets: SlotSecrets)
    throws(KeychainError) -> KeySlot
{
    var pinBytes =
        pin
        ? try secrets.next(
            prompt: "PIN of the security key: ",
            request: PinentryRequest(
                title: "Security key PIN",
                description: "latchkey needs the PIN of the security key \(PromptText.field(device.description))",
                prompt: "PIN:", error: nil)) : []
    defer { wipeBytes(&pinBytes) }
    let pinSecret =
        pin
        ? try KeychainError.allocating { () throws(SecretMemoryError) in try SharedSecret(copying: pinBytes) } : nil
    do throws(KeySlotError) {
        return try Fido2Slot.enroll(
            file, device: device, pin: pinSecret, touchTimeout: Fido2Slot.touchTimeout()
        ) {
            StandardError.write("latchkey: touch your security key…")
        }
    } catch {
        throw error.keychainError
    }
}

/// Opens `file` (locked) with a fido2 slot a reachable security key holds: a touch (and its PIN, asked on the
/// terminal, when the slot uses one). Nil when there is no such slot or key, or the key refused: one line says
/// why, and the caller asks for the password.
func unlockWithSecurityKey(_ file: Keychain) -> UnwrappedKeychainKey? {
    guard !Fido2Slot.slots(of: file).isEmpty else { return nil }
    let search = Fido2Slot.search(file, remote: Fido2Slot.inSSHSession)
    let giveUp = { (reason: String) -> UnwrappedKeychainKey? in
        StandardError.write("latchkey: \(reason); asking for the password")
        return nil
    }
    let touch = { (held: HeldFido2Slot, pin: SharedSecret?) -> UnwrappedKeychainKey? in
        StandardError.write("latchkey: touch your security key to unlock \(file.path)…")
        do throws(KeySlotError) {
            return try Fido2Slot.unwrapKey(file, held: held, pin: pin, touchTimeout: Fido2Slot.touchTimeout())
        } catch {
            return giveUp(error.description)
        }
    }
    if let held = search.held.first { return touch(held, nil) }
    guard !search.withPIN.isEmpty else { return search.reason.flatMap(giveUp) }
    // Slots with a PIN: which key holds which is seen only with the PIN.
    var complaint = ""
    for _ in 0..<3 {
        guard var typed = try? SecretInput.fromTerminal(prompt: complaint + "PIN of the security key: ") else {
            return giveUp("no terminal to ask the security key's PIN on")
        }
        defer { wipeBytes(&typed) }
        guard !typed.isEmpty, let pin = try? SharedSecret(copying: typed) else { return giveUp("no PIN given") }
        do throws(KeySlotError) {
            guard let held = try Fido2Slot.find(search.withPIN, pin: pin) else {
                return giveUp("the security key plugged in is not one of this keychain's (or it was reset)")
            }
            return touch(held, pin)
        } catch {
            guard case .securityKey(.wrongPIN) = error else { return giveUp(error.description) }
            complaint = "latchkey: \(error.description)\n"
        }
    }
    return giveUp("three wrong PINs")
}
