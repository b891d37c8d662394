import DBus
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
        let kdf = daemon.registry.configuration.kdf
        var label = ""
        if case .string(let text)? = attributes[.label] { label = text }
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
        ticket = daemon.registry.askNewItemPassword(request) { [self] sealed in
            finished = true
            if let ticket { daemon.forget([ticket], of: call.sender) }
            do throws(KeychainError) {
                var item = NewItem(itemClass, attributes: attributes, secret: try sealed.get())
                item.reference = reference
                daemon.reply(to: call, .success(try add(item, nil, call: call)))
            } catch {
                daemon.reply(to: call, .failure(Keychain1Interface.dbusError(error)))
            }
        }
        if !finished, let ticket { daemon.accessTickets[call.sender, default: []].append(ticket) }
        return .deferred
    }
}
