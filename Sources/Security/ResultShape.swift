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
    /// comes back as a `SecAccessControl`.
    private func attributes(of item: KeychainItem) -> [String: Any] {
        var dictionary: [String: Any] = [kSecClass as String: item.itemClass.rawValue]
        for (key, value) in item.attributes ?? [:] {
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
