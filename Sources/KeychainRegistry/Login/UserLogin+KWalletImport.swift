import FoundationEssentials
import GnomeKeyringImport
import KWalletImport
import KeychainStore
import Posix

/// The import at login of KWallet's wallets the login password opens (docs/kwallet.md §5).
extension UserLogin {
    /// Imports the wallets of `configuration.kwallet` not imported before that the login password opens (see
    /// `KWalletLoginImport`): read and opened on a thread of their own (files another program may have placed
    /// there, and 50,000 PBKDF2 rounds per wallet, must never hold up the serving thread or the worker's key
    /// derivations); back here the default wallet (kwalletrc `Default Wallet`) goes into the login keychain and
    /// every other into the collection labelled with its name, made under the login key when there is none; the
    /// items are written on the worker, one transaction per wallet, and the faces hear of them. One import at a
    /// time: a login while one runs starts none.
    func importKWallets(password: SharedSecret) {
        guard let locations = configuration.kwallet, login != nil, !isImportingKWallets else { return }
        let held = registry.keychains.filter { $0.id != KeychainRegistry.sessionID }.map(\.keychain)
        isImportingKWallets = true
        registry.offLoop(
            onOwnThread: true,
            { KWalletLoginImport.plan(locations: locations, password: password, keychains: held) },
            then: { [self] wallets in placeWallets(wallets) })
    }

    /// Finds or makes each opened wallet's keychain, then imports them on the worker.
    func placeWallets(_ wallets: [OpenedWallet]) {
        var placed: [(wallet: OpenedWallet, held: HeldKeychain)] = []
        for wallet in wallets {
            let target: HeldKeychain?
            switch wallet.destination {
            case .login:
                target = login
            case .collection(let label):
                target =
                    registry.keychains.first {
                        $0.id != KeychainRegistry.sessionID && $0 !== login && $0.label == label
                    }
                    ?? (try? registry.createKeychain(
                        label: label, pathElement: GnomeKeyringImporter.collectionID(forLabel:)))
            }
            // Locked meanwhile (the session closed): left for the next login.
            guard let target, !target.isLocked else { continue }
            placed.append((wallet, target))
        }
        guard !placed.isEmpty else {
            isImportingKWallets = false
            return
        }
        let jobs = placed.map { ($0.wallet, $0.held.keychain) }
        registry.offLoop(
            { jobs.map { KWalletLoginImport.run($0.0, into: $0.1) } },
            then: { [self] outcomes in
                isImportingKWallets = false
                for ((_, held), outcome) in zip(placed, outcomes) {
                    guard case .imported(let record)? = outcome, record.added > 0,
                        registry.keychains.contains(where: { $0 === held })
                    else { continue }
                    held.touch()
                    registry.announce(.itemsAdded(held))
                }
            })
    }
}
