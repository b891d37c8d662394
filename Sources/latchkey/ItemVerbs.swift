import FoundationEssentials
import KeychainClient
import KeychainCore
import Pinentry

/// What `find-*` prints.
struct FindOutput {
    /// `-g`: the password line after the attributes (on standard error, as `security(1)` does).
    var showPassword = false
    /// `-w`: the password alone.
    var passwordOnly = false
    /// `--json`.
    var json = false

    var needsPassword: Bool { showPassword || passwordOnly }
}

/// The work of the item verbs, shared by the generic and Internet password commands.
enum ItemVerbs {
    /// Adds an item, or with `update` changes the one with the same primary key.
    static func add(
        _ itemClass: ItemClass, attributes given: ItemAttributes, defaultLabel: String?, secret: Data?,
        update: Bool, keychain argument: String?
    ) throws(KeychainError) {
        var attributes = given
        if attributes[.label] == nil, let defaultLabel { attributes[.label] = .string(defaultLabel) }
        let target = try KeychainTarget.open(argument, unlocked: true)
        do {
            _ = try target.backend.add(itemClass, attributes: attributes, secret: secret ?? Data())
        } catch  where error.status == .duplicateItem && update {
            guard let existing = try samePrimaryKey(itemClass, as: attributes, in: target) else { throw error }
            let query = ItemQuery(itemClass, synchronizable: .any, references: [existing.reference])
            _ = try target.backend.update(
                matching: query, with: ItemChanges(attributes: attributes, secret: secret))
        }
    }

    /// The item whose primary key equals the one `attributes` give (a missing attribute counts as empty).
    private static func samePrimaryKey(_ itemClass: ItemClass, as attributes: ItemAttributes, in target: KeychainTarget)
        throws(KeychainError) -> KeychainItem?
    {
        let key = ItemSchema.of(itemClass).primaryKey.filter { $0 != .synchronizable }
        let query = ItemQuery(
            itemClass, attributes: attributes.filter { key.contains($0.key) }, synchronizable: .any, limit: .all,
            returning: .attributes)
        return try target.backend.items(matching: query).first { item in
            key.allSatisfy {
                isEmpty(item.attributes?[$0]) && isEmpty(attributes[$0]) || item.attributes?[$0] == attributes[$0]
            }
        }
    }

    private static func isEmpty(_ value: AttributeValue?) -> Bool {
        switch value {
        case nil: true
        case .string(let text)?: text.isEmpty
        case .data(let data)?: data.isEmpty
        default: false
        }
    }

    /// The first item matching `attributes`, with its secret when `withSecret`.
    private static func first(
        _ itemClass: ItemClass, _ attributes: ItemAttributes, in target: KeychainTarget, withSecret: Bool
    ) throws(KeychainError) -> KeychainItem {
        let query = ItemQuery(
            itemClass, attributes: attributes, synchronizable: .any, limit: .one,
            returning: withSecret ? [.attributes, .data] : .attributes)
        guard let item = try target.backend.items(matching: query).first else {
            throw KeychainError(.itemNotFound, "The specified item could not be found in the keychain.")
        }
        return item
    }

    /// Prints the first matching item as `output` asks.
    static func find(
        _ itemClass: ItemClass, attributes: ItemAttributes, keychain argument: String?, output: FindOutput
    ) throws(KeychainError) {
        // A locked keychain is asked for its password only when the item cannot be read as it is: an
        // AfterFirstUnlock item held by the daemon reads while the keychain is locked.
        let target = try KeychainTarget.open(argument, unlocked: false)
        let item: KeychainItem
        do {
            item = try first(itemClass, attributes, in: target, withSecret: output.needsPassword)
        } catch  where error.status == .interactionNotAllowed && target.backend.isLocked {
            try target.unlock()
            item = try first(itemClass, attributes, in: target, withSecret: output.needsPassword)
        }
        let secret = output.needsPassword ? item.secret ?? Data() : nil
        if output.json {
            print(ItemListing.json(item, keychain: target.path, password: secret).text)
        } else if output.passwordOnly, let secret {
            print(ItemListing.passwordOnly(secret))
        } else {
            print(ItemListing.text(item, keychain: target.path))
            if let secret { StandardError.write(ItemListing.passwordLine(secret)) }
        }
    }

    /// Deletes the first matching item, after printing it.
    static func delete(_ itemClass: ItemClass, attributes: ItemAttributes, keychain argument: String?)
        throws(KeychainError)
    {
        let target = try KeychainTarget.open(argument, unlocked: true)
        let item = try first(itemClass, attributes, in: target, withSecret: false)
        _ = try target.backend.delete(
            matching: ItemQuery(itemClass, synchronizable: .any, references: [item.reference]))
        print(ItemListing.text(item, keychain: target.path))
        print("password has been deleted.")
    }

    /// The classes `dump-keychain` lists, in its order.
    static let dumpedClasses: [ItemClass] = [.genericPassword, .internetPassword, .certificate, .key, .identity]

    /// Prints every item of a keychain; with `secrets`, after a confirmation, their secrets too.
    static func dump(keychain argument: String?, secrets: Bool, json: Bool) throws(KeychainError) {
        let target = try KeychainTarget.open(argument, unlocked: true)
        var items: [KeychainItem] = []
        for itemClass in dumpedClasses {
            items += try target.backend.items(
                matching: ItemQuery(itemClass, synchronizable: .any, limit: .all, returning: .attributes))
        }
        if secrets, !items.isEmpty, !(try confirm("Show the secrets of \(items.count) items of \(target.path)?")) {
            throw KeychainError(.userCanceled, "not confirmed; no secret was shown")
        }
        var documents: [JSONValue] = []
        for item in items {
            var secret: Data?
            if secrets {
                let query = ItemQuery(
                    item.itemClass, synchronizable: .any, references: [item.reference], returning: .data)
                secret = try target.backend.items(matching: query).first?.secret ?? Data()
            }
            if json {
                documents.append(ItemListing.json(item, keychain: target.path, password: secret))
            } else {
                print(ItemListing.text(item, keychain: target.path))
                if let secret { print("data:\n" + ItemListing.dataText(secret)) }
            }
        }
        if json { print(JSONValue.array(documents).text) }
    }

    /// Asks yes or no: on the terminal when there is one, else through pinentry.
    static func confirm(_ question: String) throws(KeychainError) -> Bool {
        if let answer = try SecretInput.fromTerminal(prompt: question + " [y/N] ", echo: true) {
            return answer.first.map { $0 | 0x20 == UInt8(ascii: "y") } ?? false
        }
        do throws(PinentryError) {
            return try PinentryWait.fromEnvironment { (pinentry) throws(PinentryError) in
                try pinentry.confirm(
                    PinentryRequest(title: "latchkey", description: question, okLabel: "Show", cancelLabel: "Cancel"))
            }
        } catch {
            throw KeychainError(.interactionNotAllowed, "no terminal to confirm on, and \(error.description)")
        }
    }
}
