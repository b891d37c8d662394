import Foundation
import KeychainCore
import KeychainStore

/// Builds the object `SecItemCopyMatching` and `SecItemAdd` return for one
/// item: the single requested value, or a dictionary of the attributes
/// (flattened in) plus `v_Data`, `v_Ref` and `v_PersistentRef` when more than
/// one kind of result was asked for.
struct ResultShape {
    let returning: ReturnOptions

    func object(for item: KeychainItem, in keychain: SecKeychain) -> AnyObject {
        let kinds: [ReturnOptions] = [.data, .attributes, .reference, .persistentReference]
        if kinds.filter({ returning.contains($0) }).count == 1 {
            if returning.contains(.data) { return NSData(data: item.secret ?? Data()) }
            if returning.contains(.attributes) { return NSDictionary(dictionary: attributes(of: item)) }
            if returning.contains(.reference) { return SecKeychainItem(keychain: keychain, reference: item.reference) }
            return NSData(data: item.reference.persistentData)
        }
        var dictionary: [String: Any] = returning.contains(.attributes) ? attributes(of: item) : [:]
        if returning.contains(.data) { dictionary[kSecValueData as String] = item.secret ?? Data() }
        if returning.contains(.reference) {
            dictionary[kSecValueRef as String] = SecKeychainItem(keychain: keychain, reference: item.reference)
        }
        if returning.contains(.persistentReference) {
            dictionary[kSecValuePersistentRef as String] = item.reference.persistentData
        }
        return NSDictionary(dictionary: dictionary)
    }

    /// The item's attributes under their `kSecAttr*` names, plus `kSecClass`.
    /// Values come back as they were given (text or bytes); an access control
    /// comes back as a `SecAccessControl`, an access list as a `SecAccess` under `kSecAttrAccess`.
    private func attributes(of item: KeychainItem) -> [String: Any] {
        var dictionary: [String: Any] = [kSecClass as String: item.itemClass.rawValue]
        let stored = item.attributes ?? [:]
        // The access list comes back as one kSecAttrAccess object, as it was given (when the item has one).
        if stored.keys.contains(where: ItemAccess.keys.contains) {
            var label = ""
            if case .string(let text)? = stored[.label] { label = text }
            dictionary[kSecAttrAccess as String] = SecAccess(ItemAccess(attributes: stored), descriptor: label)
        }
        for (key, value) in stored where !ItemAccess.keys.contains(key) {
            if key == .accessControl, case .data(let bytes) = value, let control = SecAccessControl(storedForm: bytes) {
                dictionary[key.rawValue] = control
                continue
            }
            switch value {
            case .string(let text): dictionary[key.rawValue] = text
            case .data(let bytes): dictionary[key.rawValue] = bytes
            case .number(let number): dictionary[key.rawValue] = Int(clamping: number)
            case .date(let date): dictionary[key.rawValue] = date
            case .bool(let flag): dictionary[key.rawValue] = flag
            }
        }
        return dictionary
    }
}
