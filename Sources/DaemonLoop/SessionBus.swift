import DBus
import SecretService

/// The session bus as the loop serves it: the connection once there is one, the desktop's screen saver
/// followed on it, and the daemon's bus face, which answers what arrives.
package final class SessionBus {
    /// The bus face.
    package let daemon: SecretServiceDaemon
    /// The connection; nil until a bus appears (signals made before are dropped: nobody could hear them).
    package private(set) var connection: DBusConnection?
    /// Whose word about the screen saver counts.
    private var screenSaver = ScreenSaverWatch()

    /// The session bus of `daemon`, with no connection yet.
    package init(daemon: SecretServiceDaemon) {
        self.daemon = daemon
    }

    /// Serves on `connection`: subscribes to the screen savers' activation and learns who owns the followed
    /// names now (later changes come through `NameOwnerChanged`, subscribed when the name was claimed).
    package func attach(_ connection: DBusConnection) {
        self.connection = connection
        for rule in ScreenSaverWatch.matchRules { try? connection.addMatch(rule) }
        for name in ScreenSaverWatch.names + SecretServiceDaemon.followedNames {
            noteOwner(connection.owner(of: name), of: name)
        }
    }

    /// Records the owner of a followed name, as `GetNameOwner` answered.
    package func noteOwner(_ owner: String?, of name: String) {
        screenSaver.noteOwner(owner, of: name)
        daemon.noteOwner(owner, of: name)
    }

    /// One message from the bus: the screen saver's activation locks the keychains set to lock with the
    /// screen; then the daemon handles it. What to send, in order.
    package func receive(_ message: DBusMessage) -> [DBusMessage] {
        let locked = screenSaver.announcesLock(message) ? daemon.lockForScreenLock() : []
        if let name = KWalletNames.acquired(message) { KWalletNames.log("serves KWallet clients as \(name)") }
        return locked + daemon.handle(message)
    }

    /// Sends `messages`, when there is a bus.
    package func send(_ messages: [DBusMessage]) {
        guard let connection else { return }
        for message in messages { connection.send(message) }
    }
}
