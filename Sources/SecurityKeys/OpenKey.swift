import CFIDO2
import Glibc
import Posix

/// A device opened for one operation (libfido2's `fido_dev_t`), closed and freed when it goes.
final class OpenKey {
    /// libfido2's set-up, on the calling thread (it keeps the flag per thread): no fallback to U2F (a slot needs
    /// CTAP2's hmac-secret), its debug log only when `FIDO_DEBUG` is set.
    static func initializeLibrary() {
        fido_init(FIDO_DISABLE_U2F_FALLBACK)
    }

    let device: SecurityKeyDevice
    private var handle: OpaquePointer?

    /// Opens `device`, waiting at most `timeout` for it to answer.
    init(_ device: SecurityKeyDevice, timeout: Duration) throws(SecurityKeyError) {
        Self.initializeLibrary()
        self.device = device
        guard let handle = fido_dev_new() else { throw .noSecretMemory("no memory for a device") }
        self.handle = handle
        if device.socketPath != nil {
            let status = SocketTransport.install(on: handle)
            guard status == FIDO_OK else { throw .device(status, "setting up \(device.path)") }
        }
        let status = run(timeout: timeout) { fido_dev_open($0, device.path) }
        guard status == FIDO_OK else {
            fido_dev_free(&self.handle)
            throw .unreachable(device: device.path, reason: Self.openFailure(status, socket: device.socketPath != nil))
        }
        guard fido_dev_is_fido2(handle) else {
            throw .unsupported("it speaks only U2F (CTAP1), not FIDO2")
        }
    }

    deinit {
        guard handle != nil else { return }
        _ = fido_dev_close(handle)
        fido_dev_free(&handle)
    }

    /// Runs `operation` with `timeout` as libfido2's budget for it; when it runs out, tells the key to stop
    /// waiting for a touch (CTAPHID CANCEL). `cancellation` may tell it so from another thread meanwhile; a
    /// cancellation cancelled before runs nothing (`FIDO_ERR_KEEPALIVE_CANCEL`).
    func run(
        timeout: Duration, cancellation: SecurityKeyCancellation? = nil, _ operation: (OpaquePointer) -> Int32
    ) -> Int32 {
        guard let handle else { return FIDO_ERR_INVALID_ARGUMENT }
        if let cancellation, !cancellation.attach(handle) { return FIDO_ERR_KEEPALIVE_CANCEL }
        defer { cancellation?.detach() }
        _ = fido_dev_set_timeout(handle, Self.milliseconds(timeout))
        let started = MonotonicClock.nanoseconds()
        let status = operation(handle)
        lastElapsed = Duration.nanoseconds(MonotonicClock.nanoseconds() - started)
        lastTimeout = timeout
        if status == FIDO_ERR_RX, timedOut { _ = fido_dev_cancel(handle) }
        return status
    }

    private var lastElapsed: Duration = .zero
    private var lastTimeout: Duration = .zero
    /// Whether the last operation failed because its time ran out (libfido2 says only "rx error" then).
    private var timedOut: Bool { lastElapsed >= lastTimeout - .milliseconds(50) }

    /// The key's getInfo checked for what a slot needs: hmac-secret, ES256 (when the key lists algorithms), and
    /// with `needsPIN` a PIN set and credProtect.
    func checkCapabilities(needsPIN: Bool) throws(SecurityKeyError) {
        try withInfo { (handle, info) throws(SecurityKeyError) in
            try Self.check(handle, info, needsPIN: needsPIN)
        }
    }

    private static func check(_ handle: OpaquePointer, _ info: OpaquePointer, needsPIN: Bool)
        throws(SecurityKeyError)
    {
        let extensions = (0..<fido_cbor_info_extensions_len(info)).compactMap { index in
            fido_cbor_info_extensions_ptr(info)?[index].map { String(cString: $0) }
        }
        guard extensions.contains("hmac-secret") else { throw .unsupported("it has no hmac-secret extension") }
        let algorithms = (0..<fido_cbor_info_algorithm_count(info)).map { fido_cbor_info_algorithm_cose(info, $0) }
        guard algorithms.isEmpty || algorithms.contains(COSE_ES256) else {
            throw .unsupported("it does not make ES256 credentials")
        }
        guard needsPIN else { return }
        guard fido_dev_supports_pin(handle) else { throw .unsupported("it has no PIN") }
        guard fido_dev_has_pin(handle) else { throw .noPINSet }
        guard fido_dev_supports_cred_prot(handle) else { throw .unsupported("it has no credProtect extension") }
    }

    /// The key's AAGUID (getInfo) and whether it has a PIN set.
    func identity() throws(SecurityKeyError) -> SecurityKeyIdentity {
        try withInfo { handle, info in
            let aaguid = fido_cbor_info_aaguid_ptr(info).map {
                Array(UnsafeBufferPointer(start: $0, count: fido_cbor_info_aaguid_len(info)))
            }
            return SecurityKeyIdentity(
                aaguid: aaguid ?? [UInt8](repeating: 0, count: 16),
                hasPIN: fido_dev_supports_pin(handle) && fido_dev_has_pin(handle))
        }
    }

    /// `body` with the open device and its getInfo (freed after).
    private func withInfo<Result>(
        _ body: (OpaquePointer, OpaquePointer) throws(SecurityKeyError) -> Result
    ) throws(SecurityKeyError) -> Result {
        guard let handle else { throw .unreachable(device: device.path, reason: "closed") }
        var infoHandle = fido_cbor_info_new()
        defer { fido_cbor_info_free(&infoHandle) }
        guard let info = infoHandle else { throw .noSecretMemory("no memory for the key's information") }
        let status = fido_dev_get_cbor_info(handle, info)
        guard status == FIDO_OK else { throw .device(status, "reading the key's information") }
        return try body(handle, info)
    }

    /// How many PIN tries are left, nil when the key cannot say.
    func pinRetries() -> Int? {
        guard let handle, fido_dev_supports_pin(handle) else { return nil }
        var retries: Int32 = 0
        guard fido_dev_get_retry_count(handle, &retries) == FIDO_OK else { return nil }
        return Int(retries)
    }

    /// libfido2's failure `status` of `operation` in a caller's terms. `touch`: the operation waited for one, so a
    /// timeout means nobody touched the key.
    func error(_ status: Int32, _ operation: String, touch: Bool) -> SecurityKeyError {
        switch status {
        case FIDO_ERR_NO_CREDENTIALS, FIDO_ERR_INVALID_CREDENTIAL: .otherKey
        case FIDO_ERR_PIN_REQUIRED: .pinRequired
        case FIDO_ERR_PIN_INVALID: .wrongPIN(triesLeft: pinRetries())
        case FIDO_ERR_PIN_AUTH_BLOCKED: .pinBlockedUntilReinserted
        case FIDO_ERR_PIN_BLOCKED: .pinBlocked
        case FIDO_ERR_PIN_NOT_SET: .noPINSet
        case FIDO_ERR_ACTION_TIMEOUT, FIDO_ERR_USER_ACTION_TIMEOUT: .noTouch
        case FIDO_ERR_KEEPALIVE_CANCEL, FIDO_ERR_OPERATION_DENIED: .cancelled
        case FIDO_ERR_UNSUPPORTED_EXTENSION: .unsupported("it does not support hmac-secret or credProtect")
        case FIDO_ERR_UNSUPPORTED_ALGORITHM: .unsupported("it does not make ES256 credentials")
        case FIDO_ERR_RX where timedOut && touch: .noTouch
        case FIDO_ERR_RX where timedOut: .unreachable(device: device.path, reason: "it did not answer in time")
        default: .device(status, operation)
        }
    }

    /// Why opening failed, in words: libfido2 says FIDO_ERR_INTERNAL when its open hook (ours, or hidraw's) fails,
    /// and FIDO_ERR_RX for anything wrong with the answer to INIT or getInfo.
    private static func openFailure(_ status: Int32, socket: Bool) -> String {
        switch status {
        case FIDO_ERR_INTERNAL where socket: "nothing answers on its socket"
        case FIDO_ERR_INTERNAL: "it cannot be opened (unplugged, or no permission)"
        case FIDO_ERR_RX, FIDO_ERR_TX, FIDO_ERR_RX_NOT_CBOR, FIDO_ERR_RX_INVALID_CBOR:
            "it does not answer as a FIDO2 key should"
        default: String(cString: fido_strerr(status))
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }
}

/// libfido2's assertion (`fido_assert_t`) for one credential of a relying party, freed (and its hmac-secret
/// output wiped: `fido_assert_free` zeroes its buffers) when it goes.
final class Assertion {
    private(set) var handle: OpaquePointer?

    init(relyingParty: String, credentialID: [UInt8]) throws(SecurityKeyError) {
        guard !relyingParty.isEmpty, !credentialID.isEmpty else {
            throw .invalidInput("an assertion needs a relying party and a credential id")
        }
        guard let handle = fido_assert_new() else { throw .noSecretMemory("no memory for an assertion") }
        self.handle = handle
        let clientDataHash = freshClientDataHash()
        var status = fido_assert_set_rp(handle, relyingParty)
        if status == FIDO_OK { status = fido_assert_set_clientdata_hash(handle, clientDataHash, clientDataHash.count) }
        if status == FIDO_OK { status = fido_assert_allow_cred(handle, credentialID, credentialID.count) }
        guard status == FIDO_OK else { throw .device(status, "preparing the assertion") }
    }

    deinit {
        fido_assert_free(&handle)
    }

    /// The one assertion's 32-byte hmac-secret output, copied into secret memory (libfido2's copy is zeroed when
    /// this assertion goes).
    func hmacSecretOutput() throws(SecurityKeyError) -> SecretBytes {
        guard fido_assert_count(handle) == 1, let output = fido_assert_hmac_secret_ptr(handle, 0),
            fido_assert_hmac_secret_len(handle, 0) == 32
        else { throw .unsupported("it gave no hmac-secret output") }
        do {
            return try SecretBytes(copying: UnsafeRawBufferPointer(start: output, count: 32))
        } catch {
            throw .noSecretMemory(error.description)
        }
    }
}
