import CallerIdentity
import KeychainCore
import KeychainRegistry
import KeychainStore

/// The rules that decide whether a caller may use an item, or do what is the person's to decide: one value
/// asked by every face of the daemon, as a verifier asks its policy about a certificate chain and gets an
/// outcome that names itself (docs/threat-model.md, "Access lists", "Changes and deletions").
package struct AccessRules: Sendable {
    /// Whether callers are identified at all. Off (an embedding of the daemon, the in-process tests by default),
    /// every caller is allowed everything, as before access lists.
    package var identifiesCallers: Bool

    /// Rules for a daemon that identifies its callers, or (`identifiesCallers` false) trusts them all.
    package init(identifiesCallers: Bool = true) {
        self.identifiesCallers = identifiesCallers
    }

    /// Whether `caller` may do `item.kind` (read its secret, change it, delete it) to `item`.
    ///
    /// - An item that trusts the application (its creator, `-T`, an earlier Always allow, `-A`): `.allowed`.
    /// - Else, on a keychain whose policy is `allow-all`: `.allowed` (the policy is read only here, so a
    ///   trusted lookup pays nothing for it).
    /// - Else `.ask`: a changed file is said so; Always allow is offered to read only, to an application whose
    ///   name an access list can hold, and never to a tool that runs whatever its command line says. A caller that
    ///   could not be identified (a Flatpak app is identified, by its app id) is asked about as an unknown
    ///   application, without Always allow.
    /// - An item that cannot be read (gone, its keychain locked meanwhile): `.allowed`, since nothing is handed
    ///   over or changed without the request's own read, which reports it.
    ///
    /// Never `.denied`: a use of an item is the person's to allow.
    package func decide(item: AccessedItem, caller: Requester) -> AccessDecision {
        guard identifiesCallers else { return .allowed }
        let attributes: ItemAttributes
        do {
            attributes = try item.attributes()
        } catch {
            return .allowed
        }
        var changed = false
        var offersAlways = false
        if case .application(let application) = caller {
            switch ItemAccess(attributes: attributes).verdict(
                forApplication: application.name, digest: application.digest?.description)
            {
            case .trusted: return .allowed
            case .changed: changed = true
            case .unknown: break
            }
            offersAlways =
                item.kind == .read && TrustedApplication.isStorable(application.name)
                && application.genericTool != .runsAnything
        }
        if (try? item.policy()) == .allowAll { return .allowed }
        return .ask(
            AccessDecision.Question(
                item.kind, asker: caller, label: Self.label(attributes), keychain: item.keychain, changed: changed,
                offersAlways: offersAlways))
    }

    /// Whether `caller` may do `action`: any identified program of the user outside a sandbox (on the host or in
    /// a container) may; a Flatpak application or an unidentified caller is refused, but asked about when it makes
    /// a collection (a sandboxed app holds only what the portal gives it, and an unknown program is not to fill
    /// the collection list unasked).
    package func decide(action: CallerAction, caller: Requester) -> AccessDecision {
        guard identifiesCallers else { return .allowed }
        let refusal: AccessDecision.Refusal
        switch caller {
        // A program in a container is the user's own, as a host program is (docs/containers.md).
        case .application(.executable), .application(.script), .application(.inContainer): return .allowed
        case .application(.flatpak(let appID)): refusal = .sandboxed(appID: appID)
        case .unidentified(let why): refusal = .unidentified(why)
        }
        guard action == .createCollection else { return .denied(refusal) }
        return .ask(AccessDecision.Question(.change, asker: caller))
    }

    private static func label(_ attributes: ItemAttributes) -> String {
        if case .string(let text)? = attributes[.label] { return text }
        return ""
    }
}

/// An item a caller asks to use, as the rules read it: what is asked, its keychain's label, and its attributes
/// and keychain policy, each read only when the rules need it.
package struct AccessedItem {
    /// What the caller asks to do.
    package var kind: AccessKind
    /// The label of the item's keychain, for the question.
    package var keychain: String
    /// The item's attributes (its access list and label among them); throws when the item cannot be read.
    package var attributes: () throws(KeychainError) -> ItemAttributes
    /// Its keychain's access policy; an error counts as `prompt`.
    package var policy: () throws(KeychainError) -> KeychainAccessPolicy

    /// An item read through `attributes` in a keychain labelled `keychain` whose policy `policy` reads.
    package init(
        _ kind: AccessKind, keychain: String, attributes: @escaping () throws(KeychainError) -> ItemAttributes,
        policy: @escaping () throws(KeychainError) -> KeychainAccessPolicy
    ) {
        self.kind = kind
        self.keychain = keychain
        self.attributes = attributes
        self.policy = policy
    }

    /// The item at `reference` in `held`, whose `attributes` were read already (else they are read when
    /// needed).
    package init(_ kind: AccessKind, _ reference: ItemReference, in held: HeldKeychain, attributes: ItemAttributes?) {
        self.init(
            kind, keychain: held.label,
            attributes: { () throws(KeychainError) in
                if let attributes { return attributes }
                return try held.attributes(of: reference)
            },
            policy: { () throws(KeychainError) in try held.keychain.accessPolicy() })
    }
}

extension HeldKeychain {
    /// The attributes of the item at `reference`, whatever its class; `errSecItemNotFound` when it is gone.
    package func attributes(of reference: ItemReference) throws(KeychainError) -> ItemAttributes {
        let query = ItemQuery(
            reference.itemClass, synchronizable: .any, references: [reference], returning: .attributes)
        guard let item = try keychain.items(matching: query).first else {
            throw KeychainError(.itemNotFound, "the item is gone")
        }
        return item.attributes ?? [:]
    }
}
