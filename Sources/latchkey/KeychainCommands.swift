import ArgumentParser
import FoundationEssentials
import Keychain1
import KeychainClient
import KeychainCore
import KeychainStore
import Pinentry
import Posix

/// Prints a keychain path the way `security(1)` lists keychains: indented and quoted.
private func printListed(_ path: String) {
    print("    \"\(path)\"")
}

struct ListKeychains: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the keychains: the files in the keychain directory and those the daemon holds.",
        discussion: """
            Examples:
              latchkey list-keychains
              latchkey list-keychains --json
            """)

    @Flag(help: "Print a JSON array: path, whether it is the default or the login keychain, and the daemon's view.")
    var json = false

    func run() throws {
        let held = KeychainTarget.daemonKeychains()
        var paths = KeychainPaths.keychainFiles()
        for description in held ?? [] where !description.file.isEmpty && !paths.contains(description.file) {
            paths.append(description.file)
        }
        guard json else { return paths.forEach(printListed) }
        let defaultPath = KeychainPaths.canonical(KeychainPaths.defaultKeychain)
        let documents = paths.map { path -> JSONValue in
            var object: [String: JSONValue] = [
                "path": .string(path), "default": .bool(KeychainPaths.canonical(path) == defaultPath),
                "login": .bool(path == KeychainPaths.login),
            ]
            if let description = held?.first(where: { $0.file == path }) {
                object["daemon"] = .object([
                    "collection": .string(description.id), "label": .string(description.label),
                    "locked": .bool(description.isLocked), "protection": .string(description.protection.rawValue),
                ])
            }
            return .object(object)
        }
        print(JSONValue.array(documents).text)
    }
}

struct DefaultKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set the default keychain (where verbs work when no keychain is named).",
        discussion: """
            The choice is kept in $XDG_CONFIG_HOME/latchkey/default-keychain; without one, the login keychain is the default.

            Examples:
              latchkey default-keychain
              latchkey default-keychain -s work
            """)

    @Option(name: .customShort("s"), help: ArgumentHelp("Make this keychain the default.", valueName: "keychain"))
    var set: String?

    @Flag(help: "Print {\"path\": …} as JSON.")
    var json = false

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            if let set {
                let path = KeychainPaths.path(for: set)
                guard FileManager.default.fileExists(atPath: path) else {
                    throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
                }
                let file = KeychainPaths.defaultKeychainFile
                do {
                    try FileManager.default.createDirectory(
                        atPath: String(file[..<(file.lastIndex(of: "/") ?? file.endIndex)]),
                        withIntermediateDirectories: true)
                    try (path + "\n").write(toFile: file, atomically: true, encoding: .utf8)
                } catch {
                    throw KeychainError(.writePermission, "cannot write \(file): \(error)")
                }
                return
            }
            let path = KeychainPaths.defaultKeychain
            if json { print(JSONValue.object(["path": .string(path)]).text) } else { printListed(path) }
        }
    }
}

struct LoginKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the login keychain, the one pam_latchkey unlocks with the login password.",
        discussion: """
            It is $XDG_DATA_HOME/latchkey/keychains/login.keychain-db and cannot be moved.

            Example:
              latchkey login-keychain
            """)

    @Flag(help: "Print {\"path\": …} as JSON.")
    var json = false

    func run() throws {
        let path = KeychainPaths.login
        if json { print(JSONValue.object(["path": .string(path)]).text) } else { printListed(path) }
    }
}

/// Where a verb that sets a keychain password gets it.
struct KeychainPasswordOptions: ParsableArguments {
    @Option(
        name: .customShort("p"),
        help: ArgumentHelp(
            "The password (visible to other users: prefer the prompt or --stdin).", valueName: "password"))
    var password: String?

    @Flag(help: "Read the password from standard input (all of it but a final newline).")
    var stdin = false

    /// The password from -p or standard input; nil to ask.
    func given() throws(KeychainError) -> [UInt8]? {
        if let password {
            StandardError.write(
                "latchkey: warning: a password given with -p is visible to other users; leave it out to be asked, or use --stdin"
            )
            return Array(password.utf8)
        }
        return stdin ? try SecretInput.fromStandardInput(count: 1)[0] : nil
    }
}

struct CreateKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a keychain file with its own password.",
        discussion: """
            A name without '/' is made in the keychain directory ($XDG_DATA_HOME/latchkey/keychains), with the suffix \
            .keychain-db. The password is asked twice without echo, unless -p or --stdin gives it.

            Examples:
              latchkey create-keychain work
              printf '%s\\n' "$PW" |
                latchkey create-keychain --stdin /srv/ci/build.keychain-db
            """)

    @OptionGroup var password: KeychainPasswordOptions

    @Flag(name: .customShort("P"), help: "Ask for the password (the default; accepted for security(1) scripts).")
    var prompt = false

    @Argument(help: "The keychain to create.")
    var keychain: String

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let path = KeychainPaths.path(for: keychain)
            guard !FileManager.default.fileExists(atPath: path) else {
                throw KeychainError(.duplicateKeychain, "a keychain already exists at \(path)")
            }
            var secret: [UInt8]
            if let given = try password.given() {
                secret = given
            } else {
                secret = try SecretInput.newPassword(for: path)
            }
            defer { wipeBytes(&secret) }
            let created = try Keychain.create(at: path, password: secret)
            try created.recordCreation(label: nil)
            created.lock()
        }
    }
}

struct DeleteKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete keychains and every item in them.",
        discussion: """
            A keychain the daemon holds is deleted through it, once unlocked and after you confirm it in the daemon's \
            prompt (the login keychain cannot be deleted).

            Example:
              latchkey delete-keychain work
            """)

    @Argument(help: "The keychains to delete.")
    var keychains: [String]

    func validate() throws {
        guard !keychains.isEmpty else { throw ValidationError("name at least one keychain") }
    }

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let held = KeychainTarget.daemonKeychains()
            for argument in keychains {
                let target = try KeychainTarget.reach(KeychainPaths.path(for: argument), daemonKeychains: held)
                // Compared while the file still exists, so that symbolic links resolve.
                let wasDefault =
                    KeychainPaths.canonical(KeychainPaths.defaultKeychain) == KeychainPaths.canonical(target.path)
                if let daemon = target.backend as? DaemonKeychain {
                    try daemon.deleteKeychain()
                } else {
                    Keychain.removeFiles(at: target.path)
                }
                if wasDefault { try? FileManager.default.removeItem(atPath: KeychainPaths.defaultKeychainFile) }
            }
        }
    }
}

struct LockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock a keychain the daemon holds (its key is wiped from memory).",
        discussion: """
            Without a daemon nothing holds a keychain unlocked, so there is nothing to lock.

            A lock leaves the items of the AfterFirstUnlock classes readable until the session ends; \
            --all-classes wipes their keys too, as a logout does.

            Examples:
              latchkey lock-keychain
              latchkey lock-keychain -a
              latchkey lock-keychain -a --all-classes
            """)

    @Flag(name: .customShort("a"), help: "Lock every keychain the daemon holds.")
    var all = false

    @Flag(help: "Also make AfterFirstUnlock items unreadable until the next unlock.")
    var allClasses = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            guard let held = KeychainTarget.daemonKeychains() else {
                StandardError.write("latchkey: no daemon runs, so no keychain is held unlocked")
                return
            }
            if all {
                for description in held {
                    guard let daemon = DaemonKeychain.connect(collection: description.id) else { continue }
                    if allClasses { daemon.lockAllClasses() } else { daemon.lock() }
                }
                return
            }
            let target = try KeychainTarget.reach(KeychainPaths.resolve(keychain), daemonKeychains: held)
            guard target.held != nil else {
                StandardError.write("latchkey: the daemon does not hold \(target.path), so it is not unlocked")
                return
            }
            if allClasses, let daemon = target.backend as? DaemonKeychain {
                daemon.lockAllClasses()
            } else {
                target.backend.lock()
            }
        }
    }
}

struct UnlockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock a keychain in the daemon, with its password.",
        usage: "latchkey unlock-keychain [<options>] [<keychain>]",
        discussion: """
            The password is asked without echo, unless -p or --stdin gives it. For a keychain the daemon does not hold \
            (no daemon runs, or it was made with create-keychain) the password is only checked. With no session bus \
            at all (an ssh login without a user bus) it says so and asks nothing.

            Examples:
              latchkey unlock-keychain
              latchkey unlock-keychain --stdin < password-file
            """)

    @OptionGroup var password: KeychainPasswordOptions

    @Flag(help: "Unlock with the keychain's recovery key (asked like a password, or read with --stdin).")
    var recovery = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            // Over ssh with no user bus no daemon can hold the keychain unlocked for other programs: say so before
            // asking for a password that could only be checked (docs/ssh.md).
            if let missing = DaemonKeychain.missingSessionBus() {
                throw KeychainError(
                    .notAvailable, "\(missing): no latchkeyd to unlock the keychain in (docs/ssh.md: a user bus)")
            }
            let target = try KeychainTarget.open(keychain, unlocked: false)
            if recovery { return try unlockWithRecoveryKey(target) }
            if var given = try password.given() {
                defer { wipeBytes(&given) }
                if target.held?.protection == .loginKeychain {
                    throw KeychainError.param("\(target.path) has no password of its own: unlock the login keychain")
                }
                if target.backend.isLocked { try target.backend.unlock(withPassword: given) }
            } else {
                try target.unlock()
            }
            if target.held == nil {
                StandardError.write(
                    "latchkey: no daemon holds \(target.path): the password is right, and the keychain stays locked")
            }
        }
    }

    /// Unlocks with the recovery key: the daemon's keychain by sending it (the daemon tries it on the login
    /// keychain's recovery slots), a file by checking it against the file's recovery slots.
    private func unlockWithRecoveryKey(_ target: KeychainTarget) throws(KeychainError) {
        guard password.password == nil else {
            throw KeychainError.param("a recovery key is never given on the command line: leave -p out")
        }
        var text = try SlotSecrets(stdin: password.stdin).next(
            prompt: "recovery key for \(target.path): ",
            request: PinentryRequest(
                title: "Unlock keychain",
                description: "latchkey needs the recovery key of the keychain\n\(target.path)",
                prompt: "Recovery key:", error: nil))
        defer { wipeBytes(&text) }
        if target.held != nil {
            guard target.backend.isLocked else { return }
            return try target.backend.unlock(withPassword: text)
        }
        guard let file = target.backend as? Keychain else { return }
        file.unlock(with: try unwrapWithRecoveryKey(file, text))
        file.lock()
        StandardError.write(
            "latchkey: no daemon holds \(target.path): the recovery key is right, and the keychain stays locked")
    }
}

struct SetKeychainPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change a keychain's password.",
        usage: "latchkey set-keychain-password [<options>] [<keychain>]",
        discussion: """
            The old password is asked once and the new one twice, without echo, unless given: with --stdin, standard \
            input holds the old password on the first line and the new one on the second. For the login keychain, \
            prefer changing the login password (passwd): pam_latchkey re-keys the keychain with it.

            Examples:
              latchkey set-keychain-password work
              printf '%s\\n%s\\n' "$OLD" "$NEW" | latchkey set-keychain-password --stdin work
            """)

    @Option(name: .customShort("o"), help: ArgumentHelp("The old password (visible to other users).", valueName: "old"))
    var oldPassword: String?

    @Option(name: .customShort("p"), help: ArgumentHelp("The new password (visible to other users).", valueName: "new"))
    var newPassword: String?

    @Flag(help: "Read the old and the new password from standard input, one per line.")
    var stdin = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let target = try KeychainTarget.open(keychain, unlocked: false)
            if oldPassword != nil || newPassword != nil {
                StandardError.write(
                    "latchkey: warning: passwords given with -o or -p are visible to other users; use --stdin")
            }
            var passwords: [[UInt8]]
            if stdin {
                passwords = try SecretInput.fromStandardInput(count: 2)
            } else {
                var old = oldPassword.map { Array($0.utf8) }
                if old == nil { old = try SecretInput.fromTerminal(prompt: "old password for \(target.path): ") }
                guard let oldBytes = old else {
                    throw KeychainError(.interactionNotAllowed, "no terminal to ask the passwords on: use --stdin")
                }
                var new = newPassword.map { Array($0.utf8) }
                if new == nil { new = try SecretInput.newPassword(for: target.path) }
                passwords = [oldBytes, new ?? []]
            }
            defer { for index in passwords.indices { wipeBytes(&passwords[index]) } }
            try target.backend.changePassword(from: passwords[0], to: passwords[1])
        }
    }
}

struct SetKeychainSettings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set when a keychain locks by itself.",
        usage: "latchkey set-keychain-settings [<options>] [<keychain>]",
        discussion: """
            With no option the keychain never locks by itself. The daemon applies a timeout at once to keychains it \
            holds; the time counts from the last use of the keychain. With -l it locks the keychain when \
            systemd-logind announces a suspend on the system bus; with -s when the user's screen locks \
            (systemd-logind's Lock for one of the user's sessions, or the desktop's screen saver activating on the \
            session bus). The settings are authenticated under the keychain's key, so a locked keychain is unlocked \
            first.

            Examples:
              latchkey set-keychain-settings -t 900
              latchkey set-keychain-settings -lu work
              latchkey set-keychain-settings -ls -t 900
            """)

    @Flag(name: .customShort("l"), help: "Lock when the machine sleeps.")
    var lockOnSleep = false

    @Flag(name: [.customShort("s"), .customLong("lock-on-screen-lock")], help: "Lock when the screen locks.")
    var lockOnScreenLock = false

    @Flag(name: .customShort("u"), help: "Lock after the timeout (300 seconds unless -t is given).")
    var lockAfterTimeout = false

    @Option(
        name: .customShort("t"), help: ArgumentHelp("Lock after this many seconds without use.", valueName: "seconds"))
    var timeout: UInt32?

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func validate() throws {
        if timeout == 0 { throw ValidationError("-t takes a number of seconds above 0") }
    }

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let target = try KeychainTarget.open(keychain, unlocked: true)
            let settings = KeychainSettings(
                lockTimeout: timeout ?? (lockAfterTimeout ? KeychainSettings.defaultTimeout : nil),
                lockOnSleep: lockOnSleep, lockOnScreenLock: lockOnScreenLock)
            try target.backend.setSettings(settings)
        }
    }
}

struct ShowKeychainInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a keychain's lock settings and access policy.",
        discussion: """
            Prints one line: Keychain "PATH", then lock-on-sleep and lock-on-screen-lock when set, timeout=SECONDSs or \
            no-timeout, and access-policy=prompt or access-policy=allow-all, the policy followed by ",unchecked" while \
            the keychain is locked (it is checked under the keychain's key; an altered one is an error).

            Examples:
              latchkey show-keychain-info
              latchkey show-keychain-info --json work
            """)

    @Flag(
        help:
            ArgumentHelp(
                "Print path, lockOnSleep, lockOnScreenLock, lockTimeout (null for none), accessPolicy,"
                    + " accessPolicyChecked, locked and heldByDaemon as JSON."))
    var json = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let target = try KeychainTarget.open(keychain, unlocked: false)
            let settings = try target.backend.settings()
            let policy = try target.backend.storedAccessPolicy()
            // The slot table, as the file holds it (the file is read here even when the daemon holds it).
            let fileSlots =
                (target.backend as? Keychain).map { try? $0.keySlots() }
                ?? (try? Keychain(opening: target.path).keySlots())
            if json {
                var object: [String: JSONValue] = [
                    "path": .string(target.path), "lockOnSleep": .bool(settings.lockOnSleep),
                    "lockOnScreenLock": .bool(settings.lockOnScreenLock),
                    "lockTimeout": settings.lockTimeout.map { .number(Int64($0)) } ?? .null,
                    "accessPolicy": .string(policy.policy.rawValue), "accessPolicyChecked": .bool(policy.checked),
                    "locked": .bool(target.backend.isLocked), "heldByDaemon": .bool(target.held != nil),
                ]
                if let fileSlots {
                    object["slots"] = .array(fileSlots.slots.map(jsonDescription))
                    object["slotTable"] = .string(describe(fileSlots.check).word)
                }
                print(JSONValue.object(object).text)
                return
            }
            var words = ["Keychain \"\(target.path)\""]
            if settings.lockOnSleep { words.append("lock-on-sleep") }
            if settings.lockOnScreenLock { words.append("lock-on-screen-lock") }
            words.append(settings.lockTimeout.map { "timeout=\($0)s" } ?? "no-timeout")
            words.append("access-policy=" + policy.policy.rawValue + (policy.checked ? "" : ",unchecked"))
            print(words.joined(separator: " "))
            // A keychain with only its password slot keeps the one line (scripts read it); --json always lists.
            if let fileSlots, fileSlots.slots.contains(where: { $0.kind != .password }) {
                for slot in fileSlots.slots { print("    slot \(describe(slot))") }
            }
        }
    }
}
