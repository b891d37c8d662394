import DBus
import FoundationEssentials
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// Every face's reads of items whose access control (`kSecAttrAccessControl`) asks for the person: confirmed
/// once the access list allowed the caller, before any secret is handed over (docs/secitem-semantics.md,
/// "Enforced access control"). Every path that hands out a secret comes here through
/// ``SecretServiceDaemon/servingSecrets(of:to:authentication:_:)``: `GetSecret`, `GetSecrets`,
/// `Keychain1.Search` with data, KWallet's reads; the fast paths that serve a trusted caller at once ask
/// ``SecretServiceDaemon/servesAtOnce(_:caller:)`` first.
extension SecretServiceDaemon {
    /// What an item's access control asks of a read by one connection.
    enum ReadConfirmation {
        /// Nothing: no access control asking for the person, or a confirmation still holding.
        case none
        /// The person must meet these constraints.
        case needed(AccessConstraints, label: String)
        /// The item's access control cannot be read: nothing is handed out.
        case unreadable(label: String)
    }

    /// Whether `caller` may have `target`'s secret with no prompt: the rules allow it and the item asks for no
    /// confirmation now.
    func servesAtOnce(_ target: SecretTarget, caller: String) -> Bool {
        guard decide(.read, target, caller: caller) == .allowed else { return false }
        if case .none = confirmation(of: target, by: caller) { return true }
        return false
    }

    /// Whether a read of `target` by `caller` must be confirmed now (for `kSecUseAuthenticationUISkip`).
    func needsConfirmation(_ target: SecretTarget, by caller: String) -> Bool {
        if case .none = confirmation(of: target, by: caller) { return false }
        return true
    }

    /// What `target`'s access control asks of a read by `caller` now.
    func confirmation(of target: SecretTarget, by caller: String) -> ReadConfirmation {
        var attributes = target.attributes
        // Every face gives the item's stored attributes as it read them; read them only when it did not.
        if attributes?.isEmpty ?? true {
            guard !target.held.isLocked else { return .none }
            let query = ItemQuery(
                target.reference.itemClass, synchronizable: .any, limit: .one, references: [target.reference],
                returning: .attributes)
            attributes = (try? target.held.keychain.items(matching: query))?.first?.attributes ?? attributes
        }
        var label = ""
        if case .string(let text)? = attributes?[.label] { label = text }
        let constraints: AccessConstraints?
        do throws(KeychainError) {
            constraints = try AccessConstraints.of(attributes ?? [:])
        } catch {
            return .unreadable(label: label)
        }
        guard let constraints, constraints.needsAuthentication else { return .none }
        // An item's own password is asked at each read: no confirmation holds for it.
        if !constraints.needsItemPassword, let until = confirmedReads[caller]?[Self.confirmationKey(target)],
            until > registry.now
        {
            return .none
        }
        return .needed(constraints, label: label)
    }

    /// Confirms the reads of `targets` the access stage allowed (`allowed`, `outcome`) whose items ask for the
    /// person: at once (nil) when none does or `authentication` says not to ask (`Fail`: refused with
    /// `errSecInteractionNotAllowed`; `Skip`: left out), else one prompt per keychain, after which `then` runs
    /// with the items confirmed still allowed (and the reply deferred meanwhile: the result is nil).
    func confirmingReads(
        of targets: [SecretTarget], allowed: [Bool], outcome: AccessOutcome, sender: String,
        authentication: AuthenticationOptions, then: @escaping ([Bool], AccessOutcome) -> Void
    ) -> ([Bool], AccessOutcome)? {
        var state = ConfirmationState(allowed: allowed, outcome: outcome)
        var groups: [ConfirmationGroup] = []
        for (index, target) in targets.enumerated() where allowed[index] {
            switch confirmation(of: target, by: sender) {
            case .none: continue
            case .unreadable(let label):
                state.deny([index], labels: [label], .unconfirmed(.decode, "its access control cannot be read"))
            case .needed(var constraints, let label):
                // An item with a password of its own: its stored envelope, opened once the person typed it.
                var own: OwnPasswordRead?
                if constraints.needsItemPassword {
                    switch Self.storedEnvelope(of: target) {
                    case .envelope(let envelope):
                        own = OwnPasswordRead(reference: target.reference, label: label, envelope: envelope)
                    case .unsealed:
                        // Made while the flag was recorded only: read as then until an update gives it a password.
                        constraints.flags &= ~AccessConstraints.applicationPassword
                        guard constraints.needsAuthentication else { continue }
                    case .unreadable:
                        state.deny([index], labels: [label], .unconfirmed(.decode, "its stored secret cannot be read"))
                        continue
                    }
                }
                let at =
                    groups.firstIndex { $0.held === target.held }
                    ?? {
                        groups.append(ConfirmationGroup(held: target.held))
                        return groups.count - 1
                    }()
                groups[at].indexes.append(index)
                groups[at].constraints.append(constraints)
                groups[at].labels.append(label)
                if let own { groups[at].own.append((index, own)) }
            }
        }
        guard !groups.isEmpty else { return (state.allowed, state.outcome) }
        switch authentication.interaction {
        case .allow: break
        case .fail:
            for group in groups {
                state.deny(
                    group.indexes, labels: group.labels,
                    .unconfirmed(
                        .interactionNotAllowed, "the caller asked that nobody be asked (kSecUseAuthenticationUIFail)"))
            }
            return (state.allowed, state.outcome)
        case .skip:
            for group in groups { for index in group.indexes { state.allowed[index] = false } }
            return (state.allowed, state.outcome)
        }
        let who = confirmationName(of: requester(of: sender), sender: sender)
        let client = promptClient(of: sender)
        let reason = authentication.operationPrompt
        // One keychain after the other; the reply once the last is done.
        func confirm(_ next: Int, _ state: ConfirmationState) {
            guard next < groups.count else {
                // The secrets opened with their items' own passwords, for this reply only.
                openedForServing = state.opened
                defer { openedForServing = [:] }
                return then(state.allowed, state.outcome)
            }
            let group = groups[next]
            var ticket: PromptTicket?
            var finished = false
            var request = ItemAuthenticationRequest(
                constraints: group.constraints, labels: group.labels, keychain: group.held, who: who,
                reason: reason, client: client)
            request.ownPasswords = group.own.map(\.read)
            registry.confirmRead(
                request,
                ticket: { [self] made in
                    guard !finished else { return }
                    ticket = made
                    accessTickets[sender, default: []].append(made)
                },
                completion: { [self] result in
                    finished = true
                    if let ticket { forget([ticket], of: sender) }
                    var state = state
                    switch result {
                    case .confirmed:
                        let now = registry.now
                        let until = now + Self.reuseNanoseconds
                        // Those that ran out go: a connection keeps no more than it confirmed in the last 10 s.
                        confirmedReads[sender] = confirmedReads[sender]?.filter { $0.value > now }
                        let ownIndexes = Set(group.own.map(\.index))
                        for index in group.indexes where !ownIndexes.contains(index) {
                            confirmedReads[sender, default: [:]][Self.confirmationKey(targets[index])] = until
                        }
                        for (position, own) in group.own.enumerated() {
                            guard let secret = request.opened.secrets[position] else {
                                state.deny(
                                    [own.index], labels: [own.read.label],
                                    .unconfirmed(.authFailed, "the item's password was not given"))
                                continue
                            }
                            state.opened[Self.confirmationKey(targets[own.index])] = secret
                        }
                    case .refused(let status, let why):
                        state.deny(group.indexes, labels: group.labels, .unconfirmed(status, why))
                    }
                    confirm(next + 1, state)
                })
        }
        confirm(0, state)
        return nil
    }

    /// ``KeychainRegistry/confirmationReuse`` in nanoseconds.
    private static let reuseNanoseconds: Int64 = KeychainRegistry.confirmationReuse.components.seconds * 1_000_000_000

    /// The key of a confirmed read: the item in its keychain.
    private static func confirmationKey(_ target: SecretTarget) -> String {
        confirmationKey(target.held, target.reference)
    }

    /// The key of a confirmed read of `reference` in `held`.
    static func confirmationKey(_ held: HeldKeychain, _ reference: ItemReference) -> String {
        held.id + "\t" + reference.description
    }

    /// What an item with a password of its own stores as its secret.
    enum StoredEnvelope {
        /// The envelope its password opens.
        case envelope(Data)
        /// A secret stored before the flag was enforced (when it was recorded only), or none: not sealed.
        case unsealed
        /// Nothing could be read (locked, gone, damaged).
        case unreadable
    }

    /// The stored secret of `target`'s item, for an item with a password of its own. A secret that is not an
    /// envelope is never copied out of secret memory.
    static func storedEnvelope(of target: SecretTarget) -> StoredEnvelope {
        guard !target.held.isLocked(target.reference) else { return .unreadable }
        let query = ItemQuery(
            target.reference.itemClass, synchronizable: .any, references: [target.reference], returning: .reference)
        guard let found = try? target.held.keychain.itemWithSecret(matching: query) else { return .unreadable }
        guard let secret = found.secret, Self.isEnvelope(secret) else { return .unsealed }
        return .envelope(secret.withUnsafeBytes { Data($0) })
    }

    /// Whether `secret` is an envelope (``ItemPasswordEnvelope``), not a secret stored unsealed.
    static func isEnvelope(_ secret: SharedSecret) -> Bool {
        secret.withUnsafeBytes { ItemPasswordEnvelope.looksLikeEnvelope($0) }
    }

    /// The secret to hand out for `item` of `held`, read with `stored` as its secret, in the reply being made:
    /// `stored`, or for an item with a password of its own the secret opened with it for this reply
    /// (``confirmingReads(of:allowed:outcome:sender:authentication:then:)``). Throws
    /// `errSecInteractionNotAllowed` for such an item whose password was not given for this reply (its envelope
    /// is never handed out as its secret), `errSecDecode` for an access control that cannot be read.
    func servedSecret(of item: KeychainItem, in held: HeldKeychain, stored: SharedSecret?) throws(KeychainError)
        -> SharedSecret?
    {
        if let opened = openedForServing[Self.confirmationKey(held, item.reference)] { return opened.secret }
        // Read with the item when the reply asked for them; else read now.
        var attributes = item.attributes ?? [:]
        if item.attributes == nil {
            let query = ItemQuery(
                item.reference.itemClass, synchronizable: .any, limit: .one, references: [item.reference],
                returning: .attributes)
            attributes = try held.keychain.items(matching: query).first?.attributes ?? [:]
        }
        // One stored unsealed, made while the flag was recorded only, is read as it was then.
        guard try AccessConstraints.of(attributes)?.needsItemPassword != true || !(stored.map(Self.isEnvelope) ?? false)
        else {
            throw KeychainError(
                .interactionNotAllowed, "the item has a password of its own, and it was not given for this read")
        }
        return stored
    }
}

/// The items of one keychain a read asks the person about.
private struct ConfirmationGroup {
    let held: HeldKeychain
    var indexes: [Int] = []
    var constraints: [AccessConstraints] = []
    var labels: [String] = []
    /// Those with a password of their own: their index among the request's targets, and what to open.
    var own: [(index: Int, read: OwnPasswordRead)] = []
}

/// The items still allowed and the outcome of a request while its confirmations are asked.
private struct ConfirmationState {
    var allowed: [Bool]
    var outcome: AccessOutcome
    /// The secrets opened with their items' own passwords, by confirmation key.
    var opened: [String: OpenedItemSecret] = [:]

    /// Takes `indexes` out, and makes the outcome say why (added to a denial the access stage made).
    mutating func deny(_ indexes: [Int], labels: [String], _ cause: AccessDenial.Cause) {
        for index in indexes { allowed[index] = false }
        switch outcome {
        case .allowed: outcome = .denied(AccessDenial(kind: .read, labels: labels, cause: cause))
        case .denied(let earlier):
            outcome = .denied(AccessDenial(kind: .read, labels: earlier.labels + labels, cause: earlier.cause))
        }
    }
}
