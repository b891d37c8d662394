import Testing

@testable import Fingerprint

/// What fprintd's statuses and errors mean for a check, and the enrolled fingers' digest, without fprintd.
@Suite struct FprintdProtocolTests {
    @Test func aMatchOrANoMatchEndsTheCheck() {
        #expect(FprintdProtocol.verifyStep(result: "verify-match", done: true) == .finished(.matched))
        #expect(FprintdProtocol.verifyStep(result: "verify-no-match", done: true) == .finished(.notMatched))
        // fprintd 1.94 sends done=true with both; a result that is final is final whatever the flag says.
        #expect(FprintdProtocol.verifyStep(result: "verify-match", done: false) == .finished(.matched))
    }

    @Test func aRetryGoesOnUntilFprintdSaysItIsDone() {
        for retry in [
            "verify-retry-scan", "verify-swipe-too-short", "verify-finger-not-centered", "verify-remove-and-retry",
        ] {
            #expect(FprintdProtocol.verifyStep(result: retry, done: false) == .keepWaiting)
            guard case .finished(.unavailable) = FprintdProtocol.verifyStep(result: retry, done: true) else {
                Issue.record("\(retry) with done=true should end the check as unavailable")
                continue
            }
        }
    }

    @Test func errorsAndUnknownResultsNeverMatch() {
        for result in ["verify-disconnected", "verify-unknown-error", "", "verify-matched", "VERIFY-MATCH"] {
            guard case .finished(.unavailable) = FprintdProtocol.verifyStep(result: result, done: true) else {
                Issue.record("\(result) with done=true should end the check as unavailable")
                continue
            }
        }
        #expect(FprintdProtocol.verifyStep(result: "something-new", done: false) == .keepWaiting)
    }

    @Test func fprintdErrorsReadAsOneLine() {
        #expect(
            FprintdProtocol.reason(errorName: "net.reactivated.Fprint.Error.NoEnrolledPrints", during: "VerifyStart")
                == "no enrolled finger")
        #expect(
            FprintdProtocol.reason(errorName: "net.reactivated.Fprint.Error.AlreadyInUse", during: "Claim")
                == "the fingerprint reader is in use")
        #expect(
            FprintdProtocol.reason(errorName: "org.freedesktop.DBus.Error.NoReply", during: "Claim")
                == "fprintd did not answer Claim in time")
        #expect(
            FprintdProtocol.reason(errorName: "org.example.Odd", during: "Claim")
                == "fprintd failed Claim (org.example.Odd)")
    }

    @Test func theDigestCoversTheReaderAndTheSetOfFingers() throws {
        let one = try #require(FprintdProtocol.enrolledFingersDigest(deviceName: "Reader", fingers: ["right-thumb"]))
        #expect(one.count == 32)
        let two = FprintdProtocol.enrolledFingersDigest(
            deviceName: "Reader", fingers: ["right-thumb", "left-index-finger"])
        // Order and repetition do not matter; which fingers, and on which reader, do.
        #expect(
            two
                == FprintdProtocol.enrolledFingersDigest(
                    deviceName: "Reader", fingers: ["left-index-finger", "right-thumb", "left-index-finger"]))
        #expect(two != one)
        #expect(FprintdProtocol.enrolledFingersDigest(deviceName: "Other reader", fingers: ["right-thumb"]) != one)
        #expect(FprintdProtocol.enrolledFingersDigest(deviceName: "Reader", fingers: []) == nil)
        // Names are NUL-ended: moving a byte between the reader's name and a finger changes the digest.
        #expect(
            FprintdProtocol.enrolledFingersDigest(deviceName: "Readerr", fingers: ["ight-thumb"])
                != one)
    }

    @Test func theDigestIsSHA256OfTheDocumentedBytes() throws {
        // docs/fingerprint.md: "latchkey fprintd enrolled fingers v1\0" + name + "\0" + each sorted finger + "\0".
        let digest = try #require(
            FprintdProtocol.enrolledFingersDigest(deviceName: "Virtual device for debugging", fingers: ["right-thumb"]))
        let hex = digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        #expect(hex == Self.expectedHex)
    }

    /// printf 'latchkey fprintd enrolled fingers v1\0Virtual device for debugging\0right-thumb\0' | sha256sum
    static let expectedHex = "cf86f41570962903d8c3936def37fec7aa31503f5efa5f67e27be8a4e57fef67"
}
