import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import KeychainRegistry
import Posix

/// gnome-keyring's private interface on the service object, `/org/freedesktop/secrets`, which Seahorse uses to
/// change a keyring's password and to create a keyring with a password of its own (and which oo7 serves too).
/// Passwords come as `(oayays)` secrets in one of the caller's sessions, plain or encrypted.
extension ServiceObject {
    /// `org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface`.
    static let gnomeKeyringInterfaceName = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"

    /// The interface's declarations.
    static let gnomeKeyringInterface = DBusInterface<ServiceObject>(
        gnomeKeyringInterfaceName,
        methods: [
            DBusMethod(
                "ChangeWithMasterPassword", DBusInput("collection", ObjectPath.self),
                DBusInput("original", TransportSecret.self), DBusInput("master", TransportSecret.self)
            ) { (object, call, collection, original, master) throws(DBusError) in
                try object.daemon.changeWithMasterPassword(collection.text, original, master, call: call)
            },
            DBusMethod(
                "ChangeWithPrompt", DBusInput("collection", ObjectPath.self),
                returns: [.init("prompt", ObjectPath.self)]
            ) { (object, call, collection) throws(DBusError) in
                .reply([.objectPath(try object.daemon.changeWithPrompt(collection.text, caller: call.sender))])
            },
            DBusMethod(
                "CreateWithMasterPassword", DBusInput("attributes", DBusPropertyList.self),
                DBusInput("master", TransportSecret.self), returns: [.init("collection", ObjectPath.self)]
            ) { (object, call, attributes, master) throws(DBusError) in
                try object.daemon.createWithMasterPassword(attributes.values, master, call: call)
            },
            DBusMethod(
                "UnlockWithMasterPassword", DBusInput("collection", ObjectPath.self),
                DBusInput("master", TransportSecret.self)
            ) { (object, call, collection, master) throws(DBusError) in
                try object.daemon.unlockWithMasterPassword(collection.text, master, call: call)
            },
        ])
}

/// gnome-keyring's error for a password that does not open the collection.
enum GnomeKeyringError {
    /// `org.gnome.keyring.Error.Denied`, as gnome-keyring answers a wrong original or master password.
    static let deniedName = "org.gnome.keyring.Error.Denied"

    /// The error a refused or failed password attempt is answered with.
    static func from(_ outcome: LoginPasswordOutcome) -> DBusError {
        switch outcome {
        case .accepted: DBusError(.failed, "")
        case .notTried(let wait):
            DBusError(
                name: Keychain1Interface.tooManyAttemptsError,
                message: "too many wrong passwords lately; not tried (wait \(wait) s)")
        case .failed(let error) where error.status == .authFailed:
            DBusError(name: deniedName, message: "The password was invalid")
        case .failed(let error) where error.status == .param:
            DBusError(.notSupported, error.reason)
        case .failed(let error): SecretServiceError.from(error)
        }
    }
}

extension SecretServiceDaemon {
    /// A password a client sent as a secret in one of its sessions, in secret memory (a DH session decrypts
    /// it there; a plain session's decoded array is wiped in place after the copy).
    private func password(_ transport: TransportSecret, from caller: String) throws(DBusError) -> SharedSecret {
        try receive(transport, from: caller)
    }

    /// A collection that has a password, or may be given one: not the session collection.
    private func passwordCollection(_ path: String) throws(DBusError) -> HeldKeychain {
        let held = try collection(at: path)
        if case .heldPassword = held.unlocking {
            throw DBusError(.notSupported, "the session collection is in memory and has no password")
        }
        return held
    }

    func changeWithMasterPassword(
        _ path: String, _ original: TransportSecret, _ master: TransportSecret, call: DBusMethodCall
    ) throws(DBusError) -> DBusMethodResult {
        try refuse(unlessAllowed: .sendKeychainPassword, by: call.sender)
        let old = try password(original, from: call.sender)
        let new = try password(master, from: call.sender)
        let held = try passwordCollection(path)
        registry.changePassword(of: held, original: old, to: new) { [self] outcome in
            guard case .accepted = outcome else { return reply(to: call, .failure(GnomeKeyringError.from(outcome))) }
            emit(ServiceObject.collectionChanged, at: ObjectPaths.service, ObjectPath(held.path))
            reply(to: call, .success([]))
        }
        return .deferred
    }

    func unlockWithMasterPassword(_ path: String, _ master: TransportSecret, call: DBusMethodCall)
        throws(DBusError) -> DBusMethodResult
    {
        try refuse(unlessAllowed: .sendKeychainPassword, by: call.sender)
        let secret = try password(master, from: call.sender)
        let held = try passwordCollection(path)
        guard held.isLocked else { return .reply([]) }
        registry.unlock(held, password: secret) { [self] outcome in
            guard case .accepted = outcome else { return reply(to: call, .failure(GnomeKeyringError.from(outcome))) }
            reply(to: call, .success([]))
        }
        return .deferred
    }

    func createWithMasterPassword(_ properties: [String: DBusValue], _ master: TransportSecret, call: DBusMethodCall)
        throws(DBusError) -> DBusMethodResult
    {
        var label = ""
        if let value = properties["org.freedesktop.Secret.Collection.Label"] {
            guard case .string(let text) = value else {
                throw SecretServiceError.invalidArgs("org.freedesktop.Secret.Collection.Label is a string")
            }
            label = text
        }
        try limits.check(label: label)
        try refuse(unlessAllowed: .sendKeychainPassword, by: call.sender)
        try limits.check(collectionsHeld: registry.madeKeychainCount)
        let secret = try password(master, from: call.sender)
        registry.createKeychain(label: label, password: secret, pathElement: DBusNames.pathElement) { [self] result in
            switch result {
            case .success(let created): reply(to: call, .success([.objectPath(created.path)]))
            case .failure(let error): reply(to: call, .failure(SecretServiceError.from(error)))
            }
        }
        return .deferred
    }

    /// A prompt that, once shown, asks through pinentry for the collection's current password and a new one.
    func changeWithPrompt(_ path: String, caller: String) throws(DBusError) -> String {
        let held = try passwordCollection(path)
        let promptPath = ObjectPaths.promptPrefix + "p\(nextSerial())"
        let prompt = UnlockPrompt(path: promptPath, owner: caller, objects: [held.path], waiting: [])
        prompt.changing = held
        prompts[promptPath] = prompt
        return promptPath
    }

    /// Shows a change-password prompt; `Completed` follows, with an empty string as its result (as
    /// gnome-keyring sends), dismissed when the password did not change.
    func startPasswordChange(_ prompt: UnlockPrompt, of held: HeldKeychain) {
        prompt.ticket = registry.promptToChangePassword(of: held) { [self] changed in
            guard prompts.removeValue(forKey: prompt.path) != nil else { return }
            if changed {
                emit(ServiceObject.collectionChanged, at: ObjectPaths.service, ObjectPath(held.path))
            }
            emit(PromptObject.completed, at: prompt.path, !changed, DBusVariant(.string("")))
        }
    }
}
