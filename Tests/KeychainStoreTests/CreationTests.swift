import Foundation
import KeychainCore
import KeychainStore
import Synchronization
import Testing

/// A keychain file is seen by other processes (the daemon, the command, pam_latchkey, a fixture writing its access
/// policy) only once it is complete: `Keychain.create` builds it under a private name beside its path and puts it
/// in place in one step, and opening never writes into a file that is not a keychain yet.
@Suite struct CreationTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.file("keychains/new.keychain-db")
    }

    /// Set once a background creation has returned.
    final class Finished: Sendable {
        let done = Atomic<Bool>(false)
    }

    /// What another process finds at `path` while `create` runs (with the production KDF, a few hundred
    /// milliseconds in which the key is derived), looked at as often as it can.
    func observeWhileCreating(
        _ create: @escaping @Sendable () throws -> Void, complete: @escaping (Keychain) -> Bool
    ) throws -> (sightings: Int, failures: [String]) {
        let finished = Finished()
        let creation = Thread {
            defer { finished.done.store(true, ordering: .sequentiallyConsistent) }
            do { try create() } catch { Issue.record("the creation failed: \(error)") }
        }
        creation.start()
        var sightings = 0
        var failures: [String] = []
        while !finished.done.load(ordering: .sequentiallyConsistent) {
            if FileManager.default.fileExists(atPath: path) {
                sightings += 1
                do {
                    let opened = try Keychain(opening: path)
                    if !complete(opened) { failures.append("a keychain without its header") }
                } catch {
                    failures.append("\(error)")
                }
            }
            usleep(1_000)
        }
        return (sightings, failures)
    }

    @Test func aKeychainBeingCreatedIsNeverSeenIncomplete() throws {
        let path = path
        let seen = try observeWhileCreating(
            { _ = try Keychain.create(at: path, password: "pw") }, complete: { $0.kdfParameters == .production })
        #expect(seen.failures.isEmpty, "\(seen.failures.count) of \(seen.sightings): \(seen.failures.prefix(2))")
        let keychain = try Keychain(opening: path)
        try keychain.unlock(password: "pw")
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("s".utf8))
        #expect(try keychain.count() == 1)
        #expect(try leftovers().isEmpty, "the private file of the creation is gone")
    }

    @Test func aKeychainUnderAParentIsNeverSeenIncomplete() throws {
        let parent = try Keychain.create(at: directory.file("keychains/login.keychain-db"), password: "pw")
        let path = path
        // Under a parent the key is not derived: the creation is quick, so it is repeated.
        for round in 0..<20 {
            Keychain.removeFiles(at: path)
            let seen = try observeWhileCreating(
                { _ = try Keychain.create(at: path, protectedBy: parent) },
                complete: { $0.parentIdentifier == parent.identifier })
            #expect(seen.failures.isEmpty, "round \(round): \(seen.failures.prefix(2))")
        }
        let child = try Keychain(opening: path)
        try child.unlock(using: parent)
        #expect(try leftovers().isEmpty)
    }

    @Test func openingAFileThatIsNotAKeychainYetWritesNothingInIt() throws {
        try FileManager.default.createDirectory(
            atPath: directory.file("keychains"), withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        #expect(statusOf { _ = try Keychain(opening: path) } == .invalidKeychain)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
        #expect(size == 0, "the empty file was left as it was")
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        // Whoever made it (a creation of an older build, another program) can still make its keychain there.
        Keychain.removeFiles(at: path)
        _ = try Keychain.create(at: path, password: "pw", kdf: .insecureForTesting)
    }

    @Test func aFileThatAppearsDuringTheCreationIsKeptAndTheCreationFails() throws {
        let path = path
        let finished = Finished()
        let outcome = Mutex<KeychainStatus?>(nil)
        let creation = Thread {
            defer { finished.done.store(true, ordering: .sequentiallyConsistent) }
            outcome.withLock { $0 = statusOf { _ = try Keychain.create(at: path, password: "pw") } }
        }
        creation.start()
        // The directory appears as the creation starts; the file is made by someone else meanwhile.
        while !FileManager.default.fileExists(atPath: directory.file("keychains")) { usleep(500) }
        let other = Data("another program's file".utf8)
        let made = FileManager.default.createFile(atPath: path, contents: other)
        while !finished.done.load(ordering: .sequentiallyConsistent) { usleep(1_000) }
        #expect(made)
        #expect(outcome.withLock { $0 } == .duplicateKeychain)
        #expect(FileManager.default.contents(atPath: path) == other)
        #expect(try leftovers().isEmpty)
    }

    /// Files in the keychain directory other than keychains and their SQLite companions.
    func leftovers() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.file("keychains")).filter {
            !($0.hasSuffix(".keychain-db") || $0.hasSuffix(".keychain-db-wal") || $0.hasSuffix(".keychain-db-shm"))
        }
    }
}
