import COpenSSL
import Glibc
import Posix
import Testing

@testable import AgeEncryption

/// One vector of age's testkit: what it expects, and the file. The vectors are the age project's, not ours, and are
/// not kept in this repository: a conformance run reads them from a checkout of age named by
/// `LATCHKEY_AGE_TESTKIT` (its `testdata/testkit`; docs/export-format.md, "Conformance"). Without it, these tests
/// are skipped.
struct TestkitVector: CustomStringConvertible {
    let name: String
    let expect: String
    let payloadDigest: String?
    let identities: [String]
    let passphrase: String?
    let file: [UInt8]

    var description: String { name }

    static let directory: String? = getenv("LATCHKEY_AGE_TESTKIT").map { String(cString: $0) + "/" }

    /// Every vector of the directory.
    static func all() -> [TestkitVector] {
        guard let directory, let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !name.hasPrefix("."), name != "LICENSE" { names.append(name) }
        }
        return names.sorted().compactMap { load($0) }
    }

    static func load(_ name: String) -> TestkitVector? {
        guard let directory, let bytes = BoundedFile.read(directory + name, limit: 1 << 20),
            let blank = (0..<bytes.count - 1).first(where: { bytes[$0] == 10 && bytes[$0 + 1] == 10 })
        else { return nil }
        let metadata = String(decoding: bytes[..<blank], as: UTF8.self).split(separator: "\n")
        func values(_ key: String) -> [String] {
            metadata.filter { $0.hasPrefix(key + ": ") }.map { String($0.dropFirst(key.count + 2)) }
        }
        return TestkitVector(
            name: name, expect: values("expect").first ?? "", payloadDigest: values("payload").first,
            identities: values("identity"), passphrase: values("passphrase").first, file: Array(bytes[(blank + 2)...]))
    }

    /// What AgeFile makes of it: the SHA-256 of the plaintext, or the error.
    func open() -> Result<String, AgeError> {
        do throws(AgeError) {
            if let passphrase {
                let secret = try! SecretBytes(copying: Array(passphrase.utf8))
                return .success(try AgeFile.decrypt(file, passphrase: secret).withUnsafeBytes { sha256($0) })
            }
            let keyFile = try! SecretBytes(copying: Array(identities.joined(separator: "\n").utf8))
            let identities = try AgeIdentities(parsingKeyFile: keyFile)
            return .success(try AgeFile.decrypt(file, identities: identities).withUnsafeBytes { sha256($0) })
        } catch {
            return .failure(error)
        }
    }
}

/// SHA-256 of `bytes` in lowercase hex.
func sha256(_ bytes: UnsafeRawBufferPointer) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    _ = EVP_Digest(bytes.baseAddress, bytes.count, &digest, nil, EVP_sha256(), nil)
    return digest.map { String($0 >> 4, radix: 16) + String($0 & 15, radix: 16) }.joined()
}

@Suite(.enabled(if: TestkitVector.directory != nil, "LATCHKEY_AGE_TESTKIT names no checkout of age's testkit"))
struct AgeTestkitTests {
    @Test func theTestkitIsThere() {
        #expect(TestkitVector.all().count == 114)
    }

    /// Every vector of age's testkit gives what it expects: the plaintext of the given digest, or an error of
    /// the kind its `expect:` names, and never a plaintext then.
    @Test(arguments: TestkitVector.all())
    func aTestkitVectorGivesWhatItExpects(vector: TestkitVector) throws {
        switch (vector.expect, vector.open()) {
        case ("success", .success(let digest)):
            #expect(digest == vector.payloadDigest)
        case ("success", .failure(let error)):
            Issue.record("\(vector.name) failed: \(error.kind): \(error)")
        case (_, .success):
            Issue.record("\(vector.name) (expecting \(vector.expect)) opened")
        case ("no match", .failure(let error)):
            // A file with no stanza of a type we open (x25519_lowercase: `x25519` is another type) is
            // `unsupported`, which says more than "no match".
            #expect(
                [.noMatchingIdentity, .wrongPassphrase, .unsupported].contains(error.kind), "\(vector.name): \(error)")
        case ("HMAC failure", .failure(let error)):
            #expect(error.kind == .tampered, "\(vector.name): \(error)")
        case ("header failure", .failure(let error)):
            #expect(
                [.malformed, .truncated, .unsupported, .workFactorTooHigh].contains(error.kind),
                "\(vector.name): \(error)")
        case ("payload failure", .failure(let error)):
            #expect([.tampered, .truncated, .malformed].contains(error.kind), "\(vector.name): \(error)")
        case ("armor failure", .failure(let error)):
            #expect([.malformed, .truncated].contains(error.kind), "\(vector.name): \(error)")
        case (let expect, .failure(let error)):
            Issue.record("\(vector.name): unknown expectation \(expect) (\(error))")
        }
    }
}
