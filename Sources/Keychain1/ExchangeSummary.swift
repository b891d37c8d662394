import DBus
import KeychainCore

/// What an import did (or, in a dry run, would do): `org.latchkey.Keychain1`'s `Import` reply and the
/// `latchkey import --json` summary (docs/export-import.md).
package struct ImportSummary: Equatable, Sendable {
    /// The file's format as read: `cxf-1.0`, `csv-chrome`, …
    package var format: String
    /// Items added (or that would be).
    package var added: Int
    /// Items put in place of one with the same primary key (`--replace`).
    package var replaced: Int
    /// The labels of the items left out because an item with their primary key is there.
    package var duplicates: [String]
    /// Credentials skipped as unsupported.
    package var skipped: [SkippedCredential]
    /// Whether nothing was written (`--dry-run`).
    package var dryRun: Bool

    /// A summary.
    package init(
        format: String, added: Int, replaced: Int, duplicates: [String], skipped: [SkippedCredential], dryRun: Bool
    ) {
        self.format = format
        self.added = added
        self.replaced = replaced
        self.duplicates = duplicates
        self.skipped = skipped
        self.dryRun = dryRun
    }
}

extension Keychain1Interface {
    /// A summary as `a{sv}`: `Format` s, `Added` u, `Replaced` u, `Duplicates` as, `Skipped` a(sss) (title,
    /// credential type, reason), `DryRun` b.
    package static func encode(_ summary: ImportSummary) -> DBusValue {
        .variantDictionary([
            "Format": .string(summary.format), "Added": .uint32(UInt32(clamping: summary.added)),
            "Replaced": .uint32(UInt32(clamping: summary.replaced)),
            "Duplicates": .array(elementSignature: "s", summary.duplicates.map { .string($0) }),
            "Skipped": .array(
                elementSignature: "(sss)",
                summary.skipped.map { .structure([.string($0.title), .string($0.credentialType), .string($0.reason)]) }
            ),
            "DryRun": .bool(summary.dryRun),
        ])
    }

    /// Reads a summary.
    package static func decodeSummary(_ value: DBusValue) throws(KeychainError) -> ImportSummary {
        guard let pairs = value.unwrapped.variantPairs, case .uint32(let added)? = pairs["Added"]?.unwrapped,
            case .uint32(let replaced)? = pairs["Replaced"]?.unwrapped
        else { throw KeychainError(.decode, "an import summary from the daemon lacks its counts") }
        var duplicates: [String] = []
        if case .array(_, let names)? = pairs["Duplicates"]?.unwrapped {
            duplicates = names.compactMap { $0.text }
        }
        var skipped: [SkippedCredential] = []
        if case .array(_, let entries)? = pairs["Skipped"]?.unwrapped {
            for entry in entries {
                guard case .structure(let fields) = entry, fields.count == 3 else { continue }
                skipped.append(
                    .init(
                        title: fields[0].text ?? "", credentialType: fields[1].text ?? "",
                        reason: fields[2].text ?? ""))
            }
        }
        var dryRun = false
        if case .bool(let flag)? = pairs["DryRun"]?.unwrapped { dryRun = flag }
        return ImportSummary(
            format: pairs["Format"]?.text ?? "", added: Int(added), replaced: Int(replaced), duplicates: duplicates,
            skipped: skipped, dryRun: dryRun)
    }
}
