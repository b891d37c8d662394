import Posix
import Testing

@testable import AgeEncryption

/// The bytes of a secret buffer, for comparing in tests.
func bytes(_ secret: borrowing SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

/// `text` in secret memory.
func secret(_ text: String) throws -> SecretBytes { try SecretBytes(copying: Array(text.utf8)) }

/// `count` bytes of a plaintext that differs from chunk to chunk.
func plaintext(_ count: Int) throws -> SecretBytes {
    try SecretBytes(copying: (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 16) })
}

/// The kind of error `body` throws, nil when it throws none.
func failure(_ body: () throws(AgeError) -> SecretBytes) -> AgeError.Kind? {
    do throws(AgeError) {
        _ = try body()
        return nil
    } catch {
        return error.kind
    }
}

/// The error `body` throws, nil when it throws none.
func error(_ body: () throws(AgeError) -> SecretBytes) -> AgeError? {
    do throws(AgeError) {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// Where the payload (its nonce) of a binary file starts.
func payloadStart(_ file: [UInt8]) throws -> Int { try AgeHeader.parse(file).payloadStart }

/// A file whose header is `header` (through `---`, as text), with a MAC under `fileKey` and no payload.
func fileWithHeader(_ header: String) -> [UInt8] {
    Array(header.utf8) + Array(" ".utf8) + Base64.encode([UInt8](repeating: 0, count: 32)) + Array("\n".utf8)
        + [UInt8](repeating: 0, count: 40)
}

let passphrase = "correct horse battery staple"
/// A cheap work factor for the tests (age's default is 18).
let cheap = 4

@Suite struct AgeRoundTripTests {
    @Test(arguments: [0, 1, 100, 65535, 65536, 65537, 131072, 200_000])
    func aPassphraseFileOfAnySizeOpensWithItsPassphrase(count: Int) throws {
        let plain = try plaintext(count)
        let file = try AgeFile.encrypt(plain, passphrase: try secret(passphrase), workFactor: cheap)
        let chunks = max(1, (count + 65535) / 65536)
        #expect(file.count == (try payloadStart(file)) + 16 + count + 16 * chunks)
        let opened = try AgeFile.decrypt(file, passphrase: try secret(passphrase))
        #expect(bytes(opened) == bytes(plain))
        #expect(AgeFile.requirement(of: file) == .passphrase)
    }

    @Test(arguments: [0, 65536, 65537])
    func aRecipientFileOpensWithItsIdentity(count: Int) throws {
        let identity = try AgeIdentities.generate()
        let plain = try plaintext(count)
        let file = try AgeFile.encrypt(plain, to: identity.recipients)
        #expect(bytes(try AgeFile.decrypt(file, identities: identity)) == bytes(plain))
        #expect(AgeFile.requirement(of: file) == .identity)
    }

    @Test func aFileToSeveralRecipientsOpensWithEachOfThem() throws {
        let first = try AgeIdentities.generate()
        let second = try AgeIdentities.generate()
        let file = try AgeFile.encrypt(try secret("both"), to: first.recipients + second.recipients)
        #expect(bytes(try AgeFile.decrypt(file, identities: first)) == Array("both".utf8))
        #expect(bytes(try AgeFile.decrypt(file, identities: second)) == Array("both".utf8))
        #expect(try AgeHeader.parse(file).stanzas.map(\.type) == ["X25519", "X25519"])
    }

    @Test func theHeaderIsWhatTheSpecSays() throws {
        let file = try AgeFile.encrypt(try secret("x"), passphrase: try secret(passphrase), workFactor: cheap)
        let text = String(decoding: file[..<(try payloadStart(file))], as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0] == "age-encryption.org/v1")
        let arguments = lines[1].split(separator: " ")
        #expect(arguments.count == 4 && arguments[0] == "->" && arguments[1] == "scrypt" && arguments[3] == "4")
        #expect(arguments[2].count == 22)  // 16 bytes, unpadded
        #expect(lines[2].count == 43)  // the 32-byte wrapped key, a short last line
        #expect(lines[3].hasPrefix("--- ") && lines[3].count == 47)
    }

    @Test func armoredFilesRoundTripAndAreStrictPEM() throws {
        let identity = try AgeIdentities.generate()
        let file = try AgeFile.encrypt(try plaintext(1000), to: identity.recipients, armored: true)
        let text = String(decoding: file, as: UTF8.self)
        #expect(text.hasPrefix("-----BEGIN AGE ENCRYPTED FILE-----\n"))
        #expect(text.hasSuffix("\n-----END AGE ENCRYPTED FILE-----\n"))
        #expect(text.split(separator: "\n").dropFirst().dropLast().dropLast().allSatisfy { $0.count == 64 })
        #expect(bytes(try AgeFile.decrypt(file, identities: identity)) == bytes(try plaintext(1000)))
        #expect(AgeFile.requirement(of: file) == .identity)
        // Whitespace around it and CRLF line ends are accepted.
        let crlf = Array(
            ("\n  " + text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n") + "\n\n")
                .utf8)
        #expect(bytes(try AgeFile.decrypt(crlf, identities: identity)) == bytes(try plaintext(1000)))
    }

    @Test func anEmptyPassphraseAndAnOutOfRangeWorkFactorAreRefused() throws {
        let plain = try secret("x")
        #expect(
            failure { () throws(AgeError) in
                _ = try AgeFile.encrypt(plain, passphrase: try! secret(""), workFactor: cheap)
                return try! secret("")
            } == .invalidArgument)
        #expect(
            failure { () throws(AgeError) in
                _ = try AgeFile.encrypt(plain, passphrase: try! secret("p"), workFactor: 23)
                return try! secret("")
            } == .invalidArgument)
        #expect(
            failure { () throws(AgeError) in
                _ = try AgeFile.encrypt(plain, to: [])
                return try! secret("")
            } == .invalidArgument)
    }
}

@Suite struct AgeWrongKeyTests {
    @Test func aWrongPassphraseIsSaidSo() throws {
        let file = try AgeFile.encrypt(try secret("s"), passphrase: try secret(passphrase), workFactor: cheap)
        let wrong = try secret("Correct horse battery staple")
        let thrown = error { () throws(AgeError) in try AgeFile.decrypt(file, passphrase: wrong) }
        #expect(thrown?.kind == .wrongPassphrase)
        #expect(thrown?.message.contains("wrong passphrase") == true)
    }

    @Test func aFileForAnotherKeyIsSaidSo() throws {
        let mine = try AgeIdentities.generate()
        let theirs = try AgeIdentities.generate()
        let file = try AgeFile.encrypt(try secret("s"), to: theirs.recipients)
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(file, identities: mine) } == .noMatchingIdentity)
    }

    @Test func aPassphraseFileNeedsAPassphraseAndARecipientFileAnIdentity() throws {
        let identity = try AgeIdentities.generate()
        let byPassphrase = try AgeFile.encrypt(try secret("s"), passphrase: try secret(passphrase), workFactor: cheap)
        let toRecipient = try AgeFile.encrypt(try secret("s"), to: identity.recipients)
        let pass = try secret(passphrase)
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(byPassphrase, identities: identity) }
                == .noMatchingIdentity)
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(toRecipient, passphrase: pass) } == .noMatchingIdentity
        )
    }

    @Test func aWorkFactorAboveTheMaximumIsRefusedBeforeDeriving() throws {
        let file = try AgeFile.encrypt(try secret("s"), passphrase: try secret(passphrase), workFactor: 12)
        let pass = try secret(passphrase)
        let thrown = error { () throws(AgeError) in try AgeFile.decrypt(file, passphrase: pass, maximumWorkFactor: 11) }
        #expect(thrown?.kind == .workFactorTooHigh)
        #expect(bytes(try AgeFile.decrypt(file, passphrase: pass, maximumWorkFactor: 12)) == Array("s".utf8))
        // A forged 2^30 (16 GiB of scrypt) is refused at once, under the default maximum of 22.
        let forged = replacingStanzaLine(of: file, with: "-> scrypt AAAAAAAAAAAAAAAAAAAAAA 30")
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            #expect(
                failure { () throws(AgeError) in try AgeFile.decrypt(forged, passphrase: pass) } == .workFactorTooHigh)
        }
        #expect(elapsed < .seconds(1))
        let huge = replacingStanzaLine(of: file, with: "-> scrypt AAAAAAAAAAAAAAAAAAAAAA 99999999999999999999999")
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(huge, passphrase: pass) } == .workFactorTooHigh)
        for spelling in ["012", "+12", "1e1", "-1", "0"] {
            let odd = replacingStanzaLine(of: file, with: "-> scrypt AAAAAAAAAAAAAAAAAAAAAA \(spelling)")
            #expect(failure { () throws(AgeError) in try AgeFile.decrypt(odd, passphrase: pass) } == .malformed)
        }
    }
}

/// `file` with its second line (the first stanza's argument line) replaced by `line`.
func replacingStanzaLine(of file: [UInt8], with line: String) -> [UInt8] {
    let lines = file.split(separator: UInt8(ascii: "\n"), maxSplits: 2, omittingEmptySubsequences: false)
    return Array(lines[0]) + [10] + Array(line.utf8) + [10] + Array(lines[2])
}

@Suite struct AgeScryptSeamTests {
    /// A daemon derives elsewhere: the function it passes gets the passphrase, the labelled salt and the work
    /// factor, and what it returns is the wrap key used (here OpenSSL's, counted).
    @Test func aPassedScryptFunctionIsTheOneUsed() throws {
        nonisolated(unsafe) var calls: [(salt: [UInt8], logN: Int)] = []
        let counting: AgeFile.ScryptFunction = { (passphrase, salt, logN) throws(AgeError) in
            calls.append((salt, logN))
            return try AgeFile.scryptInThisProcess(passphrase: passphrase, salt: salt, logN: logN)
        }
        let pass = try secret(passphrase)
        let file = try AgeFile.encrypt(try secret("s"), passphrase: pass, workFactor: cheap, scrypt: counting)
        #expect(bytes(try AgeFile.decrypt(file, passphrase: pass, scrypt: counting)) == Array("s".utf8))
        #expect(calls.count == 2 && calls.allSatisfy { $0.logN == cheap })
        #expect(calls[0].salt.starts(with: Array("age-encryption.org/v1/scrypt".utf8)) && calls[0].salt.count == 44)
        #expect(calls[0].salt == calls[1].salt)
        // Refused before it is called when the work factor is too high.
        #expect(
            failure { () throws(AgeError) in
                try AgeFile.decrypt(file, passphrase: pass, maximumWorkFactor: cheap - 1, scrypt: counting)
            } == .workFactorTooHigh)
        #expect(calls.count == 2)
        // A function that derives another key: the passphrase looks wrong.
        let other: AgeFile.ScryptFunction = { (_, _, _) throws(AgeError) in try AgeCrypto.secretZeros(32) }
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(file, passphrase: pass, scrypt: other) }
                == .wrongPassphrase)
    }
}
