import FoundationEssentials

/// The file `aliases` in a keychain directory: the daemon's Secret Service aliases (`default`, …), one
/// `NAME=ID` line each, ID being a collection's id (its file name without `.keychain-db`).
package enum CollectionAliases {
    /// The file's path in the keychain directory `directory`.
    package static func path(inDirectory directory: String) -> String { directory + "/aliases" }

    /// The aliases saved in `directory` (none when the file is missing or unreadable).
    package static func load(inDirectory directory: String) -> [String: String] {
        guard let text = try? String(contentsOfFile: path(inDirectory: directory), encoding: .utf8) else { return [:] }
        var aliases: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            aliases[parts[0]] = parts[1]
        }
        return aliases
    }

    /// Replaces the aliases saved in `directory` (made 0700 if missing), atomically.
    package static func save(_ aliases: [String: String], inDirectory directory: String) {
        let text = aliases.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)\n" }.joined()
        try? FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try? text.write(toFile: path(inDirectory: directory), atomically: true, encoding: .utf8)
    }
}
