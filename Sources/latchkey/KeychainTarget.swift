import ArgumentParser
import FoundationEssentials
import Glibc
import KeySlots
import Keychain1
import KeychainClient
import KeychainCore
import KeychainStore
import Posix

/// Where keychains are and which one is the default.
enum KeychainPaths {
    /// The directory of the user's keychains.
    static var directory: String { KeychainLocation.keychainDirectory() }

    /// The login keychain.
    static var login: String { KeychainLocation.loginKeychainPath() }

    /// The file remembering the default keychain: `$XDG_CONFIG_HOME/latchkey/default-keychain`.
    static var defaultKeychainFile: String {
        let environment = ProcessInfo.processInfo.environment
        let configHome =
            environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path) + "/.config"
        return configHome + "/latchkey/default-keychain"
    }

    /// The default keychain: the one set with `default-keychain -s`, else the login keychain.
    static var defaultKeychain: String {
        guard let text = try? String(contentsOfFile: defaultKeychainFile, encoding: .utf8) else { return login }
        let path = String(text.split(whereSeparator: \.isNewline).first ?? "")
        return path.hasPrefix("/") ? path : login
    }

    /// The file a keychain argument names: a name without `/` is a keychain in
    /// ``directory`` (`work` and `work.keychain` mean `work.keychain-db`); any
    /// other argument is a path, made absolute.
    static func path(for argument: String) -> String {
        guard !argument.contains("/") else {
            return argument.hasPrefix("/") ? argument : FileManager.default.currentDirectoryPath + "/" + argument
        }
        if argument.hasSuffix(".keychain-db") { return directory + "/" + argument }
        if argument.hasSuffix(".keychain") { return directory + "/" + argument + "-db" }
        return directory + "/" + argument + ".keychain-db"
    }

    /// `argument`'s file, or the default keychain when nil.
    static func resolve(_ argument: String?) -> String {
        argument.map(path(for:)) ?? defaultKeychain
    }

    /// The path with symbolic links resolved, for comparing files; unchanged when it does not exist.
    static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Every keychain file in ``directory``, the login keychain first.
    static func keychainFiles() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".keychain-db") }
            .sorted { ($0 == "login.keychain-db" ? 0 : 1, $0) < ($1 == "login.keychain-db" ? 0 : 1, $1) }
            .map { directory + "/" + $0 }
    }
}

/// The keychain a command works on: the daemon's, when the user's latchkeyd
/// holds that file, else the file opened in this process.
struct KeychainTarget {
    /// The keychain file.
    let path: String
    /// How items are reached.
    let backend: any KeychainBackend
    /// How the daemon holds it; nil when this process opened the file.
    let held: KeychainDescription?

    /// The daemon's keychains, looked up once per command (nil: no bus, or no daemon on it). A daemon that owns
    /// the name and does not answer in time ends the command with one line: the files it holds are not opened
    /// behind its back.
    static func daemonKeychains() -> [KeychainDescription]? {
        do throws(KeychainError) {
            return try DaemonKeychain.listIfRunning()
        } catch {
            StandardError.write("latchkey: \(error.reason)")
            Latchkey.exit(withError: ExitCode.failure)
        }
    }

    /// Opens the keychain `argument` names (the default one when nil). With
    /// `unlocked`, a locked keychain is unlocked first, asking for its password.
    static func open(_ argument: String?, unlocked: Bool) throws(KeychainError) -> KeychainTarget {
        let path = KeychainPaths.resolve(argument)
        let target = try reach(path, daemonKeychains: daemonKeychains())
        if unlocked { try target.unlock() }
        return target
    }

    /// The daemon's keychain when it holds `path`, else the file.
    static func reach(_ path: String, daemonKeychains: [KeychainDescription]?) throws(KeychainError) -> KeychainTarget {
        let canonical = KeychainPaths.canonical(path)
        if let held = daemonKeychains?.first(where: {
            !$0.file.isEmpty && KeychainPaths.canonical($0.file) == canonical
        }),
            let daemon = DaemonKeychain.connect(collection: held.id)
        {
            // Answered once: the daemon has identified this connection.
            SecretsAhead.prepare()
            return KeychainTarget(path: path, backend: daemon, held: held)
        }
        SecretsAhead.prepare()
        do {
            return KeychainTarget(path: path, backend: try Keychain(opening: path), held: nil)
        } catch  where error.status == .noSuchKeychain {
            throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
        }
    }

    /// Unlocks the keychain if it is locked: the daemon's with a password
    /// sent to it, a file in this process (where it stays unlocked only
    /// until the command ends). A keychain protected by the login keychain
    /// is opened by unlocking the login keychain.
    func unlock() throws(KeychainError) {
        guard backend.isLocked else { return }
        if let held {
            switch held.protection {
            case .password:
                try Self.askUntilUnlocked(path) { (password) throws(KeychainError) in
                    try backend.unlock(withPassword: password)
                }
            case .loginKeychain:
                guard let login = DaemonKeychain.connect(collection: "login") else {
                    throw KeychainError(
                        .interactionNotAllowed, "the daemon holds no login keychain to open \(path) with")
                }
                if login.isLocked {
                    let loginPath = (try? login.describe().file) ?? KeychainPaths.login
                    try Self.askUntilUnlocked(loginPath) { (password) throws(KeychainError) in
                        try login.unlock(withPassword: password)
                    }
                }
                try backend.unlock(withPassword: [])
            case .memory:
                throw KeychainError(.interactionNotAllowed, "the daemon's session keychain is locked")
            }
            return
        }
        guard let file = backend as? Keychain else { return }
        if let parent = file.parentIdentifier {
            let loginPath = KeychainLocation.loginKeychainPath(
                inDirectory: String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]))
            guard let login = try? Keychain(opening: loginPath), login.identifier == parent else {
                throw KeychainError(
                    .noSuchKeychain, "\(path) opens with the login keychain beside it, and \(loginPath) is not that one"
                )
            }
            try Self.askUntilUnlocked(loginPath) { (password) throws(KeychainError) in
                try login.unlock(password: password)
            }
            try file.unlock(using: login)
            login.lock()
        } else {
            // A tpm2 slot without a PIN opens the file with no password (a TPM that refuses: the password).
            if TPMSlot.kinds(of: file).withoutPIN, let key = try? TPMSlot.unwrapKey(file, pin: nil) {
                return file.unlock(with: key)
            }
            // A security key that holds one of its fido2 slots: a touch (and its PIN); else the password.
            if let key = unlockWithSecurityKey(file) { return file.unlock(with: key) }
            try Self.askUntilUnlocked(path) { (password) throws(KeychainError) in try file.unlock(password: password) }
        }
    }

    /// Asks for the password of `path` and tries it, three times at most.
    static func askUntilUnlocked(_ path: String, _ attempt: ([UInt8]) throws(KeychainError) -> Void)
        throws(KeychainError)
    {
        var complaint: String?
        for _ in 0..<3 {
            var password = try SecretInput.keychainPassword(for: path, error: complaint)
            defer { wipeBytes(&password) }
            do {
                try attempt(password)
                return
            } catch  where error.status == .authFailed {
                if error.reason.hasPrefix("too many") { throw error }
            }
            complaint = "wrong password; try again"
        }
        throw KeychainError(.authFailed, "three wrong passwords for \(path)")
    }
}
