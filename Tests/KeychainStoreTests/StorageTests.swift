import Foundation
import KeychainCore
import KeychainStore
import Testing

@Suite struct StorageTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.file("keychains/test.keychain-db")
    }

    func makeKeychain(password: String = "pw") throws -> Keychain {
        try Keychain.create(at: path, password: password)
    }

    /// What the quotas count: items and their sealed bytes, kept up across adds, changes, deletes, a
    /// reopening and another connection's writes.
    @Test func usageCountsItemsAndSealedBytesThroughEveryChange() throws {
        let keychain = try makeKeychain()
        #expect(try keychain.usage() == (0, 0))
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data(count: 1000))
        let one = try keychain.usage()
        #expect(one.items == 1 && one.bytes > 1000)
        try keychain.add(.genericPassword, attributes: [.account: .string("b")], secret: Data(count: 5000))
        let two = try keychain.usage()
        #expect(two.items == 2 && two.bytes > one.bytes + 5000)
        try keychain.update(matching: genericQuery("b"), with: ItemChanges(secret: Data(count: 10)))
        let changed = try keychain.usage()
        #expect(changed.items == 2 && changed.bytes < two.bytes - 4900)
        let other = try Keychain(opening: path)
        try other.unlock(password: "pw")
        #expect(try other.usage() == changed)
        try other.delete(matching: genericQuery("a"))
        #expect(try keychain.usage().items == 1)
        #expect(try keychain.usage() == other.usage())
    }

    /// The change stamp stays while nothing is written (reads, a lock and an unlock) and moves with a write
    /// through this keychain or a commit by another connection to the file, also while locked.
    @Test func changeStampMovesWithEveryWriteOnly() throws {
        let keychain = try makeKeychain()
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data([1]))
        let stamp = try keychain.changeStamp()
        _ = try keychain.items(matching: genericQuery("a"))
        keychain.lock()
        try keychain.unlock(password: "pw")
        #expect(try keychain.changeStamp() == stamp)
        try keychain.update(matching: genericQuery("a"), with: ItemChanges(secret: Data([2])))
        let updated = try keychain.changeStamp()
        #expect(updated != stamp)
        keychain.lock()
        let other = try Keychain(opening: path)
        try other.unlock(password: "pw")
        try other.add(.genericPassword, attributes: [.account: .string("b")], secret: Data([3]))
        #expect(try keychain.changeStamp() != updated)
    }

    /// An item's version moves with each change of it, by this keychain or another connection, and only
    /// then: what lets a lock read again only the items changed since what they show was kept
    /// (LockedItemViews). A deleted item has none; `among` narrows the answer to the items named.
    @Test func itemVersionsMoveWithEachChangeOfTheirItemOnly() throws {
        let keychain = try makeKeychain()
        let first = try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data([1]))
        let second = try keychain.add(.genericPassword, attributes: [.account: .string("b")], secret: Data([2]))
        let before = try keychain.itemVersions(of: .genericPassword)
        #expect(Set(before.keys) == [first.reference, second.reference])
        try keychain.update(matching: genericQuery("a"), with: ItemChanges(attributes: [.label: .string("A")]))
        let after = try keychain.itemVersions(of: .genericPassword)
        #expect(after[second.reference] == before[second.reference])
        #expect(try #require(after[first.reference]) > #require(before[first.reference]))
        #expect(
            Set(try keychain.itemVersions(of: .genericPassword, among: [second.reference]).keys) == [second.reference])
        let other = try Keychain(opening: path)
        try other.unlock(password: "pw")
        try other.update(matching: genericQuery("b"), with: ItemChanges(secret: Data([3])))
        try other.delete(matching: genericQuery("a"))
        let changed = try keychain.itemVersions(of: .genericPassword)
        #expect(changed[first.reference] == nil)
        #expect(try #require(changed[second.reference]) > #require(before[second.reference]))
        #expect(try keychain.itemVersions(of: .internetPassword).isEmpty)
    }

    /// A key, a certificate and an identity keep the access list they are given, across a reopening; one given
    /// none (as every such item stored before they could hold one) reads back with none.
    @Test func everyClassKeepsItsAccessListAcrossAReopening() throws {
        let keychain = try makeKeychain()
        let access = ItemAccess(trustedApplications: [TrustedApplication(name: "/usr/bin/ssh", digest: "ab")])
        let classes: [(ItemClass, AttributeKey)] = [
            (.key, .applicationTag), (.certificate, .serialNumber), (.identity, .applicationTag),
        ]
        for (itemClass, key) in classes {
            try keychain.add(
                itemClass, attributes: access.attributes.merging([key: .data(Data([1]))]) { $1 }, secret: Data([9]))
            try keychain.add(itemClass, attributes: [key: .data(Data([2]))], secret: Data([9]))
        }
        let reopened = try Keychain(opening: path)
        try reopened.unlock(password: "pw")
        for (itemClass, key) in classes {
            func stored(_ value: UInt8) throws -> ItemAccess {
                let query = ItemQuery(
                    itemClass, attributes: [key: .data(Data([value]))], synchronizable: .any, returning: .attributes)
                let item = try #require(try reopened.items(matching: query).first)
                return ItemAccess(attributes: item.attributes ?? [:])
            }
            #expect(try stored(1) == access, "\(itemClass)")
            #expect(try stored(2).isEmpty, "\(itemClass)")
        }
    }

    @Test func fileIs0600InA0700Directory() throws {
        _ = try makeKeychain()
        let fileMode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        let directoryMode =
            try FileManager.default.attributesOfItem(atPath: directory.file("keychains"))[.posixPermissions] as? Int
        #expect(fileMode == 0o600)
        #expect(directoryMode == 0o700)
        let raw = try RawFile(path)
        #expect(try raw.blobs("PRAGMA journal_mode").first.map { String(decoding: $0, as: UTF8.self) } == "wal")
        #expect(try raw.blobs("PRAGMA user_version").isEmpty == false)
    }

    @Test func rawBytesHoldNoSecretLabelOrAttributeValue() throws {
        let secrets = [
            "Secret-7f3a9c", "Label-c0ffee42", "Account-b16b00b5", "Service-deadbeef", "Comment-feedface",
            "Generic-abad1dea",
        ]
        do {
            let keychain = try makeKeychain()
            try keychain.add(
                .genericPassword,
                attributes: [
                    .label: .string(secrets[1]), .account: .string(secrets[2]), .service: .string(secrets[3]),
                    .comment: .string(secrets[4]), .generic: .data(Data(secrets[5].utf8)),
                ],
                secret: Data(secrets[0].utf8))
            try keychain.add(
                .internetPassword, attributes: [.server: .string("Server-0ddba11"), .path: .string("/Path-5ca1ab1e")],
                secret: Data("Inet-5eed".utf8))
            try keychain.update(
                matching: genericQuery(secrets[2]),
                with: ItemChanges(attributes: [.itemDescription: .string("Desc-1ce1ce")]))
            let whileOpen = allBytes(of: path)
            for text in secrets + ["Server-0ddba11", "Path-5ca1ab1e", "Inet-5eed", "Desc-1ce1ce"] {
                #expect(!whileOpen.contains(text), "\(text) is in the file while open")
            }
        }
        let closed = allBytes(of: path)
        #expect(closed.count > 4096)
        for text in secrets { #expect(!closed.contains(text), "\(text) is in the file after closing") }
    }

    @Test func flippedCiphertextByteIsDecodeErrorAndOtherItemsStayReadable() throws {
        let keychain = try makeKeychain()
        try keychain.add(.genericPassword, attributes: [.account: .string("victim")], secret: Data("one".utf8))
        try keychain.add(.genericPassword, attributes: [.account: .string("bystander")], secret: Data("two".utf8))
        let raw = try RawFile(path)
        for column in ["secret", "attributes"] {
            let original = try #require(try raw.blobs("SELECT \(column) FROM items ORDER BY id LIMIT 1").first)
            var flipped = original
            flipped[flipped.count / 2] ^= 0x01
            try raw.run("UPDATE items SET \(column) = ?1 WHERE id = (SELECT min(id) FROM items)", [flipped])
            let wanted: ReturnOptions = column == "secret" ? .data : .attributes
            #expect(statusOf { _ = try keychain.items(matching: genericQuery("victim", returning: wanted)) } == .decode)
            let other = try keychain.items(matching: genericQuery("bystander", returning: [.data, .attributes]))
            #expect(other.first?.secret == Data("two".utf8))
            try raw.run("UPDATE items SET \(column) = ?1 WHERE id = (SELECT min(id) FROM items)", [original])
        }
        #expect(
            try keychain.items(matching: genericQuery("victim", returning: .data)).first?.secret == Data("one".utf8))
    }

    @Test func swappedSealedBlobsAreDetected() throws {
        let keychain = try makeKeychain()
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("secret-a".utf8))
        try keychain.add(.genericPassword, attributes: [.account: .string("b")], secret: Data("secret-b".utf8))
        let raw = try RawFile(path)
        let secrets = try raw.blobs("SELECT secret FROM items ORDER BY id")
        try raw.run("UPDATE items SET secret = ?1 WHERE id = (SELECT min(id) FROM items)", [secrets[1]])
        try raw.run("UPDATE items SET secret = ?1 WHERE id = (SELECT max(id) FROM items)", [secrets[0]])
        #expect(statusOf { _ = try keychain.items(matching: genericQuery("a", returning: .data)) } == .decode)
        #expect(statusOf { _ = try keychain.items(matching: genericQuery("b", returning: .data)) } == .decode)
        // An item's attributes sealed box put in its secret column is caught too.
        let attributes = try raw.blobs("SELECT attributes FROM items ORDER BY id")
        try raw.run("UPDATE items SET secret = ?1 WHERE id = (SELECT min(id) FROM items)", [attributes[0]])
        #expect(statusOf { _ = try keychain.items(matching: genericQuery("a", returning: .data)) } == .decode)
    }

    @Test func wrongPasswordFailsAndLeavesTheKeychainLocked() throws {
        do {
            let keychain = try makeKeychain(password: "right")
            try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("s".utf8))
        }
        let reopened = try Keychain(opening: path)
        #expect(reopened.isLocked)
        #expect(statusOf { try reopened.unlock(password: "wrong") } == .authFailed)
        #expect(reopened.isLocked)
        #expect(
            statusOf { _ = try reopened.items(matching: genericQuery("a", returning: .data)) } == .interactionNotAllowed
        )
        #expect(try reopened.items(matching: genericQuery("a")).count == 1, "a locked keychain still finds references")
        #expect(try reopened.items(matching: genericQuery("nobody")).isEmpty)
        try reopened.unlock(password: "right")
        #expect(try reopened.items(matching: genericQuery("a", returning: .data)).first?.secret == Data("s".utf8))
        reopened.lock()
        #expect(reopened.isLocked)
    }

    @Test func changePasswordRewrapsOnlyTheKey() throws {
        let keychain = try makeKeychain(password: "old")
        for index in 0..<50 {
            try keychain.add(
                .genericPassword, attributes: [.account: .string("a\(index)")], secret: Data("s\(index)".utf8))
        }
        let raw = try RawFile(path)
        let rowsBefore = try raw.blobs("SELECT uuid || attributes || secret FROM items ORDER BY id")
        #expect(statusOf { try keychain.changePassword(from: "not it", to: "new") } == .authFailed)
        try keychain.changePassword(from: "old", to: "new")
        #expect(
            try raw.blobs("SELECT uuid || attributes || secret FROM items ORDER BY id") == rowsBefore,
            "items are not re-encrypted")

        let reopened = try Keychain(opening: path)
        #expect(statusOf { try reopened.unlock(password: "old") } == .authFailed)
        try reopened.unlock(password: "new")
        let all = try reopened.items(
            matching: ItemQuery(.genericPassword, limit: .all, returning: .attributes))
        #expect(all.count == 50)
        #expect(try reopened.items(matching: genericQuery("a49", returning: .data)).first?.secret == Data("s49".utf8))
    }

    /// A keychain wrapped by a parent's key given a password of its own: its key comes from the parent's,
    /// is re-wrapped under the password, and from then on the file opens with that password and no longer
    /// with the parent; a key of another keychain is refused at each step.
    @Test func aKeychainUnderAParentGetsAPasswordOfItsOwn() throws {
        let parent = try makeKeychain(password: "parent")
        let childPath = directory.file("keychains/child.keychain-db")
        let child = try Keychain.create(at: childPath, protectedBy: parent)
        try child.add(.genericPassword, attributes: [.account: .string("kept")], secret: Data("s".utf8))
        let other = try Keychain.create(at: directory.file("keychains/other.keychain-db"), password: "other")

        let parentKey = try parent.unwrapKey(password: Array("parent".utf8))
        #expect(
            statusOf { _ = try child.unwrapKey(using: try other.unwrapKey(password: Array("other".utf8))) }
                == .authFailed)
        let key = try child.unwrapKey(using: parentKey)
        #expect(statusOf { _ = try child.rewrap(parentKey, to: Array("own".utf8)) } == .authFailed)
        try child.commit(try child.rewrap(key, to: Array("own".utf8)))

        let reopened = try Keychain(opening: childPath)
        #expect(reopened.parentIdentifier == nil && reopened.kdfParameters == .production)
        #expect(statusOf { try reopened.unlock(using: parent) } == .authFailed)
        #expect(statusOf { _ = try reopened.unwrapKey(using: parentKey) } == .authFailed)
        try reopened.unlock(password: Array("own".utf8))
        #expect(try reopened.items(matching: genericQuery("kept", returning: .data)).first?.secret == Data("s".utf8))
    }

    /// The daemon's password change in its three steps: re-wrap (slow, anywhere), commit (short), then a
    /// checkpoint that does not wait for a reader holding an older snapshot and completes once it is gone.
    @Test func aCheckpointBehindAReaderFailsAtOnceAndCompletesLater() throws {
        let keychain = try makeKeychain(password: "old")
        try keychain.add(.genericPassword, attributes: [.account: .string("a")], secret: Data("s".utf8))
        let reader = try RawFile(path)
        try reader.run("BEGIN")
        #expect(try reader.blobs("SELECT count(*) FROM items") == [Data("1".utf8)])
        let change = try keychain.rewrap(from: Array("old".utf8), to: Array("new".utf8))
        try keychain.commit(change)
        #expect(statusOf { try keychain.commit(change) } == .authFailed, "a stale change is refused")
        let started = Date()
        #expect(!Keychain.checkpoint(at: path, waitMilliseconds: 0))
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(allBytes(of: path + "-wal").count > 0)
        try reader.run("COMMIT")
        #expect(Keychain.checkpoint(at: path, waitMilliseconds: 0))
        #expect(allBytes(of: path + "-wal").isEmpty)
        let reopened = try Keychain(opening: path)
        try reopened.unlock(password: "new")
        #expect(statusOf { try keychain.unlock(password: Array("old".utf8)) } == .authFailed)
    }

    /// The wrong-password count lives in the file: a new process (a restarted daemon, the command on the
    /// file) sees it; a password a login verified is tried anyway and resets it.
    @Test func wrongPasswordsAreCountedInTheFileAcrossOpens() throws {
        _ = try makeKeychain(password: "right")
        for _ in 0..<3 {
            #expect(statusOf { try Keychain(opening: path).unlock(password: Array("wrong".utf8)) } == .authFailed)
        }
        let reopened = try Keychain(opening: path)
        #expect(reopened.passwordRetryWait() > 0)
        do {
            try reopened.unlock(password: Array("right".utf8))
            Issue.record("the fourth try was not refused")
        } catch {
            #expect(error.status == .authFailed && error.retryAfterSeconds != nil)
        }
        #expect(reopened.isLocked)
        #expect(statusOf { try reopened.changePassword(from: "right", to: "other") } == .authFailed)
        let key = try reopened.unwrapKey(password: Array("right".utf8), limited: false)
        reopened.unlock(with: key)
        #expect(!reopened.isLocked)
        #expect(try Keychain(opening: path).passwordRetryWait() == 0, "a right password resets the count")
    }

    /// What the person types into the daemon's own prompt is outside the programs' count (issue 31): tried
    /// while the programs' wait runs, a wrong one not counted, a right one not clearing the programs' wait.
    @Test func aPasswordTypedInThePromptIsOutsideTheProgramsCount() throws {
        // In memory, with its cheap key derivation: the whole test runs well within the first 2 s wait.
        let keychain = try Keychain.createInMemory(password: Array("right".utf8))
        keychain.lock()
        for _ in 0..<3 {
            #expect(statusOf { try keychain.unlock(password: Array("wrong".utf8)) } == .authFailed)
        }
        let wait = keychain.passwordRetryWait()
        #expect(wait > 0)
        do {
            _ = try keychain.unwrapKey(password: Array("typo".utf8), limited: false, counted: false)
            Issue.record("a wrong password was accepted")
        } catch {
            #expect(error.status == .authFailed && error.retryAfterSeconds == nil, "tried, not refused")
        }
        #expect(keychain.passwordRetryWait() <= wait, "the typo was not counted: the wait did not grow")
        keychain.unlock(with: try keychain.unwrapKey(password: Array("right".utf8), limited: false, counted: false))
        #expect(!keychain.isLocked)
        #expect(keychain.passwordRetryWait() > 0, "the programs' wait still runs")
    }

    /// pam_latchkey re-keys the file itself when no daemon runs: a keychain already open sees the change
    /// (the old password no longer opens it) and its own next change starts from the new one.
    @Test func aPasswordChangeMadeByAnotherProcessIsSeen() throws {
        let first = try makeKeychain(password: "one")
        first.lock()
        try Keychain(opening: path).changePassword(from: "one", to: "two")
        #expect(statusOf { try first.unlock(password: "one") } == .authFailed)
        try first.unlock(password: "two")
        try first.changePassword(from: "two", to: "three")
        let reopened = try Keychain(opening: path)
        #expect(statusOf { try reopened.unlock(password: "two") } == .authFailed)
        try reopened.unlock(password: "three")
    }

    /// KDF parameters a forger wrote: too costly (16 GiB of scrypt) or too cheap are refused when the file
    /// is opened, before anything is derived or allocated.
    @Test func kdfParametersInTheFileAreBounded() throws {
        _ = try makeKeychain()
        let raw = try RawFile(path)
        for row in [
            [1, 22, 0, 0, 0, 32, 0, 0, 0, 16], [1, 10, 0, 0, 0, 8, 0, 0, 0, 1], [1, 21, 0, 0, 0, 8, 0, 0, 0, 2],
        ]
            as [[UInt8]]
        {
            try raw.run("UPDATE meta SET value = ?1 WHERE name = 'kdf'", [Data(row)])
            #expect(statusOf { _ = try Keychain(opening: path) } == .invalidKeychain, "\(row)")
        }
        try raw.run("UPDATE meta SET value = ?1 WHERE name = 'kdf'", [Data([1, 16, 0, 0, 0, 8, 0, 0, 0, 2])])
        try Keychain(opening: path).unlock(password: "pw")
        #expect(KDFParameters(logN: 10, r: 8, p: 1).raisedToProduction == .production)
        #expect(KDFParameters(logN: 17, r: 8, p: 2).raisedToProduction == KDFParameters(logN: 17, r: 8, p: 2))
    }

    /// A forged header may keep scrypt's memory within 1 GiB and still make every unlock run for minutes on
    /// the key-derivation worker through `p` (run one after the other): N · r · p is bounded too, at 16 times
    /// ``KDFParameters/production`` (``KDFParameters/maximumWork``). A file at the bound opens.
    @Test func kdfWorkInTheFileIsBounded() throws {
        _ = try makeKeychain()
        let raw = try RawFile(path)
        // 1 GiB (N = 2^20, r = 8) sixteen times over; 64 MiB (production's N and r) 32 times over.
        for row in [[1, 20, 0, 0, 0, 8, 0, 0, 0, 16], [1, 16, 0, 0, 0, 8, 0, 0, 0, 32]] as [[UInt8]] {
            try raw.run("UPDATE meta SET value = ?1 WHERE name = 'kdf'", [Data(row)])
            #expect(statusOf { _ = try Keychain(opening: path) } == .invalidKeychain, "\(row)")
        }
        #expect(KDFParameters(logN: 20, r: 8, p: 16).work > KDFParameters.maximumWork)
        // At the bound: 16 times production's work.
        try raw.run("UPDATE meta SET value = ?1 WHERE name = 'kdf'", [Data([1, 16, 0, 0, 0, 8, 0, 0, 0, 16])])
        #expect(try Keychain(opening: path).kdfParameters == KDFParameters(logN: 16, r: 8, p: 16))
        #expect(KDFParameters.production.work * 16 == KDFParameters.maximumWork)
    }

    /// A row of the attribute index repointed at another item must not make a search by one service hand
    /// out another service's password.
    @Test func aTamperedIndexRowDoesNotHandOutAnotherItem() throws {
        let keychain = try makeKeychain()
        try keychain.add(
            .genericPassword, attributes: [.service: .string("bank.example"), .account: .string("me")],
            secret: Data("bank password".utf8))
        try keychain.add(
            .genericPassword, attributes: [.service: .string("evil.example"), .account: .string("other")],
            secret: Data("evil password".utf8))
        let raw = try RawFile(path)
        // Every tag that points at the evil item now points at the bank's.
        try raw.run(
            "UPDATE OR IGNORE attribute_index SET item = (SELECT MIN(id) FROM items)"
                + " WHERE item = (SELECT MAX(id) FROM items)")
        let query = ItemQuery(
            .genericPassword, attributes: [.service: .string("evil.example")], limit: .all, returning: .data)
        #expect(try keychain.items(matching: query).isEmpty)
        // The bank item's index entries were altered (it has the evil item's tags now): it is left out too,
        // and a search by the evil item's tags never returns it.
        let bank = ItemQuery(
            .genericPassword, attributes: [.service: .string("bank.example")], limit: .all, returning: .data)
        #expect(try keychain.items(matching: bank).isEmpty)
        keychain.lock()
        #expect(
            try keychain.items(matching: ItemQuery(.genericPassword, attributes: [.service: .string("evil.example")]))
                .count == 1,
            "while locked the index is taken as it is")
    }

    @Test func killedWriterLosesNoAcknowledgedItem() throws {
        let password = "durable"
        _ = try makeKeychain(password: password)
        let executable = URL(
            fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        )
        .deletingLastPathComponent().appendingPathComponent("keychain-writer")
        let writer = Process()
        writer.executableURL = executable
        writer.arguments = [path, password, "1000000"]
        let output = Pipe()
        writer.standardOutput = output
        try writer.run()

        var buffer = Data()
        var acknowledged: [Int] = []
        let target = Int.random(in: 300...600)
        while acknowledged.count < target {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            buffer += chunk
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer = Data(buffer[buffer.index(after: newline)...])
                if let number = Int(line.dropFirst("acked ".count)) { acknowledged.append(number) }
            }
        }
        kill(writer.processIdentifier, SIGKILL)
        writer.waitUntilExit()
        #expect(writer.terminationReason == .uncaughtSignal)
        #expect(acknowledged.count >= target)

        let reopened = try Keychain(opening: path)
        try reopened.unlock(password: password)
        let stored = try reopened.count()
        #expect(stored >= acknowledged.count)
        for number in acknowledged {
            let found = try reopened.items(matching: genericQuery("item-\(number)", returning: .data))
            #expect(found.first?.secret == Data("secret-\(number)".utf8), "acked item \(number) is missing")
        }
    }

    @Test func badFilesGiveClearErrors() throws {
        #expect(statusOf { _ = try Keychain(opening: directory.file("absent.keychain-db")) } == .noSuchKeychain)
        let junk = directory.file("junk.keychain-db")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: junk))
        #expect(statusOf { _ = try Keychain(opening: junk) } == .invalidKeychain)
        _ = try makeKeychain()
        #expect(statusOf { _ = try makeKeychain() } == .duplicateKeychain)
        #expect(statusOf { _ = try Keychain(opening: path) } == nil)

        let raw = try RawFile(path)
        try raw.run("PRAGMA user_version = 99")
        #expect(statusOf { _ = try Keychain(opening: path) } == .invalidKeychain, "a newer schema is refused")
        try raw.run("PRAGMA user_version = 1")
        // A forged KDF cost must not make opening or unlocking allocate gigabytes.
        try raw.run("UPDATE meta SET value = ?1 WHERE name = 'kdf'", [Data([1, 40, 0, 0, 0, 8, 0, 0, 0, 1])])
        #expect(statusOf { _ = try Keychain(opening: path) } == .invalidKeychain)
        try raw.run("UPDATE meta SET value = ?1 WHERE name = 'index_key'", [Data([1, 2, 3])])
        #expect(statusOf { _ = try Keychain(opening: path) } == .invalidKeychain)
    }

    @Test func productionKDFIsTheDefaultAndStoredInTheFile() throws {
        #expect(KDFParameters.production.memoryBytes >= 64 << 20)
        let keychain = try Keychain.create(at: path, password: "pw")
        #expect(keychain.kdfParameters == .production)
        keychain.lock()
        let reopened = try Keychain(opening: path)
        #expect(reopened.kdfParameters == .production)
        try reopened.unlock(password: "pw")
    }

    @Test func keychainsSideBySideAreIndependent() throws {
        let first = try makeKeychain(password: "one")
        let second = try Keychain.create(
            at: directory.file("second.keychain-db"), password: "two")
        try first.add(.genericPassword, attributes: [.account: .string("shared")], secret: Data("from first".utf8))
        try second.add(.genericPassword, attributes: [.account: .string("shared")], secret: Data("from second".utf8))
        #expect(
            try first.items(matching: genericQuery("shared", returning: .data)).first?.secret == Data("from first".utf8)
        )
        #expect(
            try second.items(matching: genericQuery("shared", returning: .data)).first?.secret
                == Data("from second".utf8))
        second.lock()
        #expect(first.isLocked == false)
        // The same attribute gets a different index tag in each keychain (per-keychain index key).
        let tagsFirst = Set(try RawFile(path).blobs("SELECT tag FROM attribute_index"))
        let tagsSecond = Set(try RawFile(directory.file("second.keychain-db")).blobs("SELECT tag FROM attribute_index"))
        #expect(tagsFirst.isDisjoint(with: tagsSecond))
    }

    @Test func concurrentCallersAreSerialised() async throws {
        let keychain = try makeKeychain()
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for index in 0..<50 {
                        _ = try? keychain.add(
                            .genericPassword, attributes: [.account: .string("w\(worker)-\(index)")],
                            secret: Data("\(index)".utf8))
                    }
                }
            }
        }
        #expect(try keychain.count() == 200)
    }
}
