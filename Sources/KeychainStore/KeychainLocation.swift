import FoundationEssentials
import KeychainCore

/// Where keychain files live by default.
public enum KeychainLocation {
    /// `$XDG_DATA_HOME/latchkey/keychains`, with `XDG_DATA_HOME` defaulting to `~/.local/share`.
    public static func keychainDirectory(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        let dataHome: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            dataHome = xdg
        } else {
            let home = environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
            dataHome = home + "/.local/share"
        }
        return dataHome + "/latchkey/keychains"
    }

    /// The login keychain: `login.keychain-db` in ``keychainDirectory(environment:)``.
    public static func loginKeychainPath(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        loginKeychainPath(inDirectory: keychainDirectory(environment: environment))
    }

    /// The login keychain of the keychain directory `directory`.
    public static func loginKeychainPath(inDirectory directory: String) -> String {
        directory + "/login.keychain-db"
    }
}

extension KeychainLocation {
    /// The most characters of a label's escaped form a new keychain's id keeps (a file name takes 255 bytes).
    package static let maximumIDBase = 96

    /// The file of the keychain `id` in the keychain directory `directory`.
    package static func keychainPath(id: String, inDirectory directory: String) -> String {
        directory + "/\(id).keychain-db"
    }

    /// An id for a new keychain in `directory`: `base` (its first ``maximumIDBase`` characters), or `base_2`,
    /// `base_3`… when it is taken (by `login`, `session`, a file of the directory, or what `isTaken` says is,
    /// such as a keychain being made).
    package static func newKeychainID(
        from base: String, inDirectory directory: String, isTaken: (String) -> Bool = { _ in false }
    ) -> String {
        // The id names the file, and a client's label makes the base (escaped, up to three bytes for one): a long
        // label must still give a file name the file system takes. The label itself is kept whole in the file.
        let base = String(base.prefix(maximumIDBase))
        func taken(_ id: String) -> Bool {
            id == "login" || id == "session" || isTaken(id)
                || FileManager.default.fileExists(atPath: keychainPath(id: id, inDirectory: directory))
        }
        guard taken(base) else { return base }
        var number = 2
        while taken("\(base)_\(number)") { number += 1 }
        return "\(base)_\(number)"
    }
}

extension Keychain {
    /// Writes what a new keychain keeps about itself: its label (when it has one) and when it was made.
    package func recordCreation(label: String?) throws(KeychainError) {
        if let label { try setMetadata("label", Data(label.utf8)) }
        try setMetadata("created", Data(String(UInt64(Date().timeIntervalSince1970)).utf8))
    }
}
