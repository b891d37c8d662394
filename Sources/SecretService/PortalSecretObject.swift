import DBus
import FoundationEssentials
import Glibc
import KeychainCore
import KeychainRegistry
import KeychainStore
import Posix

/// `/org/freedesktop/portal/desktop`: `org.freedesktop.impl.portal.Secret`, the backend of the Secret portal.
///
/// xdg-desktop-portal calls it for a sandboxed application with the application's id (which the portal, not
/// the application, determines) and the write end of a pipe the application made. Only the portal may call
/// it (``PortalGate``: the owner of `org.freedesktop.portal.Desktop`, running the system's
/// xdg-desktop-portal outside a sandbox); anyone else gets `AccessDenied`, since the id in the call is the
/// caller's word. The first request for an id makes a random 64-byte secret (as gnome-keyring does) and
/// stores it in the login keychain as an item with `xdg:schema=org.freedesktop.portal.Secret` and
/// `app_id=<id>`, marked as the backend's (``AttributeKey/portalKey`` = the id, which no client can set);
/// every request writes the marked item's secret to the descriptor and closes it. An item without the mark
/// is never handed out, whatever its attributes (a client could have planted it with a secret it knows).
/// The application derives its own keys from it (libsecret's file backend keeps its keyring inside the
/// sandbox, encrypted with it).
///
/// A locked login keychain is unlocked through the same pinentry prompt as `Unlock`, and the request is
/// answered when the prompt ends. An empty application id (a process on the host, which talks to the Secret
/// Service directly) is refused with response 2, as every other failure is; the reason goes to standard
/// error (the journal). See docs/dbus-mapping.md.
struct PortalSecretObject: DBusObject {
    let daemon: SecretServiceDaemon

    /// The path xdg-desktop-portal calls its backends on.
    static let path = "/org/freedesktop/portal/desktop"
    static let interfaceName = "org.freedesktop.impl.portal.Secret"
    /// The `xdg:schema` of the items holding applications' secrets.
    static let schema = "org.freedesktop.portal.Secret"
    /// The length of a new application secret, as gnome-keyring makes them.
    static let secretLength = 64
    /// The longest application id accepted (the portal's own limit is D-Bus's 255-byte names).
    static let appIDBytes = 255

    /// The portal's response codes.
    enum Response: UInt32 {
        case success = 0
        case cancelled = 1
        case failed = 2
    }

    static let interfaces: [DBusInterface<PortalSecretObject>] =
        standardInterfaces() + [
            DBusInterface(
                interfaceName,
                methods: [
                    DBusMethod(
                        "RetrieveSecret", DBusInput("handle", ObjectPath.self), DBusInput("app_id", String.self),
                        DBusInput("fd", DBusFileDescriptor.self), DBusInput("options", DBusPropertyList.self),
                        returns: [.init("response", UInt32.self), .init("results", DBusPropertyList.self)]
                    ) { (object, call, handle, appID, descriptor, _) throws(DBusError) in
                        try object.retrieveSecret(appID: appID, to: descriptor, call: call, handle: handle.text)
                    }
                ],
                properties: [DBusProperty("version", UInt32.self) { _ in 1 }])
        ]

    private func retrieveSecret(appID: String, to descriptor: DBusFileDescriptor, call: DBusMethodCall, handle: String)
        throws(DBusError) -> DBusMethodResult
    {
        if case .refused(let refusal) = daemon.portalGate.admission(of: call.sender, callers: daemon.callers) {
            Self.log("refused RetrieveSecret from \(call.sender): \(refusal)")
            throw DBusError(.accessDenied, "RetrieveSecret is xdg-desktop-portal's to call: \(refusal)")
        }
        guard !appID.isEmpty, appID.utf8.count <= Self.appIDBytes else {
            Self.log(
                appID.isEmpty
                    ? "refused a request without an application id (a host application: it uses the Secret Service)"
                    : "refused an application id longer than \(Self.appIDBytes) bytes")
            return Self.answer(.failed)
        }
        guard let login = daemon.registry.login else {
            Self.log("no login keychain to keep the secret of \(appID) in")
            return Self.answer(.failed)
        }
        login.markUsed()
        guard login.isLocked else { return Self.answer(Self.deliver(appID: appID, in: login, to: descriptor, daemon)) }
        // As gnome-keyring: a locked login keychain is unlocked first, through the usual prompt. Meanwhile the
        // request is an object at its handle, which the portal may close (the application gave up).
        guard handle.hasPrefix(PortalRequest.pathPrefix), daemon.portalRequests[handle] == nil else {
            Self.log("refused a request handle outside \(PortalRequest.pathPrefix) or already in use")
            return Self.answer(.failed)
        }
        let request = PortalRequest(path: handle, owner: call.sender, call: call)
        daemon.portalRequests[handle] = request
        let daemon = daemon
        daemon.registry.userLogin.promptForPassword(unlocking: []) { unlocked in
            // Closed meanwhile: already answered, and nothing is written.
            guard daemon.portalRequests[handle] === request else { return }
            daemon.portalRequests[handle] = nil
            let response: Response
            if unlocked, let login = daemon.registry.login {
                response = Self.deliver(appID: appID, in: login, to: descriptor, daemon)
            } else {
                Self.log("the login keychain stayed locked: no secret for \(appID)")
                response = .failed
            }
            daemon.reply(to: call, .success(Self.answer(response).values))
        }
        return .deferred
    }

    /// Finds or makes the secret of `appID` in `login` (unlocked) and writes it to `descriptor`.
    private static func deliver(
        appID: String, in login: HeldKeychain, to descriptor: DBusFileDescriptor, _ daemon: SecretServiceDaemon
    ) -> Response {
        let attributes = ["xdg:schema": schema, "app_id": appID]
        var secret: [UInt8] = []
        defer { wipeBytes(&secret) }
        do throws(KeychainError) {
            if let reference = try existingSecret(of: appID, in: login),
                let found = try login.item(reference, returning: [.data, .attributes]), var stored = found.secret
            {
                // An access control asking for the person (set on the key by Keychain1.Update) is never passed
                // over: the portal has nobody to ask (docs/secitem-semantics.md, "Enforced access control").
                guard try AccessConstraints.of(found.attributes ?? [:])?.needsAuthentication != true else {
                    stored.withUnsafeMutableBytes { wipeBytes($0) }
                    throw KeychainError(.interactionNotAllowed, "its access control asks for the person")
                }
                secret = [UInt8](stored)
                stored.withUnsafeMutableBytes { wipeBytes($0) }
            } else {
                secret = try newSecret()
                var value = Data(secret)
                defer { value.withUnsafeMutableBytes { wipeBytes($0) } }
                let created = try login.createItem(
                    label: "Application key for \(appID)", attributes: attributes, secret: value,
                    contentType: "application/octet-stream", marks: [.portalKey: .string(appID)])
                daemon.announceItems(login, CollectionObject.itemCreated, created.reference)
            }
        } catch {
            log("cannot read or store the secret of \(appID): \(error.reason)")
            return .failed
        }
        if let problem = writeWithoutWaiting(secret, to: descriptor.rawValue) {
            log("cannot write the secret of \(appID): \(problem)")
            return .failed
        }
        return .success
    }

    /// The item holding the secret of `appID`: the one marked with it (``AttributeKey/portalKey``), which this
    /// backend made or the gnome-keyring import brought over from gnome-keyring's backend. Found by the mark
    /// alone: an item's Secret Service attributes are any client's to set (a planted item with this schema and
    /// id is never taken, and neither is a marked item whose `app_id` a client changed to another id).
    private static func existingSecret(of appID: String, in login: HeldKeychain) throws(KeychainError)
        -> ItemReference?
    {
        let query = ItemQuery(
            .genericPassword, attributes: [.portalKey: .string(appID)], synchronizable: .any, limit: .all)
        return try login.keychain.items(matching: query).first?.reference
    }

    private static func newSecret() throws(KeychainError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: secretLength)
        let filled = bytes.withUnsafeMutableBytes { (buffer) -> Result<Void, KeychainError> in
            Result { () throws(KeychainError) in try SecureRandom.fill(buffer) }
        }
        try filled.get()
        return bytes
    }

    /// Writes all of `bytes` to `descriptor` with `O_NONBLOCK` set for the write (and the descriptor's flags
    /// put back after), so that a pipe its reader filled cannot stall the serving loop: nil, or what went
    /// wrong. The secret is shorter than `PIPE_BUF`: a pipe takes it whole or not at all.
    static func writeWithoutWaiting(_ bytes: [UInt8], to descriptor: Int32) -> String? {
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0 else { return "not an open descriptor" }
        guard flags & O_ACCMODE != O_RDONLY else { return "the descriptor is read-only" }
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(descriptor, F_SETFL, flags) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                Glibc.write(descriptor, buffer.baseAddress.map { $0 + written }, buffer.count - written)
            }
            if count > 0 {
                written += count
            } else if count == 0 {
                return "the descriptor took nothing"
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return "the reader's pipe is full"
            } else {
                return String(cString: strerror(errno))
            }
        }
        return nil
    }

    private static func answer(_ response: Response) -> DBusMethodResult {
        .reply([.uint32(response.rawValue), .variantDictionary([:])])
    }

    /// One line on standard error (the journal, under systemd); never a secret.
    static func log(_ line: String) {
        let bytes = Array("latchkeyd: Secret portal: \(line)\n".utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

extension DBusMethodResult {
    /// The values of a reply.
    fileprivate var values: [DBusValue] {
        if case .reply(let values) = self { return values }
        return []
    }
}
