import FoundationEssentials
import KWalletFormat
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// One KWallet entry as a collection holds it (docs/kwallet.md §2): an item with `server` (the folder) and
/// `user` (the key) Secret Service attributes and a `type` KWallet knows (none: a password).
struct KWalletEntry {
    let reference: ItemReference
    let folder: String
    let key: String
    let form: KWalletStoredForm
    /// The item's Secret Service attributes (kept when the entry is written again).
    let attributes: [String: String]
    /// The item's stored attributes as the search read them: the access decision takes them instead of
    /// reading the item again.
    let stored: ItemAttributes
    let modified: Date
}

extension KWalletEntry {
    /// The entry as the access decision sees it, with the attributes already read.
    func target(in held: HeldKeychain) -> SecretServiceDaemon.SecretTarget {
        SecretServiceDaemon.SecretTarget(held: held, reference: reference, attributes: stored)
    }
}

extension HeldKeychain {
    /// The KWallet entries of `folder` (every folder when nil), one per key: of items with the same folder and
    /// key, the most recently modified.
    func kwalletEntries(folder: String?) throws(KeychainError) -> [KWalletEntry] {
        let items =
            if let folder {
                try search([KWalletScheme.folderAttribute: folder], returning: .attributes)
            } else {
                try allItems(returning: .attributes)
            }
        var newest: [String: KWalletEntry] = [:]
        for item in items {
            guard let entry = Self.kwalletEntry(item) else { continue }
            let name = entry.folder + "\u{0}" + entry.key
            if let other = newest[name], other.modified > entry.modified { continue }
            newest[name] = entry
        }
        return newest.values.sorted { ($0.folder, $0.key) < ($1.folder, $1.key) }
    }

    /// The entry `key` of `folder`, nil when there is none.
    func kwalletEntry(folder: String, key: String) throws(KeychainError) -> KWalletEntry? {
        var best: KWalletEntry?
        let items = try search(
            [KWalletScheme.folderAttribute: folder, KWalletScheme.keyAttribute: key], returning: .attributes)
        for item in items {
            guard let entry = Self.kwalletEntry(item), entry.folder == folder, entry.key == key else { continue }
            if let current = best, current.modified > entry.modified { continue }
            best = entry
        }
        return best
    }

    /// Every item of `folder` that has a key (whatever its type): what `removeFolder` deletes. An item with a
    /// `server` and no `user` (a libsecret network password for a host) is no entry and stays.
    func kwalletItems(folder: String) throws(KeychainError) -> [ItemReference] {
        var references: [ItemReference] = []
        for item in try search([KWalletScheme.folderAttribute: folder], returning: .attributes) {
            guard let stored = item.attributes else { continue }
            let attributes = AttributeMapping.secretServiceAttributes(stored, of: item.reference.itemClass)
            if attributes[KWalletScheme.keyAttribute] != nil { references.append(item.reference) }
        }
        return references
    }

    /// Whether any item has `folder` as its `server` (from the keyed index, stopping at the first: cheap in a
    /// large folder, and works while locked).
    func hasKWalletFolder(_ folder: String) throws(KeychainError) -> Bool {
        for itemClass in Self.shownClasses {
            guard let mapped = AttributeMapping.storeAttributes([KWalletScheme.folderAttribute: folder], for: itemClass)
            else { continue }
            let query = ItemQuery(itemClass, attributes: mapped, synchronizable: .any, limit: .one)
            if try !keychain.items(matching: query).isEmpty { return true }
        }
        return false
    }

    /// Every item with `folder` and `key`, whatever its type (a write replaces the newest; a remove takes all).
    func kwalletItems(folder: String, key: String) throws(KeychainError) -> [ItemReference] {
        try search([KWalletScheme.folderAttribute: folder, KWalletScheme.keyAttribute: key])
    }

    private static func kwalletEntry(_ item: KeychainItem) -> KWalletEntry? {
        guard let stored = item.attributes else { return nil }
        let attributes = AttributeMapping.secretServiceAttributes(stored, of: item.reference.itemClass)
        guard let folder = attributes[KWalletScheme.folderAttribute], let key = attributes[KWalletScheme.keyAttribute],
            let form = KWalletStoredForm(typeAttribute: attributes[KWalletScheme.typeAttribute])
        else { return nil }
        var modified = Date.distantPast
        if case .date(let date) = stored[.modificationDate] { modified = date }
        return KWalletEntry(
            reference: item.reference, folder: folder, key: key, form: form, attributes: attributes, stored: stored,
            modified: modified)
    }
}

/// KWallet's key patterns (`readEntryList` and its kin; Qt's wildcard syntax over the whole key): `*` any run,
/// `?` any one character, `[…]` one of a set (`[!…]` or `[^…]` none of it, `a-z` ranges), anything else
/// itself. Matched by Unicode scalar with one backtracking point (time proportional to the pattern's length
/// times the key's at worst), and within a budget of steps shared by every key of one call (a set's test costs
/// its range count): a hostile pattern over many long keys stops matching (the rest are left out) instead of
/// holding the daemon.
struct KWalletPattern {
    /// The steps one call may take over all its keys.
    static let stepBudget = 4_000_000

    private enum Token {
        case scalar(Unicode.Scalar)
        case any
        case run
        case set([ClosedRange<Unicode.Scalar>], negated: Bool)

        /// The steps one test of a character costs: a set's range count (each test looks at every range).
        var cost: Int {
            if case .set(let ranges, _) = self { max(1, ranges.count) } else { 1 }
        }

        func matches(_ scalar: Unicode.Scalar) -> Bool {
            switch self {
            case .scalar(let expected): expected == scalar
            case .any: true
            case .run: false
            case .set(let ranges, let negated): ranges.contains { $0.contains(scalar) } != negated
            }
        }
    }

    private let tokens: [Token]
    /// Steps left for this pattern's calls of ``matches(_:)``.
    private(set) var budget = stepBudget

    /// The pattern `text`.
    init(_ text: String) {
        var tokens: [Token] = []
        var scalars = Array(text.unicodeScalars)[...]
        while let scalar = scalars.popFirst() {
            switch scalar {
            case "*": tokens.append(.run)
            case "?": tokens.append(.any)
            case "[":
                guard let set = Self.set(&scalars) else {
                    tokens.append(.scalar("["))
                    continue
                }
                tokens.append(set)
            default: tokens.append(.scalar(scalar))
            }
        }
        self.tokens = tokens
    }

    /// A set after its `[`, consuming through its `]`; nil (nothing consumed) when it is not closed.
    private static func set(_ scalars: inout ArraySlice<Unicode.Scalar>) -> Token? {
        var rest = scalars
        var negated = false
        if let first = rest.first, first == "!" || first == "^" {
            negated = true
            rest.removeFirst()
        }
        var ranges: [ClosedRange<Unicode.Scalar>] = []
        var first = true
        while let scalar = rest.popFirst() {
            if scalar == "]", !first {
                scalars = rest
                return .set(merged(ranges), negated: negated)
            }
            first = false
            if rest.count >= 2, rest.first == "-", let upper = rest.dropFirst().first, upper != "]", scalar <= upper {
                rest.removeFirst(2)
                ranges.append(scalar...upper)
            } else {
                ranges.append(scalar...scalar)
            }
        }
        return nil
    }

    /// `ranges` sorted, the ones that overlap or touch joined (`[bbbb]` is one range, `[a-cb-e]` one).
    private static func merged(_ ranges: [ClosedRange<Unicode.Scalar>]) -> [ClosedRange<Unicode.Scalar>] {
        var joined: [ClosedRange<Unicode.Scalar>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = joined.last, UInt64(range.lowerBound.value) <= UInt64(last.upperBound.value) + 1 {
                joined[joined.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                joined.append(range)
            }
        }
        return joined
    }

    /// Whether `text` matches the whole pattern; false once the budget is spent. Each character tested costs
    /// the token's ``Token/cost`` (a set its range count), so a call's work is bounded whatever its sets.
    mutating func matches(_ text: String) -> Bool {
        let scalars = Array(text.unicodeScalars)
        var position = 0
        var index = 0
        var lastRun: (token: Int, position: Int)?
        while position < scalars.count {
            budget -= index < tokens.count ? tokens[index].cost : 1
            guard budget > 0 else { return false }
            if index < tokens.count, case .run = tokens[index] {
                lastRun = (index, position)
                index += 1
            } else if index < tokens.count, tokens[index].matches(scalars[position]) {
                index += 1
                position += 1
            } else if let run = lastRun {
                // Let the last `*` take one more character, and try the rest again from there.
                lastRun = (run.token, run.position + 1)
                index = run.token + 1
                position = run.position + 1
            } else {
                return false
            }
        }
        while index < tokens.count, case .run = tokens[index] { index += 1 }
        return index == tokens.count
    }
}
