import COpenSSL
import FoundationEssentials
import KeychainCore

/// Computes the keyed tags (HMAC-SHA256) of attribute values that let the
/// store find items by equality without decrypting them, even while the
/// keychain is locked.
///
/// A tag covers the item class, the attribute name and the value's canonical
/// bytes. String values get a second, case-folded tag for
/// `kSecMatchCaseInsensitive`. The same construction keys the primary-key hash
/// that enforces `errSecDuplicateItem`.
final class AttributeIndexer: @unchecked Sendable {
    private let base: OpaquePointer

    init(key: SecretKey) throws(KeychainError) {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            throw KeychainError(.internalComponent, "OpenSSL has no HMAC")
        }
        defer { EVP_MAC_free(mac) }
        guard let ctx = EVP_MAC_CTX_new(mac) else {
            throw KeychainError(.allocate, "cannot allocate an HMAC context")
        }
        var params = [
            OSSL_PARAM_construct_utf8_string(
                cName("digest"), UnsafeMutablePointer(mutating: cName("SHA256")), 0),
            OSSL_PARAM_construct_end(),
        ]
        guard
            EVP_MAC_init(
                ctx, key.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), key.bytes.count,
                &params) == 1
        else {
            EVP_MAC_CTX_free(ctx)
            throw KeychainError(.internalComponent, "HMAC-SHA256 set-up failed")
        }
        base = ctx
    }

    deinit { EVP_MAC_CTX_free(base) }

    /// HMAC-SHA256 of `message` under the index key, truncated to 128 bits:
    /// plenty for an equality index (a chance collision needs about 2^64
    /// values) and half the index size.
    func mac(_ message: [UInt8]) -> Data {
        Data(fullMAC(message).prefix(16))
    }

    private func fullMAC(_ message: [UInt8]) -> Data {
        var out = Data(count: 32)
        guard let ctx = EVP_MAC_CTX_dup(base) else { return out }
        defer { EVP_MAC_CTX_free(ctx) }
        var length = 0
        out.withUnsafeMutableBytes { buffer in
            _ = EVP_MAC_update(ctx, message, message.count)
            _ = EVP_MAC_final(ctx, buffer.bindMemory(to: UInt8.self).baseAddress, &length, 32)
        }
        return out
    }

    /// The exact-match tag of one attribute value of an item class.
    func tag(_ itemClass: ItemClass, _ key: AttributeKey, _ value: AttributeValue) -> Data {
        var message: [UInt8] = [0x65]  // "e": exact
        append(itemClass, key, &message)
        message.append(key.indexedKind(of: value).rawValue)
        value.appendCanonicalBytes(to: &message)
        return mac(message)
    }

    /// The case-insensitive tag of a string value (or of UTF-8 bytes given
    /// for a text attribute Apple keeps as bytes), nil for other values.
    func foldedTag(_ itemClass: ItemClass, _ key: AttributeKey, _ value: AttributeValue) -> Data? {
        guard let text = key.text(of: value) else { return nil }
        var message: [UInt8] = [0x66]  // "f": folded
        append(itemClass, key, &message)
        message.append(contentsOf: text.lowercased().utf8)
        return mac(message)
    }

    /// Every tag an item is found by: one per indexed attribute, plus the folded ones.
    func tags(_ itemClass: ItemClass, _ attributes: ItemAttributes) -> [Data] {
        var tags: [Data] = []
        tags.reserveCapacity(attributes.count * 2)
        for (key, value) in attributes where key.isIndexed {
            tags.append(tag(itemClass, key, value))
            if let folded = foldedTag(itemClass, key, value) { tags.append(folded) }
        }
        return tags
    }

    /// The hash of an item's primary key, with an absent attribute counting as
    /// its empty value; nil for an item made through the Secret Service, which
    /// has none.
    func primaryKeyHash(_ itemClass: ItemClass, _ attributes: ItemAttributes) -> Data? {
        guard attributes[.secretServiceItem] == nil else { return nil }
        var message: [UInt8] = [0x70]  // "p": primary key
        message.append(contentsOf: itemClass.rawValue.utf8)
        for key in ItemSchema.of(itemClass).primaryKey {
            message.append(0)
            message.append(contentsOf: key.rawValue.utf8)
            let value = attributes[key] ?? key.emptyValue
            message.append(key.indexedKind(of: value).rawValue)
            var bytes: [UInt8] = []
            value.appendCanonicalBytes(to: &bytes)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { message.append(contentsOf: $0) }
            message.append(contentsOf: bytes)
        }
        return mac(message)
    }

    private func append(_ itemClass: ItemClass, _ key: AttributeKey, _ message: inout [UInt8]) {
        message.append(contentsOf: itemClass.rawValue.utf8)
        message.append(0)
        message.append(contentsOf: key.rawValue.utf8)
        message.append(0)
    }
}

extension AttributeKey {
    /// The kind a value is indexed and compared as: bytes given for a text
    /// attribute Apple keeps as bytes count as text, so `"a"` and `Data("a".utf8)`
    /// find each other and collide as primary keys; other values keep their kind.
    func indexedKind(of value: AttributeValue) -> AttributeKind {
        value.kind == .data && storesTextAsBytes ? .string : value.kind
    }

    /// The text a value stands for in case-insensitive matching: the string,
    /// or the bytes of a text attribute Apple keeps as bytes when they are UTF-8.
    func text(of value: AttributeValue) -> String? {
        switch value {
        case .string(let text): text
        case .data(let bytes) where storesTextAsBytes: String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }

    /// Whether the attribute has tags in the index. The dates change on every
    /// update and are rarely searched (queries on them are filtered after
    /// decryption); the synchronizable flag is a column of its own.
    var isIndexed: Bool {
        self != .creationDate && self != .modificationDate && self != .synchronizable
    }

    /// The value an absent primary-key attribute counts as: empty text or
    /// bytes, zero, false, or the reference date.
    var emptyValue: AttributeValue {
        switch kind ?? .string {
        case .string: .string("")
        case .data: .data(Data())
        case .number: .number(0)
        case .bool: .bool(false)
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        }
    }
}

extension AttributeValue {
    /// The bytes that define equality: UTF-8 for text (no normalisation), raw
    /// bytes, big-endian integers, the IEEE bits of a date's seconds since 2001.
    func appendCanonicalBytes(to out: inout [UInt8]) {
        switch self {
        case .string(let text): out.append(contentsOf: text.utf8)
        case .data(let data): out.append(contentsOf: data)
        case .number(let n): withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) }
        case .date(let date):
            withUnsafeBytes(of: date.timeIntervalSinceReferenceDate.bitPattern.bigEndian) {
                out.append(contentsOf: $0)
            }
        case .bool(let flag): out.append(flag ? 1 : 0)
        }
    }
}
