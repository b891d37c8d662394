import DBus

/// Follows the desktop's screen saver on the session bus, so that keychains set to lock with the screen
/// (`latchkey set-keychain-settings -s`) lock when it activates: GNOME Shell's `org.gnome.ScreenSaver` and
/// the freedesktop `org.freedesktop.ScreenSaver` (KDE, Xfce, …) both send `ActiveChanged(true)` when the
/// screen locks.
///
/// Only a signal from the current owner of the well-known name counts, as for logind's announcements: a
/// client may send a signal straight to the daemon. Owners are followed through the bus's
/// `NameOwnerChanged`, after a first answer from ``noteOwner(_:of:)``.
package struct ScreenSaverWatch {
    /// The bus names (and interfaces: each service sends on the interface named as it is) followed.
    package static let names = ["org.gnome.ScreenSaver", "org.freedesktop.ScreenSaver"]

    /// The match rules that bring the screen savers' `ActiveChanged` to the daemon.
    package static var matchRules: [String] {
        names.map { "type='signal',interface='\($0)',member='ActiveChanged'" }
    }

    /// Unique name owning each followed name, as the bus last said.
    private var owners: [String: String] = [:]

    /// A watch that believes nobody until told who owns the names.
    package init() {}

    /// Records who owns `name` (nil: nobody); names that are not followed are ignored.
    package mutating func noteOwner(_ owner: String?, of name: String) {
        guard Self.names.contains(name) else { return }
        owners[name] = owner.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Reads one message of the session bus: a followed name's new owner, when the bus itself says so
    /// (`NameOwnerChanged`; a client could send the same signal), is noted. Whether the message is a
    /// followed screen saver saying, as the owner of its name, that it became active: the screen locks.
    package mutating func announcesLock(_ message: DBusMessage) -> Bool {
        if let change = message.nameOwnerChange { noteOwner(change.newOwner, of: change.name) }
        return isActivation(message)
    }

    /// Whether `message` is a followed screen saver saying, as the owner of its name, that it became active.
    func isActivation(_ message: DBusMessage) -> Bool {
        guard let interface = message.interface, Self.names.contains(interface), message.member == "ActiveChanged",
            message.signature == "b", case .bool(true)? = try? message.arguments().first,
            let sender = message.sender
        else { return false }
        return owners[interface] == sender
    }
}
