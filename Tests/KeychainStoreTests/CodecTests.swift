import Foundation
import KeychainCore
import Testing

@testable import KeychainStore

@Suite struct CodecTests {
    @Test func attributesRoundTripThroughTheCodec() throws {
        let attributes: ItemAttributes = [
            .account: .string("ünïcödé ✓"), .generic: .data(Data([0, 255, 7])), .port: .number(-42),
            .creationDate: .date(Date(timeIntervalSinceReferenceDate: 123.456)), .isInvisible: .bool(true),
            .label: .string(""),
        ]
        #expect(try AttributeCodec.decode(AttributeCodec.encode(attributes)) == attributes)
    }

    @Test func damagedEncodingsThrowDecodeAndNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        let valid = [UInt8](AttributeCodec.encode([.account: .string("a"), .port: .number(1)]))
        // A cut inside an attribute is an error; a cut between attributes is a
        // shorter valid encoding (the AEAD seal is what detects truncation).
        for length in 0..<valid.count {
            do {
                let decoded = try AttributeCodec.decode(Data(valid.prefix(length)))
                #expect(decoded.count < 2)
            } catch {
                #expect(error.status == .decode)
            }
        }
        #expect(throws: KeychainError.self) { try AttributeCodec.decode(Data(valid.prefix(valid.count - 1))) }
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 1...40, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            do {
                _ = try AttributeCodec.decode(Data([1] + bytes))
            } catch {
                #expect(error.status == .decode)
            }
        }
    }
}

/// Keychain files may come from anyone: their connections run defensively.
@Suite struct DefensiveConnectionTests {
    @Test func theSchemaCannotBeWrittenThroughSQL() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("defensive.keychain-db")
        _ = try Keychain.create(at: path, password: "pw")
        let db = try SQLiteDatabase(path: path, create: false)
        #expect(throws: KeychainError.self) {
            try db.execute("PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = 'x' WHERE name = 'items'")
        }
        try Keychain(opening: path).unlock(password: "pw")
    }
}

/// The wrong-password count is read from a row anyone who can write the file may edit: any time in it gives a
/// wait between none and the longest, never a trap (found by `fuzz-keychain-file`: a last failure near
/// `Int64.max` overflowed the sum).
@Suite struct PasswordAttemptsTests {
    private func attempts(failures: UInt32, lastFailure: Int64) -> PasswordAttempts {
        let bytes =
            withUnsafeBytes(of: failures.bigEndian) { Data($0) }
            + withUnsafeBytes(of: lastFailure.bigEndian) { Data($0) }
        return PasswordAttempts(stored: bytes)
    }

    @Test(arguments: [Int64.max, Int64.max - 30, Int64.min, Int64.min + 1, -1, 0])
    func anyStoredTimeGivesABoundedWait(lastFailure: Int64) {
        for failures: UInt32 in [3, 4, 9, UInt32.max] {
            let wait = attempts(failures: failures, lastFailure: lastFailure).secondsToWait(now: 1_800_000_000)
            #expect((0...60).contains(wait))
        }
        #expect(attempts(failures: 9, lastFailure: Int64.max).secondsToWait(now: 1_800_000_000) == 60)
        #expect(attempts(failures: 9, lastFailure: Int64.min).secondsToWait(now: 1_800_000_000) == 0)
    }
}
