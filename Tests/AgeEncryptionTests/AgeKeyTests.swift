import Posix
import Testing

@testable import AgeEncryption

/// The example keys of the age specification (c2sp.org/age): `age-keygen -y` of the identity prints the recipient.
let specIdentity = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
let specRecipient = "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj"

/// The kind of error parsing `text` as a recipient gives, nil when it parses.
func recipientFailure(_ text: String) -> AgeError.Kind? {
    do throws(AgeError) {
        _ = try AgeRecipient(parsing: text)
        return nil
    } catch {
        return error.kind
    }
}

/// The error parsing `text` as a key file gives, nil when it parses.
func keyFileError(_ text: String) -> AgeError? {
    do throws(AgeError) {
        _ = try AgeIdentities(parsingKeyFile: try! secret(text))
        return nil
    } catch {
        return error
    }
}

@Suite struct AgeKeyTests {
    @Test func theSpecsIdentityHasTheSpecsRecipient() throws {
        let identities = try AgeIdentities(parsingKeyFile: try secret(specIdentity + "\n"))
        #expect(identities.count == 1)
        #expect(identities.recipients[0].description == specRecipient)
        #expect(try AgeRecipient(parsing: specRecipient) == identities.recipients[0])
        // The identity's 32 bytes: "GFPYYSJZ" spells 0x42 five times.
        #expect(bytes(identities.privateKeys) == [UInt8](repeating: 0x42, count: 32))
        // The key file we write reads back, in age-keygen's form.
        let keyFile = try identities.keyFile()
        #expect(bytes(keyFile) == Array("# public key: \(specRecipient)\n\(specIdentity)\n".utf8))
    }

    @Test func aRecipientIsAllOneCaseWithItsChecksum() throws {
        #expect(recipientFailure(specRecipient.uppercased()) == nil)
        #expect(recipientFailure("  \(specRecipient)\n") == nil)
        // Every single-character change breaks the checksum (BIP 173 guarantees it for one error).
        let characters = Array(specRecipient)
        for index in 4..<characters.count {
            var changed = characters
            changed[index] = changed[index] == "q" ? "p" : "q"
            #expect(recipientFailure(String(changed)) == .invalidRecipient, "position \(index)")
        }
        var swapped = characters
        swapped.swapAt(10, 11)
        #expect(recipientFailure(String(swapped)) == .invalidRecipient)
        #expect(recipientFailure("age1ZVKYG2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj") == .invalidRecipient)
        #expect(recipientFailure(String(specRecipient.dropLast())) == .invalidRecipient)
        #expect(recipientFailure("") == .invalidRecipient)
        #expect(recipientFailure("age1") == .invalidRecipient)
        #expect(recipientFailure("age1b") == .invalidRecipient)
        #expect(recipientFailure(String(repeating: "a", count: 5000)) == .invalidRecipient)
    }

    @Test func theChecksumErrorIsNamed() throws {
        var changed = Array(specRecipient)
        changed[20] = changed[20] == "q" ? "p" : "q"
        do throws(AgeError) {
            _ = try AgeRecipient(parsing: String(changed))
            Issue.record("a mistyped recipient parsed")
        } catch {
            #expect(error.message == "the age recipient's checksum does not match: a character is mistyped")
        }
    }

    @Test func otherKindsOfRecipientAreUnsupported() throws {
        // A valid Bech32 string of another human-readable part: the identity's bytes under "age1pq".
        let identities = try AgeIdentities(parsingKeyFile: try secret(specIdentity))
        let postQuantum = try identities.privateKeys.withUnsafeBytes { (bytes) throws(SecretMemoryError) in
            try Bech32.encode(bytes, prefix: "age1pq", uppercase: false)
        }
        #expect(recipientFailure(String(decoding: bytes(postQuantum), as: UTF8.self)) == .unsupported)
        #expect(
            recipientFailure("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHsKLqeplhpW+uObz5dvMgjz1OxfM/XXUB+VHtZ6isGN")
                == .unsupported)
        // Bech32 of 31 bytes under "age": the wrong length.
        let short = try SecretBytes(copying: [UInt8](repeating: 1, count: 31))
        let encoded = try short.withUnsafeBytes { (bytes) throws(SecretMemoryError) in
            try Bech32.encode(bytes, prefix: "age", uppercase: false)
        }
        #expect(recipientFailure(String(decoding: bytes(encoded), as: UTF8.self)) == .invalidRecipient)
    }

    @Test func aKeyFileOfAgeKeygenWithCommentsAndSeveralKeysReads() throws {
        let first = try AgeIdentities.generate()
        let second = try AgeIdentities.generate()
        let text =
            "# created: 2026-11-26T09:00:00Z\r\n" + String(decoding: bytes(try first.keyFile()), as: UTF8.self)
            + "\n\n  "
            + String(decoding: bytes(try second.keyFile()), as: UTF8.self).lowercased() + "\t\n"
        let both = try AgeIdentities(parsingKeyFile: try secret(text))
        #expect(both.count == 2)
        #expect(both.recipients == first.recipients + second.recipients)
        let file = try AgeFile.encrypt(try secret("for the second"), to: second.recipients)
        #expect(bytes(try AgeFile.decrypt(file, identities: both)) == Array("for the second".utf8))
    }

    @Test func aBadKeyFileIsNamedByLineWithoutQuotingIt() throws {
        let noKey = keyFileError("# only a comment\n\n")
        #expect(noKey?.kind == .invalidIdentity)
        var mistyped = Array(specIdentity)
        mistyped[30] = mistyped[30] == "Q" ? "P" : "Q"
        let checksum = keyFileError("# key\n" + String(mistyped) + "\n")
        #expect(checksum?.kind == .invalidIdentity)
        #expect(checksum?.message == "line 2 of the age key file: the identity's checksum does not match")
        let garbage = keyFileError("\(specIdentity)\nhunter2 is my password\n")
        #expect(garbage?.kind == .invalidIdentity)
        #expect(garbage?.message == "line 2 of the age key file is not an identity (AGE-SECRET-KEY-1…)")
        #expect(garbage?.message.contains("hunter2") == false)
        #expect(keyFileError(specRecipient)?.kind == .invalidIdentity)
        #expect(keyFileError("AGE-PLUGIN-YUBIKEY-1QQQQQQQQQQQQQQQQQQQQQQQQQ")?.kind != nil)
        #expect(keyFileError("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n")?.kind == .unsupported)
        let mixedCase = keyFileError(String(specIdentity.prefix(20)) + specIdentity.dropFirst(20).lowercased())
        #expect(mixedCase?.kind == .invalidIdentity)
    }

    @Test func aKeyFileIsBounded() throws {
        let one = String(decoding: bytes(try AgeIdentities.generate().keyFile()), as: UTF8.self)
        #expect(keyFileError(String(repeating: one, count: 65))?.kind == .tooLarge)
        #expect(keyFileError(String(repeating: one, count: 64)) == nil)
        #expect(keyFileError(String(repeating: "#", count: 65 << 10))?.kind == .tooLarge)
    }
}
