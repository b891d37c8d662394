import Foundation
import KeychainCore
import Testing

@testable import KeySlots
@testable import KeychainStore

/// The `…ThisDeviceOnly` class keys sealed to the TPM (issue 27): a copy of the keychain file on another machine
/// (another swtpm, with its own seed), or on one without a TPM, does not open those classes even with the
/// password, and opens every other class.
@Suite(.enabled(if: SoftwareTPM.isAvailable, "swtpm is not installed"))
struct DeviceBoundClassTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-device-\(UUID())")

    func add(_ keychain: Keychain, _ account: String, _ accessibility: Accessibility) throws {
        try keychain.add(
            .genericPassword,
            attributes: [.account: .string(account), .accessible: .string(accessibility.rawValue)],
            secret: Data("secret \(account)".utf8))
    }

    func secret(_ keychain: Keychain, _ account: String) throws -> Data? {
        try keychain.items(
            matching: ItemQuery(.genericPassword, attributes: [.account: .string(account)], returning: .data)
        ).first?.secret
    }

    @Test func aCopiedFileDoesNotOpenThisDeviceOnlyClassesOnAnotherTPM() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("tdo.keychain-db").path
        let copy = directory.appendingPathComponent("copy.keychain-db").path
        let here = try SoftwareTPM()
        defer { here.stop() }
        let elsewhere = try SoftwareTPM()
        defer { elsewhere.stop() }

        try Keychain.$deviceSealingHere.withValue(TPMDeviceSealing(configuration: here.configuration)) {
            let keychain = try Keychain.create(at: path, password: "pw")
            try add(keychain, "aku", .whenUnlockedThisDeviceOnly)
            try add(keychain, "cku", .afterFirstUnlockThisDeviceOnly)
            try add(keychain, "ak", .whenUnlocked)
            keychain.lock()
            #expect(try secret(keychain, "cku") == Data("secret cku".utf8), "AfterFirstUnlock kin outlast the lock")
            #expect(Keychain.checkpoint(at: path, waitMilliseconds: 1_000), "the copy holds every item")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            // Reopened on this machine, with the password: all of it.
            let reopened = try Keychain(opening: path)
            try reopened.unlock(password: "pw")
            for account in ["aku", "cku", "ak"] {
                #expect(try secret(reopened, account) == Data("secret \(account)".utf8))
            }
        }
        #expect(try !metaRow(path, "class-device").isEmpty, "the device secret's TPM blob is in the file")

        for sealing: (any DeviceSealing)? in [TPMDeviceSealing(configuration: elsewhere.configuration), nil] {
            try Keychain.$deviceSealingHere.withValue(sealing) {
                let stolen = try Keychain(opening: copy)
                try stolen.unlock(password: "pw")
                #expect(try secret(stolen, "ak") == Data("secret ak".utf8), "the other classes open")
                for account in ["aku", "cku"] {
                    var reason = ""
                    do {
                        _ = try secret(stolen, account)
                    } catch let error as KeychainError {
                        #expect(error.status == .decode)
                        reason = error.reason
                    }
                    #expect(reason.contains("TPM"), "\(account): \(reason)")
                }
                // A search over every item gives the others and leaves these out, as a locked keychain does.
                let all = try stolen.items(
                    matching: ItemQuery(.genericPassword, limit: .all, returning: [.attributes, .data]))
                #expect(all.compactMap { $0.attributes?[.account] } == [.string("ak")])
                #expect(try stolen.items(matching: ItemQuery(.genericPassword, limit: .all)).count == 3)
                // Nor can a new key be made over it: adds to those classes are refused too.
                #expect(throws: KeychainError.self) { try add(stolen, "more", .afterFirstUnlockThisDeviceOnly) }
            }
        }
    }
}
