import DBus
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore

/// `Keychain1.Add` and `Update` of an item's access control (docs/secitem-semantics.md, "Enforced access
/// control"): the value must be one the `Security` module makes; `biometryCurrentSet` records the enrolled
/// fingers' digest it is made under; changing the access control of an item that asks for the person needs the
/// person's confirmation first, as a read of its secret does (else removing it would be a way round it).
extension Keychain1Object {
    /// `attributes` with its `kSecAttrAccessControl` checked and, for the biometry flags, the enrolled fingers'
    /// digest recorded (for `biometryCurrentSet`). Throws `errSecParam` for a value that is not an access
    /// control, and `errSecAuthFailed`, as Apple's `SecItemAdd` does, for a biometry flag with no finger enrolled
    /// (or no reader) unless `.or` offers the password.
    func recordingEnrolledFingers(_ attributes: ItemAttributes) throws(KeychainError) -> ItemAttributes {
        guard attributes[.accessControl] != nil else { return attributes }
        guard var constraints = try? AccessConstraints.of(attributes) else {
            throw KeychainError.param(
                "kSecAttrAccessControl takes a SecAccessControl (from SecAccessControlCreateWithFlags)")
        }
        let given = constraints
        let biometry = AccessConstraints.biometryAny | AccessConstraints.biometryCurrentSet
        guard given.flags & biometry != 0 else {
            var checked = attributes
            constraints.enrolledFingers = nil
            checked[.accessControl] = .data(constraints.storedForm)
            return checked
        }
        let passwordAlternative =
            given.flags & AccessConstraints.or != 0
            && given.flags & (AccessConstraints.userPresence | AccessConstraints.devicePasscode) != 0
        // fprintd answers the digest from its device list (a bus call with a bound of its own).
        let enrolled = daemon.registry.configuration.fingerprints.enrolledFingersDigest(
            user: KeychainRegistry.userName())
        guard enrolled != nil || passwordAlternative else {
            throw KeychainError(
                .authFailed, "the access control asks for a fingerprint, and no finger is enrolled (or no reader)")
        }
        constraints.enrolledFingers = given.flags & AccessConstraints.biometryCurrentSet != 0 ? (enrolled ?? []) : nil
        var checked = attributes
        checked[.accessControl] = .data(constraints.storedForm)
        return checked
    }

    /// Whether an `Update` of `query`'s items with `attributes` changes the access control of items that ask for
    /// the person (then the person confirms first, as for a read of them): the items, else nil. A new secret
    /// (`changingSecret`) for items with a password of their own asks it too (it proves the person knows it, and
    /// gives the key the new secret is sealed under): those items.
    func accessControlChangeToConfirm(
        of query: ItemQuery, to attributes: ItemAttributes, changingSecret: Bool, caller: String
    ) -> [SecretServiceDaemon.SecretTarget]? {
        let changesControl = attributes[.accessControl] != nil
        guard changesControl || changingSecret, !keychain.isLocked else { return nil }
        var reading = query
        reading.returning = .attributes
        reading.limit = .all
        let matched = (try? keychain.keychain.items(matching: reading)) ?? []
        var targets: [SecretServiceDaemon.SecretTarget] = []
        var asks = false
        for item in matched {
            let ownPassword = (try? AccessConstraints.of(item.attributes ?? [:]))??.needsItemPassword == true
            guard changesControl || ownPassword else { continue }
            let target = SecretServiceDaemon.SecretTarget(
                held: keychain, reference: item.reference, attributes: item.attributes ?? [:])
            if daemon.needsConfirmation(target, by: caller) { asks = true }
            targets.append(target)
        }
        return asks ? targets : nil
    }

    /// Runs `change` once the person confirmed `targets` (``accessControlChangeToConfirm(of:to:caller:)``), given
    /// the secrets of items with a password of their own the confirmation opened (by
    /// ``SecretServiceDaemon/confirmationKey(_:_:)``; `change` may keep them past its return, for a change that
    /// asks the person more before it is made); refused: the read's error, and nothing changes.
    func confirmingAccessControlChange(
        of targets: [SecretServiceDaemon.SecretTarget], authentication: AuthenticationOptions, call: DBusMethodCall,
        _ change: @escaping ([String: OpenedItemSecret]) -> Result<DBusMethodResult, DBusError>
    ) -> Result<DBusMethodResult, DBusError> {
        let daemon = daemon
        // kSecUseAuthenticationUISkip leaves items out of a read; a change has nothing to leave out: it is asked
        // for as Fail is (refused unasked), never made without the confirmation.
        var asking = authentication
        if asking.interaction == .skip { asking.interaction = .fail }
        let confirmed = daemon.confirmingReads(
            of: targets, allowed: targets.map { _ in true }, outcome: .allowed, sender: call.sender,
            authentication: asking
        ) { _, outcome in
            // Set only while this runs: taken now, for a change that goes on after it returned.
            let opened = daemon.openedForServing
            Self.finish(call, outcome, daemon: daemon, change(opened))
        }
        guard let confirmed else { return .success(.deferred) }
        if case .denied(let denial) = confirmed.1 { return .failure(denial.keychainError) }
        // Confirmed at once: nobody was asked, so nothing was opened.
        return change([:])
    }

    /// Answers `call` once its confirmation ended: the denial's error, or what the change gave (nothing more
    /// when it deferred its own reply).
    private static func finish(
        _ call: DBusMethodCall, _ outcome: AccessOutcome, daemon: SecretServiceDaemon,
        _ result: @autoclosure () -> Result<DBusMethodResult, DBusError>
    ) {
        if case .denied(let denial) = outcome { return daemon.reply(to: call, .failure(denial.keychainError)) }
        switch result() {
        case .success(.reply(let values)): daemon.reply(to: call, .success(values))
        case .success(.deferred): break
        case .failure(let error): daemon.reply(to: call, .failure(error))
        }
    }
}
