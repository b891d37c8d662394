import FoundationEssentials
import KeychainCore
import Posix

/// The associated data (AAD) every AES-256-GCM value of a keychain file is bound to, built here and nowhere else:
/// one function per kind of sealed value, each giving its exact bytes (docs/file-format.md, "Key hierarchy").
/// These bytes are the file format: changing any of them leaves every existing file unreadable.
///
/// `‖` is concatenation; the keychain identifier and an item's identifier are 16 random bytes; text is UTF-8
/// with no length and no terminator.
///
/// Also how an item's sealed value is opened, so that a value that fails its check reads the same everywhere.
enum ItemSealing {
    /// Which value of an item a sealed field holds; its byte is bound into the field's associated data.
    enum Field: UInt8 {
        /// The encoded attributes (`items.attributes`): `"a"`.
        case attributes = 0x61
        /// The secret (`items.secret`): `"s"`.
        case secret = 0x73
    }

    /// An item's sealed attributes or secret under the keychain key:
    ///
    ///     keychain identifier (16) ‖ item identifier (16) ‖ class name ("genp", "inet", …) ‖ field (1: "a" or "s")
    ///     ‖ "v" (0x76) ‖ version (8, big-endian)
    ///
    /// without the last two parts for version 0 (an item written in format 1, whose associated data had no
    /// version). The version changes with every change of the item, so a value the item had before, put back,
    /// fails authentication.
    static func itemField(keychain: Data, item: ItemReference, _ field: Field, version: Int64) -> Data {
        var aad = keychain + item.identifier + Data(item.itemClass.rawValue.utf8) + Data([field.rawValue])
        if version != 0 {
            aad.append(0x76)  // "v"
            withUnsafeBytes(of: UInt64(bitPattern: version).bigEndian) { aad.append(contentsOf: $0) }
        }
        return aad
    }

    /// The keychain key in the header (`meta.wrapped_key`), wrapped under the password key or the parent
    /// keychain's key:
    ///
    ///     "latchkey wrap v1" ‖ keychain identifier (16)
    static func headerKeyWrap(keychain: Data) -> Data {
        Data("latchkey wrap v1".utf8) + keychain
    }

    /// The keychain key wrapped in a key slot's row (`meta.slot-ID`) under the slot's key:
    ///
    ///     "latchkey slot v1" ‖ keychain identifier (16) ‖ slot id (1) ‖ the row before the wrap
    ///
    /// where the row before the wrap (`KeySlotRecord.head`) is row version (1) ‖ kind (1) ‖ created (8,
    /// big-endian) ‖ parameter length (4, big-endian) ‖ parameters.
    static func slotKeyWrap(keychain: Data, slot: UInt8, rowHead: Data) -> Data {
        Data("latchkey slot v1".utf8) + keychain + Data([slot]) + rowHead
    }

    /// A class key in its row (`meta.class-key-PDMN`), sealed under the keychain key:
    ///
    ///     "latchkey class key v1" ‖ keychain identifier (16) ‖ the class's pdmn value ("ak", "ck", …)
    static func classKeyWrap(keychain: Data, accessibility: Accessibility) -> Data {
        Data("latchkey class key v1".utf8) + keychain + Data(accessibility.rawValue.utf8)
    }

    /// The slot list's MAC (`meta.slots`: an AES-256-GCM tag of nothing under the keychain key):
    ///
    ///     "latchkey slots v1" ‖ keychain identifier (16) ‖ listing
    ///
    /// where the listing is list version (1) ‖ count (1) ‖ per slot, by id: id (1) ‖ SHA-256 of its row (32).
    static func slotList(keychain: Data, listing: Data) -> Data {
        Data("latchkey slots v1".utf8) + keychain + listing
    }

    /// The MAC of a value kept in clear in `meta` (``AuthenticatedMetaRecord``: an AES-256-GCM tag of nothing
    /// under the keychain key):
    ///
    ///     purpose ‖ keychain identifier (16) ‖ the value's bytes
    ///
    /// with purpose `"latchkey settings v2"` (`settings_mac`) or `"latchkey access policy v1"`
    /// (`access_policy_mac`).
    static func metaRecord(purpose: String, keychain: Data, value: Data) -> Data {
        Data(purpose.utf8) + keychain + value
    }

    /// Opens an item's sealed value; `errSecDecode` saying what that means when it fails.
    static func open(_ sealed: Data, _ key: SecretKey, _ context: Data) throws(KeychainError) -> Data {
        do {
            return try AuthenticatedCipher.open(sealed, key: key, context: context)
        } catch {
            throw alteredValue
        }
    }

    /// Opens an item's sealed secret straight into secret memory; as ``open(_:_:_:)``.
    static func openSecret(_ sealed: Data, _ key: SecretKey, _ context: Data) throws(KeychainError) -> SecretBytes {
        do {
            return try AuthenticatedCipher.openSecret(sealed, key: key, context: context)
        } catch  where error.status == .allocate {
            throw error
        } catch {
            throw alteredValue
        }
    }

    /// `errSecDecode` for a sealed value that does not open, saying what that means.
    private static var alteredValue: KeychainError {
        KeychainError(
            .decode,
            "an item's stored value failed authentication: the keychain file was altered (damaged, or a value"
                + " of another item or an older one of this item put in its place)")
    }
}
