import FoundationEssentials
import GnomeKeyringImport
import KeychainCore
import KeychainStore
import Posix

/// The import at login: gnome-keyring's keyrings and Flatpak apps' libsecret files, opened with the password a
/// login handed over (docs/gnome-keyring-import.md).
extension UserLogin {
    /// Imports gnome-keyring's keyrings not imported before, with the login password a login handed over
    /// (see `GnomeKeyringLoginImport`): the files are read and opened on a thread of their own (not the
    /// worker: files another program, or a Flatpak app, may have placed there, and the opening of each keyring,
    /// must never hold up the key derivations of later unlocks); back here each keyring other than
    /// `login.keyring` gets a collection of its own under the login key (made as `CreateCollection` makes one,
    /// labelled with the keyring's name); the items are written on the worker, one transaction per keyring;
    /// the faces hear of the new collections and items, and the keyring gnome-keyring's `default` file names
    /// becomes the `default` alias. One import at a time: a login while one runs starts none.
    func importGnomeKeyrings(password: SharedSecret) {
        importKWallets(password: password)
        guard let directory = configuration.gnomeKeyringDirectory, let login, !isImportingGnomeKeyrings else { return }
        let loginPath = login.keychain.path
        let flatpakApps = configuration.flatpakAppDirectory
        let held = registry.keychains.filter { $0.id != KeychainRegistry.sessionID }.map(\.keychain)
        isImportingGnomeKeyrings = true
        registry.offLoop(
            onOwnThread: true,
            {
                // The importer takes an array (the keyring readers work on arrays): a copy, wiped after.
                var copy = password.withUnsafeBytes { [UInt8]($0) }
                defer { wipeBytes(&copy) }
                return GnomeKeyringLoginImport.plan(
                    directory: directory, password: copy, login: loginPath,
                    keychains: held.map { RecordedKeychain(path: $0.path, keychain: $0) }, flatpakApps: flatpakApps)
            },
            then: { [self] plan in placeImports(plan) })
    }

    /// Finds or makes the keychain of each planned keyring, then imports them on the worker (the import is
    /// over when they are written).
    private func placeImports(_ plan: LoginImportPlan) {
        var placed: [(entry: LoginImportPlan.Entry, held: HeldKeychain)] = []
        for entry in plan.entries {
            let target: HeldKeychain?
            switch entry.destination {
            case .login:
                target = login
            case .keychain(let path):
                target = registry.keychains.first { $0.keychain.path == path }
            case .newCollection(let label):
                target = try? registry.createKeychain(
                    label: label, pathElement: GnomeKeyringImporter.collectionID(forLabel:))
                try? target?.keychain.setMetadata(GnomeKeyringImporter.sourceName, Data(entry.file.path.utf8))
            }
            // Locked meanwhile (the session closed): left for the next login.
            guard let target, !target.isLocked else { continue }
            placed.append((entry, target))
        }
        guard !placed.isEmpty else {
            isImportingGnomeKeyrings = false
            return
        }
        let jobs = placed.map { ($0.entry, $0.held.keychain) }
        registry.offLoop(
            { jobs.map { GnomeKeyringLoginImport.run($0.0, into: $0.1) } },
            then: { [self] outcomes in
                isImportingGnomeKeyrings = false
                for ((entry, held), outcome) in zip(placed, outcomes) {
                    guard case .imported(let record)? = outcome, registry.keychains.contains(where: { $0 === held })
                    else {
                        continue
                    }
                    if record.added > 0 {
                        held.touch()
                        registry.announce(.itemsAdded(held))
                    }
                    // The first import of the keyring gnome-keyring's `default` names: it is the default here too.
                    if case .newCollection = entry.destination, entry.file.path == plan.defaultKeyring {
                        registry.setAlias("default", to: held)
                    }
                }
            })
    }
}
