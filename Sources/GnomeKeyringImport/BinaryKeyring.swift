/// Reads gnome-keyring's binary keyring format, version 0 (docs/gnome-keyring-import.md).
///
/// Layout, all numbers big-endian 32-bit: the 16-byte magic `GnomeKeyring\n\r\0\n`; major,
/// minor, crypto and hash bytes (all 0); the keyring name; the modification time, then the
/// creation time (the writer's order; gnome-keyring's file-format.txt names them the other way
/// round); flags; lock timeout; hash iterations; an 8-byte salt; 16 reserved bytes; the item
/// count and per item its id, type and hashed attributes; the length of the encrypted block and
/// the block. Decrypted, the block is an MD5 of the rest, then per item its label, secret,
/// creation and modification times, reserved fields, attributes and access list, then zero padding.
enum BinaryKeyring {
    /// The first 16 bytes of every binary keyring file.
    static let magic: [UInt8] = Array("GnomeKeyring\n\r".utf8) + [0, 0x0a]

    /// More iterations than gnome-keyring ever writes (it picks 1000–4095); a file asking for more
    /// is taken as damaged rather than spending minutes on it.
    static let maximumIterations: UInt32 = 1 << 20

    /// Whether `bytes` start with the binary keyring magic.
    static func matches(_ bytes: [UInt8]) -> Bool {
        bytes.count >= magic.count && Array(bytes[0..<magic.count]) == magic
    }

    /// The keyring in `bytes` (the file at `path`), opened with `password`.
    static func read(_ bytes: [UInt8], path: String, password: [UInt8]) throws(GnomeKeyringError) -> GnomeKeyring {
        guard matches(bytes) else { throw GnomeKeyringError(path, .notAKeyring) }
        var reader = ByteReader(bytes, path: path, offset: magic.count)
        let major = try reader.byte("the version")
        let minor = try reader.byte("the version")
        let crypto = try reader.byte("the cipher")
        let hash = try reader.byte("the hash")
        guard major == 0, minor == 0, crypto == 0, hash == 0 else {
            throw GnomeKeyringError(path, .unsupportedVersion(major: major, minor: minor, crypto: crypto, hash: hash))
        }
        let name = try reader.string("the keyring name") ?? ""
        let modified = try reader.time("the keyring times")
        let created = try reader.time("the keyring times")
        _ = try reader.uint32("the flags")
        _ = try reader.uint32("the lock timeout")
        let iterations = try reader.uint32("the hash iterations")
        let salt = Array(try reader.bytes(8, "the salt"))
        _ = try reader.bytes(16, "the reserved fields")
        guard iterations >= 1, iterations <= maximumIterations else {
            throw GnomeKeyringError(path, .corrupt("\(iterations) hash iterations"))
        }

        // The clear part: ids, item types and hashed attributes (only the ids and types are used).
        let count = try reader.uint32("the item count")
        var headers: [(id: UInt32, type: UInt32)] = []
        for _ in 0..<count {
            let id = try reader.uint32("an item id")
            let type = try reader.uint32("an item type")
            _ = try attributes(&reader, path: path, hashed: true)
            headers.append((id, type))
        }

        let size = try reader.uint32("the encrypted size")
        guard size % 16 == 0, size >= 16 else {
            throw GnomeKeyringError(path, .corrupt("an encrypted block of \(size) bytes"))
        }
        let encrypted = try reader.bytes(Int(size), "the encrypted block")
        guard let (key, iv) = KeyringCrypto.deriveKey(password: password, salt: salt, iterations: iterations),
            var block = KeyringCrypto.decrypt(encrypted, key: key, iv: iv),
            let check = KeyringCrypto.md5(block[16...])
        else {
            throw GnomeKeyringError(path, .corrupt("the encrypted block cannot be decrypted"))
        }
        defer { KeyringCrypto.wipe(&block) }
        guard Array(block[0..<16]) == check else { throw GnomeKeyringError(path, .wrongPassword) }

        var inner = ByteReader(block, path: path, offset: 16)
        var items: [GnomeKeyringItem] = []
        for header in headers {
            let label = try inner.string("an item label") ?? ""
            let secret = Array(try inner.byteArray("an item secret") ?? [])
            let itemCreated = try inner.time("an item's times")
            let itemModified = try inner.time("an item's times")
            _ = try inner.string("an item's reserved text")
            _ = try inner.bytes(16, "an item's reserved numbers")
            var fields = try attributes(&inner, path: path, hashed: false)
            try skipAccessList(&inner)
            if fields[ItemType.schemaAttribute] == nil, let schema = ItemType.schema(header.type) {
                fields[ItemType.schemaAttribute] = schema
            }
            items.append(
                GnomeKeyringItem(
                    id: header.id, label: label, attributes: fields, secret: secret, contentType: nil,
                    created: itemCreated, modified: itemModified))
        }
        return GnomeKeyring(
            path: path, format: .binary, name: name, created: created, modified: modified, items: items)
    }

    /// An attribute list: a count, then name, type (0 text, 1 number) and value. Numbers become
    /// their decimal text. Hashed lists (the clear part) hold digests, read only to be skipped.
    private static func attributes(_ reader: inout ByteReader, path: String, hashed: Bool)
        throws(GnomeKeyringError) -> [String: String]
    {
        let count = try reader.uint32("an attribute count")
        var result: [String: String] = [:]
        for _ in 0..<count {
            guard let name = try reader.string("an attribute name") else {
                throw GnomeKeyringError(path, .corrupt("an attribute has no name"))
            }
            switch try reader.uint32("an attribute type") {
            case 0: result[name] = try reader.string("an attribute value") ?? ""
            case 1: result[name] = String(try reader.uint32("an attribute value"))
            case let type: throw GnomeKeyringError(path, .corrupt("attribute \(name) has type \(type)"))
            }
        }
        return hashed ? [:] : result
    }

    /// An item's access list (a count, then per entry: types, display name, path, reserved text
    /// and number), which Latchkey does not use.
    private static func skipAccessList(_ reader: inout ByteReader) throws(GnomeKeyringError) {
        let count = try reader.uint32("an access list")
        for _ in 0..<count {
            _ = try reader.uint32("an access entry")
            _ = try reader.string("an access entry")
            _ = try reader.string("an access entry")
            _ = try reader.string("an access entry")
            _ = try reader.uint32("an access entry")
        }
    }
}

/// gnome-keyring's item types (from the old libgnome-keyring API) and the schemas they stand for.
enum ItemType {
    /// The attribute that names an item's schema.
    static let schemaAttribute = "xdg:schema"

    /// The schema for an item type, as gnome-keyring shows it for an item whose attributes name none.
    static func schema(_ type: UInt32) -> String? {
        switch type & 0xffff {
        case 0: "org.freedesktop.Secret.Generic"
        case 1: "org.gnome.keyring.NetworkPassword"
        case 2: "org.gnome.keyring.Note"
        case 3: "org.gnome.keyring.ChainedKeyring"
        case 4: "org.gnome.keyring.EncryptionKey"
        case 0x100: "org.gnome.keyring.PkStorage"
        default: nil
        }
    }
}
