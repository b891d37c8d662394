/// Why sealing or unsealing failed, in the terms a caller acts on.
package enum TPMSealingError: Error, Equatable, CustomStringConvertible {
    /// No TPM answered through the configured TCTI (no device, no permission, simulator not running).
    case noTPM(tcti: String, reason: String)
    /// The PIN was wrong; the TPM counted a failed authorisation. `triesLeft` is what the TPM reports before
    /// it locks out (nil when it would not say).
    case wrongPIN(triesLeft: UInt32?)
    /// The TPM is in dictionary-attack lockout and refuses every PIN for now. `secondsPerRecoveredTry` is the
    /// TPM's lockout interval: one failed try is forgotten per interval (nil when it would not say).
    case lockedOut(secondsPerRecoveredTry: UInt32?)
    /// The sealed key was made by another TPM (another machine, or this one after a TPM clear): it cannot load.
    case notThisTPM
    /// The key is bound to PCR values that are no longer the current ones (changed boot chain or configuration).
    case pcrsChanged
    /// The sealed key needs a PIN and none was given.
    case pinRequired
    /// The arguments cannot be sealed: a key that is not 32 bytes, a PCR index out of range, unreadable bytes.
    case invalidInput(String)
    /// Any other TPM or library failure, with the operation, its response code and tpm2-tss's text for it.
    case tpm(operation: String, code: UInt32, text: String)
    /// No secret memory could be mapped for the unsealed key (no address space or memory left).
    case noSecretMemory(String)

    /// One line for the user.
    package var description: String {
        switch self {
        case .noTPM(let tcti, let reason): "no TPM reachable through \(tcti): \(reason)"
        case .wrongPIN(let triesLeft?): "wrong PIN (\(triesLeft) tries left before the TPM locks out)"
        case .wrongPIN(nil): "wrong PIN"
        case .lockedOut(let seconds?):
            "the TPM is locked out after too many wrong PINs (one try comes back every \(seconds) s)"
        case .lockedOut(nil): "the TPM is locked out after too many wrong PINs"
        case .notThisTPM: "the key was sealed by another TPM (another machine, or this TPM was cleared)"
        case .pcrsChanged: "the PCR values the key is bound to have changed (boot chain or firmware changed)"
        case .pinRequired: "this key needs its PIN"
        case .invalidInput(let reason): reason
        case .tpm(let operation, let code, let text): "\(operation) failed: \(text) (0x\(String(code, radix: 16)))"
        case .noSecretMemory(let reason): reason
        }
    }
}
