import Fingerprint
import Foundation
import KeychainCore
import Testing

@testable import KeychainRegistry

/// An item's access control as latchkeyd reads and combines it (docs/secitem-semantics.md, "Enforced access
/// control"): the stored form, the factors each flag asks for, and `.or` / `.and` over what the fingerprint
/// reader can do.
@Suite struct AccessConstraintsTests {
    /// A reader whose answers the test fixes (fprintd is not on this machine's bus; fprint27 tests the real one).
    struct FixedReader: FingerprintChecking {
        let digest: [UInt8]?
        let verdict: FingerprintVerdict
        func enrolledFingersDigest(user: String) -> [UInt8]? { digest }
        func verify(user: String, timeoutSeconds: Double) -> FingerprintVerdict { verdict }
    }

    typealias C = AccessConstraints

    static func plan(_ flags: UInt64, digest: [UInt8]? = nil) -> (needed: [C.Factor], anyOne: Bool) {
        C(protection: "ak", flags: flags, enrolledFingers: digest).factors
    }

    @Test func theStoredFormKeepsFlagsProtectionAndTheEnrolledDigest() throws {
        let plain = C(protection: "cku", flags: C.userPresence | C.or | C.biometryAny)
        #expect(C(storedForm: plain.storedForm) == plain)
        #expect(plain.storedForm[4] == 1)
        let bound = C(protection: "ak", flags: C.biometryCurrentSet, enrolledFingers: [1, 2, 3])
        #expect(C(storedForm: bound.storedForm) == bound)
        #expect(bound.storedForm[4] == 2)
        // Bits Apple does not define, a cut digest, another protection: not an access control.
        var unknown = plain.storedForm
        unknown[12] |= 0x80
        #expect(C(storedForm: unknown) == nil)
        #expect(C(storedForm: bound.storedForm.prefix(15)) == nil)
        #expect(C(storedForm: Data("lkac".utf8) + Data([1, 0, 0, 0, 0, 0, 0, 0, 1]) + Data("zz".utf8)) == nil)
        #expect(throws: KeychainError.self) { try C.of([.accessControl: .data(Data("garbage".utf8))]) }
        #expect(try C.of([:]) == nil)
    }

    @Test func eachFlagAsksForItsFactorAndPasswordFlagsAskOnce() {
        #expect(Self.plan(C.userPresence | C.devicePasscode).needed == [.password])
        #expect(Self.plan(C.biometryAny).needed == [.fingerprint(digest: nil)])
        #expect(Self.plan(C.biometryCurrentSet, digest: [9]).needed == [.fingerprint(digest: [9])])
        #expect(Self.plan(C.companion).needed == [.companion])
        #expect(Self.plan(C.privateKeyUsage).needed.isEmpty)
        #expect(Self.plan(C.or | C.userPresence).anyOne)
        #expect(!Self.plan(C.userPresence | C.biometryAny).anyOne)
    }

    @Test func withNoReaderBiometryFailsUnlessOrOffersThePassword() {
        let none = NoFingerprintReader()
        func decide(_ flags: UInt64) -> KeychainRegistry.FactorDecision {
            KeychainRegistry.fingerprintStage([Self.plan(flags)], reader: none, user: "u")
        }
        guard case .refused = decide(C.biometryAny) else {
            Issue.record("biometryAny with no reader")
            return
        }
        #expect(decide(C.biometryAny | C.or | C.devicePasscode) == .password)
        // Apple's default for several constraints is all of them.
        guard case .refused = decide(C.biometryAny | C.devicePasscode) else {
            Issue.record("biometryAny and the passcode with no reader")
            return
        }
        guard case .refused = decide(C.biometryAny | C.and | C.userPresence) else {
            Issue.record(".and with no reader")
            return
        }
        #expect(KeychainRegistry.decideWithoutFingers([Self.plan(C.userPresence)]) == .password)
        #expect(KeychainRegistry.decideWithoutFingers([Self.plan(0)]) == .met)
        guard case .refused = KeychainRegistry.decideWithoutFingers([Self.plan(C.companion | C.or | C.userPresence)])
        else { return }
        Issue.record("a watch or the password falls back to the password")
    }

    @Test func aMatchingFingerMeetsBiometryAndCurrentSetNeedsTheSameFingers() {
        let matched = FixedReader(digest: [1, 2], verdict: .matched)
        func decide(_ flags: UInt64, digest: [UInt8]? = nil, reader: FixedReader = matched)
            -> KeychainRegistry.FactorDecision
        {
            KeychainRegistry.fingerprintStage([Self.plan(flags, digest: digest)], reader: reader, user: "u")
        }
        #expect(decide(C.biometryAny) == .met)
        #expect(decide(C.biometryCurrentSet, digest: [1, 2]) == .met)
        #expect(
            decide(C.biometryCurrentSet, digest: [1, 3])
                == .refused(
                    "the enrolled fingers changed since the item's access control was set"))
        // .and: the finger, then the password; .or: the finger is enough.
        #expect(decide(C.biometryAny | C.and | C.userPresence) == .password)
        #expect(decide(C.biometryAny | C.or | C.userPresence) == .met)
        // A finger that does not match: the password when .or offers it, else refused.
        let wrong = FixedReader(digest: [1, 2], verdict: .notMatched)
        #expect(decide(C.biometryAny | C.or | C.devicePasscode, reader: wrong) == .password)
        #expect(decide(C.biometryAny, reader: wrong) == .refused("the finger did not match"))
    }
}
