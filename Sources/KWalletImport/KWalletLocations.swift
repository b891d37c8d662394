import FoundationEssentials
import GnomeKeyringImport
import KWalletFormat

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

    /// The wallet KDE applications open by default: kwalletrc `[Wallet] Default Wallet`, default `kdewallet`
    /// (read as the KWallet face reads it, ``KWalletrc``). Its items go into the login keychain. The file is
    /// read as a bounded regular file.
    package func defaultWallet() -> String {
        guard let file = try? KeyringFile.readRegularFile(configuration, atMost: KWalletrc.maximumFileBytes) else {
            return KWalletrc.defaultNetworkWallet
        }
        return KWalletrc(kwalletrc: String(decoding: file.bytes, as: UTF8.self)).networkWallet
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
