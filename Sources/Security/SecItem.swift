import Foundation
import KeychainClient
import KeychainCore
import KeychainStore

/// Adds an item to a keychain (the default one, or the one `kSecUseKeychain`
/// names) and, when `result` is given and the dictionary asks with
/// `kSecReturn*`, returns it in the shape `SecItemCopyMatching` would.
///
/// - Returns: `errSecSuccess`, `errSecDuplicateItem` when an item of the class
///   with the same primary key exists, `errSecParam`, `errSecNoSuchAttr`,
///   `errSecInteractionNotAllowed` when the keychain is locked, or another `errSec*`.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    osStatus { () throws(KeychainError) in
        let request = try QueryDictionary(attributes, role: .add)
        guard let itemClass = request.itemClass else { throw .param("kSecClass is missing") }
        var values = request.attributes
        if request.synchronizable == .yes { values[.synchronizable] = .bool(true) }
        let keychain = try orDefault(request.keychains?.first)
        if keychain.store is Keychain, try AccessConstraints.of(values)?.needsItemPassword == true {
            throw inProcessItemPassword
        }
        let item = try keychain.store.add(itemClass, attributes: values, secret: request.data)
        if let result {
            result.pointee =
                request.returning.isEmpty
                ? nil : ResultShape(returning: request.returning).object(for: item, in: keychain)
        }
    }
}

/// Finds the items that match a query and returns what it asks for: a bare
/// value when it asks for one kind of result and one match, a dictionary
/// when it asks for several kinds, an array of either when `kSecMatchLimit`
/// allows more than one match.
///
/// - Returns: `errSecSuccess`, `errSecItemNotFound` when nothing matches,
///   `errSecParam`, `errSecNoSuchAttr`, `errSecInteractionNotAllowed` when
///   attributes or data are asked of a locked keychain, or another `errSec*`.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    osStatus { () throws(KeychainError) in
        let request = try QueryDictionary(query, role: .search)
        let found = try search(request)
        guard !found.isEmpty else { throw KeychainError(.itemNotFound, "no item matches the query") }
        guard let result else { return }
        guard !request.returning.isEmpty else {
            result.pointee = nil
            return
        }
        let shape = ResultShape(returning: request.returning)
        if request.limit == .one, let (keychain, item) = found.first {
            result.pointee = shape.object(for: item, in: keychain)
        } else {
            result.pointee = NSArray(array: found.map { shape.object(for: $0.1, in: $0.0) })
        }
    }
}

/// Changes every item that matches `query`: the attributes and the data
/// (`kSecValueData`) in `attributesToUpdate`, and the modification date.
///
/// - Returns: `errSecSuccess`, `errSecItemNotFound`, `errSecDuplicateItem`
///   when a change would make two items share a primary key (nothing
///   changes then), `errSecParam` for return or search keys among the
///   attributes to update, or another `errSec*`.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    osStatus { () throws(KeychainError) in
        let request = try QueryDictionary(query, role: .update)
        let changes = try QueryDictionary(attributesToUpdate, role: .changes)
        let itemChanges = ItemChanges(attributes: changes.attributes, secret: changes.data)
        try forEachTarget(of: request) { (keychain, query) throws(KeychainError) in
            if keychain.store is Keychain { try refuseItemPasswordsInProcess(keychain.store, query, itemChanges) }
            return try keychain.store.update(matching: query, with: itemChanges)
        }
    }
}

/// `errSecInteractionNotAllowed` for an item with a password of its own in a keychain file opened in this
/// process: only latchkeyd asks for an item's password (docs/secitem-semantics.md, "An item's own password").
private var inProcessItemPassword: KeychainError {
    KeychainError(
        .interactionNotAllowed,
        "an item with a password of its own is made and changed through latchkeyd, which asks for the password:"
            + " the keychain file is open in this process")
}

/// Refuses, in a keychain file opened in this process, an update that gives items a password of their own or
/// changes the secret or access control of items that have one: sealing under, or opening with, an item's
/// password is latchkeyd's (stored as it is, a new secret would not be sealed under it).
private func refuseItemPasswordsInProcess(_ store: any KeychainBackend, _ query: ItemQuery, _ changes: ItemChanges)
    throws(KeychainError)
{
    if try AccessConstraints.of(changes.attributes)?.needsItemPassword == true { throw inProcessItemPassword }
    guard changes.secret != nil || changes.attributes[.accessControl] != nil else { return }
    var reading = query
    reading.returning = .attributes
    reading.limit = .all
    for item in try store.items(matching: reading)
    where try AccessConstraints.of(item.attributes ?? [:])?.needsItemPassword == true {
        throw inProcessItemPassword
    }
}

/// Deletes every item that matches `query`, or the items it names with
/// `kSecValueRef`, `kSecValuePersistentRef` or `kSecMatchItemList`.
///
/// - Returns: `errSecSuccess`, `errSecItemNotFound` when nothing matches, or another `errSec*`.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    osStatus { () throws(KeychainError) in
        let request = try QueryDictionary(query, role: .delete)
        try forEachTarget(of: request) { (keychain, query) throws(KeychainError) in
            try keychain.store.delete(matching: query)
        }
    }
}

// MARK: - Shared steps

/// The keychains a request covers and the item references it is limited to.
private func targets(of request: QueryDictionary) throws(KeychainError) -> (
    [SecKeychain], [ItemReference]?
) {
    var keychains: [SecKeychain]
    if let listed = request.keychains { keychains = listed } else { keychains = [try currentDefaultKeychain()] }
    guard request.items != nil || request.persistentReference != nil else { return (keychains, nil) }
    // An item list, even an empty one, limits the search to the items it names.
    var references: [ItemReference] = request.persistentReference.map { [$0] } ?? []
    for object in request.items ?? [] {
        if let item = object as? SecKeychainItem {
            references.append(item.reference)
            if request.keychains == nil, !keychains.contains(item.keychain) { keychains.append(item.keychain) }
        } else if let data = object as? Data, let reference = ItemReference(persistentData: data) {
            references.append(reference)
        } else {
            throw KeychainError(.invalidItemReference, "an item in the item list is not an item reference")
        }
    }
    return (keychains, references)
}

/// The matches of a search over every keychain it covers, up to its limit.
private func search(_ request: QueryDictionary) throws(KeychainError) -> [(SecKeychain, KeychainItem)] {
    guard let itemClass = request.itemClass else { throw .param("kSecClass is missing") }
    let (keychains, references) = try targets(of: request)
    let query = request.query(itemClass, references: references)
    try query.validate()
    var found: [(SecKeychain, KeychainItem)] = []
    for keychain in keychains {
        let items: [KeychainItem]
        do {
            items = try readable(keychain.store, query)
        } catch
            where error.status == .interactionNotAllowed && request.skipsItemsNeedingAuthentication
            && keychain.store.isLocked && !query.returning.isDisjoint(with: [.data, .attributes])
        {
            // A locked keychain's items are left out, but those of classes readable while it is locked
            // (AfterFirstUnlock), which the store returns.
            continue
        }
        for item in items {
            found.append((keychain, item))
            if let maximum = query.limit.maximum, found.count >= maximum { return found }
        }
    }
    return found
}

/// The matches of `query` in `store` whose secrets may be handed over. latchkeyd enforces an item's access
/// control itself (it asks the person); a keychain file opened in this process has nobody to ask but this
/// process, which holds the keychain's key: an item whose access control needs the person is left out under
/// `kSecUseAuthenticationUISkip` and otherwise fails the read with `errSecInteractionNotAllowed`, rather than
/// handing its secret over unasked (docs/secitem-semantics.md, "Enforced access control").
private func readable(_ store: any KeychainBackend, _ query: ItemQuery) throws(KeychainError) -> [KeychainItem] {
    guard store is Keychain, query.returning.contains(.data) else { return try store.items(matching: query) }
    var reading = query
    reading.returning.insert(.attributes)
    var kept: [KeychainItem] = []
    for item in try store.items(matching: reading) {
        if try AccessConstraints.of(item.attributes ?? [:])?.needsAuthentication == true {
            if query.authentication.interaction == .skip { continue }
            throw KeychainError(
                .interactionNotAllowed,
                "the item's access control asks for the person, and only latchkeyd can ask: the keychain file is"
                    + " open in this process")
        }
        kept.append(
            query.returning.contains(.attributes)
                ? item : KeychainItem(reference: item.reference, attributes: nil, secret: item.secret))
    }
    return kept
}

/// Runs an update or delete on each keychain a request covers; `errSecItemNotFound` only if none matched.
private func forEachTarget(
    of request: QueryDictionary, _ body: (SecKeychain, ItemQuery) throws(KeychainError) -> Int
) throws(KeychainError) {
    guard let itemClass = request.itemClass else { throw .param("kSecClass is missing") }
    let (keychains, references) = try targets(of: request)
    let query = request.query(itemClass, references: references)
    var changed = 0
    for keychain in keychains {
        do {
            changed += try body(keychain, query)
        } catch  where error.status == .itemNotFound {
            continue
        }
    }
    if changed == 0 { throw KeychainError(.itemNotFound, "no item matches the query") }
}
