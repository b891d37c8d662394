// A test helper: adds generic-password items one by one to an existing keychain
// and prints "acked N" after each add has returned (so is committed). The
// durability test kills it with SIGKILL mid-run and checks every acked item.
// `keychain-writer PATH --access-policy POLICY` sets a keychain's access policy (prompt, allow-all) in its
// file, as `latchkey set-access-policy` does on a file: unlocked with the login password read from standard
// input (a keychain under the login keychain's key through `login.keychain-db` beside it), since the policy
// rows are authenticated under the keychain key. The integration tests' fixtures set allow-all for the tests
// that are not about access prompts (Tests/Integration/conftest.py).
import Foundation
import KeychainCore
import KeychainStore

let arguments = CommandLine.arguments
// `keychain-writer PATH --every-kind|--dump`: the export and import tests' keychains (password: the
// first line of standard input). `--every-kind` adds an item of every class with every attribute its class takes
// (each kind of value: text, bytes, number, date, flag), a Secret Service item, an item with an access list, and
// one of a ThisDeviceOnly class; `--dump` prints every item (class, attributes with their kinds, secret in hex)
// as one JSON line each, sorted, for comparing two keychains item by item.
if arguments.count >= 3, ["--every-kind", "--dump"].contains(arguments[2]) {
    let password =
        String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        .split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
    do {
        let keychain = try Keychain(opening: arguments[1])
        try keychain.unlock(password: password)
        switch arguments[2] {
        case "--every-kind": try ExchangeKeychains.addEveryKind(to: keychain)
        default: try ExchangeKeychains.dump(keychain)
        }
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("keychain-writer: \(error)\n".utf8))
        exit(1)
    }
}
if arguments.count == 4, arguments[2] == "--access-policy" {
    guard let policy = KeychainAccessPolicy(rawValue: arguments[3]) else {
        FileHandle.standardError.write(Data("keychain-writer: no access policy '\(arguments[3])'\n".utf8))
        exit(2)
    }
    // One password a line: the login password first, then those of keychains with a password of their own.
    let passwords = FileHandle.standardInput.readDataToEndOfFile().split(separator: UInt8(ascii: "\n")).map {
        [UInt8]($0)
    }
    /// Unlocks `keychain` with the first of `passwords` that opens it, without counting the wrong ones in the
    /// file (the tests of the wrong-password count must not see the fixture's tries).
    func unlockQuietly(_ keychain: Keychain, _ passwords: [[UInt8]]) throws {
        for password in passwords {
            guard let key = try? keychain.unwrapKey(password: password, counted: false) else { continue }
            keychain.unlock(with: key)
            return
        }
        throw KeychainError(.authFailed, "none of the passwords given unlocks \(keychain.path)")
    }
    do {
        let keychain = try Keychain(opening: arguments[1])
        if keychain.parentIdentifier != nil {
            let directory = (arguments[1] as NSString).deletingLastPathComponent
            let login = try Keychain(opening: directory + "/login.keychain-db")
            try unlockQuietly(login, passwords)
            try keychain.unlock(using: login)
        } else {
            try unlockQuietly(keychain, passwords)
        }
        try keychain.setAccessPolicy(policy)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("keychain-writer: \(error)\n".utf8))
        exit(1)
    }
}
// `keychain-writer PATH --copy-secret SERVICE FROM TO` (the password on standard input): copies, through the store,
// the stored secret of the generic password (SERVICE, FROM) onto (SERVICE, TO), as someone with the keychain's
// password and the file could (the abuse test of items with a password of their own: a copied envelope must not
// open for the other item).
if arguments.count == 6, arguments[2] == "--copy-secret" {
    do {
        let password = FileHandle.standardInput.readDataToEndOfFile().split(separator: UInt8(ascii: "\n"))
        let keychain = try Keychain(opening: arguments[1])
        try keychain.unlock(password: [UInt8](password.first ?? Data()))
        func query(_ account: String) -> ItemQuery {
            ItemQuery(
                .genericPassword, attributes: [.service: .string(arguments[3]), .account: .string(account)],
                returning: .data)
        }
        guard let stored = try keychain.items(matching: query(arguments[4])).first?.secret else {
            throw KeychainError(.itemNotFound, "no item to copy from")
        }
        _ = try keychain.update(matching: query(arguments[5]), with: ItemChanges(secret: stored))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("keychain-writer: \(error)\n".utf8))
        exit(1)
    }
}
// `keychain-writer PATH --set-access-control SERVICE ACCOUNT FLAGS` (the password on standard input): sets the
// generic password's kSecAttrAccessControl to FLAGS (decimal), its secret left as it is, as latchkeyd did while
// applicationPassword was recorded only (the test of items made then).
if arguments.count == 6, arguments[2] == "--set-access-control", let flags = UInt64(arguments[5]) {
    do {
        let password = FileHandle.standardInput.readDataToEndOfFile().split(separator: UInt8(ascii: "\n"))
        let keychain = try Keychain(opening: arguments[1])
        try keychain.unlock(password: [UInt8](password.first ?? Data()))
        let control = AccessConstraints(protection: "ak", flags: flags)
        _ = try keychain.update(
            matching: ItemQuery(
                .genericPassword, attributes: [.service: .string(arguments[3]), .account: .string(arguments[4])]),
            with: ItemChanges(attributes: [.accessControl: .data(control.storedForm)]))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("keychain-writer: \(error)\n".utf8))
        exit(1)
    }
}
guard arguments.count == 4, let count = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: keychain-writer PATH PASSWORD COUNT\n".utf8))
    exit(2)
}
do {
    let keychain = try Keychain(opening: arguments[1])
    try keychain.unlock(password: arguments[2])
    for index in 0..<count {
        try keychain.add(
            .genericPassword,
            attributes: [.account: .string("item-\(index)"), .service: .string("durability")],
            secret: Data("secret-\(index)".utf8))
        FileHandle.standardOutput.write(Data("acked \(index)\n".utf8))
    }
} catch {
    FileHandle.standardError.write(Data("keychain-writer: \(error)\n".utf8))
    exit(1)
}
