import FoundationEssentials
import KeychainStore
import Posix

/// A wallet the login password opened, ready to be written: the file, its decrypted contents (in secure memory,
/// never changed after it is made, so it may cross threads), the attributes kwalletd5's Secret Service kept, and
/// where it goes.
package final class OpenedWallet: @unchecked Sendable {
    /// The wallet file.
    package let file: KWalletFile
    /// Its entries.
    package let contents: KWalletContents
    /// `NAME_attributes.json` beside it.
    package let attributes: KWalletAttributes
    /// Where its entries go.
    package let destination: KWalletDestination

    /// A wallet opened and placed.
    package init(
        file: KWalletFile, contents: consuming KWalletContents, attributes: KWalletAttributes,
        destination: KWalletDestination
    ) {
        self.file = file
        self.contents = contents
        self.attributes = attributes
        self.destination = destination
    }
}

/// What the daemon imports at login: every wallet with a salt file that the login password opens (pam_kwallet's
/// case, where the wallet password is the login password).
package enum KWalletLoginImport {
    /// Opens, with the login `password`, each wallet of `locations` that has a salt file and is not recorded as
    /// imported in any of `keychains` (the login keychain and the collections beside it). A wallet that cannot be
    /// read or opened is left for `latchkey import-kwallet` (`latchkey migration-status` lists it). Files are read
    /// as bounded regular files (a FIFO named `x.kwl` is refused at once). Slow (PBKDF2): run it off the serving
    /// thread.
    package static func plan(locations: KWalletLocations, password: SharedSecret, keychains: [Keychain])
        -> [OpenedWallet]
    {
        let defaultWallet = locations.defaultWallet()
        var opened: [OpenedWallet] = []
        for path in locations.walletPaths() {
            guard let file = try? KWalletFile(path: path), file.needsSalt,
                KWalletImporter.earlierImport(of: file, in: keychains) == nil,
                let salt = try? file.salt(),
                let key = try? password.withUnsafeBytes({ (bytes) throws(KWalletError) in
                    try file.key(password: bytes, salt: salt)
                }),
                let contents = try? file.open(key: key)
            else { continue }
            opened.append(
                OpenedWallet(
                    file: file, contents: contents, attributes: KWalletAttributes(besides: file),
                    destination: KWalletDestination(wallet: file.walletName, defaultWallet: defaultWallet)))
        }
        return opened
    }

    /// Imports one opened wallet into `keychain` (unlocked), in one transaction with its record; nil when it failed
    /// (the keychain is left as it was). Run it off the serving thread.
    package static func run(_ wallet: OpenedWallet, into keychain: Keychain) -> KWalletImportOutcome? {
        try? KWalletImporter.importWallet(
            wallet.contents, from: wallet.file, attributes: wallet.attributes, into: keychain)
    }
}
