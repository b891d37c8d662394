import Posix

/// Files in the age format v1 (https://age-encryption.org/v1, c2sp.org/age): written to a passphrase (one
/// scrypt stanza) or to X25519 recipients, read with a passphrase or X25519 identities, binary or ASCII-armored.
/// All cryptography is OpenSSL's; the plaintext, passphrase and keys stay in ``SecretBytes``.
///
/// A file is read whole and checked whole: nothing of the plaintext is returned unless the header's MAC and
/// every chunk of the payload authenticate, and every size is bounded before anything is allocated for it.
package enum AgeFile {
    /// Computes a passphrase stanza's wrap key: scrypt(N = 2^logN, r = 8, p = 1, dkLen = 32) of the passphrase
    /// with `salt` (the spec's label and the stanza's 16 bytes, already joined). ``scryptInThisProcess`` by
    /// default; a daemon passes one that derives in a process of its own, so that scrypt's memory (256 MiB at
    /// 2^18) is not its own. The work factor it gets has been checked against the caller's maximum.
    package typealias ScryptFunction = (_ passphrase: borrowing SecretBytes, _ salt: [UInt8], _ logN: Int)
        throws(AgeError) -> SecretBytes

    /// scrypt with OpenSSL in this process (`EVP_KDF` "SCRYPT"), into secret memory.
    package static func scryptInThisProcess(passphrase: borrowing SecretBytes, salt: [UInt8], logN: Int)
        throws(AgeError) -> SecretBytes
    {
        try AgeCrypto.scrypt(passphrase: passphrase, salt: salt, logN: logN)
    }

    /// The longest plaintext written or read: 256 MiB.
    package static let maximumPlaintextLength = 256 << 20
    /// The longest file read (armored files are a third longer than binary ones): 512 MiB.
    package static let maximumFileLength = 512 << 20
    /// The longest header read: 1 MiB.
    package static let maximumHeaderLength = 1 << 20
    /// The most stanzas a header may hold (each may cost an X25519 per identity): 256.
    package static let maximumStanzas = 256
    /// The highest scrypt work factor (log2 N) accepted at all, whatever a caller allows: 30, age's own bound.
    package static let highestWorkFactor = 30
    /// Work factors a file may be written with: 1 (tests only) to 22.
    package static let writableWorkFactors = 1...22
    /// Plaintext bytes per payload chunk.
    static let chunkLength = 64 * 1024
    /// Bytes of a sealed full chunk.
    static let sealedChunkLength = chunkLength + AgeCrypto.tagLength
    /// Bytes of the payload's nonce.
    static let payloadNonceLength = 16
    /// The ChaCha20-Poly1305 nonce of a stanza body: 12 zero bytes (each wrap key is used once).
    static let zeroNonce = [UInt8](repeating: 0, count: AgeCrypto.nonceLength)
    /// The scrypt salt's label, before the stanza's 16 random bytes.
    static let scryptLabel = Array("age-encryption.org/v1/scrypt".utf8)

    // MARK: Encrypting

    /// Encrypts to a passphrase (scrypt stanza, work factor logN; age's default is 18), armored if asked.
    ///
    /// - Throws: ``AgeError/Kind/invalidArgument`` for an empty passphrase or a work factor outside
    ///   ``writableWorkFactors``, ``AgeError/Kind/tooLarge`` for a plaintext above ``maximumPlaintextLength``.
    package static func encrypt(
        _ plaintext: borrowing SecretBytes, passphrase: borrowing SecretBytes, workFactor: Int = 18,
        armored: Bool = false, scrypt: ScryptFunction = scryptInThisProcess
    ) throws(AgeError) -> [UInt8] {
        guard !passphrase.isEmpty else { throw AgeError(.invalidArgument, "the passphrase is empty") }
        guard writableWorkFactors.contains(workFactor) else {
            throw AgeError(
                .invalidArgument,
                "the scrypt work factor \(workFactor) is outside \(writableWorkFactors.lowerBound)…"
                    + "\(writableWorkFactors.upperBound)")
        }
        try checkLength(of: plaintext)
        let fileKey = try AgeCrypto.randomSecret(16)
        let salt = try AgeCrypto.randomBytes(16)
        let wrapKey = try scrypt(passphrase, scryptLabel + salt, workFactor)
        let stanza = AgeStanza(
            arguments: ["scrypt", String(decoding: Base64.encode(salt), as: UTF8.self), String(workFactor)],
            body: try wrap(fileKey, with: wrapKey))
        return try seal(plaintext, fileKey: fileKey, stanzas: [stanza], armored: armored)
    }

    /// Encrypts to one or more X25519 recipients, armored if asked.
    ///
    /// - Throws: ``AgeError/Kind/invalidArgument`` for no recipient, ``AgeError/Kind/tooLarge``.
    package static func encrypt(
        _ plaintext: borrowing SecretBytes, to recipients: [AgeRecipient], armored: Bool = false
    ) throws(AgeError) -> [UInt8] {
        guard !recipients.isEmpty else { throw AgeError(.invalidArgument, "no recipient to encrypt to") }
        guard recipients.count <= maximumStanzas else {
            throw AgeError(.invalidArgument, "more than \(maximumStanzas) recipients")
        }
        try checkLength(of: plaintext)
        let fileKey = try AgeCrypto.randomSecret(16)
        var stanzas: [AgeStanza] = []
        for recipient in recipients {
            let ephemeral = try AgeCrypto.randomSecret(AgeCrypto.keyLength)
            let share = try ephemeral.withUnsafeBytes { (secret) throws(AgeError) in
                try AgeCrypto.x25519PublicKey(of: secret)
            }
            guard
                let shared = try ephemeral.withUnsafeBytes({ (secret) throws(AgeError) in
                    try AgeCrypto.x25519(secret, peer: recipient.publicKey)
                })
            else { throw AgeError(.invalidRecipient, "the recipient \(recipient) is a point of low order") }
            let wrapKey = try x25519WrapKey(shared: shared, share: share, recipient: recipient.publicKey)
            stanzas.append(
                AgeStanza(
                    arguments: ["X25519", String(decoding: Base64.encode(share), as: UTF8.self)],
                    body: try wrap(fileKey, with: wrapKey)))
        }
        return try seal(plaintext, fileKey: fileKey, stanzas: stanzas, armored: armored)
    }

    /// The file of `stanzas` and the payload of `plaintext` under `fileKey`.
    private static func seal(
        _ plaintext: borrowing SecretBytes, fileKey: borrowing SecretBytes, stanzas: [AgeStanza], armored: Bool
    ) throws(AgeError) -> [UInt8] {
        let header = AgeHeader.encode(stanzas)
        let mac = try headerMAC(of: header[...], fileKey: fileKey)
        let nonce = try AgeCrypto.randomBytes(payloadNonceLength)
        let payloadKey = try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try AgeCrypto.hkdf(key, salt: nonce, info: "payload")
        }
        let chunks = max(1, (plaintext.count + chunkLength - 1) / chunkLength)
        var file = header + Array(" ".utf8) + Base64.encode(mac) + Array("\n".utf8) + nonce
        let payloadStart = file.count
        file += repeatElement(0, count: plaintext.count + chunks * AgeCrypto.tagLength)
        try plaintext.withUnsafeBytes { (plain) throws(AgeError) in
            try file.withMutableBytes { (output) throws(AgeError) in
                for index in 0..<chunks {
                    let start = index * chunkLength
                    let end = min(start + chunkLength, plain.count)
                    let outputStart = payloadStart + index * sealedChunkLength
                    try AgeCrypto.seal(
                        UnsafeRawBufferPointer(rebasing: plain[start..<end]), key: payloadKey,
                        nonce: chunkNonce(index, last: index == chunks - 1),
                        into: UnsafeMutableRawBufferPointer(
                            rebasing: output[outputStart..<outputStart + end - start + AgeCrypto.tagLength]))
                }
            }
        }
        return armored ? AgeArmor.encode(file) : file
    }

    /// `fileKey` sealed under `wrapKey` with the zero nonce: a stanza's body (32 bytes).
    private static func wrap(_ fileKey: borrowing SecretBytes, with wrapKey: borrowing SecretBytes) throws(AgeError)
        -> [UInt8]
    {
        var body = [UInt8](repeating: 0, count: fileKey.count + AgeCrypto.tagLength)
        try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try body.withMutableBytes { (output) throws(AgeError) in
                try AgeCrypto.seal(key, key: wrapKey, nonce: zeroNonce, into: output)
            }
        }
        return body
    }

    /// Refuses a plaintext above ``maximumPlaintextLength``.
    private static func checkLength(of plaintext: borrowing SecretBytes) throws(AgeError) {
        guard plaintext.count <= maximumPlaintextLength else {
            throw AgeError(.tooLarge, "the plaintext is longer than \(maximumPlaintextLength >> 20) MiB")
        }
    }

    // MARK: Decrypting

    /// Decrypts a file (binary or armored) encrypted to a passphrase.
    ///
    /// - Throws: ``AgeError/Kind/workFactorTooHigh`` before deriving anything when the file's logN is above
    ///   `maximumWorkFactor` (itself at most ``highestWorkFactor``); ``AgeError/Kind/wrongPassphrase``;
    ///   ``AgeError/Kind/noMatchingIdentity`` when the file is encrypted to recipients instead;
    ///   ``AgeError/Kind/malformed``, ``AgeError/Kind/truncated``, ``AgeError/Kind/tampered`` for a damaged file.
    ///   No plaintext is returned unless all of it authenticates.
    package static func decrypt(
        _ file: [UInt8], passphrase: borrowing SecretBytes, maximumWorkFactor: Int = 22,
        scrypt: ScryptFunction = scryptInThisProcess
    ) throws(AgeError) -> SecretBytes {
        let (binary, header) = try read(file)
        guard let stanza = try scryptStanza(of: header) else {
            throw AgeError(
                .noMatchingIdentity,
                "the age file is encrypted to recipients (\(typeList(header))), not to a passphrase: it needs an identity"
            )
        }
        let (salt, logN) = try scryptParameters(of: stanza)
        guard logN <= min(maximumWorkFactor, highestWorkFactor) else {
            throw AgeError(
                .workFactorTooHigh,
                "the age file's scrypt work factor 2^\(logN) is above the allowed 2^\(min(maximumWorkFactor, highestWorkFactor))"
            )
        }
        let wrapKey = try scrypt(passphrase, scryptLabel + salt, logN)
        guard let fileKey = try unwrap(stanza.body, with: wrapKey) else {
            throw AgeError(.wrongPassphrase, "wrong passphrase for the age file (or its scrypt stanza was altered)")
        }
        return try open(binary, header: header, fileKey: fileKey)
    }

    /// Decrypts a file (binary or armored) encrypted to X25519 recipients, with any of `identities`.
    ///
    /// - Throws: ``AgeError/Kind/noMatchingIdentity`` when none of them unwraps the file key (or the file is
    ///   encrypted to a passphrase); ``AgeError/Kind/unsupported`` when it holds only stanzas of other types; the
    ///   errors of a damaged file as ``decrypt(_:passphrase:maximumWorkFactor:scrypt:)``.
    package static func decrypt(_ file: [UInt8], identities: borrowing AgeIdentities) throws(AgeError) -> SecretBytes {
        let (binary, header) = try read(file)
        guard try scryptStanza(of: header) == nil else {
            throw AgeError(.noMatchingIdentity, "the age file is encrypted to a passphrase, not to an identity")
        }
        let stanzas = header.stanzas.filter { $0.type == "X25519" }
        guard !stanzas.isEmpty else {
            throw AgeError(
                .unsupported,
                "the age file is encrypted only to recipients of types Latchkey cannot open (\(typeList(header)))")
        }
        // Every X25519 stanza is checked, whichever identity matches (age's rule).
        var shares: [[UInt8]] = []
        for stanza in stanzas {
            guard stanza.arguments.count == 2, let share = Base64.decode(stanza.arguments[1].utf8),
                share.count == AgeCrypto.keyLength, stanza.body.count == 32
            else { throw AgeError(.malformed, "an X25519 stanza of the age file is malformed") }
            shares.append(share)
        }
        let publicKeys = identities.recipients.map(\.publicKey)
        for (stanza, share) in zip(stanzas, shares) {
            for (index, publicKey) in publicKeys.enumerated() {
                let shared = try identities.privateKeys.withUnsafeBytes { (keys) throws(AgeError) in
                    try AgeCrypto.x25519(
                        UnsafeRawBufferPointer(
                            rebasing: keys[index * AgeCrypto.keyLength..<(index + 1) * AgeCrypto.keyLength]),
                        peer: share)
                }
                guard let shared else {
                    throw AgeError(.malformed, "an X25519 stanza of the age file has a share of low order")
                }
                let wrapKey = try x25519WrapKey(shared: shared, share: share, recipient: publicKey)
                if let fileKey = try unwrap(stanza.body, with: wrapKey) {
                    return try open(binary, header: header, fileKey: fileKey)
                }
            }
        }
        throw AgeError(
            .noMatchingIdentity, "none of the identities can open the age file: it is encrypted to other keys")
    }

    /// What a file needs: .passphrase, .identity, .unreadable (an age file that cannot be opened), or nil when
    /// it is no age file at all (neither binary nor armored).
    package static func requirement(of file: [UInt8]) -> AgeRequirement? {
        guard file.starts(with: AgeHeader.intro) || AgeArmor.isArmored(file) else { return nil }
        do throws(AgeError) {
            let (_, header) = try read(file)
            if try scryptStanza(of: header) != nil { return .passphrase }
            if header.stanzas.contains(where: { $0.type == "X25519" }) { return .identity }
            return .unreadable(
                AgeError(
                    .unsupported,
                    "the age file is encrypted only to recipients of types Latchkey cannot open (\(typeList(header)))"))
        } catch {
            return .unreadable(error)
        }
    }

    /// The binary file (de-armored when armored) and its header.
    private static func read(_ file: [UInt8]) throws(AgeError) -> (binary: [UInt8], header: AgeHeader) {
        guard file.count <= maximumFileLength else {
            throw AgeError(.tooLarge, "the age file is longer than \(maximumFileLength >> 20) MiB")
        }
        let binary = AgeArmor.isArmored(file) ? try AgeArmor.decode(file) : file
        return (binary, try AgeHeader.parse(binary))
    }

    /// The header's scrypt stanza, nil when it has none.
    ///
    /// - Throws: ``AgeError/Kind/malformed`` when an scrypt stanza is not the only stanza (age's rule: a
    ///   passphrase file is authenticated by the passphrase alone).
    private static func scryptStanza(of header: AgeHeader) throws(AgeError) -> AgeStanza? {
        guard let stanza = header.stanzas.first(where: { $0.type == "scrypt" }) else { return nil }
        guard header.stanzas.count == 1 else {
            throw AgeError(.malformed, "the age file mixes an scrypt stanza with other stanzas, which age forbids")
        }
        return stanza
    }

    /// The salt and work factor of an scrypt stanza, checked as the spec asks: three arguments, a 16-byte salt,
    /// a decimal without leading zero, a 32-byte body.
    private static func scryptParameters(of stanza: AgeStanza) throws(AgeError) -> (salt: [UInt8], logN: Int) {
        guard stanza.arguments.count == 3, let salt = Base64.decode(stanza.arguments[1].utf8), salt.count == 16,
            stanza.body.count == 32
        else { throw AgeError(.malformed, "the scrypt stanza of the age file is malformed") }
        let digits = Array(stanza.arguments[2].utf8)
        guard let first = digits.first, first != UInt8(ascii: "0"),
            digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { throw AgeError(.malformed, "the scrypt work factor of the age file is not a decimal number") }
        guard digits.count <= 2, let logN = Int(stanza.arguments[2]) else {
            throw AgeError(
                .workFactorTooHigh, "the age file's scrypt work factor \(stanza.arguments[2]) is far too high")
        }
        return (salt, logN)
    }

    /// The stanza types of a header, for a message.
    private static func typeList(_ header: AgeHeader) -> String {
        var seen: [String] = []
        for stanza in header.stanzas where !seen.contains(stanza.type) { seen.append(stanza.type) }
        return seen.map { String($0.prefix(40)) }.joined(separator: ", ")
    }

    /// The file key in a stanza body, nil when `wrapKey` does not open it.
    private static func unwrap(_ body: [UInt8], with wrapKey: borrowing SecretBytes) throws(AgeError) -> SecretBytes? {
        var fileKey = try AgeCrypto.secretZeros(body.count - AgeCrypto.tagLength)
        let opened = try body.withBytes { (sealed) throws(AgeError) in
            try fileKey.withUnsafeMutableBytes { (output) throws(AgeError) in
                try AgeCrypto.open(sealed, key: wrapKey, nonce: zeroNonce, into: output)
            }
        }
        guard opened else { return nil }
        return fileKey
    }

    /// The wrap key of an X25519 stanza: HKDF(shared secret, share ‖ recipient, "age-encryption.org/v1/X25519").
    private static func x25519WrapKey(shared: borrowing SecretBytes, share: [UInt8], recipient: [UInt8])
        throws(AgeError) -> SecretBytes
    {
        try shared.withUnsafeBytes { (secret) throws(AgeError) in
            try AgeCrypto.hkdf(secret, salt: share + recipient, info: "age-encryption.org/v1/X25519")
        }
    }

    /// HMAC-SHA-256 of the header (through `---`) under HKDF(file key, "", "header").
    private static func headerMAC(of header: ArraySlice<UInt8>, fileKey: borrowing SecretBytes) throws(AgeError)
        -> [UInt8]
    {
        let macKey = try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try AgeCrypto.hkdf(key, salt: [], info: "header")
        }
        return try AgeCrypto.hmac(key: macKey, message: header)
    }

    /// Checks the header's MAC and decrypts the payload, all of it or nothing.
    private static func open(_ file: [UInt8], header: AgeHeader, fileKey: borrowing SecretBytes) throws(AgeError)
        -> SecretBytes
    {
        let mac = try headerMAC(of: file[..<header.macInputEnd], fileKey: fileKey)
        guard constantTimeEqual(mac, header.mac) else {
            throw AgeError(.tampered, "the age file's header does not authenticate: it was altered")
        }
        guard file.count - header.payloadStart >= payloadNonceLength else {
            throw AgeError(.truncated, "the age file ends before its payload")
        }
        let nonce = Array(file[header.payloadStart..<header.payloadStart + payloadNonceLength])
        let payloadStart = header.payloadStart + payloadNonceLength
        let payloadLength = file.count - payloadStart
        guard payloadLength > 0 else { throw AgeError(.truncated, "the age file ends before its first chunk") }
        let chunks = (payloadLength + sealedChunkLength - 1) / sealedChunkLength
        let lastLength = payloadLength - (chunks - 1) * sealedChunkLength
        guard lastLength >= AgeCrypto.tagLength else {
            throw AgeError(.truncated, "the age file ends inside its last chunk: it was cut short")
        }
        guard lastLength > AgeCrypto.tagLength || chunks == 1 else {
            throw AgeError(.malformed, "the age file's last chunk is empty, which age forbids")
        }
        let plaintextLength = payloadLength - chunks * AgeCrypto.tagLength
        guard plaintextLength <= maximumPlaintextLength else {
            throw AgeError(.tooLarge, "the age file's plaintext is longer than \(maximumPlaintextLength >> 20) MiB")
        }
        let payloadKey = try fileKey.withUnsafeBytes { (key) throws(AgeError) in
            try AgeCrypto.hkdf(key, salt: nonce, info: "payload")
        }
        var plaintext = try AgeCrypto.secretZeros(plaintextLength)
        try file.withBytes { (input) throws(AgeError) in
            try plaintext.withUnsafeMutableBytes { (output) throws(AgeError) in
                for index in 0..<chunks {
                    let start = payloadStart + index * sealedChunkLength
                    let end = min(start + sealedChunkLength, file.count)
                    let sealed = UnsafeRawBufferPointer(rebasing: input[start..<end])
                    let outputStart = index * chunkLength
                    let out = UnsafeMutableRawBufferPointer(
                        rebasing: output[outputStart..<outputStart + sealed.count - AgeCrypto.tagLength])
                    let last = index == chunks - 1
                    guard try !AgeCrypto.open(sealed, key: payloadKey, nonce: chunkNonce(index, last: last), into: out)
                    else { continue }
                    // A full last chunk that opens as a middle one: the file was cut at a chunk boundary.
                    if last, sealed.count == sealedChunkLength,
                        try AgeCrypto.open(sealed, key: payloadKey, nonce: chunkNonce(index, last: false), into: out)
                    {
                        wipeBytes(output)
                        throw AgeError(
                            .truncated,
                            "the age file ends after chunk \(index + 1), which is not its last: it was cut short")
                    }
                    wipeBytes(output)
                    throw AgeError(
                        .tampered,
                        last
                            ? "the age file's last chunk does not authenticate: it was altered or cut short"
                            : "chunk \(index + 1) of the age file does not authenticate: it was altered")
                }
            }
        }
        return plaintext
    }

    /// The nonce of payload chunk `index`: an 11-byte big-endian counter, then 1 for the last chunk, else 0.
    private static func chunkNonce(_ index: Int, last: Bool) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: AgeCrypto.nonceLength)
        for byte in 0..<8 { nonce[10 - byte] = UInt8(truncatingIfNeeded: UInt64(index) >> UInt64(8 * byte)) }
        nonce[11] = last ? 1 : 0
        return nonce
    }

    /// Whether two MACs are equal, in a time that does not depend on where they differ.
    private static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
