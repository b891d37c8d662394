// A test helper: adds generic-password items one by one to an existing keychain
// and prints "acked N" after each add has returned (so is committed). The
// durability test kills it with SIGKILL mid-run and checks every acked item.
// `keychain-writer PATH --access-policy POLICY` sets a keychain's access policy (prompt, allow-all) in its
// file, as `latchkey set-access-policy` will: the integration tests' fixtures set allow-all for the tests that
// are not about access prompts (Tests/Integration/conftest.py).
import Foundation
import KeychainCore
import KeychainStore

let arguments = CommandLine.arguments
if arguments.count == 4, arguments[2] == "--access-policy" {
    guard let policy = KeychainAccessPolicy(rawValue: arguments[3]) else {
        FileHandle.standardError.write(Data("keychain-writer: no access policy '\(arguments[3])'\n".utf8))
        exit(2)
    }
    do {
        try Keychain(opening: arguments[1]).setAccessPolicy(policy)
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
