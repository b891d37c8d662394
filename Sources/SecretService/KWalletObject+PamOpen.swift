import Posix

/// `pamOpen` (docs/kwallet.md §5 and "Locking and prompts, as built").
extension KWalletObject {
    /// `pamOpen(wallet, hash, timeout)`: the hash may only decrypt the one `.kwl` whose salt made it, for the import.
    /// When `wallet` is kwalletrc's local wallet, the login keychain is unlocked and that wallet was not imported,
    /// it is imported with the hash (``UserLogin/importKWallet(named:key:)``, off the serving thread); otherwise
    /// nothing. Never unlocks, makes or changes a keychain's key; the caller's bytes are wiped either way.
    func pamOpen(_ wallet: String, hash: [UInt8]) {
        defer { wipeSharedStorage(of: hash) }
        guard wallet == sessions.names.localWallet, daemon.registry.login?.isLocked == false,
            let key = try? SharedSecret(copying: hash)
        else { return }
        daemon.registry.userLogin.importKWallet(named: wallet, key: key)
    }
}
