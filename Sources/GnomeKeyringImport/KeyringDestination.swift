import FoundationEssentials
import Glibc
import KeychainCore
import KeychainStore

/// A keychain and the gnome-keyring imports recorded in it.
package struct RecordedKeychain: Sendable {
    /// The keychain file.
    package var path: String
    /// The keychain (opened; its records are readable while it is locked).
    package var keychain: Keychain
    /// The imports recorded in it.
    package var records: [ImportRecord]
    /// The keyring file a collection was made for (metadata ``GnomeKeyringImporter/sourceName``), if any.
    package var source: String?

    /// Reads the records and the source of `keychain`; a keychain whose records cannot be read has none.
    package init(path: String, keychain: Keychain) {
        self.path = path
        self.keychain = keychain
        self.records = (try? GnomeKeyringImporter.records(in: keychain)) ?? []
        self.source = (try? keychain.metadata(GnomeKeyringImporter.sourceName)).map {
            String(decoding: $0, as: UTF8.self)
        }
    }
}

/// Where a keyring's items go: each keyring becomes a collection of its own, as it was one in
/// gnome-keyring, except `login.keyring`, whose items go into the login keychain.
package enum KeyringDestination: Sendable, Equatable {
    /// The login keychain (`login.keyring`).
    case login
    /// The keychain file at this path: the one an earlier import of this keyring went to.
    case keychain(String)
    /// A new collection under the login keychain, labelled with the keyring's name.
    case newCollection(label: String)
}

extension GnomeKeyringImporter {
    /// The metadata row of a collection made for a keyring: the keyring file's path.
    package static let sourceName = "gnome-keyring-source"

    /// Whether `path` is gnome-keyring's login keyring.
    package static func isLoginKeyring(_ path: String) -> Bool {
        path.split(separator: "/").last == "login.keyring"
    }

    /// The earlier import of this very file (same path and contents) in any of `keychains`.
    package static func earlierImport(of file: KeyringFile, in keychains: [RecordedKeychain]) -> ImportRecord? {
        keychains.lazy.compactMap { earlierImport(of: file, in: $0.records) }.first
    }

    /// Where the items of `keyring`, read from `file`, go when `login` is the login keychain's path and
    /// `keychains` are the login keychain and the collections beside it: the login keychain for
    /// `login.keyring`; the keychain an earlier import of the same path went to (or that was made for
    /// it); else a new collection.
    package static func destination(
        of file: KeyringFile, named name: String, login: String, among keychains: [RecordedKeychain]
    ) -> KeyringDestination {
        if isLoginKeyring(file.path) { return .login }
        if let earlier = keychains.last(where: { $0.records.contains { $0.path == file.path } }) {
            return earlier.path == login ? .login : .keychain(earlier.path)
        }
        if let made = keychains.last(where: { $0.source == file.path }) { return .keychain(made.path) }
        return .newCollection(label: name)
    }

    /// The keyring gnome-keyring's `default` alias names (the file `default` in its keyrings directory
    /// holds a keyring's file name without `.keyring`), as the path of that keyring; nil when none.
    package static func defaultKeyringPath(inDirectory directory: String) -> String? {
        // As a keyring file is read: a FIFO or a link to a device here must not block the import either.
        guard let file = try? KeyringFile.readRegularFile(directory + "/default", atMost: 4096) else { return nil }
        let name = String(decoding: file.bytes, as: UTF8.self).filter { !$0.isWhitespace }
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else { return nil }
        return directory + "/" + name + ".keyring"
    }

    /// An id for a keychain file and object path made from a collection's label: ASCII letters and
    /// digits and `_` are kept, the rest dropped; `keyring` when nothing is left.
    package static func collectionID(forLabel label: String) -> String {
        let kept = String(
            label.lowercased().unicodeScalars.filter {
                $0 == "_" || ($0.isASCII && $0.properties.isAlphabetic) || ("0"..."9").contains($0)
            })
        return kept.isEmpty ? "keyring" : kept
    }

    /// The collections of the keychain directory `directory` whose key the login keychain `login`
    /// wraps, with their records, the login keychain first.
    package static func recordedKeychains(login: Keychain, inDirectory directory: String) -> [RecordedKeychain] {
        var found = [RecordedKeychain(path: login.path, keychain: login)]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names.sorted() where name.hasSuffix(".keychain-db") {
            let path = directory + "/" + name
            guard path != login.path, let keychain = try? Keychain(opening: path),
                keychain.parentIdentifier == login.identifier
            else { continue }
            found.append(RecordedKeychain(path: path, keychain: keychain))
        }
        return found
    }

    /// Makes, in `directory`, a collection for the keyring at `source` labelled `label` whose key the
    /// (unlocked) login keychain wraps, as the daemon makes one for `CreateCollection`: the file
    /// `ID.keychain-db` (``collectionID(forLabel:)``, numbered when taken), its label and creation time.
    /// Used when no daemon holds the login keychain. Returns it unlocked.
    package static func createCollection(
        label: String, source: String, inDirectory directory: String, protectedBy login: Keychain
    ) throws(KeychainError) -> Keychain {
        let id = KeychainLocation.newKeychainID(from: collectionID(forLabel: label), inDirectory: directory)
        let keychain = try Keychain.create(
            at: KeychainLocation.keychainPath(id: id, inDirectory: directory), protectedBy: login)
        try keychain.recordCreation(label: label)
        try keychain.setMetadata(sourceName, Data(source.utf8))
        return keychain
    }
}
