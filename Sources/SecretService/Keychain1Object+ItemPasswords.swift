import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// `Keychain1.Add` of an item with a password of its own (`kSecAccessControlApplicationPassword`,
/// docs/secitem-semantics.md, "An item's own password"): the person chooses the item's password (typed twice),
/// and the secret is stored sealed under a key scrypt derives from it (``ItemPasswordEnvelope``), bound to the
/// item's reference, made here before the item is added.
extension Keychain1Object {
    /// Adds an item whose `attributes` ask for a password of its own once the person chose it (the reply is
    /// deferred meanwhile); nil when they do not ask for one (the add goes on as any other). Refused, nothing is
    /// added: `errSecUserCanceled` (cancelled), `errSecInteractionNotAllowed` (nobody could be asked).
    func addingWithItemPassword(
        _ attributes: ItemAttributes, of itemClass: ItemClass, secret: SharedSecret?, call: DBusMethodCall
    ) throws(DBusError) -> DBusMethodResult? {
        guard (try? AccessConstraints.of(attributes))??.needsItemPassword == true else { return nil }
        let reference: ItemReference
        let plain: SharedSecret
        do throws(KeychainError) {
            // An add that would fail anyway fails before anyone is asked.
            if try keychain.keychain.hasDuplicate(of: itemClass, attributes: attributes) {
                throw KeychainError(.duplicateItem, "an item with these primary attributes exists")
            }
            reference = try ItemPasswordEnvelope.newReference(of: itemClass)
            // No secret given: an empty one, sealed all the same (every such item's secret is an envelope).
            if let secret {
                plain = secret
            } else {
                plain = try KeychainError.allocating { () throws(SecretMemoryError) in try SharedSecret(copying: []) }
            }
        } catch {
            throw Keychain1Interface.dbusError(error)
        }
        var label = ""
        if case .string(let text)? = attributes[.label] { label = text }
        askNewItemPassword(for: reference, label: label, sealing: plain, call: call) { [self] sealed in
            do throws(KeychainError) {
                var item = NewItem(itemClass, attributes: attributes, secret: try sealed.get())
                item.reference = reference
                daemon.reply(to: call, .success(try add(item, nil, call: call)))
            } catch {
                daemon.reply(to: call, .failure(Keychain1Interface.dbusError(error)))
            }
        }
        return .deferred
    }

    /// Asks the person for a new password of the item `reference` (labelled `label`) and seals `plain` under it on
    /// the worker; `completion` gets the envelope, or why not (`errSecUserCanceled`, `errSecInteractionNotAllowed`).
    /// The prompt is withdrawn when the caller leaves.
    private func askNewItemPassword(
        for reference: ItemReference, label: String, sealing plain: SharedSecret, call: DBusMethodCall,
        completion: @escaping (Result<Data, KeychainError>) -> Void
    ) {
        let kdf = daemon.registry.configuration.kdf
        let request = NewItemPasswordRequest(
            label: label, keychain: keychain,
            who: daemon.confirmationName(of: daemon.requester(of: call.sender), sender: call.sender),
            client: daemon.promptClient(of: call.sender),
            seal: { (password) throws(KeychainError) in
                try plain.withUnsafeBytes { (bytes) throws(KeychainError) in
                    try ItemPasswordEnvelope.seal(bytes, password: password, item: reference, kdf: kdf)
                }
            })
        let daemon = daemon
        var ticket: PromptTicket?
        var finished = false
        ticket = daemon.registry.askNewItemPassword(request) { sealed in
            finished = true
            if let ticket { daemon.forget([ticket], of: call.sender) }
            completion(sealed)
        }
        if !finished, let ticket { daemon.accessTickets[call.sender, default: []].append(ticket) }
    }

    /// `Update` giving items a password of their own (`kSecAttrAccessControl` with `applicationPassword` for items
    /// without it): the person chooses each one's password in turn, and its secret (the new one, else the one it
    /// has) is sealed under it; then `then` runs with the envelopes by item (at once, with none, when no item
    /// gains one). `kSecUseAuthenticationUIFail` and `Skip`: refused with `errSecInteractionNotAllowed`, nothing
    /// asked. A refusal ends the update, nothing changed.
    func sealingUnderNewItemPasswords(
        matching query: ItemQuery, to given: ItemAttributes, secret: SharedSecret?, call: DBusMethodCall,
        then: @escaping ([ItemReference: Data]) -> Result<DBusMethodResult, DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        guard given[.accessControl] != nil, (try? AccessConstraints.of(given))??.needsItemPassword == true,
            !keychain.isLocked
        else { return try then([:]).get() }
        var reading = query
        reading.returning = [.attributes, .reference]
        reading.limit = .all
        // Those without the flag, and those with it whose secret was stored unsealed (before it was enforced).
        let gaining = ((try? keychain.keychain.items(matching: reading)) ?? []).filter { !isSealed($0) }
        guard !gaining.isEmpty else { return try then([:]).get() }
        guard query.authentication.interaction == .allow else {
            throw Keychain1Interface.dbusError(
                KeychainError(
                    .interactionNotAllowed,
                    "giving an item a password of its own asks the person, and the caller asked that nobody be asked"))
        }
        let daemon = daemon
        var sealed: [ItemReference: Data] = [:]
        func next(_ index: Int) {
            guard index < gaining.count else {
                switch then(sealed) {
                case .success(.reply(let values)): daemon.reply(to: call, .success(values))
                case .success(.deferred): break
                case .failure(let error): daemon.reply(to: call, .failure(error))
                }
                return
            }
            let item = gaining[index]
            var label = ""
            if case .string(let text)? = item.attributes?[.label] { label = text }
            let plain: SharedSecret
            do throws(KeychainError) {
                if let secret { plain = secret } else { plain = try storedSecret(of: item.reference) }
            } catch {
                return daemon.reply(to: call, .failure(Keychain1Interface.dbusError(error)))
            }
            askNewItemPassword(for: item.reference, label: label, sealing: plain, call: call) { result in
                switch result {
                case .success(let envelope):
                    sealed[item.reference] = envelope
                    next(index + 1)
                case .failure(let error): daemon.reply(to: call, .failure(Keychain1Interface.dbusError(error)))
                }
            }
        }
        next(0)
        return .deferred
    }

    /// Whether `item` (read with its attributes) has a password of its own: the flag, and its secret stored
    /// sealed under it (one stored before the flag was enforced, when it was recorded only, is not).
    private func isSealed(_ item: KeychainItem) -> Bool {
        guard (try? AccessConstraints.of(item.attributes ?? [:]))??.needsItemPassword == true else { return false }
        let target = SecretServiceDaemon.SecretTarget(held: keychain, reference: item.reference)
        if case .unsealed = SecretServiceDaemon.storedEnvelope(of: target) { return false }
        return true
    }

    /// The secret `reference` has now, in secret memory (empty when it has none).
    private func storedSecret(of reference: ItemReference) throws(KeychainError) -> SharedSecret {
        let query = ItemQuery(reference.itemClass, synchronizable: .any, references: [reference], returning: .reference)
        if let secret = try keychain.keychain.itemWithSecret(matching: query)?.secret { return secret }
        return try KeychainError.allocating { () throws(SecretMemoryError) in try SharedSecret(copying: []) }
    }

    /// Changes the items `matching` finds with `changes`, those with a password of their own (before or after
    /// the change) each on its own: a new secret sealed under the key its password gave when it was asked for
    /// this update (`opened`, by ``SecretServiceDaemon/confirmationKey(_:_:)``, as the confirmation left them),
    /// the plain secret when the change takes the password away (the new one, else the one opened), the envelope
    /// `sealed` made for one given a password by this update. The others as one change. How many changed.
    func updateWithItemPasswords(
        matching: ItemQuery, with changes: ItemChanges, sealed: [ItemReference: Data],
        opened: [String: OpenedItemSecret]
    ) throws(KeychainError) -> Int {
        var reading = matching
        reading.returning = [.attributes, .reference]
        reading.limit = .all
        let matched = try keychain.keychain.items(matching: reading)
        let afterwards: Bool? =
            changes.attributes[.accessControl] == nil
            ? nil : try AccessConstraints.of(changes.attributes)?.needsItemPassword == true
        var own: [(ItemReference, SharedSecret?, Data?)] = []
        var rest: [ItemReference] = []
        for item in matched {
            let had = isSealed(item)
            let after = afterwards ?? had
            if let envelope = sealed[item.reference] {
                own.append((item.reference, nil, envelope))
                continue
            }
            guard had || after else {
                rest.append(item.reference)
                continue
            }
            guard had else {
                throw KeychainError(.param, "an item given a password of its own was not asked for it")
            }
            let key = SecretServiceDaemon.confirmationKey(keychain, item.reference)
            guard let openedItem = opened[key] else {
                // Attributes only, the password kept: the envelope stays as it is.
                if after, changes.secret == nil {
                    rest.append(item.reference)
                    continue
                }
                throw KeychainError(
                    .interactionNotAllowed, "the item has a password of its own, and it was not given for this change")
            }
            if after {
                var envelope: Data?
                if let secret = changes.secret {
                    let sealing = secret.withUnsafeBytes { (bytes) in
                        Result { () throws(KeychainError) in try openedItem.key.seal(bytes) }
                    }
                    envelope = try sealing.get()
                }
                own.append((item.reference, nil, envelope))
            } else {
                own.append((item.reference, changes.secret == nil ? openedItem.secret : nil, changes.secret))
            }
        }
        guard !own.isEmpty else { return try keychain.keychain.update(matching: matching, with: changes) }
        func only(_ references: [ItemReference]) -> ItemQuery {
            var query = matching
            query.references = references
            return query
        }
        // One transaction for all of them: each item with a password of its own gets its own secret (its new
        // envelope, or, its password taken away, its plain secret); the others the change's.
        var secrets: [ItemReference: SharedSecret] = [:]
        for (reference, plain, bytes) in own {
            if let plain {
                secrets[reference] = plain
            } else if let bytes {
                do {
                    secrets[reference] = try SharedSecret(copying: bytes)
                } catch {
                    throw KeychainError(.allocate, "no secret memory for an item's secret: \(error)")
                }
            }
        }
        return try keychain.keychain.update(
            matching: only(rest + own.map(\.0)), with: changes, secrets: secrets)
    }
}
