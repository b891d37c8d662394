import Glibc

/// Which TPM to talk to: a TCTI configuration string as tpm2-tss's TCTI loader reads it.
package struct TPMConfiguration: Sendable, Equatable {
    /// The kernel's TPM resource manager: the machine's own TPM, shared safely between processes.
    package static let kernelResourceManager = "device:/dev/tpmrm0"

    /// The environment variable that names another TCTI (tests: `swtpm:host=127.0.0.1,port=N`).
    package static let environmentVariable = "LATCHKEY_TPM_TCTI"

    /// The TCTI string, e.g. `device:/dev/tpmrm0` or `swtpm:host=127.0.0.1,port=2321`.
    package var tcti: String

    /// A configuration for the TCTI `tcti`.
    package init(tcti: String) {
        self.tcti = tcti
    }

    /// `LATCHKEY_TPM_TCTI` when set and not empty, else the kernel's resource manager. Never the TCTI loader's
    /// own fallback list, which would try a simulator on a local TCP port that any local user can open.
    package static func fromEnvironment() -> TPMConfiguration {
        if let value = getenv(environmentVariable), value.pointee != 0 {
            return TPMConfiguration(tcti: String(cString: value))
        }
        return TPMConfiguration(tcti: kernelResourceManager)
    }

    /// Turns tpm2-tss's own log off (`TSS2_LOG=all+none`) unless the user set `TSS2_LOG`: it prints every failed
    /// TPM command (a wrong PIN, another machine's key) on standard error, where Latchkey says what happened in
    /// one line of its own. Call it at the start of `main`, before any thread runs (`setenv`).
    package static func quietLibraryLog() {
        setenv("TSS2_LOG", "all+none", 0)
    }
}
