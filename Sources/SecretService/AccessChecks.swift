import CallerIdentity
import DBus
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore

/// Whether a caller may be handed an item's secret, and the access prompt when it may not yet
/// (docs/threat-model.md, "Access lists"; docs/dbus-mapping.md, "Access prompts").
///
/// Every path that hands out a secret goes through ``SecretServiceDaemon/servingSecrets(of:to:_:)``:
/// `GetSecret`, `GetSecrets` and `org.latchkey.Keychain1.Search` asking for data (the CLI and the `Security`
/// module go through it). Every path that changes or deletes an item goes through
/// ``SecretServiceDaemon/servingChange(_:of:to:_:)``, with the same decision: `Item.SetSecret`, `Item.Delete`,
/// the `Label` and `Attributes` setters, `CreateItem` replacing an item, `Keychain1.Update` and `Delete`.
/// Labels and attributes stay visible to every caller.
extension SecretServiceDaemon {
    /// One item whose secret is asked for, with its attributes when the request has read them already.
    struct SecretTarget {
        let held: HeldKeychain
        let reference: ItemReference
        var attributes: ItemAttributes? = nil
    }

    /// Who is asking, as far as the daemon knows.
    enum Asker {
        /// Identified: its program.
        case application(Application)
        /// Could not be identified (gone, another user, `/proc` unreadable): why.
        case unidentified(String)
    }

    /// What an item's access list says of the caller, when the caller must be asked about.
    struct AccessCheck {
        let target: SecretTarget
        let asker: Asker
        let changed: Bool
        let label: String

        /// Nil when the item's keychain lets every application read its items (`allow-all`); read only for
        /// a caller the item does not trust, so that the trusted lookup does not pay for it.
        func unlessAllowedByPolicy() -> AccessCheck? {
            (try? target.held.keychain.accessPolicy()) == .allowAll ? nil : self
        }
    }

    /// Serves a request for the secrets of `targets`: at once when the caller may read them all, else once
    /// the person has answered a prompt for each item it may not (one prompt per item, one at a time; the
    /// same item asked for by the same application shares one). `serve` gets, per target, whether it was
    /// allowed and, when some were not, the denial; it makes the reply. Never blocks: the reply is deferred
    /// while prompts are pending.
    func servingSecrets(
        of targets: [SecretTarget], to call: DBusMethodCall,
        _ serve: @escaping (_ allowed: [Bool], _ denial: AccessDenial?) -> Result<[DBusValue], DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        var checks: [(index: Int, check: AccessCheck)] = []
        for (index, target) in targets.enumerated() {
            if let check = accessCheck(target, caller: call.sender) { checks.append((index, check)) }
        }
        guard !checks.isEmpty else {
            switch serve(Array(repeating: true, count: targets.count), nil) {
            case .success(let values): return .reply(values)
            case .failure(let error): throw error
            }
        }
        let pending = PendingSecretRequest(count: targets.count, waiting: checks.count)
        let sender = call.sender
        for (index, check) in checks {
            let failure = AccessPromptFailure()
            let ticket = registry.promptForAccess(
                sharingKey: Self.sharingKey(check, sender: sender), client: Self.promptClient(check.asker),
                question: Self.question(.read, for: [check]),
                failure: failure,
                trust: { [self] in trust(check) },
                // Read afresh: the list may have changed since (another request's Always allow).
                isAllowed: { [self] in
                    let current = SecretTarget(held: check.target.held, reference: check.target.reference)
                    return accessCheck(current, caller: sender) == nil
                },
                completion: { [self] granted in
                    pending.allowed[index] = granted
                    if !granted {
                        pending.deniedLabels.append(check.label)
                        if pending.failure == nil { pending.failure = failure.description }
                    }
                    pending.waiting -= 1
                    guard pending.waiting == 0 else { return }
                    forget(pending.tickets, of: sender)
                    let denial =
                        pending.deniedLabels.isEmpty
                        ? nil : AccessDenial(kind: .read, labels: pending.deniedLabels, failure: pending.failure)
                    reply(to: call, serve(pending.allowed, denial))
                })
            if pending.waiting > 0 {
                pending.tickets.append(ticket)
                accessTickets[sender, default: []].append(ticket)
            }
        }
        return .deferred
    }

    /// Serves a request that changes or deletes `targets` (docs/dbus-mapping.md, "Access prompts"): at once when
    /// the caller may read them all (the same decision as for their secrets: the item trusts it, or the
    /// keychain's policy is `allow-all`), else once the person allowed it in one prompt that covers every item
    /// it may not touch (a bulk `Keychain1.Delete` asks once, not per item). Such a prompt offers no Always
    /// allow: the access list is one for reads and changes, and a change is no reason to trust a program with
    /// the secret. `serve` makes the change and the reply, given the denial when the person did not allow it
    /// (nothing may change then). Never blocks: the reply is deferred while the prompt is pending.
    func servingChange(
        _ kind: AccessKind, of targets: [SecretTarget], to call: DBusMethodCall,
        _ serve: @escaping (_ denial: AccessDenial?) -> Result<[DBusValue], DBusError>
    ) throws(DBusError) -> DBusMethodResult {
        let checks = targets.compactMap { accessCheck($0, caller: call.sender) }
        guard !checks.isEmpty else {
            switch serve(nil) {
            case .success(let values): return .reply(values)
            case .failure(let error): throw error
            }
        }
        let sender = call.sender
        let failure = AccessPromptFailure()
        var ticket: PromptTicket?
        var finished = false
        ticket = registry.promptForAccess(
            sharingKey: nil, client: Self.promptClient(checks[0].asker), question: Self.question(kind, for: checks),
            failure: failure, trust: {},
            // Read afresh: the caller may have been trusted meanwhile (another request's Always allow).
            isAllowed: { [self] in
                checks.allSatisfy {
                    accessCheck(SecretTarget(held: $0.target.held, reference: $0.target.reference), caller: sender)
                        == nil
                }
            },
            completion: { [self] granted in
                finished = true
                if let ticket { forget([ticket], of: sender) }
                let denial =
                    granted ? nil : AccessDenial(kind: kind, labels: checks.map(\.label), failure: failure.description)
                reply(to: call, serve(denial))
            })
        if !finished, let ticket { accessTickets[sender, default: []].append(ticket) }
        return .deferred
    }

    /// Forgets `tickets` of `sender` once their prompts ended.
    private func forget(_ tickets: [PromptTicket], of sender: String) {
        accessTickets[sender]?.removeAll { ticket in tickets.contains { $0 === ticket } }
        if accessTickets[sender]?.isEmpty == true { accessTickets[sender] = nil }
    }

    /// Withdraws the access prompts of a client that left the bus: nobody waits for their answer.
    func withdrawAccessPrompts(of sender: String) {
        for ticket in accessTickets.removeValue(forKey: sender) ?? [] { registry.withdraw(ticket) }
    }

    /// Nil when the caller may read the item's secret without asking: callers are not identified (an
    /// embedding, in-process tests), the keychain's policy is `allow-all`, or the item trusts the
    /// application. Otherwise what to ask. A caller that could not be identified is asked about.
    func accessCheck(_ target: SecretTarget, caller sender: String) -> AccessCheck? {
        guard let callers else { return nil }
        let read = target.attributes ?? (try? target.held.item(target.reference, returning: .attributes))??.attributes
        // Gone or unreadable: the request's own read reports it.
        guard let attributes = read else { return nil }
        let asker: Asker
        var changed = false
        switch callers.entries[sender] {
        case .identified(let caller)? where !callers.runsAsIdentified(caller, sender: sender):
            // Its pid ended or now runs another program (which holds the connection it inherited), or it
            // executed another program since it connected (while a child of it keeps the connection).
            asker = .unidentified("process \(caller.pid) ended or started another program since it connected")
        case .identified(let caller)?:
            let application = caller.application
            switch ItemAccess(attributes: attributes).verdict(
                forApplication: application.name, digest: application.digest?.description)
            {
            case .trusted: return nil
            case .changed: changed = true
            case .unknown: break
            }
            asker = .application(application)
        case .unidentified(let reason)?:
            asker = .unidentified(reason)
        default:
            asker = .unidentified("not identified")
        }
        return AccessCheck(target: target, asker: asker, changed: changed, label: Self.label(attributes))
            .unlessAllowedByPolicy()
    }

    private static func label(_ attributes: ItemAttributes) -> String {
        if case .string(let text)? = attributes[.label] { return text }
        return ""
    }

    /// Adds the application of `check` to its item's access list ("Always allow"), on disk.
    private func trust(_ check: AccessCheck) {
        guard case .application(let application) = check.asker else { return }
        let held = check.target.held
        let reference = check.target.reference
        do throws(KeychainError) {
            let attributes = try held.item(reference, returning: .attributes)?.attributes ?? [:]
            var access = ItemAccess(attributes: attributes)
            access.trust(TrustedApplication(name: application.name, digest: application.digest?.description))
            let query = ItemQuery(reference.itemClass, synchronizable: .any, references: [reference])
            try held.keychain.update(matching: query, with: ItemChanges(attributes: access.attributes))
            held.touch()
        } catch {
            KeychainRegistry.log("cannot add \(application) to the access list of '\(check.label)': \(error.reason)")
        }
    }

    /// Requests share a prompt when they are for the same item from the same application (an unidentified
    /// caller shares only with itself).
    private static func sharingKey(_ check: AccessCheck, sender: String) -> String {
        let who: String
        switch check.asker {
        case .application(let application): who = application.name + "\t" + (application.digest?.description ?? "")
        case .unidentified: who = "unidentified\t" + sender
        }
        return check.target.held.id + "\t" + check.target.reference.description + "\t" + who
    }

    /// Whom a prompt takes its turn for (docs/robustness.md, "Fair prompts"): an identified application by its
    /// name, however many connections it opens (a Flatpak app by its app id), and every caller that could not be
    /// identified as one client, so that neither many connections nor hiding its identity gives a caller more
    /// turns.
    static func promptClient(_ asker: Asker) -> PromptClient {
        switch asker {
        case .application(let application):
            PromptClient(key: "application\t" + application.name, name: application.description)
        case .unidentified:
            PromptClient(key: "unidentified", name: "Programs Latchkey could not identify")
        }
    }

    /// Whom a confirmation of `sender`'s request takes its turn for (``promptClient(_:)``): its application, or
    /// the unidentified callers' one turn (also when callers are not identified at all).
    func promptClient(of sender: String) -> PromptClient {
        guard let application = application(of: sender) else { return Self.promptClient(.unidentified("")) }
        return Self.promptClient(.application(application))
    }

    /// The words of the prompt asking to `kind` the items of `checks` (one item for a read; all of one caller,
    /// in one keychain), made on the prompt's thread (`dpkg -S` may take a while).
    private static func question(_ kind: AccessKind, for checks: [AccessCheck]) -> @Sendable () -> AccessQuestion {
        let asker = checks[0].asker
        let changed = checks.contains { $0.changed }
        let labels = checks.map(\.label)
        let keychain = checks[0].target.held.label
        return {
            switch asker {
            case .application(let application):
                var who = application.description
                if let path = Self.packagedPath(application), let package = PackageOwner.package(of: path) {
                    who += " (package \(package))"
                }
                var warnings: [AccessWarning] = changed ? [.changed] : []
                switch application.genericTool {
                case .keychainCommand?: warnings.append(.keychainCommand)
                case .runsAnything?: warnings.append(.runsAnything)
                case nil: break
                }
                return AccessQuestion(
                    kind, who: who, warnings: warnings, labels: labels, keychain: keychain,
                    offersAlways: TrustedApplication.isStorable(application.name)
                        && application.genericTool != .runsAnything)
            case .unidentified(let reason):
                return AccessQuestion(
                    kind, who: "A program Latchkey could not identify", warnings: [.unidentified(reason: reason)],
                    labels: labels, keychain: keychain, offersAlways: false)
            }
        }
    }

    /// The file whose package a prompt names: a script's, else the executable's; none for a Flatpak app.
    private static func packagedPath(_ application: Application) -> String? {
        switch application {
        case .executable(let path, _), .script(_, let path, _): path
        case .flatpak: nil
        }
    }

}

/// Why some of a request's secrets were not handed over, or its items not changed or deleted: what was asked
/// for, the items' labels, and the pinentry's failure when there was no way to ask (nil: the person denied,
/// dismissed, or did not answer in time).
struct AccessDenial {
    let kind: AccessKind
    let labels: [String]
    let failure: String?

    private var message: String {
        let items = AccessQuestion.itemList(labels)
        let doing: String
        switch kind {
        case .read: doing = "reading"
        case .change: doing = "changing"
        case .delete: doing = "deleting"
        }
        if let failure { return "\(doing) \(items) needs your permission, and there was no way to ask (\(failure))" }
        return "\(doing) \(items) was not allowed"
    }

    /// The Secret Service face's error: `AccessDenied`, not `IsLocked` (unlocking would not help; see
    /// docs/dbus-mapping.md).
    var secretServiceError: DBusError { DBusError(.accessDenied, message) }

    /// `org.latchkey.Keychain1`'s: `errSecInteractionNotAllowed` when nobody could be asked, else
    /// `errSecUserCanceled`, as macOS answers a Deny.
    var keychainError: DBusError {
        Keychain1Interface.dbusError(KeychainError(failure == nil ? .userCanceled : .interactionNotAllowed, message))
    }
}

/// A request waiting for its access prompts: which items were allowed, how many prompts are left.
private final class PendingSecretRequest {
    var allowed: [Bool]
    var waiting: Int
    var failure: String?
    var deniedLabels: [String] = []
    var tickets: [PromptTicket] = []

    init(count: Int, waiting: Int) {
        allowed = Array(repeating: true, count: count)
        self.waiting = waiting
    }
}
