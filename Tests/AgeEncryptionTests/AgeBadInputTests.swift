import Posix
import Testing

@testable import AgeEncryption

/// A file of three chunks (two full, one of 100 bytes) to `identity`, with where its payload starts.
func threeChunkFile(to identity: borrowing AgeIdentities) throws -> (file: [UInt8], payload: Int) {
    let file = try AgeFile.encrypt(try plaintext(2 * 65536 + 100), to: identity.recipients)
    return (file, try payloadStart(file) + 16)
}

/// `file` with bit 0 of byte `index` flipped.
func flipping(_ file: [UInt8], at index: Int) -> [UInt8] {
    var copy = file
    copy[index] ^= 1
    return copy
}

@Suite struct AgeBadInputTests {
    @Test func everyByteOfTheHeaderIsCovered() throws {
        let identity = try AgeIdentities.generate()
        let file = try AgeFile.encrypt(try secret("s"), to: identity.recipients)
        let header = try AgeHeader.parse(file)
        for index in 0..<header.payloadStart {
            let kind = failure { () throws(AgeError) in
                try AgeFile.decrypt(flipping(file, at: index), identities: identity)
            }
            #expect(kind != nil, "a flip at byte \(index) of the header went unnoticed")
        }
    }

    @Test func aChangedStanzaThatStillUnwrapsFailsTheMAC() throws {
        // Two recipients; the second stanza's share is replaced by another valid share: the first still
        // unwraps the file key, and only the MAC catches the change.
        let mine = try AgeIdentities.generate()
        let other = try AgeIdentities.generate()
        let file = try AgeFile.encrypt(try secret("s"), to: mine.recipients + other.recipients)
        let header = try AgeHeader.parse(file)
        let oldShare = Array(header.stanzas[1].arguments[1].utf8)
        let newShare = Base64.encode(other.recipients[0].publicKey)
        let start = try #require(
            (0..<file.count - oldShare.count).first { file[$0..<$0 + oldShare.count].elementsEqual(oldShare) })
        let altered = Array(file[..<start]) + newShare + Array(file[(start + oldShare.count)...])
        let thrown = error { () throws(AgeError) in try AgeFile.decrypt(altered, identities: mine) }
        #expect(thrown?.kind == .tampered)
        #expect(thrown?.message == "the age file's header does not authenticate: it was altered")
    }

    @Test func aChangedMACIsTampering() throws {
        let file = try AgeFile.encrypt(try secret("s"), passphrase: try secret(passphrase), workFactor: cheap)
        let header = try AgeHeader.parse(file)
        var mac = header.mac
        mac[31] ^= 0x80
        let altered =
            Array(file[..<(header.macInputEnd + 1)]) + Base64.encode(mac) + Array(file[(header.payloadStart - 1)...])
        let pass = try secret(passphrase)
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(altered, passphrase: pass) } == .tampered)
    }

    @Test func aFlipInEachChunkOrTheNonceIsTampering() throws {
        let identity = try AgeIdentities.generate()
        let (file, payload) = try threeChunkFile(to: identity)
        for (index, offset) in [
            (1, 0), (1, 65551), (2, 65552 + 300), (3, 2 * 65552 + 5), (3, file.count - payload - 1),
        ] {
            let thrown = error { () throws(AgeError) in
                try AgeFile.decrypt(flipping(file, at: payload + offset), identities: identity)
            }
            #expect(thrown?.kind == .tampered)
            #expect(thrown?.message.contains(index == 3 ? "last chunk" : "chunk \(index) ") == true, "\(thrown!)")
        }
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(flipping(file, at: payload - 1), identities: identity)
            }
                == .tampered)
    }

    @Test func aFileCutAtEveryChunkBoundaryIsTruncated() throws {
        let identity = try AgeIdentities.generate()
        let (file, payload) = try threeChunkFile(to: identity)
        for chunks in 1...2 {
            let cut = Array(file[..<(payload + chunks * 65552)])
            let thrown = error { () throws(AgeError) in try AgeFile.decrypt(cut, identities: identity) }
            #expect(thrown?.kind == .truncated)
            #expect(thrown?.message.contains("ends after chunk \(chunks), which is not its last") == true)
        }
        // Cut after the nonce, inside the nonce, inside the header, inside a tag.
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(Array(file[..<payload]), identities: identity) }
                == .truncated)
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(Array(file[..<(payload - 3)]), identities: identity) }
                == .truncated)
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(Array(file[..<40]), identities: identity) }
                == .truncated)
        #expect(
            failure { () throws(AgeError) in
                try AgeFile.decrypt(Array(file[..<(payload + 2 * 65552 + 10)]), identities: identity)
            } == .truncated)
        // Cut inside the last chunk's ciphertext: the tag no longer matches.
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(Array(file.dropLast(7)), identities: identity) }
                == .tampered)
    }

    @Test func aFileOfExactlyTwoChunksWithoutItsLastIsTruncated() throws {
        let identity = try AgeIdentities.generate()
        let file = try AgeFile.encrypt(try plaintext(2 * 65536), to: identity.recipients)
        let payload = try payloadStart(file) + 16
        #expect(file.count == payload + 2 * 65552)  // the last chunk is full, not followed by an empty one
        let thrown = error { () throws(AgeError) in
            try AgeFile.decrypt(Array(file.dropLast(65552)), identities: identity)
        }
        #expect(thrown?.kind == .truncated)
    }

    @Test func droppedSwappedOrAddedChunksAreCaught() throws {
        let identity = try AgeIdentities.generate()
        let (file, payload) = try threeChunkFile(to: identity)
        let first = file[payload..<(payload + 65552)]
        let second = file[(payload + 65552)..<(payload + 2 * 65552)]
        let last = file[(payload + 2 * 65552)...]
        let head = file[..<payload]
        let dropped: [UInt8] = Array(head) + Array(first) + Array(last)
        let swapped: [UInt8] = Array(head) + Array(second) + Array(first) + Array(last)
        let repeated: [UInt8] = Array(head) + Array(first) + Array(first) + Array(second) + Array(last)
        let trailing: [UInt8] = file + [0]
        let cases: [(String, [UInt8])] = [
            ("dropped", dropped), ("swapped", swapped), ("trailing", trailing), ("repeated", repeated),
        ]
        for (name, altered) in cases {
            #expect(
                failure { () throws(AgeError) in try AgeFile.decrypt(altered, identities: identity) } == .tampered,
                "\(name)")
        }
    }

    @Test func anEmptyLastChunkAfterAFullOneIsRefused() throws {
        // Made by hand with the file key: chunk 0 full and not last, then an empty last chunk (age forbids it).
        let fileKey = try SecretBytes(copying: [UInt8](repeating: 7, count: 16))
        let passphraseBytes = try secret(passphrase)
        let salt = [UInt8](repeating: 1, count: 16)
        let wrapKey = try AgeCrypto.scrypt(passphrase: passphraseBytes, salt: AgeFile.scryptLabel + salt, logN: cheap)
        var body = [UInt8](repeating: 0, count: 32)
        try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try body.withMutableBytes { (out) throws(AgeError) in
                try AgeCrypto.seal(key, key: wrapKey, nonce: AgeFile.zeroNonce, into: out)
            }
        }
        let header = AgeHeader.encode([
            AgeStanza(
                arguments: ["scrypt", String(decoding: Base64.encode(salt), as: UTF8.self), "\(cheap)"], body: body)
        ])
        let macKey = try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try AgeCrypto.hkdf(key, salt: [], info: "header")
        }
        let nonce = [UInt8](repeating: 9, count: 16)
        let payloadKey = try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try AgeCrypto.hkdf(key, salt: nonce, info: "payload")
        }
        var chunks = [UInt8](repeating: 0, count: 65552 + 16)
        let plain = try plaintext(65536)
        try plain.withUnsafeBytes { (bytes) throws(AgeError) in
            try chunks.withMutableBytes { (out) throws(AgeError) in
                try AgeCrypto.seal(
                    bytes, key: payloadKey, nonce: [UInt8](repeating: 0, count: 12),
                    into: UnsafeMutableRawBufferPointer(rebasing: out[..<65552]))
                try AgeCrypto.seal(
                    UnsafeRawBufferPointer(start: nil, count: 0), key: payloadKey,
                    nonce: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
                    into: UnsafeMutableRawBufferPointer(rebasing: out[65552...]))
            }
        }
        let file =
            header + Array(" ".utf8) + Base64.encode(try AgeCrypto.hmac(key: macKey, message: header[...]))
            + Array("\n".utf8) + nonce + chunks
        let thrown = error { () throws(AgeError) in try AgeFile.decrypt(file, passphrase: passphraseBytes) }
        #expect(thrown?.kind == .malformed)
        #expect(thrown?.message == "the age file's last chunk is empty, which age forbids")
        // The same file without the empty chunk is cut short after a middle chunk.
        #expect(
            failure { () throws(AgeError) in try AgeFile.decrypt(Array(file.dropLast(16)), passphrase: passphraseBytes)
            }
                == .truncated)
    }

    @Test func anScryptStanzaMustBeTheOnlyOne() throws {
        let identity = try AgeIdentities.generate()
        let toRecipient = try AgeFile.encrypt(try secret("s"), to: identity.recipients)
        let x25519Stanza = try AgeHeader.parse(toRecipient).stanzas[0]
        let mixed = fileWithHeader(
            String(
                decoding: AgeHeader.encode([
                    AgeStanza(
                        arguments: ["scrypt", "AAAAAAAAAAAAAAAAAAAAAA", "10"], body: [UInt8](repeating: 0, count: 32)),
                    x25519Stanza,
                ]), as: UTF8.self))
        let pass = try secret(passphrase)
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(mixed, passphrase: pass) } == .malformed)
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(mixed, identities: identity) } == .malformed)
        guard case .unreadable(let error) = AgeFile.requirement(of: mixed) else {
            Issue.record("a mixed header is readable")
            return
        }
        #expect(error.kind == .malformed)
    }

    @Test func onlyStanzasOfOtherTypesAreUnsupported() throws {
        let identity = try AgeIdentities.generate()
        let file = fileWithHeader(
            "age-encryption.org/v1\n-> ssh-ed25519 Xyz1Aw AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"
                + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n---")
        let thrown = error { () throws(AgeError) in try AgeFile.decrypt(file, identities: identity) }
        #expect(thrown?.kind == .unsupported)
        #expect(thrown?.message.contains("ssh-ed25519") == true)
        #expect(AgeFile.requirement(of: file) == .unreadable(thrown!))
    }

    @Test func anotherVersionIsUnsupportedAndNoAgeFileIsNone() throws {
        let v2 = Array("age-encryption.org/v2\n-> X25519 abc\n\n--- x\n".utf8)
        let identity = try AgeIdentities.generate()
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(v2, identities: identity) } == .unsupported)
        for notAge in [
            "", "{\"version\": {\"major\": 1}}", "age-encryption.org", "  age-encryption.org/v1\n", "PK\u{3}\u{4}",
        ] {
            #expect(AgeFile.requirement(of: Array(notAge.utf8)) == nil, "\(notAge)")
            #expect(
                failure { () throws(AgeError) in try AgeFile.decrypt(Array(notAge.utf8), identities: identity) }
                    == .malformed)
        }
    }

    @Test func theHeaderIsBounded() throws {
        let identity = try AgeIdentities.generate()
        var header = "age-encryption.org/v1\n"
        for _ in 0...AgeFile.maximumStanzas { header += "-> other a\n\n" }
        let many = fileWithHeader(header + "---")
        let thrown = error { () throws(AgeError) in try AgeFile.decrypt(many, identities: identity) }
        #expect(thrown?.kind == .tooLarge)
        #expect(thrown?.message == "the age header has more than 256 stanzas")
        // A stanza line longer than the header may be, without its line end: too large, not "truncated".
        let long = Array("age-encryption.org/v1\n-> ".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
        #expect(failure { () throws(AgeError) in try AgeFile.decrypt(long, identities: identity) } == .tooLarge)
    }

    @Test func armorIsStrict() throws {
        let identity = try AgeIdentities.generate()
        let armored = try AgeFile.encrypt(try plaintext(500), to: identity.recipients, armored: true)
        let text = String(decoding: armored, as: UTF8.self)
        var lines = text.split(separator: "\n").map(String.init)
        func opens(_ candidate: String) -> AgeError.Kind? {
            failure { () throws(AgeError) in try AgeFile.decrypt(Array(candidate.utf8), identities: identity) }
        }
        #expect(opens(text) == nil)
        #expect(opens("\n \t" + text + "\r\n\n") == nil)
        #expect(AgeFile.requirement(of: Array(("garbage\n" + text).utf8)) == nil)
        #expect(opens("garbage\n" + text) == .malformed)
        #expect(opens(text + "trailing\n") == .malformed)
        #expect(opens(lines.dropLast().joined(separator: "\n") + "\n") == .truncated)
        // A short line in the middle, a long one, padding taken off, a PGP-style checksum line.
        let middle = lines[1]
        lines[1] = String(middle.dropLast())
        #expect(opens(lines.joined(separator: "\n")) == .malformed)
        lines[1] = middle + "A"
        #expect(opens(lines.joined(separator: "\n")) == .malformed)
        lines[1] = middle
        let padded = lines[lines.count - 2]
        lines[lines.count - 2] = padded.replacingOccurrencesOfEquals()
        #expect(padded.hasSuffix("=") == false || opens(lines.joined(separator: "\n")) == .malformed)
        lines[lines.count - 2] = padded
        lines.insert("=abcd", at: lines.count - 1)
        #expect(opens(lines.joined(separator: "\n")) == .malformed)
        let lowercase = "-----BEGIN age ENCRYPTED FILE-----" + text.dropFirst(34)
        #expect(AgeFile.requirement(of: Array(lowercase.utf8)) == nil)
    }
}

extension String {
    /// The string without its `=` padding.
    func replacingOccurrencesOfEquals() -> String { String(filter { $0 != "=" }) }
}
