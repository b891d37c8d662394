import FoundationEssentials
import Glibc
import KeychainCore
import KeychainStore
import Posix
import TPMSealing

/// Seals the device secret of the `…ThisDeviceOnly` class keys with this machine's TPM 2.0 (no PIN, no PCRs):
/// the blob loads only in the TPM that sealed it, so a copy of the keychain file on another machine cannot open
/// those classes even with the password (docs/file-format.md, "Class keys").
package struct TPMDeviceSealing: DeviceSealing {
    let sealing: KeySealing

    /// Sealing through the TPM `configuration` names.
    package init(configuration: TPMConfiguration = .fromEnvironment()) {
        sealing = KeySealing(configuration: configuration)
    }

    /// `secret` sealed by the TPM.
    package func seal(_ secret: borrowing SecretBytes) throws(KeychainError) -> Data {
        do {
            return Data(try sealing.seal(key: secret).encoded())
        } catch {
            throw KeychainError(.notAvailable, "the TPM did not seal the device secret: \(error)")
        }
    }

    /// The secret `sealed` holds; `errSecDecode` when this TPM cannot unseal it (another machine's).
    package func unseal(_ sealed: Data) throws(KeychainError) -> SecretBytes {
        do {
            return try sealing.unseal(try SealedKey(encoded: Array(sealed)))
        } catch {
            throw KeychainError(.decode, "this machine's TPM does not unseal it (\(error))")
        }
    }

    /// Makes the keychains this process makes or opens from now on bind their `…ThisDeviceOnly` class keys to
    /// the TPM, when the machine has one (the kernel's resource manager, or `LATCHKEY_TPM_TCTI`). Call it at
    /// start, before a keychain is opened.
    package static func installIfPresent() {
        let configuration = TPMConfiguration.fromEnvironment()
        guard configuration.tcti != TPMConfiguration.kernelResourceManager || access("/dev/tpmrm0", R_OK | W_OK) == 0
        else { return }
        Keychain.defaultDeviceSealing.withLock { $0 = TPMDeviceSealing(configuration: configuration) }
    }
}
