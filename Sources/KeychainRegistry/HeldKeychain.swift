import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// One keychain the daemon holds: its file (or memory), how it unlocks, its label, dates and lock settings.
/// The Secret Service shows it as a collection; `org.latchkey.Keychain1` as a keychain.
package final class HeldKeychain {
    /// How a locked keychain is opened.
    package enum Unlocking {
        /// With the login password (the login keychain).
        case loginPassword
        /// With the key of the login keychain, while it is unlocked (collections made by clients).
        case loginKey
        /// With a random password the daemon holds (the in-memory session collection).
        case heldPassword(SharedSecret)
        /// With a password of its own (a collection made by `CreateWithMasterPassword`, or given one by a
        /// password change).
        case ownPassword
    }

    /// The id: `login`, `session`, or the path element of a client-made collection.
    package let id: String
    /// The store.
    package let keychain: Keychain
    /// How it unlocks (a password change gives a collection under the login key a password of its own).
    package internal(set) var unlocking: Unlocking
    /// Its label.
    package internal(set) var label: String
    /// When it was made (Unix seconds).
    package let created: UInt64
    /// The last change made through this daemon, else the file's modification time (Unix seconds).
    package private(set) var modified: UInt64
    /// When it locks by itself (read from the file, changed through ``KeychainRegistry/setSettings(_:of:)``).
    /// Read while locked they are as the file holds them; they are checked under the key once it is unlocked
    /// (``KeychainSettings/afterTampering`` when the check fails), before they are first applied.
    package internal(set) var settings: KeychainSettings {
        didSet { settingsChecked = !isLocked }
    }
    /// Whether ``settings`` were read or set while unlocked, so checked.
    private var settingsChecked = false
    /// How many times it was locked: a key derived across a lock is not installed (the lock wins).
    var locks = 0
    /// When a client last used it (nanoseconds on ``clock``, down to the whole second), for the lock timeout.
    private(set) var lastUse: Int64
    /// Where "now" is read (the registry's clock).
    private let clock: RegistryClock

    /// Whether the key is out of memory.
    package var isLocked: Bool { keychain.isLocked }

    /// Whether `reference` reads as locked: its keychain is locked and the key of the item's accessibility class
    /// did not outlast the lock (an `AfterFirstUnlock` item reads as unlocked in a locked keychain).
    package func isLocked(_ reference: ItemReference) -> Bool {
        keychain.isLocked && !keychain.isReadable(reference)
    }

    /// Of `references`, those that read as unlocked (all of them while the keychain is unlocked).
    package func readable(among references: [ItemReference]) -> Set<ItemReference> {
        keychain.isLocked ? (try? keychain.readable(among: references)) ?? [] : Set(references)
    }

    init(id: String, keychain: Keychain, unlocking: Unlocking, label: String, clock: RegistryClock) {
        self.id = id
        self.clock = clock
        self.keychain = keychain
        self.unlocking = unlocking
        self.label = label
        let attributes = try? FileManager.default.attributesOfItem(atPath: keychain.path)
        let now = UInt64(Date().timeIntervalSince1970)
        let createdMetadata = (try? keychain.metadata("created")).flatMap { String(decoding: $0, as: UTF8.self) }
        self.created = createdMetadata.flatMap(UInt64.init) ?? now
        self.modified = (attributes?[.modificationDate] as? Date).map(StorableDates.unsignedSeconds) ?? now
        self.settings = Self.storedSettings(of: keychain)
        self.lastUse = Self.wholeSeconds(clock.nanoseconds())
        self.settingsChecked = !keychain.isLocked
        // Checkpoints after deletes run on the worker (`KeychainRegistry.runTimers`), not in the serving loop.
        keychain.deferCheckpoints()
    }

    /// The settings in the file (checked when unlocked); ``KeychainSettings/afterTampering`` when they fail.
    private static func storedSettings(of keychain: Keychain) -> KeychainSettings {
        do {
            return try keychain.settings()
        } catch  where error.status == .decode {
            return .afterTampering
        } catch {
            return KeychainSettings()
        }
    }

    /// The settings to apply now: read again and checked the first time they are needed while unlocked.
    package var appliedSettings: KeychainSettings {
        if !settingsChecked, !isLocked { settings = Self.storedSettings(of: keychain) }
        return settings
    }

    /// Notes a use: the lock timeout counts from the last one.
    package func markUsed() {
        lastUse = Self.wholeSeconds(clock.nanoseconds())
    }

    /// Notes a change of its items now.
    package func touch() {
        modified = UInt64(Date().timeIntervalSince1970)
    }

    /// `nanoseconds` down to the whole second: the lock timeout counts whole seconds from the second of the last
    /// use, as it did on the monotonic clock's seconds (a 1 s timeout locks at the next second's start, however
    /// often the keychain was read within the second before).
    private static func wholeSeconds(_ nanoseconds: Int64) -> Int64 {
        nanoseconds - nanoseconds % 1_000_000_000
    }

    /// When the lock timeout locks it (nanoseconds on the registry's clock), nil if it never does.
    var lockDeadline: Int64? {
        if case .heldPassword = unlocking { return nil }
        guard !isLocked, let timeout = appliedSettings.lockTimeout else { return nil }
        return lastUse + RegistryClock.nanoseconds(.seconds(Int64(timeout)))
    }
}
