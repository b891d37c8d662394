import DBus
import KeychainRegistry

/// `/org/freedesktop/secrets/session/…`: `org.freedesktop.Secret.Session`.
struct SessionObject: DBusObject {
    let daemon: SecretServiceDaemon
    let session: SecretSession

    static let interfaces: [DBusInterface<SessionObject>] =
        standardInterfaces() + [
            DBusInterface(
                "org.freedesktop.Secret.Session",
                methods: [
                    // Only by the client that opened it: another closing it would turn that client's
                    // Keychain1 secrets plain under its feet.
                    DBusMethod("Close") { (object, call) throws(DBusError) in
                        guard call.sender == object.session.owner else {
                            throw DBusError(.accessDenied, "\(object.session.path) belongs to another client")
                        }
                        object.daemon.close(object.session)
                        return .reply([])
                    }
                ])
        ]
}
