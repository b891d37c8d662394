import FoundationEssentials
import KeychainStore

/// What the daemon imports at login, with the login password PAM verified.
package enum GnomeKeyringLoginImport {
    /// gnome-keyring's name for a keyring file in the unlock-password items of the login keyring.
    static let keyringPrefix = "LOCAL:/keyrings/"

    /// Imports into `keychain` (unlocked) the gnome-keyring files in `directory` not imported before:
    /// `login.keyring` with `password` (gnome-keyring kept it under the login password), then every other
    /// keyring with the password gnome-keyring kept for it in the login keyring ("Unlock password for …",
    /// attribute `keyring` = `LOCAL:/keyrings/NAME.keyring`), or with none (a keyring without a password).
    /// A keyring it cannot open, or one that fails, is left for later (`latchkey migration-status` lists
    /// it); each import is one transaction. The number of items added.
    package static func run(directory: String, password: [UInt8], into keychain: Keychain) -> Int {
        let loginPath = directory + "/login.keyring"
        var added = 0
        var keptPasswords: [String: [UInt8]] = [:]
        if let file = try? KeyringFile(path: loginPath), let keyring = try? file.keyring(password: password) {
            added += importing(keyring, from: file, into: keychain)
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
            added += importing(keyring, from: file, into: keychain)
        }
        return added
    }

    private static func importing(_ keyring: GnomeKeyring, from file: KeyringFile, into keychain: Keychain) -> Int {
        guard case .imported(let record)? = try? GnomeKeyringImporter.importKeyring(keyring, from: file, into: keychain)
        else { return 0 }
        return record.added
    }
}
