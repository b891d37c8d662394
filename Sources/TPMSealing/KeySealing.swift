import COpenSSL
import CTSS2
import Posix

/// Seals a 32-byte key to a TPM's storage hierarchy and unseals it, with an optional PIN and PCR policy.
///
/// The primary key is recreated from a fixed template on every call (the TPM derives it from its owner seed, so it
/// is the same key every time on the same TPM and nothing is persisted in the TPM); the sealed data object lives
/// only in the `SealedKey` the caller stores. Every ESAPI handle is flushed before returning.
package struct KeySealing: Sendable {
    /// The length of a key this seals.
    package static let keyLength = 32

    /// The TPM this talks to.
    package var configuration: TPMConfiguration

    /// Seals through the TPM `configuration` names.
    package init(configuration: TPMConfiguration = .fromEnvironment()) {
        self.configuration = configuration
    }

    /// Seals `key` (32 bytes). With a `pin` (UTF-8 bytes, not empty), unsealing needs it and every wrong one counts
    /// towards the TPM's dictionary-attack lockout. With `pcrs` (indices 0–23 of the SHA-256 bank), unsealing needs
    /// those PCRs to hold the values they hold now.
    package func seal(key: borrowing SecretBytes, pin: borrowing SecretBytes, pcrs: [UInt8] = [])
        throws(TPMSealingError) -> SealedKey
    {
        try key.withUnsafeBytes { (key) throws(TPMSealingError) in
            try pin.withUnsafeBytes { (pin) throws(TPMSealingError) in try seal(key: key, pin: pin, pcrs: pcrs) }
        }
    }

    /// Seals `key` (32 bytes) with no PIN: see ``seal(key:pin:pcrs:)``.
    package func seal(key: borrowing SecretBytes, pcrs: [UInt8] = []) throws(TPMSealingError) -> SealedKey {
        try key.withUnsafeBytes { (key) throws(TPMSealingError) in try seal(key: key, pin: nil, pcrs: pcrs) }
    }

    private func seal(key: UnsafeRawBufferPointer, pin: UnsafeRawBufferPointer?, pcrs: [UInt8])
        throws(TPMSealingError) -> SealedKey
    {
        guard key.count == Self.keyLength else { throw .invalidInput("a sealed key must be 32 bytes") }
        if let pin, pin.isEmpty { throw .invalidInput("an empty PIN is no PIN") }
        let pcrs = Array(Set(pcrs)).sorted()
        guard pcrs.allSatisfy({ $0 < 24 }) else { throw .invalidInput("PCR indices go from 0 to 23") }
        var salt = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&salt, Int32(salt.count)) == 1 else { throw .invalidInput("no randomness for the PIN salt") }

        let context = try TPMContext(configuration: configuration)
        let primary = try createPrimary(context)
        defer { context.flush(primary) }

        var template = sealedObjectTemplate(usesPolicy: !pcrs.isEmpty)
        if !pcrs.isEmpty {
            let digest = try policyDigest(context, pcrs: pcrs, withPIN: pin != nil)
            template.publicArea.authPolicy.size = copyBytes(digest, into: &template.publicArea.authPolicy.buffer)
        }

        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { withUnsafeMutableBytes(of: &sensitive) { wipeBytes($0) } }
        sensitive.sensitive.data.size = copyBytes(key, into: &sensitive.sensitive.data.buffer)
        if let pin {
            var authValue = pinAuthValue(pin: pin, salt: salt)
            defer { wipeBytes(&authValue) }
            sensitive.sensitive.userAuth.size = copyBytes(authValue, into: &sensitive.sensitive.userAuth.buffer)
        }

        // A session salted to the primary key, so the key and the PIN's authorisation value cross to the TPM
        // encrypted (the command's first parameter, inSensitive).
        let session = try startSession(context, primary: primary, type: TPM2_SE_HMAC, attributes: sessionDecrypt)
        defer { context.flush(session) }

        var outsideInfo = TPM2B_DATA()
        var creationPCRs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        var creationData: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
        var creationHash: UnsafeMutablePointer<TPM2B_DIGEST>?
        var creationTicket: UnsafeMutablePointer<TPMT_TK_CREATION>?
        let created = Esys_Create(
            context.esys, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outsideInfo,
            &creationPCRs, &outPrivate, &outPublic, &creationData, &creationHash, &creationTicket)
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
            Esys_Free(creationData)
            Esys_Free(creationHash)
            Esys_Free(creationTicket)
        }
        try context.check("TPM2_Create", created)
        guard let outPrivate, let outPublic else { throw context.failure("TPM2_Create", created) }
        return SealedKey(
            publicArea: try marshal(outPublic, Tss2_MU_TPM2B_PUBLIC_Marshal),
            privateArea: try marshal(outPrivate, Tss2_MU_TPM2B_PRIVATE_Marshal),
            pcrs: pcrs, needsPIN: pin != nil, pinSalt: salt)
    }

    /// Unseals `sealed`, which needs a PIN, on this TPM and returns the 32-byte key (wiped when released).
    package func unseal(_ sealed: SealedKey, pin: borrowing SecretBytes) throws(TPMSealingError) -> SecretBytes {
        try pin.withUnsafeBytes { (pin) throws(TPMSealingError) in try unseal(sealed, pin: pin) }
    }

    /// Unseals `sealed`, which needs no PIN (else: `pinRequired`), on this TPM and returns the 32-byte key.
    package func unseal(_ sealed: SealedKey) throws(TPMSealingError) -> SecretBytes {
        try unseal(sealed, pin: nil)
    }

    private func unseal(_ sealed: SealedKey, pin: UnsafeRawBufferPointer?) throws(TPMSealingError) -> SecretBytes {
        if sealed.needsPIN && (pin?.isEmpty ?? true) { throw .pinRequired }
        var inPublic = TPM2B_PUBLIC()
        var inPrivate = TPM2B_PRIVATE()
        try unmarshal(sealed.publicArea, into: &inPublic, Tss2_MU_TPM2B_PUBLIC_Unmarshal)
        try unmarshal(sealed.privateArea, into: &inPrivate, Tss2_MU_TPM2B_PRIVATE_Unmarshal)

        let context = try TPMContext(configuration: configuration)
        let primary = try createPrimary(context)
        defer { context.flush(primary) }

        var object: ESYS_TR = ESYS_TR_NONE
        let loaded = Esys_Load(
            context.esys, primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &inPrivate, &inPublic, &object)
        defer { context.flush(object) }
        if loaded != TSS2_RC_SUCCESS {
            // Another TPM's storage key cannot check the private part's integrity (or decrypt it to a sane size).
            if let error = ResponseCode.tpmError(loaded),
                [ResponseCode.integrity, ResponseCode.size, ResponseCode.value, ResponseCode.keySize].contains(error)
            {
                throw .notThisTPM
            }
            throw context.failure("TPM2_Load", loaded)
        }

        if sealed.needsPIN, let pin {
            var authValue = pinAuthValue(pin: pin, salt: sealed.pinSalt)
            defer { wipeBytes(&authValue) }
            var auth = TPM2B_AUTH()
            defer { withUnsafeMutableBytes(of: &auth) { wipeBytes($0) } }
            auth.size = copyBytes(authValue, into: &auth.buffer)
            try context.check("setting the PIN", Esys_TR_SetAuth(context.esys, object, &auth))
        }

        // The response (the key) comes back encrypted under the session salted to the primary key.
        let session: ESYS_TR
        if sealed.pcrs.isEmpty {
            session = try startSession(context, primary: primary, type: TPM2_SE_HMAC, attributes: sessionEncrypt)
        } else {
            session = try startSession(context, primary: primary, type: TPM2_SE_POLICY, attributes: sessionEncrypt)
            try applyPolicy(context, session: session, pcrs: sealed.pcrs, withPIN: sealed.needsPIN)
        }
        defer { context.flush(session) }

        var outData: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        let unsealed = Esys_Unseal(context.esys, object, session, ESYS_TR_NONE, ESYS_TR_NONE, &outData)
        defer {
            if let outData {
                wipeBytes(UnsafeMutableRawBufferPointer(start: outData, count: MemoryLayout<TPM2B_SENSITIVE_DATA>.size))
                Esys_Free(outData)
            }
        }
        switch ResponseCode.tpmError(unsealed) {
        case ResponseCode.authFail?, ResponseCode.badAuth?:
            if let lockout = context.lockoutProperties() {
                throw .wrongPIN(triesLeft: lockout.maxTries > lockout.counter ? lockout.maxTries - lockout.counter : 0)
            }
            throw .wrongPIN(triesLeft: nil)
        case ResponseCode.policyFail?:
            throw .pcrsChanged
        default:
            try context.check("TPM2_Unseal", unsealed)
        }
        guard let outData, outData.pointee.size == UInt16(Self.keyLength) else {
            throw .invalidInput("the TPM object does not hold a 32-byte key")
        }
        // Straight from ESAPI's buffer (wiped above) into secret memory, with no copy between.
        let offset = MemoryLayout<TPM2B_SENSITIVE_DATA>.offset(of: \.buffer) ?? MemoryLayout<UInt16>.size
        do {
            return try SecretBytes(
                copying: UnsafeRawBufferPointer(start: UnsafeRawPointer(outData) + offset, count: Self.keyLength))
        } catch {
            throw .noSecretMemory(error.description)
        }
    }
}

/// Session attributes: keep the session after the command (it is flushed explicitly), and encrypt the first
/// command parameter (`sessionDecrypt`) or the first response parameter (`sessionEncrypt`).
private let sessionDecrypt = TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT)
private let sessionEncrypt = TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT)

/// The authorisation value for a PIN: SHA-256 over a domain label, the slot's salt and the PIN's bytes.
///
/// Not a slow KDF on purpose: the value is never stored, and the sealed object can only be tried against the TPM
/// that holds its parent key, whose dictionary-attack lockout limits guesses far more than any KDF cost could.
/// The salt keeps the value different per sealed key, so one leaked authorisation value does not open another.
func pinAuthValue(pin: UnsafeRawBufferPointer, salt: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    let label = Array("latchkey tpm2 pin v1\0".utf8)
    guard let context = EVP_MD_CTX_new() else { return digest }
    defer { EVP_MD_CTX_free(context) }
    _ = EVP_DigestInit_ex(context, EVP_sha256(), nil)
    _ = EVP_DigestUpdate(context, label, label.count)
    _ = EVP_DigestUpdate(context, salt, salt.count)
    _ = EVP_DigestUpdate(context, pin.baseAddress, pin.count)
    _ = EVP_DigestFinal_ex(context, &digest, &length)
    return digest
}

/// The storage primary key: ECC P-256, AES-128-CFB, restricted decryption, from the TCG's SRK template (unique
/// field 32 zero bytes per coordinate). The TPM derives it from the owner seed, so it is the same on every call.
private func createPrimary(_ context: TPMContext) throws(TPMSealingError) -> ESYS_TR {
    var template = TPM2B_PUBLIC()
    template.publicArea.type = TPM2_ALG_ECC
    template.publicArea.nameAlg = TPM2_ALG_SHA256
    template.publicArea.objectAttributes = TPMA_OBJECT(
        TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH
            | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT)
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES
    template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
    template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
    template.publicArea.unique.ecc.x.size = 32
    template.publicArea.unique.ecc.y.size = 32
    var sensitive = TPM2B_SENSITIVE_CREATE()
    var outsideInfo = TPM2B_DATA()
    var creationPCRs = TPML_PCR_SELECTION()
    var handle: ESYS_TR = ESYS_TR_NONE
    var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
    var creationData: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
    var creationHash: UnsafeMutablePointer<TPM2B_DIGEST>?
    var creationTicket: UnsafeMutablePointer<TPMT_TK_CREATION>?
    let code = Esys_CreatePrimary(
        context.esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template,
        &outsideInfo, &creationPCRs, &handle, &outPublic, &creationData, &creationHash, &creationTicket)
    Esys_Free(outPublic)
    Esys_Free(creationData)
    Esys_Free(creationHash)
    Esys_Free(creationTicket)
    try context.check("TPM2_CreatePrimary (owner hierarchy)", code)
    return handle
}

/// A sealed data object: keyed-hash with no scheme, fixed to this TPM and this parent, dictionary-attack protection
/// on (no noDA). Without a policy it is unsealed with its authorisation value (the PIN's, or empty); with one,
/// only through the policy.
private func sealedObjectTemplate(usesPolicy: Bool) -> TPM2B_PUBLIC {
    var template = TPM2B_PUBLIC()
    template.publicArea.type = TPM2_ALG_KEYEDHASH
    template.publicArea.nameAlg = TPM2_ALG_SHA256
    var attributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
    if !usesPolicy { attributes |= TPMA_OBJECT_USERWITHAUTH }
    template.publicArea.objectAttributes = TPMA_OBJECT(attributes)
    template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL
    return template
}

/// The SHA-256 bank selection of `pcrs`.
private func pcrSelection(_ pcrs: [UInt8]) -> TPML_PCR_SELECTION {
    var selection = TPML_PCR_SELECTION()
    selection.count = 1
    selection.pcrSelections.0.hash = TPM2_ALG_SHA256
    selection.pcrSelections.0.sizeofSelect = 3
    var bitmap: [UInt8] = [0, 0, 0]
    for pcr in pcrs { bitmap[Int(pcr) / 8] |= 1 << (pcr % 8) }
    _ = copyBytes(bitmap, into: &selection.pcrSelections.0.pcrSelect)
    return selection
}

/// Starts a session salted to the primary key (ECDH), with AES-128-CFB parameter encryption and SHA-256.
private func startSession(
    _ context: TPMContext, primary: ESYS_TR, type: TPM2_SE, attributes: TPMA_SESSION
) throws(TPMSealingError) -> ESYS_TR {
    var symmetric = TPMT_SYM_DEF()
    symmetric.algorithm = TPM2_ALG_AES
    symmetric.keyBits.aes = 128
    symmetric.mode.aes = TPM2_ALG_CFB
    var session: ESYS_TR = ESYS_TR_NONE
    try context.check(
        "TPM2_StartAuthSession",
        Esys_StartAuthSession(
            context.esys, primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nil, type, &symmetric,
            TPM2_ALG_SHA256, &session))
    let set = Esys_TRSess_SetAttributes(context.esys, session, attributes, 0xFF)
    if set != TSS2_RC_SUCCESS {
        context.flush(session)
        throw context.failure("setting session attributes", set)
    }
    return session
}

/// PolicyPCR over the current values of `pcrs`, then PolicyAuthValue when the object has a PIN.
private func applyPolicy(
    _ context: TPMContext, session: ESYS_TR, pcrs: [UInt8], withPIN: Bool
) throws(TPMSealingError) {
    var selection = pcrSelection(pcrs)
    var emptyDigest = TPM2B_DIGEST()
    try context.check(
        "TPM2_PolicyPCR",
        Esys_PolicyPCR(context.esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &emptyDigest, &selection))
    if withPIN {
        try context.check(
            "TPM2_PolicyAuthValue",
            Esys_PolicyAuthValue(context.esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE))
    }
}

/// The policy digest for `pcrs` at their current values (and the PIN), computed by the TPM in a trial session.
private func policyDigest(_ context: TPMContext, pcrs: [UInt8], withPIN: Bool) throws(TPMSealingError) -> [UInt8] {
    var symmetric = TPMT_SYM_DEF()
    symmetric.algorithm = TPM2_ALG_NULL
    var trial: ESYS_TR = ESYS_TR_NONE
    try context.check(
        "TPM2_StartAuthSession (trial)",
        Esys_StartAuthSession(
            context.esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nil, TPM2_SE_TRIAL,
            &symmetric, TPM2_ALG_SHA256, &trial))
    defer { context.flush(trial) }
    try applyPolicy(context, session: trial, pcrs: pcrs, withPIN: withPIN)
    var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
    let code = Esys_PolicyGetDigest(context.esys, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest)
    defer { Esys_Free(digest) }
    try context.check("TPM2_PolicyGetDigest", code)
    guard let digest else { throw context.failure("TPM2_PolicyGetDigest", code) }
    return bytesOf(digest.pointee.buffer, count: digest.pointee.size)
}

/// Marshals a TPM2B structure with its Tss2_MU function.
private func marshal<Value>(
    _ value: UnsafeMutablePointer<Value>,
    _ function: (UnsafePointer<Value>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> TSS2_RC
) throws(TPMSealingError) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: MemoryLayout<Value>.size + 8)
    var offset = 0
    let code = buffer.withUnsafeMutableBufferPointer { function(value, $0.baseAddress, $0.count, &offset) }
    guard code == TSS2_RC_SUCCESS else {
        throw .tpm(operation: "marshalling", code: code, text: String(cString: Tss2_RC_Decode(code)))
    }
    return Array(buffer.prefix(offset))
}

/// Unmarshals a TPM2B structure with its Tss2_MU function; all of `bytes` must be used.
private func unmarshal<Value>(
    _ bytes: [UInt8], into value: inout Value,
    _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<Value>?) -> TSS2_RC
) throws(TPMSealingError) {
    var offset = 0
    let code = bytes.withUnsafeBufferPointer { function($0.baseAddress, $0.count, &offset, &value) }
    guard code == TSS2_RC_SUCCESS, offset == bytes.count else { throw .invalidInput("not a sealed TPM key") }
}
