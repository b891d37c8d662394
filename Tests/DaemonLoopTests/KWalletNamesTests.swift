import DBus
import DaemonLoop
import Testing

/// Which messages tell latchkeyd it now owns a KDE name: the bus's own `NameAcquired` for one of them, nothing
/// a client sends.
@Suite struct KWalletNamesTests {
    private func nameSignal(_ member: String, _ name: String, from sender: String) throws -> DBusMessage {
        let message = try DBusMessage.signal(
            path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: member,
            arguments: [.string(name)])
        message.stampAsDelivered(from: sender, serial: 7)
        return message
    }

    @Test func onlyTheBusSaysLatchkeydAcquiredAKWalletName() throws {
        #expect(
            KWalletNames.acquired(try nameSignal("NameAcquired", "org.kde.kwalletd5", from: "org.freedesktop.DBus"))
                == "org.kde.kwalletd5")
        #expect(
            KWalletNames.acquired(try nameSignal("NameAcquired", "org.kde.kwalletd6", from: "org.freedesktop.DBus"))
                == "org.kde.kwalletd6")
        // A client's forgery, another name, another member.
        #expect(KWalletNames.acquired(try nameSignal("NameAcquired", "org.kde.kwalletd5", from: ":1.9")) == nil)
        #expect(
            KWalletNames.acquired(
                try nameSignal("NameAcquired", "org.freedesktop.secrets", from: "org.freedesktop.DBus"))
                == nil)
        #expect(
            KWalletNames.acquired(try nameSignal("NameLost", "org.kde.kwalletd5", from: "org.freedesktop.DBus")) == nil)
        #expect(KWalletNames.all == ["org.kde.kwalletd5", "org.kde.kwalletd6"])
    }
}
