// Fuzzes the age container (`AgeFile`, `AgeIdentities`, `AgeRecipient`): the reader of export files, which may
// come from anyone.
//
// Input: one byte choosing what (modulo 4), then:
//   0: an age file (the rest, binary or armored), decrypted with the identity of the spec's example key
//      (AGE-SECRET-KEY-1GFPYY…); when it opens, `requirement(of:)` must say `.identity`;
//   1: an age file decrypted with the passphrase "fuzz", work factors above 2^4 refused (so scrypt stays
//      cheap); when it opens, `requirement(of:)` must say `.passphrase`;
//   2: a key file (the rest): when it parses, the key file it writes back parses to the same recipients; the
//      rest is also parsed as an `age1…` recipient, whose text must parse back to the same key;
//   3: a plaintext (the rest), encrypted to the identity, armored when its first byte is odd, and to the
//      passphrase at 2^1: both must decrypt to it.
import FuzzSupport

@testable import AgeEncryption
@testable import Posix

let specIdentity = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
let passphrase = "fuzz"
let maximumWorkFactor = 4

/// The example identity, parsed once (a class holds it: a noncopyable value cannot be unwrapped from a global).
final class Keys {
    let identities: AgeIdentities

    init() throws(AgeError) {
        identities = try AgeIdentities(parsingKeyFile: secret(Array(specIdentity.utf8)))
    }
}

nonisolated(unsafe) var keys: Keys?

func secret(_ bytes: [UInt8]) -> SecretBytes {
    guard let secret = try? SecretBytes(copying: bytes) else { fatalError("fuzz-age: no secret memory") }
    return secret
}

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    do throws(AgeError) {
        keys = try Keys()
    } catch {
        fatalError("fuzz-age: cannot parse the example identity: \(error)")
    }
    SeedCorpus.writeIfAsked {
        guard let recipients = keys?.identities.recipients else { return [] }
        let plain = secret(Array("an export, in CXF: {\"version\": {\"major\": 1}}".utf8))
        let pass = secret(Array(passphrase.utf8))
        return [
            ("x25519", [0] + (try AgeFile.encrypt(plain, to: recipients))),
            ("x25519-armored", [0] + (try AgeFile.encrypt(plain, to: recipients, armored: true))),
            ("scrypt-logn-2", [1] + (try AgeFile.encrypt(plain, passphrase: pass, workFactor: 2))),
            (
                "key-file",
                [2]
                    + Array(
                        "# created: 2026-11-26\n# public key: age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj\n\(specIdentity)\n"
                            .utf8)
            ),
            ("recipient", [2] + Array("age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj".utf8)),
            ("plaintext", [3] + Array("hunter2".utf8)),
        ]
    }
    return 0
}

/// The plaintext's bytes, copied out of secret memory to compare.
func bytes(_ secret: borrowing SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    guard let keys else { return 0 }
    var input = FuzzInput(start, count)
    let mode = input.byte() % 4
    let rest = input.rest()
    switch mode {
    case 0:
        let requirement = AgeFile.requirement(of: rest)
        if (try? AgeFile.decrypt(rest, identities: keys.identities)) != nil, requirement != .identity {
            fatalError("a file opened with an identity, but its requirement is \(String(describing: requirement))")
        }
    case 1:
        let requirement = AgeFile.requirement(of: rest)
        let pass = secret(Array(passphrase.utf8))
        if (try? AgeFile.decrypt(rest, passphrase: pass, maximumWorkFactor: maximumWorkFactor)) != nil,
            requirement != .passphrase
        {
            fatalError("a file opened with a passphrase, but its requirement is \(String(describing: requirement))")
        }
    case 2:
        if let parsed = try? AgeIdentities(parsingKeyFile: secret(rest)) {
            guard let written = try? parsed.keyFile(), let again = try? AgeIdentities(parsingKeyFile: written),
                again.recipients == parsed.recipients
            else { fatalError("a key file's identities do not survive being written back") }
        }
        if let recipient = try? AgeRecipient(parsing: String(decoding: rest, as: UTF8.self)) {
            guard (try? AgeRecipient(parsing: recipient.description)) == recipient else {
                fatalError("a recipient does not survive being written back")
            }
        }
    default:
        let plain = secret(rest)
        let pass = secret(Array(passphrase.utf8))
        do throws(AgeError) {
            let toIdentity = try AgeFile.encrypt(
                plain, to: keys.identities.recipients, armored: rest.first.map { $0 & 1 == 1 } ?? false)
            let toPassphrase = try AgeFile.encrypt(plain, passphrase: pass, workFactor: 1)
            guard bytes(try AgeFile.decrypt(toIdentity, identities: keys.identities)) == rest,
                bytes(try AgeFile.decrypt(toPassphrase, passphrase: pass, maximumWorkFactor: 1)) == rest
            else { fatalError("a round trip changed the plaintext") }
        } catch {
            fatalError("a round trip failed: \(error)")
        }
    }
    return 0
}
