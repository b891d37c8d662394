import FoundationEssentials

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
