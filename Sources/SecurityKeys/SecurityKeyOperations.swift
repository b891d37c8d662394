import CFIDO2
import Glibc
import Posix

extension SecurityKeyDevice {
    /// How long an operation that needs a touch waits for it by default.
    package static let defaultTouchTimeout: Duration = .seconds(30)
    /// How long an operation that needs no touch waits for the key's answer by default.
    package static let defaultResponseTimeout: Duration = .seconds(5)

    /// Makes a non-resident ES256 credential with the `hmac-secret` extension for `relyingParty`, with a touch and
    /// the key's `pin` (user verification; the credential then also gets credProtect "user verification
    /// required", so the key neither uses nor admits to it without the PIN).
    package func enroll(
        relyingParty: String, userID: [UInt8], userName: String, pin: borrowing SecretBytes,
        touchTimeout: Duration = defaultTouchTimeout
    ) throws(SecurityKeyError) -> EnrolledCredential {
        try enroll(
            relyingParty: relyingParty, userID: userID, userName: userName, pin: PINText(pin), timeout: touchTimeout)
    }

    /// Makes a non-resident ES256 credential with the `hmac-secret` extension for `relyingParty`, with a touch and
    /// no PIN.
    package func enroll(
        relyingParty: String, userID: [UInt8], userName: String, touchTimeout: Duration = defaultTouchTimeout
    ) throws(SecurityKeyError) -> EnrolledCredential {
        try enroll(relyingParty: relyingParty, userID: userID, userName: userName, pin: nil, timeout: touchTimeout)
    }

    /// Whether this key holds `credentialID` for `relyingParty`, asked with no touch and no PIN: false when the
    /// key answers "no credentials" (another key, or this key after a reset).
    ///
    /// A credential made with a PIN (credProtect "user verification required") is hidden from a request without
    /// the PIN, as CTAP 2.1 says: this answers false for it even on its own key. Use ``probe(relyingParty:
    /// credentialID:pin:timeout:)`` for those, or go straight to ``hmacSecret(relyingParty:credentialID:salt:pin:
    /// touchTimeout:)``, which answers ``SecurityKeyError/otherKey`` on another key.
    package func probe(
        relyingParty: String, credentialID: [UInt8], timeout: Duration = defaultResponseTimeout
    ) throws(SecurityKeyError) -> Bool {
        try probe(relyingParty: relyingParty, credentialID: credentialID, pin: nil, timeout: timeout)
    }

    /// Whether this key holds `credentialID` for `relyingParty`, asked with the key's `pin` and no touch: for
    /// credentials made with a PIN. A wrong PIN counts on the key like any other (``SecurityKeyError/wrongPIN(triesLeft:)``).
    package func probe(
        relyingParty: String, credentialID: [UInt8], pin: borrowing SecretBytes,
        timeout: Duration = defaultResponseTimeout
    ) throws(SecurityKeyError) -> Bool {
        try probe(
            relyingParty: relyingParty, credentialID: credentialID, pin: PINText(pin), timeout: timeout)
    }

    /// The credential's `hmac-secret` output for `salt` (32 bytes), with a touch and the key's `pin`: 32 bytes.
    /// `cancellation` stops the wait for the touch from another thread (``SecurityKeyError/cancelled``).
    package func hmacSecret(
        relyingParty: String, credentialID: [UInt8], salt: [UInt8], pin: borrowing SecretBytes,
        touchTimeout: Duration = defaultTouchTimeout, cancellation: SecurityKeyCancellation? = nil
    ) throws(SecurityKeyError) -> SecretBytes {
        try hmacSecret(
            relyingParty: relyingParty, credentialID: credentialID, salt: salt, pin: PINText(pin),
            timeout: touchTimeout, cancellation: cancellation)
    }

    /// The credential's `hmac-secret` output for `salt` (32 bytes), with a touch and no PIN: 32 bytes.
    /// `cancellation` stops the wait for the touch from another thread (``SecurityKeyError/cancelled``).
    package func hmacSecret(
        relyingParty: String, credentialID: [UInt8], salt: [UInt8], touchTimeout: Duration = defaultTouchTimeout,
        cancellation: SecurityKeyCancellation? = nil
    ) throws(SecurityKeyError) -> SecretBytes {
        try hmacSecret(
            relyingParty: relyingParty, credentialID: credentialID, salt: salt, pin: nil, timeout: touchTimeout,
            cancellation: cancellation)
    }

    /// How many PIN tries the key has left before it blocks its PIN for good, nil when it cannot say (no key, no
    /// PIN support).
    package func pinRetries(timeout: Duration = defaultResponseTimeout) -> Int? {
        guard let key = try? OpenKey(self, timeout: timeout) else { return nil }
        return key.pinRetries()
    }

    /// The key's model (AAGUID, 16 bytes; zeros for a key that does not tell) and whether it has a PIN set, from
    /// its getInfo: no touch, no PIN, so a caller can leave out keys that cannot hold a slot before it sends a PIN.
    package func identity(timeout: Duration = defaultResponseTimeout) throws(SecurityKeyError) -> SecurityKeyIdentity {
        let key = try OpenKey(self, timeout: timeout)
        return try key.identity()
    }

    /// The keys libfido2 finds plugged in (hidraw devices that say they are FIDO keys), with product names.
    static func pluggedIn() throws(SecurityKeyError) -> [SecurityKeyDevice] {
        OpenKey.initializeLibrary()
        let capacity = 64
        var listHandle = fido_dev_info_new(capacity)
        defer { fido_dev_info_free(&listHandle, capacity) }
        guard let list = listHandle else { throw .noSecretMemory("no memory for the device list") }
        var found = 0
        let status = fido_dev_info_manifest(list, capacity, &found)
        guard status == FIDO_OK else { throw .device(status, "listing the security keys") }
        return (0..<found).compactMap { index in
            guard let info = fido_dev_info_ptr(list, index), let path = fido_dev_info_path(info) else { return nil }
            let product = fido_dev_info_product_string(info).map { String(cString: $0) }
            return SecurityKeyDevice(
                path: String(cString: path), productName: product?.isEmpty == false ? product : nil)
        }
    }

    private func enroll(relyingParty: String, userID: [UInt8], userName: String, pin: PINText?, timeout: Duration)
        throws(SecurityKeyError) -> EnrolledCredential
    {
        guard !relyingParty.isEmpty, !userID.isEmpty, userID.count <= 64 else {
            throw .invalidInput("a credential needs a relying party and a user id of 1 to 64 bytes")
        }
        let key = try OpenKey(self, timeout: timeout)
        try key.checkCapabilities(needsPIN: pin != nil)
        var credentialHandle = fido_cred_new()
        defer { fido_cred_free(&credentialHandle) }
        guard let credential = credentialHandle else { throw .noSecretMemory("no memory for a credential") }
        let clientDataHash = freshClientDataHash()
        var extensions = FIDO_EXT_HMAC_SECRET
        if pin != nil { extensions |= FIDO_EXT_CRED_PROTECT }
        var status = fido_cred_set_type(credential, COSE_ES256)
        if status == FIDO_OK {
            status = fido_cred_set_clientdata_hash(credential, clientDataHash, clientDataHash.count)
        }
        if status == FIDO_OK { status = fido_cred_set_rp(credential, relyingParty, nil) }
        if status == FIDO_OK { status = fido_cred_set_user(credential, userID, userID.count, userName, nil, nil) }
        if status == FIDO_OK { status = fido_cred_set_extensions(credential, extensions) }
        if status == FIDO_OK, pin != nil { status = fido_cred_set_prot(credential, FIDO_CRED_PROT_UV_REQUIRED) }
        guard status == FIDO_OK else { throw .device(status, "preparing the credential") }
        status = withExtendedLifetime(pin) {
            key.run(timeout: timeout) { fido_dev_make_cred($0, credential, pin?.cString) }
        }
        guard status == FIDO_OK else { throw key.error(status, "making the credential", touch: true) }
        guard let id = fido_cred_id_ptr(credential), fido_cred_id_len(credential) > 0 else {
            throw .device(
                operation: "making the credential", code: FIDO_ERR_INVALID_CREDENTIAL, text: "no credential id")
        }
        let aaguid = fido_cred_aaguid_ptr(credential).map {
            Array(UnsafeBufferPointer(start: $0, count: fido_cred_aaguid_len(credential)))
        }
        let userVerified = fido_cred_flags(credential) & 0x04 != 0
        if pin != nil, !userVerified || fido_cred_prot(credential) != FIDO_CRED_PROT_UV_REQUIRED {
            throw .unsupported("it did not verify the PIN or protect the credential with it")
        }
        return EnrolledCredential(
            credentialID: Array(UnsafeBufferPointer(start: id, count: fido_cred_id_len(credential))),
            aaguid: aaguid ?? [UInt8](repeating: 0, count: 16), productName: productName ?? path,
            userVerified: userVerified)
    }

    private func probe(relyingParty: String, credentialID: [UInt8], pin: PINText?, timeout: Duration)
        throws(SecurityKeyError) -> Bool
    {
        let key = try OpenKey(self, timeout: timeout)
        let assertion = try Assertion(relyingParty: relyingParty, credentialID: credentialID)
        var status = fido_assert_set_up(assertion.handle, FIDO_OPT_FALSE)
        guard status == FIDO_OK else { throw .device(status, "preparing the probe") }
        status = withExtendedLifetime((assertion, pin)) {
            key.run(timeout: timeout) { fido_dev_get_assert($0, assertion.handle, pin?.cString) }
        }
        switch status {
        case FIDO_OK: return true
        case FIDO_ERR_NO_CREDENTIALS, FIDO_ERR_INVALID_CREDENTIAL: return false
        default: throw key.error(status, "asking the key for its credential", touch: false)
        }
    }

    private func hmacSecret(
        relyingParty: String, credentialID: [UInt8], salt: [UInt8], pin: PINText?, timeout: Duration,
        cancellation: SecurityKeyCancellation?
    )
        throws(SecurityKeyError) -> SecretBytes
    {
        guard salt.count == 32 else { throw .invalidInput("an hmac-secret salt is 32 bytes, not \(salt.count)") }
        let key = try OpenKey(self, timeout: timeout)
        let assertion = try Assertion(relyingParty: relyingParty, credentialID: credentialID)
        var status = fido_assert_set_extensions(assertion.handle, FIDO_EXT_HMAC_SECRET)
        if status == FIDO_OK { status = fido_assert_set_hmac_salt(assertion.handle, salt, salt.count) }
        guard status == FIDO_OK else { throw .device(status, "preparing the assertion") }
        status = withExtendedLifetime((assertion, pin)) {
            key.run(timeout: timeout, cancellation: cancellation) {
                fido_dev_get_assert($0, assertion.handle, pin?.cString)
            }
        }
        guard status == FIDO_OK else { throw key.error(status, "getting the key's secret", touch: true) }
        return try assertion.hmacSecretOutput()
    }
}

extension SecurityKeyError {
    /// libfido2's status `code` as an error of `operation`, with its text.
    static func device(_ code: Int32, _ operation: String) -> SecurityKeyError {
        .device(operation: operation, code: code, text: String(cString: fido_strerr(code)))
    }
}

/// A client-data hash for a request: the slot checks no signature, so it only needs to be fresh.
func freshClientDataHash() -> [UInt8] {
    (0..<32).map { _ in UInt8.random(in: .min ... .max) }
}

/// The PIN as the C string libfido2 takes, in secret memory (wiped when the last reference goes).
final class PINText {
    private let bytes: SecretBytes

    init(_ pin: borrowing SecretBytes) throws(SecurityKeyError) {
        let invalid = pin.withUnsafeBytes { $0.contains(0) || $0.count < 4 || $0.count > 63 }
        guard !invalid else { throw .invalidInput("a security key's PIN is 4 to 63 bytes with no NUL") }
        do {
            var text = try SecretBytes(capacity: pin.count + 1)
            pin.withUnsafeBytes { text.append($0) }
            text.append(0)
            bytes = text
        } catch {
            throw .noSecretMemory(error.description)
        }
    }

    /// The NUL-terminated PIN, valid while this value lives.
    var cString: UnsafePointer<CChar>? {
        bytes.withUnsafeBytes { $0.baseAddress?.assumingMemoryBound(to: CChar.self) }
    }
}
