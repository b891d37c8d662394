import DBus

/// A RetrieveSecret waiting for the unlock prompt: who called (the portal) and the call to answer.
final class PortalRequest {
    /// Where the portal puts its requests' handles.
    static let pathPrefix = PortalSecretObject.path + "/request/"
    let path: String
    let owner: String
    let call: DBusMethodCall

    init(path: String, owner: String, call: DBusMethodCall) {
        self.path = path
        self.owner = owner
        self.call = call
    }
}

/// `/org/freedesktop/portal/desktop/request/…` while a RetrieveSecret waits for the unlock prompt:
/// `org.freedesktop.impl.portal.Request`, which xdg-desktop-portal closes when the application closes its
/// request or leaves. The call is answered at once with response 1 (cancelled) and nothing is written; the
/// prompt itself runs to its end (an unlock it brings stays).
struct PortalRequestObject: DBusObject {
    let daemon: SecretServiceDaemon
    let request: PortalRequest

    static let interfaces: [DBusInterface<PortalRequestObject>] =
        standardInterfaces() + [
            DBusInterface(
                "org.freedesktop.impl.portal.Request",
                methods: [
                    DBusMethod("Close") { (object, call) throws(DBusError) in
                        guard call.sender == object.request.owner else {
                            throw DBusError(.accessDenied, "\(object.request.path) belongs to another client")
                        }
                        object.daemon.portalRequests[object.request.path] = nil
                        object.daemon.reply(
                            to: object.request.call,
                            .success([.uint32(PortalSecretObject.Response.cancelled.rawValue), .variantDictionary([:])])
                        )
                        return .reply([])
                    }
                ])
        ]
}
