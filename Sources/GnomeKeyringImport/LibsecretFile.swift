import COpenSSL

/// Reads libsecret's file backend, format version 1 (docs/gnome-keyring-import.md): what libsecret
/// writes instead of talking to the Secret Service inside a Flatpak or Snap sandbox
/// (`~/.var/app/<app id>/data/keyrings/default.keyring`) or with `SECRET_BACKEND=file`.
///
/// Layout: gnome-keyring's 16-byte magic, the bytes 1 and 0, then one serialised GVariant
/// `(uayutua(a{say}ay))`: salt length, salt, PBKDF2 iterations, modification time, usage count, and
/// per item its hashed attributes and the item sealed as AES-128-CBC (PKCS#7 padding) ‖ IV ‖
/// HMAC-SHA-256 over both, under a 16-byte key PBKDF2-SHA-256 derives from the password. An item,
/// unsealed, is a GVariant `(a{ss}sttay)`: attributes, label, created, modified, secret.
package enum LibsecretFile {
    /// Ten times what libsecret writes (100,000): a file asking for more is taken as damaged rather
    /// than spending seconds on it.
    static let maximumIterations: UInt64 = 1_000_000

    private static let keySize = 16
    private static let macSize = 32
    private static let blockSize = 16

    /// Whether `bytes` start with the magic and version 1.0.
    static func matches(_ bytes: [UInt8]) -> Bool {
        BinaryKeyring.matches(bytes) && bytes.count >= 18 && bytes[16] == 1 && bytes[17] == 0
    }

    /// The items in `bytes` (the file at `path`), opened with `password`. Named after the Flatpak app
    /// whose data directory holds the file, else after the file.
    static func read(_ bytes: [UInt8], path: String, password: [UInt8]) throws(GnomeKeyringError) -> GnomeKeyring {
        guard matches(bytes) else { throw GnomeKeyringError(path, .notAKeyring) }
        let body = Array(bytes[18...])
        let file = GVariantReader(body, path: path, what: "the file's header")
        let top = try file.structure(0..<body.count, [.uint32, .variable, .uint32, .uint64, .uint32, .variable])
        let salt = Array(file.byteString(top[1]))
        let iterations = try file.unsigned(top[2])
        guard try file.unsigned(top[0]) == UInt64(salt.count), !salt.isEmpty else {
            throw GnomeKeyringError(path, .corrupt("the salt's length"))
        }
        guard iterations >= 1, iterations <= maximumIterations else {
            throw GnomeKeyringError(path, .corrupt("\(iterations) key derivation iterations"))
        }
        let modified = try file.unsigned(top[3])
        guard var key = pbkdf2(password, salt: salt, iterations: Int32(iterations)) else {
            throw GnomeKeyringError(path, .unreadable("the key derivation failed"))
        }
        defer { KeyringCrypto.wipe(&key) }

        var items: [GnomeKeyringItem] = []
        for (index, entry) in try file.array(top[5]).enumerated() {
            let parts = try file.structure(entry, [.variable, .variable])
            var plain = try unseal(file.byteString(parts[1]), key: key, path: path)
            defer { KeyringCrypto.wipe(&plain) }
            items.append(try item(plain, number: index + 1, path: path))
        }
        return GnomeKeyring(
            path: path, format: .libsecretFile, name: name(of: path), created: modified, modified: modified,
            items: items)
    }

    /// The sealed item's plaintext, its padding removed; a MAC that does not match is a wrong password.
    private static func unseal(_ sealed: ArraySlice<UInt8>, key: [UInt8], path: String) throws(GnomeKeyringError)
        -> [UInt8]
    {
        let cipherSize = sealed.count - blockSize - macSize
        guard cipherSize >= blockSize, cipherSize % blockSize == 0 else {
            throw GnomeKeyringError(path, .corrupt("a sealed item of \(sealed.count) bytes"))
        }
        let start = sealed.startIndex
        let macStart = start + cipherSize + blockSize
        guard let mac = hmacSHA256(key: key, sealed[start..<macStart]) else {
            throw GnomeKeyringError(path, .unreadable("the MAC computation failed"))
        }
        // Constant time: every byte compared.
        var difference: UInt8 = 0
        for (mine, theirs) in zip(mac, sealed[macStart...]) { difference |= mine ^ theirs }
        guard difference == 0 else { throw GnomeKeyringError(path, .wrongPassword) }
        let iv = Array(sealed[start + cipherSize..<macStart])
        guard var plain = KeyringCrypto.decrypt(sealed[start..<start + cipherSize], key: key, iv: iv) else {
            throw GnomeKeyringError(path, .corrupt("an item that does not decrypt"))
        }
        let padding = Int(plain.last ?? 0)
        guard padding >= 1, padding <= blockSize, plain.suffix(padding).allSatisfy({ Int($0) == padding }) else {
            KeyringCrypto.wipe(&plain)
            throw GnomeKeyringError(path, .corrupt("an item's padding"))
        }
        plain.removeLast(padding)
        return plain
    }

    /// One unsealed item, `(a{ss}sttay)`.
    private static func item(_ plain: [UInt8], number: Int, path: String) throws(GnomeKeyringError)
        -> GnomeKeyringItem
    {
        let reader = GVariantReader(plain, path: path, what: "item \(number)")
        let parts = try reader.structure(0..<plain.count, [.variable, .variable, .uint64, .uint64, .variable])
        var attributes: [String: String] = [:]
        for (name, value) in try reader.dictionary(parts[0]) { attributes[name] = try reader.string(value) }
        return GnomeKeyringItem(
            id: UInt32(clamping: number), label: try reader.string(parts[1]), attributes: attributes,
            secret: Array(reader.byteString(parts[4])), contentType: nil, created: try reader.unsigned(parts[2]),
            modified: try reader.unsigned(parts[3]))
    }

    /// The Flatpak app id of `~/.var/app/<id>/data/keyrings/…`, else the file name without `.keyring`.
    static func name(of path: String) -> String {
        if let app = flatpakApp(of: path) { return app }
        let file = path.split(separator: "/").last.map(String.init) ?? path
        return file.hasSuffix(".keyring") ? String(file.dropLast(".keyring".count)) : file
    }

    /// The app id when `path` is a Flatpak app's libsecret file, `…/.var/app/<id>/data/keyrings/<file>`.
    package static func flatpakApp(of path: String) -> String? {
        let parts = path.split(separator: "/").map(String.init)
        guard parts.count >= 6 else { return nil }
        let tail = Array(parts.suffix(6))
        guard tail[0] == ".var", tail[1] == "app", tail[3] == "data", tail[4] == "keyrings" else { return nil }
        return tail[2]
    }

    private static func pbkdf2(_ password: [UInt8], salt: [UInt8], iterations: Int32) -> [UInt8]? {
        var key = [UInt8](repeating: 0, count: keySize)
        let ok = password.withUnsafeBufferPointer { pass in
            PKCS5_PBKDF2_HMAC(
                pass.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(pass.count),
                salt, Int32(salt.count), iterations, EVP_sha256(), Int32(keySize), &key) == 1
        }
        return ok ? key : nil
    }

    private static func hmacSHA256(key: [UInt8], _ data: ArraySlice<UInt8>) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: macSize)
        var written = 0
        let input = Array(data)
        let result = EVP_Q_mac(
            nil, "HMAC", nil, "SHA256", nil, key, key.count, input, input.count, &out, out.count, &written)
        return result != nil && written == macSize ? out : nil
    }
}
