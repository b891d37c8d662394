import DBus
import DaemonLoop
import Foundation
import KeychainCore
import KeychainRegistry
import KeychainStore
import Pinentry
import Posix
import SecretService
import Testing

/// The session bus as the loop serves it, with no connection: messages stamped as the bus would stamp them
/// are handed to ``SessionBus/receive(_:)``, the loop's one step for each message.
@Suite struct SessionBusTests {
    static let password = Array("session bus password".utf8)

    /// The desktop's screen saver activating locks the keychains set to lock with the screen, and no other;
    /// only the owner of the screen saver's name is believed, and its deactivation changes nothing.
    @Test func theScreenSaverOwnerActivatingLocksKeychainsSetToLockWithTheScreen() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bus-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try SecretServiceDaemon(
            configuration: SecretServiceConfiguration(
                registry: RegistryConfiguration(
                    keychainDirectory: directory, pinentry: Pinentry(program: "/bin/false"), systemctl: nil)),
            loginPassword: try SecretBytes(copying: Self.password))
        defer { daemon.registry.shutDown() }
        let bus = SessionBus(daemon: daemon)
        let registry = daemon.registry
        let login = try #require(registry.login)
        try registry.setSettings(KeychainSettings(lockOnScreenLock: true), of: login)
        let work = try registry.createKeychain(label: "Work") { $0 }
        #expect(!work.isLocked)
        var serial: UInt32 = 200
        func deliver(_ message: DBusMessage, from sender: String) {
            serial += 1
            message.stampAsDelivered(from: sender, serial: serial)
            _ = bus.receive(message)
        }
        func activeChanged(_ active: Bool, interface: String = "org.gnome.ScreenSaver") throws -> DBusMessage {
            try DBusMessage.signal(
                path: "/org/gnome/ScreenSaver", interface: interface, member: "ActiveChanged",
                arguments: [.bool(active)])
        }
        // Nobody owns the name yet: nobody is believed.
        deliver(try activeChanged(true), from: ":1.50")
        #expect(!login.isLocked)
        let owned = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            arguments: [.string("org.gnome.ScreenSaver"), .string(""), .string(":1.50")])
        // A client cannot claim the name by saying so.
        deliver(owned, from: ":1.51")
        deliver(try activeChanged(true), from: ":1.50")
        #expect(!login.isLocked)
        deliver(owned, from: "org.freedesktop.DBus")
        deliver(try activeChanged(true), from: ":1.51")
        deliver(try activeChanged(true, interface: "org.freedesktop.ScreenSaver"), from: ":1.50")
        deliver(try activeChanged(false), from: ":1.50")
        #expect(!login.isLocked, "an impostor, another name's interface and a deactivation lock nothing")
        deliver(try activeChanged(true), from: ":1.50")
        #expect(login.isLocked)
        #expect(!work.isLocked)
        // The freedesktop name's owner, as GetNameOwner answered at start.
        try login.keychain.unlock(password: Self.password)
        bus.noteOwner(":1.60", of: "org.freedesktop.ScreenSaver")
        deliver(try activeChanged(true, interface: "org.freedesktop.ScreenSaver"), from: ":1.60")
        #expect(login.isLocked)
    }
}
