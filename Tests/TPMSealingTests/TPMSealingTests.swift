import Posix
import TPMSealing
import Testing

/// Sealing against a real software TPM (swtpm); each test starts its own and kills it at the end.
@Suite(.enabled(if: SoftwareTPM.isAvailable, "swtpm is not installed"))
struct TPMSealingTests {
    let key: [UInt8] = (0..<32).map { UInt8($0 * 7 + 3) }
    let pin = Array("4711".utf8)

    @Test func sealsAndUnsealsWithoutPIN() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sealing = KeySealing(configuration: tpm.configuration)
        let sealed = try sealing.seal(key: secret(key))
        #expect(!sealed.needsPIN)
        // The stored bytes hold the TPM's encrypted private part, not the key.
        #expect(!contains(sealed.encoded(), key))
        let unsealed = try sealing.unseal(try SealedKey(encoded: sealed.encoded()))
        #expect(unsealed.hasSameBytes(as: key) as Bool)
    }

    @Test func wrongPINFailsAndRightPINUnseals() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sealing = KeySealing(configuration: tpm.configuration)
        let sealed = try sealing.seal(key: secret(key), pin: secret(pin))
        #expect(sealed.needsPIN)
        #expect(throws: TPMSealingError.pinRequired) { _ = try sealing.unseal(sealed) }
        // swtpm allows 3 failed authorisations by default: the first wrong PIN leaves 2.
        #expect(throws: TPMSealingError.wrongPIN(triesLeft: 2)) {
            _ = try sealing.unseal(sealed, pin: secret(Array("4712".utf8)))
        }
        #expect(try sealing.unseal(sealed, pin: secret(pin)).hasSameBytes(as: key) as Bool)
    }

    @Test func anotherTPMCannotUnseal() throws {
        let first = try SoftwareTPM()
        defer { first.stop() }
        let second = try SoftwareTPM()
        defer { second.stop() }
        let sealed = try KeySealing(configuration: first.configuration).seal(key: secret(key))
        #expect(throws: TPMSealingError.notThisTPM) {
            _ = try KeySealing(configuration: second.configuration).unseal(sealed)
        }
        #expect(try KeySealing(configuration: first.configuration).unseal(sealed).hasSameBytes(as: key) as Bool)
    }

    @Test func extendedPCRStopsUnsealing() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sealing = KeySealing(configuration: tpm.configuration)
        let bound = try sealing.seal(key: secret(key), pcrs: [16])
        let boundWithPIN = try sealing.seal(key: secret(key), pin: secret(pin), pcrs: [16, 7])
        #expect(bound.pcrs == [16])
        #expect(try sealing.unseal(bound).hasSameBytes(as: key) as Bool)
        #expect(try sealing.unseal(boundWithPIN, pin: secret(pin)).hasSameBytes(as: key) as Bool)
        #expect(throws: TPMSealingError.wrongPIN(triesLeft: 2)) {
            _ = try sealing.unseal(boundWithPIN, pin: secret(Array("0000".utf8)))
        }
        try tpm.tpm2Tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)])
        #expect(throws: TPMSealingError.pcrsChanged) { _ = try sealing.unseal(bound) }
        #expect(throws: TPMSealingError.pcrsChanged) { _ = try sealing.unseal(boundWithPIN, pin: secret(pin)) }
    }

    @Test func repeatedWrongPINsLockTheTPMOut() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        // Two failed authorisations allowed; one forgotten every 600 s.
        try tpm.tpm2Tool("tpm2_dictionarylockout", ["--setup-parameters", "-n", "2", "-t", "600", "-l", "600"])
        let sealing = KeySealing(configuration: tpm.configuration)
        let sealed = try sealing.seal(key: secret(key), pin: secret(pin))
        #expect(throws: TPMSealingError.wrongPIN(triesLeft: 1)) {
            _ = try sealing.unseal(sealed, pin: secret(Array("1".utf8)))
        }
        #expect(throws: TPMSealingError.wrongPIN(triesLeft: 0)) {
            _ = try sealing.unseal(sealed, pin: secret(Array("2".utf8)))
        }
        // Now even the right PIN is refused, and the error says how the TPM recovers.
        #expect(throws: TPMSealingError.lockedOut(secondsPerRecoveredTry: 600)) {
            _ = try sealing.unseal(sealed, pin: secret(pin))
        }
        try tpm.tpm2Tool("tpm2_dictionarylockout", ["--clear-lockout"])
        #expect(try sealing.unseal(sealed, pin: secret(pin)).hasSameBytes(as: key) as Bool)
    }

    @Test func damagedSealedKeyIsRefusedClearly() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sealing = KeySealing(configuration: tpm.configuration)
        let sealed = try sealing.seal(key: secret(key), pin: secret(pin))
        var flipped = sealed
        flipped.privateArea[flipped.privateArea.count - 1] ^= 0x01
        // The TPM's integrity check on the private part fails, exactly as for another TPM's key.
        #expect(throws: TPMSealingError.notThisTPM) { _ = try sealing.unseal(flipped, pin: secret(pin)) }
        var truncated = sealed
        truncated.publicArea.removeLast()
        #expect(throws: TPMSealingError.invalidInput("not a sealed TPM key")) {
            _ = try sealing.unseal(truncated, pin: secret(pin))
        }
        #expect(try sealing.unseal(sealed, pin: secret(pin)).hasSameBytes(as: key) as Bool)
    }

    @Test func noTPMIsReported() throws {
        let tpm = try SoftwareTPM()
        let configuration = tpm.configuration
        tpm.stop()
        #expect {
            try KeySealing(configuration: configuration).seal(key: secret(key))
        } throws: { error in
            guard case .noTPM(let tcti, _) = error as? TPMSealingError else { return false }
            return tcti == configuration.tcti
        }
    }

    @Test func rejectsBadInput() throws {
        let sealing = KeySealing(configuration: TPMConfiguration(tcti: "swtpm:host=127.0.0.1,port=1"))
        #expect(throws: TPMSealingError.invalidInput("a sealed key must be 32 bytes")) {
            try sealing.seal(key: secret([1, 2, 3]))
        }
        #expect(throws: TPMSealingError.invalidInput("PCR indices go from 0 to 23")) {
            try sealing.seal(key: secret(key), pcrs: [24])
        }
        #expect(throws: TPMSealingError.invalidInput("not a sealed TPM key")) { try SealedKey(encoded: [1, 0, 0]) }
        let sealed = SealedKey(
            publicArea: [0, 4, 1, 2], privateArea: [0, 1], pcrs: [0, 23], needsPIN: true,
            pinSalt: .init(repeating: 9, count: 16))
        #expect(try SealedKey(encoded: sealed.encoded()) == sealed)
        #expect(throws: TPMSealingError.invalidInput("not a sealed TPM key")) {
            try SealedKey(encoded: sealed.encoded() + [0])
        }
    }
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<$0 + needle.count]) == needle }
}

/// `bytes` in secret memory, as `KeySealing` takes a key and a PIN.
func secret(_ bytes: [UInt8]) -> SecretBytes {
    try! SecretBytes(copying: bytes)
}
