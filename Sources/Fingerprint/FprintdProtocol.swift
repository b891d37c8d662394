import COpenSSL

/// fprintd's names on the system bus (`net.reactivated.Fprint`, fprintd 1.94's
/// `net.reactivated.Fprint.Manager.xml` and `net.reactivated.Fprint.Device.xml`), and what its replies and
/// signals mean for a check. No I/O here: ``FprintdFingerprints`` does the talking.
package enum FprintdProtocol {
    /// The service's well-known name, owned by root only (fprintd's bus policy, `net.reactivated.Fprint.conf`).
    package static let service = "net.reactivated.Fprint"
    /// The manager object.
    package static let managerPath = "/net/reactivated/Fprint/Manager"
    /// The manager's interface (`GetDefaultDevice`, `GetDevices`).
    package static let managerInterface = "net.reactivated.Fprint.Manager"
    /// A device's interface (`ListEnrolledFingers`, `Claim`, `VerifyStart`, `VerifyStatus`, …).
    package static let deviceInterface = "net.reactivated.Fprint.Device"
    /// The finger `VerifyStart` takes for "whichever the user enrolled".
    package static let anyFinger = "any"

    /// The ten finger names fprintd knows (`FINGERS_NAMES` in fprintd's device.c); anything else in a reply is
    /// not fprintd's.
    package static let fingerNames: Set<String> = [
        "left-thumb", "left-index-finger", "left-middle-finger", "left-ring-finger", "left-little-finger",
        "right-thumb", "right-index-finger", "right-middle-finger", "right-ring-finger", "right-little-finger",
    ]

    /// What one `VerifyStatus(result, done)` signal means for the wait.
    package enum VerifyStep: Equatable, Sendable {
        /// The check is over with this verdict: stop verifying and release the reader.
        case finished(FingerprintVerdict)
        /// The person is to try again (a swipe too short, a finger off centre); the verification goes on.
        case keepWaiting
    }

    /// Reads a `VerifyStatus` signal's result and done flag (fprintd's "Verify Statuses"). A match or no-match
    /// ends the check whatever the flag says; the retry statuses go on unless fprintd says it is done; a
    /// disconnection, an unknown error or a result fprintd does not define ends it as unavailable.
    package static func verifyStep(result: String, done: Bool) -> VerifyStep {
        switch result {
        case "verify-match": return .finished(.matched)
        case "verify-no-match": return .finished(.notMatched)
        case "verify-retry-scan", "verify-swipe-too-short", "verify-finger-not-centered", "verify-remove-and-retry":
            return done ? .finished(.unavailable(reason: "the fingerprint reader stopped (\(result))")) : .keepWaiting
        case "verify-disconnected":
            return .finished(.unavailable(reason: "the fingerprint reader was disconnected"))
        case "verify-unknown-error":
            return .finished(.unavailable(reason: "the fingerprint reader failed (verify-unknown-error)"))
        default:
            return done
                ? .finished(.unavailable(reason: "fprintd answered an unknown status"))
                : .keepWaiting
        }
    }

    /// Why a call to fprintd failed, in one line, from its D-Bus error name (`net.reactivated.Fprint.Error.*`
    /// and the bus's own).
    package static func reason(errorName: String, during step: String) -> String {
        switch errorName {
        case "net.reactivated.Fprint.Error.NoSuchDevice": "no fingerprint reader"
        case "net.reactivated.Fprint.Error.NoEnrolledPrints": "no enrolled finger"
        case "net.reactivated.Fprint.Error.AlreadyInUse": "the fingerprint reader is in use"
        case "net.reactivated.Fprint.Error.PermissionDenied":
            "fprintd refused (polkit did not allow net.reactivated.fprint.device.verify)"
        case "net.reactivated.Fprint.Error.ClaimDevice": "the fingerprint reader was not claimed"
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            "fprintd did not answer \(step) in time"
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            "fprintd is not available"
        default: "fprintd failed \(step) (\(errorName))"
        }
    }

    /// The digest of a user's enrolled fingers on one reader: SHA-256 over a version label, the reader's name
    /// and the sorted, distinct finger names, each ended by a NUL (no name holds one). Nil when `fingers` is
    /// empty: no enrolled finger, nothing for `biometryCurrentSet` to keep.
    package static func enrolledFingersDigest(deviceName: String, fingers: [String]) -> [UInt8]? {
        let sorted = Set(fingers).sorted()
        guard !sorted.isEmpty else { return nil }
        var input = Array("latchkey fprintd enrolled fingers v1".utf8) + [0]
        input += Array(deviceName.utf8) + [0]
        for finger in sorted { input += Array(finger.utf8) + [0] }
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(input, input.count, &output, &length, EVP_sha256(), nil) == 1 else { return nil }
        return Array(output.prefix(Int(length)))
    }
}
