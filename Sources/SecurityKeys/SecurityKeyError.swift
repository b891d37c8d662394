/// Why talking to a security key failed, in the terms a caller acts on and a person understands.
package enum SecurityKeyError: Error, Equatable, CustomStringConvertible {
    /// No security key is plugged in (none in libfido2's list of devices).
    case noKey
    /// The named device cannot be opened or does not answer as a FIDO2 authenticator.
    case unreachable(device: String, reason: String)
    /// The key does not hold the credential: it is another key (or this key after a reset).
    case otherKey
    /// The operation needs the key's PIN and none was given.
    case pinRequired
    /// The PIN was wrong; the key counted it. `triesLeft` is what the key says is left before it blocks its PIN
    /// for good (nil when it would not say).
    case wrongPIN(triesLeft: Int?)
    /// Three wrong PINs in a row: the key refuses every PIN until it is unplugged and plugged in again.
    case pinBlockedUntilReinserted
    /// Too many wrong PINs in all: the key's PIN is blocked for good. Only a reset of the key opens it again, and
    /// a reset destroys every credential on it, so a slot made with this key is dead.
    case pinBlocked
    /// Nobody touched the key in time.
    case noTouch
    /// The key cannot do what is asked: no `hmac-secret` extension, no ES256, no PIN support.
    case unsupported(String)
    /// A PIN was given but the key has no PIN set.
    case noPINSet
    /// The operation was cancelled (at the key or by the caller).
    case cancelled
    /// The arguments cannot be used: a salt that is not 32 bytes, an empty credential id, a PIN with a NUL.
    case invalidInput(String)
    /// No secret memory could be mapped for the PIN or the key's secret.
    case noSecretMemory(String)
    /// Any other failure, with the operation, libfido2's code and its text for it (`fido_strerr`).
    case device(operation: String, code: Int32, text: String)

    /// One line for the user.
    package var description: String {
        switch self {
        case .noKey: "no security key is plugged in"
        case .unreachable(let device, let reason): "the security key \(device) cannot be used: \(reason)"
        case .otherKey: "this security key is not the one the slot was made with (or it was reset)"
        case .pinRequired: "the security key needs its PIN"
        case .wrongPIN(let triesLeft?): "wrong PIN for the security key (\(triesLeft) tries left)"
        case .wrongPIN(nil): "wrong PIN for the security key"
        case .pinBlockedUntilReinserted:
            "the security key blocks its PIN after three wrong PINs in a row: unplug it and plug it in again"
        case .pinBlocked:
            "the security key's PIN is blocked after too many wrong PINs: only a reset (which erases its credentials) opens it"
        case .noTouch: "the security key was not touched in time"
        case .unsupported(let what): "the security key cannot be used: \(what)"
        case .noPINSet: "the security key has no PIN set (set one with its own tool, e.g. fido2-token -S)"
        case .cancelled: "cancelled at the security key"
        case .invalidInput(let reason): reason
        case .noSecretMemory(let reason): reason
        case .device(let operation, let code, let text): "\(operation) failed: \(text) (\(code))"
        }
    }
}
