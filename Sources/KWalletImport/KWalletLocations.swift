import FoundationEssentials
import GnomeKeyringImport

/// Where a user's KWallet files are and which wallet is the default one.
package struct KWalletLocations: Sendable, Equatable {
    /// kwalletd's wallet directory: `$XDG_DATA_HOME/kwalletd`, default `~/.local/share/kwalletd`.
    package var directory: String
    /// KDE's `kwalletrc`: `$XDG_CONFIG_HOME/kwalletrc`, default `~/.config/kwalletrc`.
    package var configuration: String

    /// The locations given directly.
    package init(directory: String, configuration: String) {
        self.directory = directory
        self.configuration = configuration
    }

    /// The locations of the user whose environment is `environment` (relative XDG directories are ignored, as
    /// the XDG specification says).
    package init(environment: [String: String]) {
        let home = environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        let data = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        self.init(directory: data + "/kwalletd", configuration: config + "/kwalletrc")
    }

    /// The wallet KDE applications open by default: kwalletrc `[Wallet] Default Wallet`, default `kdewallet`. Its
    /// items go into the login keychain. The file is read as a bounded regular file.
    package func defaultWallet() -> String {
        guard let file = try? KeyringFile.readRegularFile(configuration, atMost: 1 << 20) else { return "kdewallet" }
        return Self.defaultWallet(inConfiguration: String(decoding: file.bytes, as: UTF8.self))
    }

    /// `[Wallet] Default Wallet` of the INI text `text`, default `kdewallet`.
    package static func defaultWallet(inConfiguration text: String) -> String {
        var group = ""
        var found: String?
        func trimmed(_ text: Substring) -> Substring {
            var text = text.drop { $0 == " " || $0 == "\t" }
            while text.last == " " || text.last == "\t" { text = text.dropLast() }
            return text
        }
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = trimmed(rawLine)
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard group == "Wallet", let equals = line.firstIndex(of: "=") else { continue }
            let key = trimmed(line[..<equals])
            guard key == "Default Wallet" else { continue }
            let value = trimmed(line[line.index(after: equals)...])
            if !value.isEmpty { found = String(value) }
        }
        return found ?? "kdewallet"
    }

    /// The wallet files: `*.kwl` in ``directory``, sorted, the default wallet first.
    package func walletPaths() -> [String] {
        let first = defaultWallet()
        return KWalletFile.paths(inDirectory: directory).sorted {
            (KWalletFile.walletName(ofPath: $0) == first ? 0 : 1, $0)
                < (KWalletFile.walletName(ofPath: $1) == first ? 0 : 1, $1)
        }
    }
}
