import CFIDO2
import Posix

extension SecurityKeyDevice {
    /// How long an operation that needs a touch waits for it by default.
    package static let defaultTouchTimeout: Duration = .seconds(30)
    /// How long an operation that needs no touch waits for the key's answer by default.
    package static let defaultResponseTimeout: Duration = .seconds(5)

    /// Makes a non-resident ES256 credential with the `hmac-secret` extension for `relyingParty`, with a touch and
    /// the key's `pin` (user verification; the credential then also gets credProtect "user verification
    /// required").
    package func enroll(
        relyingParty: String, userID: [UInt8], userName: String, pin: borrowing SecretBytes,
        touchTimeout: Duration = defaultTouchTimeout
    ) throws(SecurityKeyError) -> EnrolledCredential {
        throw .unsupported("not yet")
    }

    /// Makes a non-resident ES256 credential with the `hmac-secret` extension for `relyingParty`, with a touch and
    /// no PIN.
    package func enroll(
        relyingParty: String, userID: [UInt8], userName: String, touchTimeout: Duration = defaultTouchTimeout
    ) throws(SecurityKeyError) -> EnrolledCredential {
        throw .unsupported("not yet")
    }

    /// Whether this key holds `credentialID` for `relyingParty`, asked with no touch and no PIN: false when the
    /// key answers "no credentials" (another key, or this key after a reset).
    package func probe(
        relyingParty: String, credentialID: [UInt8], timeout: Duration = defaultResponseTimeout
    ) throws(SecurityKeyError) -> Bool {
        throw .unsupported("not yet")
    }

    /// The credential's `hmac-secret` output for `salt` (32 bytes), with a touch and the key's `pin`: 32 bytes.
    package func hmacSecret(
        relyingParty: String, credentialID: [UInt8], salt: [UInt8], pin: borrowing SecretBytes,
        touchTimeout: Duration = defaultTouchTimeout
    ) throws(SecurityKeyError) -> SecretBytes {
        throw .unsupported("not yet")
    }

    /// The credential's `hmac-secret` output for `salt` (32 bytes), with a touch and no PIN: 32 bytes.
    package func hmacSecret(
        relyingParty: String, credentialID: [UInt8], salt: [UInt8], touchTimeout: Duration = defaultTouchTimeout
    ) throws(SecurityKeyError) -> SecretBytes {
        throw .unsupported("not yet")
    }

    /// How many PIN tries the key has left before it blocks its PIN for good, nil when it cannot say.
    package func pinRetries(timeout: Duration = defaultResponseTimeout) -> Int? {
        nil
    }

    /// The keys libfido2 finds plugged in.
    static func pluggedIn() throws(SecurityKeyError) -> [SecurityKeyDevice] {
        throw .unsupported("not yet")
    }
}
