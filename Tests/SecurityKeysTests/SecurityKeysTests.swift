import Foundation
import Posix
import Testing

@testable import SecurityKeys

/// The device layer through the real libfido2, against Tests/Support/soft-fido2 on the `unix:` seam.
@Suite(.serialized) struct SecurityKeysTests {
    static let relyingParty = "latchkey:0123456789abcdef"
    static let userID: [UInt8] = Array("keychain".utf8)
    static let saltA = [UInt8](repeating: 0xA5, count: 32)
    static let saltB = [UInt8](repeating: 0x5A, count: 32)

    func secret(_ bytes: [UInt8]) throws -> SecretBytes { try SecretBytes(copying: bytes) }
    func pin(_ text: String) throws -> SecretBytes { try SecretBytes(copying: Array(text.utf8)) }

    func output(_ secret: borrowing SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

    @Test func aUnixDeviceNamesItsSocket() {
        #expect(SecurityKeyDevice(path: "unix:/run/x.sock").socketPath == "/run/x.sock")
        #expect(SecurityKeyDevice(path: "/dev/hidraw0").socketPath == nil)
    }

    @Test func aCredentialWithoutPINGivesTheSameSecretForTheSameSaltAndAnotherForAnother() throws {
        let key = try SoftwareAuthenticator()
        let credential = try key.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "login")
        #expect(!credential.credentialID.isEmpty)
        #expect(credential.aaguid.count == 16 && credential.aaguid != [UInt8](repeating: 0, count: 16))
        #expect(!credential.userVerified)
        let first = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        let second = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        let other = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltB)
        #expect(first.count == 32)
        #expect(output(first) == output(second))
        #expect(output(first) != output(other))
        #expect(try key.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
        // Another relying party does not find it (the key binds the credential to its rp id).
        #expect(try !key.device.probe(relyingParty: "latchkey:other", credentialID: credential.credentialID))
    }

    @Test func theSecretDiffersWithAndWithoutThePIN() throws {
        let key = try SoftwareAuthenticator(["--set-pin", "1234"])
        let credential = try key.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "login")
        let without = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        let with = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
            pin: try pin("1234"))
        #expect(output(without) != output(with))
    }

    @Test(arguments: ["1,2", "1"])
    func aCredentialWithPINNeedsThePINAndIsHiddenWithoutIt(protocols: String) throws {
        let key = try SoftwareAuthenticator(["--set-pin", "1234", "--pin-protocols", protocols])
        let credential = try key.device.enroll(
            relyingParty: Self.relyingParty, userID: Self.userID, userName: "login", pin: try pin("1234"))
        #expect(credential.userVerified)
        let first = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
            pin: try pin("1234"))
        let second = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
            pin: try pin("1234"))
        #expect(output(first) == output(second))
        // credProtect "user verification required": without the PIN the key does not admit to the credential.
        #expect(try !key.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
        #expect(
            try key.device.probe(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, pin: try pin("1234")))
        #expect(throws: SecurityKeyError.otherKey) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        }
    }

    @Test func anotherKeyDoesNotHoldTheCredential() throws {
        let first = try SoftwareAuthenticator()
        let second = try SoftwareAuthenticator()
        let credential = try first.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "a")
        #expect(try first.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
        #expect(try !second.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
        #expect(throws: SecurityKeyError.otherKey) {
            _ = try second.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        }
        // The same state file after a restart is the same key.
        try first.restart()
        #expect(try first.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
    }

    @Test func aResetKeyNoLongerHoldsTheCredential() throws {
        let key = try SoftwareAuthenticator()
        let credential = try key.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "a")
        try key.restart(["--reset"])
        #expect(try !key.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
        #expect(throws: SecurityKeyError.otherKey) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        }
    }

    @Test func aWrongPINIsCountedAndTheRightOneRestoresTheTries() throws {
        let key = try SoftwareAuthenticator(["--set-pin", "1234"])
        let credential = try key.device.enroll(
            relyingParty: Self.relyingParty, userID: Self.userID, userName: "login", pin: try pin("1234"))
        #expect(key.device.pinRetries() == 8)
        #expect(throws: SecurityKeyError.wrongPIN(triesLeft: 7)) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                pin: try pin("9999"))
        }
        #expect(key.device.pinRetries() == 7)
        _ = try key.device.hmacSecret(
            relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
            pin: try pin("1234"))
        #expect(key.device.pinRetries() == 8)
    }

    @Test func threeWrongPINsInARowBlockThePINUntilTheKeyIsReinserted() throws {
        let key = try SoftwareAuthenticator(["--set-pin", "1234"])
        let credential = try key.device.enroll(
            relyingParty: Self.relyingParty, userID: Self.userID, userName: "login", pin: try pin("1234"))
        let secret = { (text: String) throws in
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                pin: try SecretBytes(copying: Array(text.utf8)))
        }
        #expect(throws: SecurityKeyError.wrongPIN(triesLeft: 7)) { try secret("0000") }
        #expect(throws: SecurityKeyError.wrongPIN(triesLeft: 6)) { try secret("0000") }
        #expect(throws: SecurityKeyError.pinBlockedUntilReinserted) { try secret("0000") }
        #expect(throws: SecurityKeyError.pinBlockedUntilReinserted) { try secret("1234") }
        try key.reinsert()
        try secret("1234")
    }

    @Test func eightWrongPINsBlockThePINForGood() throws {
        let key = try SoftwareAuthenticator(["--set-pin", "1234"])
        let credential = try key.device.enroll(
            relyingParty: Self.relyingParty, userID: Self.userID, userName: "login", pin: try pin("1234"))
        var errors: [SecurityKeyError] = []
        for attempt in 1...8 {
            do {
                _ = try key.device.hmacSecret(
                    relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                    pin: try pin("0000"))
            } catch let error as SecurityKeyError {
                errors.append(error)
            }
            if attempt % 3 == 0 { try key.reinsert() }
        }
        #expect(errors.last == .pinBlocked)
        #expect(errors.filter { $0 == .pinBlockedUntilReinserted }.count == 2)
        try key.restart()
        #expect(throws: SecurityKeyError.pinBlocked) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                pin: try pin("1234"))
        }
        #expect(key.device.pinRetries() == 0)
    }

    @Test func aKeyNobodyTouchesGivesNoTouchQuickly() throws {
        let key = try SoftwareAuthenticator()
        let credential = try key.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "a")
        // The key gives up waiting (USER_ACTION_TIMEOUT).
        try key.setTouch(false)
        var started = MonotonicClock.nanoseconds()
        #expect(throws: SecurityKeyError.noTouch) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA)
        }
        #expect(MonotonicClock.nanoseconds() - started < 2_000_000_000)
        // Latchkey gives up first (its own touch timeout) and cancels: the key stops waiting at once.
        try key.setTouch(true, touchDelay: 10)
        started = MonotonicClock.nanoseconds()
        #expect(throws: SecurityKeyError.noTouch) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                touchTimeout: .milliseconds(300))
        }
        #expect(MonotonicClock.nanoseconds() - started < 2_000_000_000)
        // The probe needs no touch, and the key is free again.
        started = MonotonicClock.nanoseconds()
        #expect(try key.device.probe(relyingParty: Self.relyingParty, credentialID: credential.credentialID))
        #expect(MonotonicClock.nanoseconds() - started < 2_000_000_000)
    }

    @Test func aCancellationFromAnotherThreadStopsTheWaitForATouch() throws {
        let key = try SoftwareAuthenticator()
        let credential = try key.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "a")
        // The key would be touched only after 10 s; the person gives up after 0.3 s (another thread cancels).
        try key.setTouch(true, touchDelay: 10)
        let stop = SecurityKeyCancellation()
        let canceller = Thread {
            usleep(300_000)
            stop.cancel()
        }
        let started = MonotonicClock.nanoseconds()
        canceller.start()
        #expect(throws: SecurityKeyError.cancelled) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                cancellation: stop)
        }
        #expect(MonotonicClock.nanoseconds() - started < 3_000_000_000)
        // A cancellation cancelled before runs nothing: the key is not asked at all.
        #expect(throws: SecurityKeyError.cancelled) {
            _ = try key.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: credential.credentialID, salt: Self.saltA,
                cancellation: stop)
        }
    }

    @Test func aKeyWhosePINIsBlockedSaysSoAtEnrollment() throws {
        let key = try SoftwareAuthenticator(["--set-pin", "1234", "--block-pin"])
        #expect(throws: SecurityKeyError.pinBlocked) {
            _ = try key.device.enroll(
                relyingParty: Self.relyingParty, userID: Self.userID, userName: "a", pin: try pin("1234"))
        }
        #expect(key.device.pinRetries() == 0)
    }

    @Test func listingThePluggedInKeysWorksWithNone() throws {
        // CI machines have no security key: libfido2's manifest runs (hidraw, udev) and lists none, without error.
        let keys = try SecurityKeyDevice.pluggedIn()
        #expect(keys.allSatisfy { $0.socketPath == nil && !$0.path.isEmpty })
    }

    @Test func whatAKeyCannotDoIsSaid() throws {
        let noPIN = try SoftwareAuthenticator()
        #expect(throws: SecurityKeyError.noPINSet) {
            _ = try noPIN.device.enroll(
                relyingParty: Self.relyingParty, userID: Self.userID, userName: "a", pin: try pin("1234"))
        }
        let noHMAC = try SoftwareAuthenticator(["--no-hmac-secret"])
        #expect(throws: SecurityKeyError.unsupported("it has no hmac-secret extension")) {
            _ = try noHMAC.device.enroll(relyingParty: Self.relyingParty, userID: Self.userID, userName: "a")
        }
        #expect(throws: SecurityKeyError.invalidInput("an hmac-secret salt is 32 bytes, not 16")) {
            _ = try noPIN.device.hmacSecret(
                relyingParty: Self.relyingParty, credentialID: [1, 2, 3], salt: [UInt8](repeating: 0, count: 16))
        }
        let missing = SecurityKeyDevice(path: "unix:" + noPIN.directory.appendingPathComponent("none.sock").path)
        #expect(throws: SecurityKeyError.self) {
            _ = try missing.probe(relyingParty: Self.relyingParty, credentialID: [1, 2, 3])
        }
    }
}
