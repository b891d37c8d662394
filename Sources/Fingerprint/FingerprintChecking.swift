/// What one fingerprint check answered.
package enum FingerprintVerdict: Sendable, Equatable {
    /// An enrolled finger of the user matched.
    case matched
    /// A finger was read and matched none of the user's enrolled fingers (or the person gave up).
    case notMatched
    /// No check could be made: no fingerprint service, no reader, no enrolled finger, the reader busy, or no
    /// answer in time. `reason` is one line for a log or an error message, never a secret.
    case unavailable(reason: String)
}

/// A fingerprint reader the access checks of `kSecAccessControlBiometryAny` and `…BiometryCurrentSet` ask
/// (docs/secitem-semantics.md). The daemon holds one; tests and machines without fprintd hold
/// ``NoFingerprintReader``.
package protocol FingerprintChecking: Sendable {
    /// A digest of the user's enrolled fingers (which fingers, on which reader), or nil when the user has no
    /// enrolled finger or there is no reader. `biometryCurrentSet` items keep the digest they were made under and
    /// become unreadable when it changes.
    func enrolledFingersDigest(user: String) -> [UInt8]?

    /// Asks the person to touch the reader and waits for the verdict, at most `timeoutSeconds`.
    func verify(user: String, timeoutSeconds: Double) -> FingerprintVerdict

    /// The same check, calling `touchRequested` (on the checking thread) once the reader waits for the finger:
    /// where a request tells its person to touch the reader (docs/fingerprint.md, "Telling the person").
    func verify(user: String, timeoutSeconds: Double, touchRequested: @escaping @Sendable () -> Void)
        -> FingerprintVerdict
}

extension FingerprintChecking {
    /// A reader that never waits for a finger: the check alone, `touchRequested` never called.
    package func verify(user: String, timeoutSeconds: Double, touchRequested: @escaping @Sendable () -> Void)
        -> FingerprintVerdict
    {
        verify(user: user, timeoutSeconds: timeoutSeconds)
    }
}

/// The reader of a machine with none: every check is unavailable.
package struct NoFingerprintReader: FingerprintChecking {
    /// A machine without a reader.
    package init() {}

    /// Nil: no reader, no enrolled finger.
    package func enrolledFingersDigest(user: String) -> [UInt8]? { nil }

    /// Unavailable.
    package func verify(user: String, timeoutSeconds: Double) -> FingerprintVerdict {
        .unavailable(reason: "no fingerprint reader")
    }
}
