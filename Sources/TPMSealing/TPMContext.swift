import CTSS2

/// TPM response codes tpm2-tss defines as macros Swift cannot import (format-1 and warning codes).
enum ResponseCode {
    static let format1: UInt32 = 0x080
    static let warning: UInt32 = 0x900
    static let authFail: UInt32 = format1 + 0x00E
    static let policyFail: UInt32 = format1 + 0x01D
    static let integrity: UInt32 = format1 + 0x01F
    static let badAuth: UInt32 = format1 + 0x022
    static let lockout: UInt32 = warning + 0x021
    static let size: UInt32 = format1 + 0x015
    static let value: UInt32 = format1 + 0x004
    static let keySize: UInt32 = format1 + 0x007

    /// The TPM's own error without the layer and, for format-1 codes, without the handle/session/parameter number.
    static func tpmError(_ code: TSS2_RC) -> UInt32? {
        let layer = code & 0xFF_0000
        guard layer == 0 || layer == 12 << 16 else { return nil }
        let error = code & 0xFFFF
        return error & format1 != 0 ? (error & 0x3F) | format1 : error
    }
}

/// TPM properties (TPM2_PT_VAR group) about dictionary-attack protection.
private enum LockoutProperty {
    static let counter: UInt32 = 0x20E
    static let maxAuthFail: UInt32 = 0x20F
    static let interval: UInt32 = 0x210
}

/// One open connection to a TPM through ESAPI: the TCTI and the ESAPI context, finalised on deinit.
/// Not shared between threads: each seal or unseal opens its own.
final class TPMContext {
    let tcti: String
    private var tctiContext: OpaquePointer?
    let esys: OpaquePointer

    init(configuration: TPMConfiguration) throws(TPMSealingError) {
        tcti = configuration.tcti
        var tctiContext: OpaquePointer?
        let loaded = Tss2_TctiLdr_Initialize(configuration.tcti, &tctiContext)
        guard loaded == TSS2_RC_SUCCESS, let tctiContext else {
            throw .noTPM(tcti: configuration.tcti, reason: String(cString: Tss2_RC_Decode(loaded)))
        }
        var esys: OpaquePointer?
        let initialised = Esys_Initialize(&esys, tctiContext, nil)
        guard initialised == TSS2_RC_SUCCESS, let esys else {
            var owned: OpaquePointer? = tctiContext
            Tss2_TctiLdr_Finalize(&owned)
            throw .noTPM(tcti: configuration.tcti, reason: String(cString: Tss2_RC_Decode(initialised)))
        }
        self.tctiContext = tctiContext
        self.esys = esys
    }

    deinit {
        var esys: OpaquePointer? = esys
        Esys_Finalize(&esys)
        Tss2_TctiLdr_Finalize(&tctiContext)
    }

    /// Turns a failed ESAPI call into an error: the TCTI's connection failures as `noTPM`, the rest as `tpm`.
    func failure(_ operation: String, _ code: TSS2_RC) -> TPMSealingError {
        if code & 0xFF_0000 == 10 << 16 {
            return .noTPM(tcti: tcti, reason: String(cString: Tss2_RC_Decode(code)))
        }
        if ResponseCode.tpmError(code) == ResponseCode.lockout {
            return .lockedOut(secondsPerRecoveredTry: lockoutProperties()?.interval)
        }
        return .tpm(operation: operation, code: code, text: String(cString: Tss2_RC_Decode(code)))
    }

    /// Runs an ESAPI call and throws `failure(operation, code)` when it does not succeed.
    func check(_ operation: String, _ code: TSS2_RC) throws(TPMSealingError) {
        guard code == TSS2_RC_SUCCESS else { throw failure(operation, code) }
    }

    /// The TPM's failed-authorisation counter, its limit and its recovery interval in seconds.
    func lockoutProperties() -> (counter: UInt32, maxTries: UInt32, interval: UInt32)? {
        var moreData: TPMI_YES_NO = 0
        var capabilities: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        let code = Esys_GetCapability(
            esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES, LockoutProperty.counter, 3,
            &moreData, &capabilities)
        guard code == TSS2_RC_SUCCESS, let capabilities else { return nil }
        defer { Esys_Free(capabilities) }
        var values: [UInt32: UInt32] = [:]
        let properties = capabilities.pointee.data.tpmProperties
        withUnsafeBytes(of: properties.tpmProperty) { raw in
            let tagged = raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self)
            for index in 0..<min(Int(properties.count), tagged.count) {
                values[tagged[index].property] = tagged[index].value
            }
        }
        guard let counter = values[LockoutProperty.counter], let maxTries = values[LockoutProperty.maxAuthFail],
            let interval = values[LockoutProperty.interval]
        else { return nil }
        return (counter, maxTries, interval)
    }

    /// Flushes a transient object or session, ignoring failure (the context's end frees what is left).
    func flush(_ handle: ESYS_TR) {
        guard handle != ESYS_TR_NONE else { return }
        _ = Esys_FlushContext(esys, handle)
    }
}

/// Copies `bytes` into a C fixed-size array (imported as a tuple); at most its size.
func copyBytes<Buffer>(_ bytes: some Collection<UInt8>, into buffer: inout Buffer) -> UInt16 {
    withUnsafeMutableBytes(of: &buffer) { raw in
        let count = min(raw.count, bytes.count)
        raw.copyBytes(from: bytes.prefix(count))
        return UInt16(count)
    }
}

/// The first `count` bytes of a C fixed-size array (imported as a tuple).
func bytesOf<Buffer>(_ buffer: Buffer, count: UInt16) -> [UInt8] {
    withUnsafeBytes(of: buffer) { raw in Array(raw.prefix(Int(count))) }
}
