import DBus
import Glibc

/// KDE's KWallet bus names, `org.kde.kwalletd5` and `org.kde.kwalletd6` (docs/kwallet.md, "Names and
/// packaging, as built"). latchkeyd asks for them once it owns `org.freedesktop.secrets`, queued: when a
/// kwalletd owns one, the bus hands it to latchkeyd as soon as that kwalletd leaves. They are asked for
/// without `ALLOW_REPLACEMENT`, so another program of the user asking with `REPLACE_EXISTING` is only
/// queued behind latchkeyd; and without `REPLACE_EXISTING` even under `--replace` (a real kwalletd5 does not
/// allow it, and a latchkeyd being replaced lets go of them when it loses `org.freedesktop.secrets` and
/// exits). Losing one of them never ends the daemon: only `org.freedesktop.secrets` does.
package enum KWalletNames {
    /// The names, in the order they are asked for.
    package static let all = ["org.kde.kwalletd5", "org.kde.kwalletd6"]

    /// Asks the bus for each name, queued and not replaceable; one line to log for each name another
    /// connection owns (`describeOwner` names that owner) or the bus refused.
    package static func request(on connection: DBusConnection, describeOwner: (String) -> String) -> [String] {
        var lines: [String] = []
        for name in all {
            do {
                switch try connection.requestName(name, flags: []) {
                case .primaryOwner, .alreadyOwner: break
                case .inQueue, .exists:
                    lines.append(
                        "\(name) is owned by \(describeOwner(name)): KWallet clients reach it, not latchkeyd, until "
                            + "it leaves (latchkeyd waits in the bus's queue for the name)")
                }
            } catch {
                lines.append("cannot request \(name): \(error.message); KWallet clients are not served under it")
            }
        }
        return lines
    }

    /// The KWallet name `message` says this connection now owns: the bus's own `NameAcquired` (a client may
    /// send the same signal straight to us; it counts for nothing). Nil for any other message.
    package static func acquired(_ message: DBusMessage) -> String? {
        guard message.kind == .signal, message.sender == "org.freedesktop.DBus",
            message.interface == "org.freedesktop.DBus", message.member == "NameAcquired",
            case .string(let name)? = try? message.arguments().first, all.contains(name)
        else { return nil }
        return name
    }

    /// Writes one line to standard error (the journal, under systemd).
    static func log(_ line: String) {
        let bytes = Array(("latchkeyd: " + line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}
