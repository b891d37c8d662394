// A test helper: SecItem calls on the default keychain (the daemon when one
// answers), driven from the command line by the integration tests.
//   secitem-client add-generic SERVICE ACCOUNT SECRET
//   secitem-client find-generic SERVICE [ACCOUNT]      prints the secret
//   secitem-client find-generic-per-line SERVICE       prints the secret once per line read from stdin
//   secitem-client add-internet SERVER ACCOUNT SECRET PORT
//   secitem-client find-internet SERVER                prints account, port, secret
//   secitem-client delete-generic SERVICE
//   secitem-client update-generic SERVICE SECRET       every match's secret
//   secitem-client apple-semantics SERVICE             issue 16's four points, one line each
//   secitem-client add-trusting SERVICE SECRET APP...  kSecAttrAccess trusting APP... ("any": any application)
//   secitem-client show-access SERVICE                 the returned kSecAttrAccess: "any", or one name a line
//   secitem-client add-key TAG SECRET                  a private key item (kSecClassKey) tagged TAG
//   secitem-client find-key TAG                        prints the key's data and its kSecAttrAccess names
//   secitem-client add-synchronizable SERVICE SECRET   a synchronizable item; prints its persistent reference (hex)
//   secitem-client read-by-reference HEX              prints the secret of the item the persistent reference names
//   secitem-client wrapper-semantics SERVICE           issue 27's points, one line each: a migration of
//                                                      synchronizable items by persistent reference, accounts
//                                                      as bytes read by a CFString key, query comparison
//   secitem-client add-controlled SERVICE ACCOUNT SECRET FLAG...
//                                                      kSecAttrAccessControl with the flags named (userPresence,
//                                                      devicePasscode, biometryAny, biometryCurrentSet, watch, or,
//                                                      and, applicationPassword; "none" for no flag)
//   secitem-client read-controlled SERVICE UI [PROMPT]  every match's data (kSecMatchLimitAll) with
//                                                      kSecUseAuthenticationUI UI (allow, fail, skip) and
//                                                      kSecUseOperationPrompt PROMPT; one secret a line, sorted
//   secitem-client update-control SERVICE FLAG...      SecItemUpdate of the kSecAttrAccessControl
//   secitem-client update-control-skip SERVICE FLAG... the same with kSecUseAuthenticationUISkip in the query
//   secitem-client update-secret-control SERVICE SECRET FLAG...
//                                                      SecItemUpdate of every match's secret and its
//                                                      kSecAttrAccessControl, in one call
// Exits 0 on errSecSuccess, else prints "status N" and exits 1.
import Foundation
import Security

func finish(_ status: OSStatus) -> Never {
    if status == errSecSuccess { exit(0) }
    print("status \(status)")
    exit(1)
}

/// The access control the flags named make (exits errSecParam for an unknown name).
func accessControl(_ names: ArraySlice<String>) -> SecAccessControl {
    var flags: SecAccessControlCreateFlags = []
    let known: [String: SecAccessControlCreateFlags] = [
        "userPresence": .userPresence, "devicePasscode": .devicePasscode, "biometryAny": .biometryAny,
        "biometryCurrentSet": .biometryCurrentSet, "watch": .watch, "or": .or, "and": .and,
        "applicationPassword": .applicationPassword, "none": [],
    ]
    for name in names {
        guard let flag = known[name] else { finish(errSecParam) }
        flags.insert(flag)
    }
    guard let control = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil) else {
        finish(errSecParam)
    }
    return control
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { finish(errSecParam) }
switch (command, arguments.count) {
case ("add-generic", 4):
    finish(
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1], kSecAttrAccount: arguments[2],
                kSecAttrLabel: "added by secitem-client", kSecValueData: Data(arguments[3].utf8),
            ] as CFDictionary, nil))
case ("add-trusting", 4...):
    var access: SecAccess?
    if arguments[3] == "any" {
        _ = SecAccessCreateForAnyApplication("secitem-client" as CFString, &access)
    } else {
        var applications: [SecTrustedApplication] = []
        for path in arguments[3...] {
            var application: SecTrustedApplication?
            let status = SecTrustedApplicationCreateFromPath(path, &application)
            guard status == errSecSuccess, let application else { finish(status) }
            applications.append(application)
        }
        let status = SecAccessCreate("secitem-client" as CFString, applications as CFArray, &access)
        guard status == errSecSuccess else { finish(status) }
    }
    finish(
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1],
                kSecValueData: Data(arguments[2].utf8), kSecAttrAccess: access as Any,
            ] as CFDictionary, nil))
case ("show-access", 2):
    var result: CFTypeRef?
    let status = SecItemCopyMatching(
        [kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1], kSecReturnAttributes: true]
            as CFDictionary, &result)
    if let access = (result as? [String: Any])?[kSecAttrAccess as String] as? SecAccess {
        print(access.allowsAnyApplication ? "any" : access.trustedApplications.map(\.name).joined(separator: "\n"))
    }
    finish(status)
case ("add-key", 3):
    finish(
        SecItemAdd(
            [
                kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                kSecAttrApplicationTag: Data(arguments[1].utf8), kSecAttrLabel: "key added by secitem-client",
                kSecValueData: Data(arguments[2].utf8),
            ] as CFDictionary, nil))
case ("find-key", 2):
    var result: CFTypeRef?
    let status = SecItemCopyMatching(
        [
            kSecClass: kSecClassKey, kSecAttrApplicationTag: Data(arguments[1].utf8), kSecReturnData: true,
            kSecReturnAttributes: true,
        ] as CFDictionary, &result)
    if let item = result as? [String: Any] {
        print((item[kSecValueData as String] as? Data).map { String(decoding: $0, as: UTF8.self) } ?? "")
        if let access = item[kSecAttrAccess as String] as? SecAccess {
            print(access.allowsAnyApplication ? "any" : access.trustedApplications.map(\.name).joined(separator: "\n"))
        }
    }
    finish(status)
case ("find-generic", 2), ("find-generic", 3):
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: arguments[1],
        kSecReturnData as String: true,
    ]
    if arguments.count == 3 { query[kSecAttrAccount as String] = arguments[2] }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    if let data = result as? Data { print(String(decoding: data, as: UTF8.self)) }
    finish(status)
case ("find-generic-per-line", 2):
    // One read per line on standard input, over the process's one connection to the daemon.
    while readLine() != nil {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1], kSecReturnData: true] as CFDictionary,
            &result)
        guard status == errSecSuccess, let data = result as? Data else { finish(status) }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
    finish(errSecSuccess)
case ("add-internet", 5):
    finish(
        SecItemAdd(
            [
                kSecClass: kSecClassInternetPassword, kSecAttrServer: arguments[1], kSecAttrAccount: arguments[2],
                kSecAttrPort: Int(arguments[4]) ?? 0, kSecAttrProtocol: kSecAttrProtocolHTTPS,
                kSecValueData: Data(arguments[3].utf8),
            ] as CFDictionary, nil))
case ("find-internet", 2):
    var result: CFTypeRef?
    let status = SecItemCopyMatching(
        [
            kSecClass: kSecClassInternetPassword, kSecAttrServer: arguments[1], kSecReturnAttributes: true,
            kSecReturnData: true,
        ] as CFDictionary, &result)
    if let item = result as? [String: Any] {
        let secret = (item[kSecValueData as String] as? Data).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let account = item[kSecAttrAccount as String] as? String ?? ""
        print("\(account) \(item[kSecAttrPort as String] as? Int ?? -1) \(secret)")
    }
    finish(status)
case ("apple-semantics", 2):
    // Two items in SERVICE: account "binary" given as bytes, and account
    // "guarded" with an access control; then every secret at once, one item by
    // its persistent reference alone, and the stored access control.
    let service = arguments[1]
    guard
        let control = SecAccessControlCreateWithFlags(
            kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.biometryAny, .or, .devicePasscode], nil
        )
    else { finish(errSecParam) }
    var reference: CFTypeRef?
    let first: [CFString: Any] = [
        kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: Data("binary".utf8),
        kSecValueData: Data("one".utf8), kSecReturnPersistentRef: kCFBooleanTrue!,
    ]
    var status = SecItemAdd(first as CFDictionary, &reference)
    guard status == errSecSuccess, let persistent = reference as? Data else { finish(status) }
    let second: [CFString: Any] = [
        kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "guarded",
        kSecAttrAccessControl: control, kSecValueData: Data("two".utf8),
    ]
    status = SecItemAdd(second as CFDictionary, nil)
    guard status == errSecSuccess else { finish(status) }

    var result: CFTypeRef?
    status = SecItemCopyMatching(
        [
            kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecReturnData: true,
            kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll,
        ] as CFDictionary, &result)
    guard status == errSecSuccess, let items = result as? [[String: Any]] else { finish(status) }
    let secrets = items.compactMap { $0[kSecValueData as String] as? Data }.map { String(decoding: $0, as: UTF8.self) }
    print("all-data \(secrets.joined(separator: ","))")
    for item in items {
        if let bytes = item[kSecAttrAccount as String] as? Data {
            print("bytes-account \(String(decoding: bytes, as: UTF8.self))")
        }
        if let stored = item[kSecAttrAccessControl as String] as? SecAccessControl {
            let accessible = item[kSecAttrAccessible as String] as? String ?? "-"
            print(
                "access-control \(stored.protection) \(stored.flags.rawValue) \(accessible) equal=\(stored == control)")
        }
    }
    status = SecItemCopyMatching(
        [kSecValuePersistentRef: persistent, kSecReturnData: true] as CFDictionary, &result)
    guard status == errSecSuccess, let secret = result as? Data else { finish(status) }
    print("by-reference \(String(decoding: secret, as: UTF8.self))")
    finish(errSecSuccess)
case ("add-synchronizable", 3):
    var reference: CFTypeRef?
    let status = SecItemAdd(
        [
            kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1], kSecAttrSynchronizable: true,
            kSecValueData: Data(arguments[2].utf8), kSecReturnPersistentRef: true,
        ] as CFDictionary, &reference)
    if let bytes = reference as? Data { print(bytes.map { String(format: "%02x", $0) }.joined()) }
    finish(status)
case ("read-by-reference", 2):
    var bytes: [UInt8] = []
    var hex = Substring(arguments[1])
    while hex.count >= 2, let byte = UInt8(hex.prefix(2), radix: 16) {
        bytes.append(byte)
        hex = hex.dropFirst(2)
    }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(
        [kSecValuePersistentRef: Data(bytes), kSecReturnData: true] as CFDictionary, &result)
    if let secret = result as? Data { print(String(decoding: secret, as: UTF8.self)) }
    finish(status)
case ("wrapper-semantics", 2):
    // Two synchronizable items in SERVICE with their accounts given as bytes; then, as wrappers do: attributes
    // and persistent references of every match ([String: AnyHashable]), each item's data by its reference alone;
    // the accounts read from [AnyHashable: Any] results by the CFString key; a query written with CFString
    // values compared with the same query in plain strings.
    let service = arguments[1]
    for account in ["first", "second"] {
        let status = SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: Data(account.utf8),
                kSecAttrSynchronizable: kCFBooleanTrue!, kSecValueData: Data("secret of \(account)".utf8),
            ] as CFDictionary, nil)
        guard status == errSecSuccess else { finish(status) }
    }
    let query: [String: AnyHashable] = [
        kSecClass as String: kSecClassGenericPassword as String, kSecAttrService as String: service,
        kSecAttrSynchronizable as String: true, kSecMatchLimit as String: kSecMatchLimitAll as String,
        kSecReturnAttributes as String: true, kSecReturnPersistentRef as String: true,
    ]
    var result: CFTypeRef?
    var status = SecItemCopyMatching(query as CFDictionary, &result)
    guard status == errSecSuccess, let matches = result as? [[AnyHashable: Any]] else { finish(status) }
    for match in matches {
        guard let account = match[kSecAttrAccount] as? Data, let reference = match[kSecValuePersistentRef] as? Data
        else { finish(errSecDecode) }
        var data: CFTypeRef?
        status = SecItemCopyMatching([kSecValuePersistentRef: reference, kSecReturnData: true] as CFDictionary, &data)
        guard status == errSecSuccess, let secret = data as? Data else { finish(status) }
        print("migrated \(String(decoding: account, as: UTF8.self))=\(String(decoding: secret, as: UTF8.self))")
    }
    let written: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
    let plain: [String: Any] = ["class": "genp", "svce": service]
    print("queries-equal \(NSDictionary(dictionary: written).isEqual(to: plain))")
    finish(errSecSuccess)
case ("update-generic", 3):
    finish(
        SecItemUpdate(
            [kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1]] as CFDictionary,
            [kSecValueData: Data(arguments[2].utf8)] as CFDictionary))
case ("delete-generic", 2):
    finish(SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1]] as CFDictionary))
case ("add-controlled", 5...):
    finish(
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1], kSecAttrAccount: arguments[2],
                kSecAttrLabel: "controlled \(arguments[2])", kSecValueData: Data(arguments[3].utf8),
                kSecAttrAccessControl: accessControl(arguments[4...]),
            ] as CFDictionary, nil))
case ("read-controlled", 3), ("read-controlled", 4):
    let modes = [
        "allow": kSecUseAuthenticationUIAllow, "fail": kSecUseAuthenticationUIFail, "skip": kSecUseAuthenticationUISkip,
    ]
    guard let mode = modes[arguments[2]] else { finish(errSecParam) }
    var query: [CFString: Any] = [
        kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1], kSecReturnData: true,
        kSecMatchLimit: kSecMatchLimitAll, kSecUseAuthenticationUI: mode,
    ]
    if arguments.count == 4 { query[kSecUseOperationPrompt] = arguments[3] }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    for data in ((result as? [Data]) ?? []).map({ String(decoding: $0, as: UTF8.self) }).sorted() { print(data) }
    finish(status)
case ("update-control", 3...):
    finish(
        SecItemUpdate(
            [kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1]] as CFDictionary,
            [kSecAttrAccessControl: accessControl(arguments[2...])] as CFDictionary))
case ("update-secret-control", 4...):
    finish(
        SecItemUpdate(
            [kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1]] as CFDictionary,
            [kSecValueData: Data(arguments[2].utf8), kSecAttrAccessControl: accessControl(arguments[3...])]
                as CFDictionary))
case ("update-control-skip", 3...):
    finish(
        SecItemUpdate(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[1],
                kSecUseAuthenticationUI: kSecUseAuthenticationUISkip,
            ] as CFDictionary,
            [kSecAttrAccessControl: accessControl(arguments[2...])] as CFDictionary))
default:
    finish(errSecParam)
}
