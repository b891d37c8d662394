import KWalletImport
import Posix

/// The import of kwalletrc's default wallet with the key a `pamOpen` call carries (docs/kwallet.md, "Locking and
/// prompts, as built").
extension UserLogin {
    /// Imports the wallet `wallet` with `key` (``KWalletLoginImport/plan(wallet:key:locations:keychains:)``) into
    /// the login keychain, when it is unlocked and no import runs: opened on a thread of its own, written on the
    /// worker as the import at login is. Never unlocks, makes or re-keys a keychain: with the login keychain
    /// locked, nothing happens. The key is dropped (wiped) once the wallet is opened or not.
    package func importKWallet(named wallet: String, key: SharedSecret) {
        guard let locations = configuration.kwallet, login?.isLocked == false, !isImportingKWallets else { return }
        let held = registry.keychains.filter { $0.id != KeychainRegistry.sessionID }.map(\.keychain)
        isImportingKWallets = true
        registry.offLoop(
            onOwnThread: true,
            { KWalletLoginImport.plan(wallet: wallet, key: key, locations: locations, keychains: held) },
            then: { [self] wallets in placeWallets(wallets) })
    }
}
