// Fuzzes the exchange readers (`CXFDocument.decode`, `PasswordCSV.decode`, `ExchangeFile.decode`) and the CXF
// writer behind them.
//
// Input: one byte choosing the reader (modulo 3), then the file's bytes:
//   0: a CXF JSON document. When it reads, its items are written again (`CXFDocument.encode`, each as a found
//      item with its attributes, dates and secret) and read back: the second reading must give the same items
//      (attributes, secret, dates), less the ones of a `…ThisDeviceOnly` class, which must be counted as left out;
//   1: a password CSV file;
//   2: either, told apart by content.
import FoundationEssentials
import FuzzSupport
import KeychainCore

@testable import CredentialExchange
@testable import KeychainStore
@testable import Posix

let fixtures = String(#filePath.split(separator: "/Fuzz/Sources/").first ?? "") + "/Tests/Fixtures/exchange/"

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        var seeds: [(name: String, bytes: [UInt8])] = []
        func file(_ name: String) throws -> [UInt8] {
            guard let bytes = BoundedFile.read(fixtures + name, limit: 1 << 20) else {
                fatalError("no fixture \(name)")
            }
            return bytes
        }
        seeds.append(("other-exporter", [0] + (try file("other-exporter.cxf.json"))))
        // A Latchkey document of every item class and attribute kind.
        let identifier = Data(repeating: 7, count: 16)
        let items: [(item: KeychainItem, secret: SharedSecret?)] = [
            (
                KeychainItem(
                    reference: ItemReference(itemClass: .internetPassword, identifier: identifier),
                    attributes: [
                        .server: .string("example.com"), .protocol: .string("htps"), .port: .number(443),
                        .account: .string("ann"), .label: .string("Example \"quoted\"\n"),
                        .creationDate: .date(Date(timeIntervalSinceReferenceDate: 7e8)),
                        .synchronizable: .bool(true), .generic: .data(Data([0, 1, 255])),
                    ], secret: nil),
                try SharedSecret(copying: Array("pässwörd".utf8))
            ),
            (
                KeychainItem(
                    reference: ItemReference(itemClass: .key, identifier: Data(repeating: 8, count: 16)),
                    attributes: [.keyClass: .number(1), .accessible: .string("ck")], secret: nil),
                try SharedSecret(copying: [0, 1, 2, 3])
            ),
        ]
        let export = try CXFDocument.encode(
            [ExportedKeychain(name: "login", items: items)], exporter: "Latchkey", at: Date(timeIntervalSince1970: 0))
        seeds.append(("latchkey", [0] + export.document.withUnsafeBytes { Array($0) }))
        for name in ["chrome", "firefox", "bitwarden", "keepassxc-2.7.4", "apple-passwords"] {
            seeds.append((name, [1] + (try file(name + ".csv"))))
        }
        seeds.append(("keepassxc-totp-either", [2] + (try file("keepassxc-totp.csv"))))
        return seeds
    }
    return 0
}

/// An item as found: attributes (dates among them), secret, for comparing readings.
func described(_ item: NewItem) -> String {
    var attributes = item.attributes
    if let date = item.creationDate { attributes[.creationDate] = .date(date) }
    if let date = item.modificationDate { attributes[.modificationDate] = .date(date) }
    attributes[.portalKey] = nil
    let sorted = attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    return "\(item.itemClass) \(sorted) \(item.secret.map { Array($0) } ?? [])"
}

/// Writes `reading`'s items again and reads them back; traps when anything changed.
func checkRoundTrip(_ reading: ExchangeReading) {
    var found: [(item: KeychainItem, secret: SharedSecret?)] = []
    var kept: [String] = []
    var deviceOnly = 0
    for (index, item) in reading.items.enumerated() {
        var attributes = item.attributes
        if let date = item.creationDate { attributes[.creationDate] = .date(date) }
        if let date = item.modificationDate { attributes[.modificationDate] = .date(date) }
        var identifier = Data(count: 16)
        withUnsafeBytes(of: UInt64(index).bigEndian) { identifier.replaceSubrange(8..<16, with: $0) }
        let secret = item.secret.flatMap { try? SharedSecret(copying: Array($0)) }
        found.append(
            (
                KeychainItem(
                    reference: ItemReference(itemClass: item.itemClass, identifier: identifier),
                    attributes: attributes, secret: nil), secret
            ))
        if Accessibility(of: attributes).mayLeaveThisDevice { kept.append(described(item)) } else { deviceOnly += 1 }
    }
    guard
        let export = try? CXFDocument.encode(
            [ExportedKeychain(name: "fuzz", items: found)], exporter: "fuzz", at: Date(timeIntervalSince1970: 0))
    else { fatalError("a reading could not be written again") }
    precondition(export.leftOut == deviceOnly, "left out \(export.leftOut), expected \(deviceOnly)")
    let again: ExchangeReading
    do { again = try CXFDocument.decode(export.document) } catch {
        fatalError("a written document does not read: \(error)")
    }
    precondition(again.skipped.isEmpty, "a written document has skipped credentials")
    precondition(again.items.map(described) == kept, "a round trip changed an item")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    var input = FuzzInput(start, count)
    let choice = input.byte() % 3
    guard let bytes = try? SecretBytes(copying: input.rest()) else { return 0 }
    switch choice {
    case 0:
        if let reading = try? CXFDocument.decode(bytes) { checkRoundTrip(reading) }
    case 1:
        _ = try? PasswordCSV.decode(bytes)
    default:
        _ = try? ExchangeFile.decode(bytes)
    }
    return 0
}
