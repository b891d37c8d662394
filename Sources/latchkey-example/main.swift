// Stores a password with Apple's SecItem API in a throwaway keychain file,
// reads it back, shows that the file on disk does not contain it, and
// deletes the keychain. Run: swift run latchkey-example
import Foundation
import Security

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-example-\(getpid())")
let path = directory.appendingPathComponent("example.keychain-db").path
defer { try? FileManager.default.removeItem(at: directory) }

func check(_ status: OSStatus, _ step: String) {
    guard status != errSecSuccess else { return }
    let message = SecCopyErrorMessageString(status, nil) ?? "unknown error"
    FileHandle.standardError.write(Data("latchkey-example: \(step) failed: \(message) (\(status))\n".utf8))
    exit(1)
}

let keychainPassword = "example keychain password"
var keychain: SecKeychain?
check(
    SecKeychainCreate(path, UInt32(keychainPassword.utf8.count), keychainPassword, false, nil, &keychain),
    "creating the keychain")
check(SecKeychainSetDefault(keychain), "choosing the keychain")
print("created \(path) (unlocked; key derived with scrypt)")

let secret = "correct horse battery staple"
let item: [String: Any] = [
    kSecClass as String: kSecClassGenericPassword,
    kSecAttrService as String: "latchkey-example",
    kSecAttrAccount as String: "alice",
    kSecAttrLabel as String: "Example password",
    kSecValueData as String: Data(secret.utf8),
]
check(SecItemAdd(item as CFDictionary, nil), "SecItemAdd")
print("SecItemAdd: stored a password for alice")

let query: [String: Any] = [
    kSecClass as String: kSecClassGenericPassword,
    kSecAttrService as String: "latchkey-example",
    kSecReturnAttributes as String: true,
    kSecReturnData as String: true,
]
var result: CFTypeRef?
check(SecItemCopyMatching(query as CFDictionary, &result), "SecItemCopyMatching")
guard let found = result as? [String: Any], let data = found[kSecValueData as String] as? Data,
    let account = found[kSecAttrAccount as String] as? String
else {
    FileHandle.standardError.write(Data("latchkey-example: unexpected result shape\n".utf8))
    exit(1)
}
print("SecItemCopyMatching: account \(account), password \(String(decoding: data, as: UTF8.self))")

let onDisk = ["", "-wal"].reduce(Data()) { $0 + (FileManager.default.contents(atPath: path + $1) ?? Data()) }
let leaked = onDisk.range(of: Data(secret.utf8)) != nil || onDisk.range(of: Data("alice".utf8)) != nil
print("file bytes contain the password or the account in clear: \(leaked ? "YES (bug!)" : "no")")

check(SecKeychainLock(keychain), "locking")
check(
    SecItemCopyMatching(query as CFDictionary, &result) == errSecInteractionNotAllowed ? errSecSuccess : -1,
    "locked read")
print("locked: reading the password now gives errSecInteractionNotAllowed")
exit(leaked ? 1 : 0)
