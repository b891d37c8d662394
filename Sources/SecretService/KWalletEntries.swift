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
    let modified: Date
}

extension HeldKeychain {
    /// The KWallet entries of `folder` (every folder when nil), one per key: of items with the same folder and
    /// key, the most recently modified.
    func kwalletEntries(folder: String?) throws(KeychainError) -> [KWalletEntry] {
        let items: [KeychainItem]
        if let folder {
            var found: [KeychainItem] = []
            for reference in try search([KWalletScheme.folderAttribute: folder]) {
                if let item = try item(reference, returning: .attributes) { found.append(item) }
            }
            items = found
        } else {
            items = try allItems(returning: .attributes)
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
        for reference in try search([KWalletScheme.folderAttribute: folder, KWalletScheme.keyAttribute: key]) {
            guard let item = try item(reference, returning: .attributes), let entry = Self.kwalletEntry(item),
                entry.folder == folder, entry.key == key
            else { continue }
            if let current = best, current.modified > entry.modified { continue }
            best = entry
        }
        return best
    }

    /// Every item of `folder` that has a key (whatever its type): what `removeFolder` deletes. An item with a
    /// `server` and no `user` (a libsecret network password for a host) is no entry and stays.
    func kwalletItems(folder: String) throws(KeychainError) -> [ItemReference] {
        var references: [ItemReference] = []
        for reference in try search([KWalletScheme.folderAttribute: folder]) {
            guard let stored = try item(reference, returning: .attributes)?.attributes else { continue }
            let attributes = AttributeMapping.secretServiceAttributes(stored, of: reference.itemClass)
            if attributes[KWalletScheme.keyAttribute] != nil { references.append(reference) }
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
            reference: item.reference, folder: folder, key: key, form: form, attributes: attributes, modified: modified)
    }

    /// The secret of `entry`'s item in secret memory, nil when it has none or is gone.
    func kwalletSecret(_ entry: KWalletEntry) -> SharedSecret? {
        (try? itemWithSecret(entry.reference))?.secret
    }
}

/// KWallet's key patterns (`readEntryList` and its kin; Qt's wildcard syntax over the whole key): `*` any run,
/// `?` any one character, `[…]` one of a set (`[!…]` or `[^…]` none of it, `a-z` ranges), anything else
/// itself. Matched in time proportional to the pattern's length times the key's (no backtracking blow-up).
struct KWalletPattern {
    private enum Token {
        case character(Character)
        case any
        case run
        case set([ClosedRange<Character>], negated: Bool)

        func matches(_ character: Character) -> Bool {
            switch self {
            case .character(let expected): expected == character
            case .any: true
            case .run: false
            case .set(let ranges, let negated): ranges.contains { $0.contains(character) } != negated
            }
        }
    }

    private let tokens: [Token]

    /// The pattern `text`.
    init(_ text: String) {
        var tokens: [Token] = []
        var characters = Array(text)[...]
        while let character = characters.popFirst() {
            switch character {
            case "*": tokens.append(.run)
            case "?": tokens.append(.any)
            case "[":
                guard let set = Self.set(&characters) else {
                    tokens.append(.character("["))
                    continue
                }
                tokens.append(set)
            default: tokens.append(.character(character))
            }
        }
        self.tokens = tokens
    }

    /// A set after its `[`, consuming through its `]`; nil (nothing consumed) when it is not closed.
    private static func set(_ characters: inout ArraySlice<Character>) -> Token? {
        var rest = characters
        var negated = false
        if let first = rest.first, first == "!" || first == "^" {
            negated = true
            rest.removeFirst()
        }
        var ranges: [ClosedRange<Character>] = []
        var first = true
        while let character = rest.popFirst() {
            if character == "]", !first {
                characters = rest
                return .set(ranges, negated: negated)
            }
            first = false
            if rest.count >= 2, rest.first == "-", let upper = rest.dropFirst().first, upper != "]", character <= upper
            {
                rest.removeFirst(2)
                ranges.append(character...upper)
            } else {
                ranges.append(character...character)
            }
        }
        return nil
    }

    /// Whether `text` matches the whole pattern.
    func matches(_ text: String) -> Bool {
        let characters = Array(text)
        var position = 0
        var index = 0
        var lastRun: (token: Int, position: Int)?
        while position < characters.count {
            if index < tokens.count, case .run = tokens[index] {
                lastRun = (index, position)
                index += 1
            } else if index < tokens.count, tokens[index].matches(characters[position]) {
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
