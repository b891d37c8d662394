import FoundationEssentials
import KeychainStore

/// The keyrings a login can import, each opened and with where it goes.
package struct LoginImportPlan: Sendable {
    /// One keyring to import.
    package struct Entry: Sendable {
        /// The file it was read from.
        package var file: KeyringFile
        /// Its items.
        package var keyring: GnomeKeyring
        /// Where they go.
        package var destination: KeyringDestination
    }

    /// The keyrings to import, `login.keyring` first.
    package var entries: [Entry] = []
    /// The keyring gnome-keyring's `default` alias names (a path), if any.
    package var defaultKeyring: String?
}

/// What the daemon imports at login, with the login password PAM verified.
package enum GnomeKeyringLoginImport {
    /// gnome-keyring's name for a keyring file in the unlock-password items of the login keyring.
    static let keyringPrefix = "LOCAL:/keyrings/"

    /// Opens the gnome-keyring files in `directory` not imported before into any of `keychains` (the
    /// login keychain, at `login`, and the collections its key wraps): `login.keyring` with `password`
    /// (gnome-keyring kept it under the login password), then every other keyring with the password
    /// gnome-keyring kept for it in the login keyring ("Unlock password for …", attribute `keyring` =
    /// `LOCAL:/keyrings/NAME.keyring`), or with none (a keyring without a password). A keyring it cannot
    /// read or open is left for later (`latchkey migration-status` lists it). Slow: run it off the
    /// serving thread.
    package static func plan(
        directory: String, password: [UInt8], login: String, keychains: [RecordedKeychain]
    ) -> LoginImportPlan {
        var plan = LoginImportPlan(defaultKeyring: GnomeKeyringImporter.defaultKeyringPath(inDirectory: directory))
        func add(_ file: KeyringFile, _ keyring: GnomeKeyring) {
            guard GnomeKeyringImporter.earlierImport(of: file, in: keychains) == nil else { return }
            let destination = GnomeKeyringImporter.destination(
                of: file, named: keyring.name, login: login, among: keychains)
            plan.entries.append(.init(file: file, keyring: keyring, destination: destination))
        }
        let loginPath = directory + "/login.keyring"
        var keptPasswords: [String: [UInt8]] = [:]
        if let file = try? KeyringFile(path: loginPath), let keyring = try? file.keyring(password: password) {
            add(file, keyring)
            for item in keyring.items {
                guard let name = item.attributes["keyring"], name.hasPrefix(keyringPrefix) else { continue }
                keptPasswords[directory + "/" + name.dropFirst(keyringPrefix.count)] = item.secret
            }
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names.sorted() where name.hasSuffix(".keyring") && name != "login.keyring" {
            let path = directory + "/" + name
            guard let file = try? KeyringFile(path: path),
                let keyring = try? file.keyring(password: keptPasswords[path] ?? [])
            else { continue }
            add(file, keyring)
        }
        return plan
    }

    /// Imports one planned keyring into `keychain` (unlocked), in one transaction with its record; nil
    /// when it failed (the keychain is left as it was). Slow: run it off the serving thread.
    package static func run(_ entry: LoginImportPlan.Entry, into keychain: Keychain) -> ImportOutcome? {
        try? GnomeKeyringImporter.importKeyring(entry.keyring, from: entry.file, into: keychain)
    }
}
