import KeychainStore
import Posix

/// The import of the one wallet a `pamOpen` key opens (docs/kwallet.md, "Locking and prompts, as built").
extension KWalletLoginImport {
    /// Opens the wallet `wallet` with `key`, the 56-byte PBKDF2 key pam_kwallet hands to kwalletd's `pamOpen`, for
    /// the import into the login keychain. Nothing when `wallet` is not kwalletrc's default wallet (the one that
    /// goes into the login keychain: no keychain is ever made for it), the key is not 56 bytes, the wallet's file
    /// has no salt (a legacy wallet's key is not PBKDF2's), it was imported before into any of `keychains`, or the
    /// key does not open it. The key only decrypts that one file. Run it off the serving thread (it reads a file
    /// another program may have placed).
    package static func plan(
        wallet: String, key: SharedSecret, locations: KWalletLocations, keychains: [Keychain]
    ) -> [OpenedWallet] {
        guard wallet == locations.defaultWallet(), key.count == KWalletCrypto.pbkdf2KeyLength,
            let path = locations.walletPaths().first(where: { KWalletFile.walletName(ofPath: $0) == wallet }),
            let file = try? KWalletFile(path: path), file.needsSalt,
            KWalletImporter.earlierImport(of: file, in: keychains) == nil,
            let contents = try? file.open(key: key.bytes)
        else { return [] }
        return [
            OpenedWallet(
                file: file, contents: contents, attributes: KWalletAttributes(besides: file), destination: .login)
        ]
    }
}
