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
    /// `LOCAL:/keyrings/NAME.keyring`), or with none (a keyring without a password). Then, with
    /// `flatpakApps` (`~/.var/app`), each Flatpak app's libsecret file
    /// (`<app id>/data/keyrings/default.keyring`) whose key gnome-keyring's Secret portal kept in the
    /// login keyring (an item with attribute `app_id`). A keyring it cannot read or open is left for
    /// later (`latchkey migration-status` lists it). Slow: run it off the serving thread.
    package static func plan(
        directory: String, password: [UInt8], login: String, keychains: [RecordedKeychain],
        flatpakApps: String? = nil
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
        var portalSecrets: [(app: String, secret: [UInt8])] = []
        if let file = try? KeyringFile(path: loginPath), let keyring = try? file.keyring(password: password) {
            add(file, keyring)
            for item in keyring.items {
                if let app = item.attributes["app_id"], isFlatpakAppID(app) { portalSecrets.append((app, item.secret)) }
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
        if let flatpakApps {
            for (app, secret) in portalSecrets.sorted(by: { $0.app < $1.app }) {
                let path = flatpakApps + "/" + app + "/data/keyrings/default.keyring"
                guard FileManager.default.fileExists(atPath: path), let file = try? KeyringFile(path: path),
                    file.format == .libsecretFile, let keyring = try? file.keyring(password: secret)
                else { continue }
                add(file, keyring)
            }
        }
        return plan
    }

    /// Whether `text` can be a Flatpak application id (and so a directory name): letters, digits, `_`,
    /// `-` and `.`, not starting with a dot.
    static func isFlatpakAppID(_ text: String) -> Bool {
        !text.isEmpty && !text.hasPrefix(".") && text.utf8.count <= 255
            && text.unicodeScalars.allSatisfy {
                $0.isASCII
                    && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "_-.".unicodeScalars.contains($0))
            }
    }

    /// Imports one planned keyring into `keychain` (unlocked), in one transaction with its record; nil
    /// when it failed (the keychain is left as it was). Slow: run it off the serving thread.
    package static func run(_ entry: LoginImportPlan.Entry, into keychain: Keychain) -> ImportOutcome? {
        try? GnomeKeyringImporter.importKeyring(entry.keyring, from: entry.file, into: keychain)
    }
}
