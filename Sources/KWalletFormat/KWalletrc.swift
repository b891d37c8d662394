/// The wallet names the user's kwalletrc gives (docs/kwallet.md §2): `[Wallet] Default Wallet` (the network
/// wallet, `kdewallet` unless set), and `Local Wallet` (`localwallet`) when `Use One Wallet` is false, else
/// the network wallet again. latchkeyd's KWallet face takes both as names of the `default` collection, and
/// the import puts the network wallet into it. Only those three keys of that group are read; a name that is
/// empty, not UTF-8 or longer than ``maximumNameBytes`` leaves the default (and the readers of the file
/// take at most ``maximumFileBytes`` of a regular file).
package struct KWalletrc: Equatable, Sendable {
    /// The network wallet's name when kwalletrc names none.
    package static let defaultNetworkWallet = "kdewallet"
    /// The local wallet's name when kwalletrc names none (and uses two wallets).
    package static let defaultLocalWallet = "localwallet"
    /// The largest kwalletrc read; a larger one gives the defaults.
    package static let maximumFileBytes = 64 * 1024
    /// The longest wallet name taken from kwalletrc.
    package static let maximumNameBytes = 255

    /// What `networkWallet` answers.
    package var networkWallet = defaultNetworkWallet
    /// What `localWallet` answers.
    package var localWallet = defaultNetworkWallet

    /// The defaults.
    package init() {}

    /// The names `text`, a kwalletrc, gives.
    package init(kwalletrc text: String) {
        var inWallet = false
        var network: String?
        var local: String?
        var oneWallet = true
        for rawLine in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            if line.first == "#" { continue }
            if line.first == "[" {
                // `[Wallet]`, or `[Wallet][$i]` (immutable); `[Wallet][Sub]` is another group.
                let header = line.trimmingSpaces
                inWallet = header == "[Wallet]" || header.hasPrefix("[Wallet][$")
                continue
            }
            guard inWallet, let equals = line.firstIndex(of: "=") else { continue }
            var key = line[..<equals].trimmingSpaces
            // A flag (`Default Wallet[$i]`) names the same key; a locale (`[de]`) another.
            if let flag = key.firstRange(of: "[$"), key.hasSuffix("]") { key = String(key[..<flag.lowerBound]) }
            let value = Self.unescaped(line[line.index(after: equals)...].trimmingSpaces)
            switch key {
            case "Default Wallet": network = Self.validName(value)
            case "Local Wallet": local = Self.validName(value)
            case "Use One Wallet": oneWallet = Self.boolean(value) ?? true
            default: break
            }
        }
        networkWallet = network ?? Self.defaultNetworkWallet
        localWallet = oneWallet ? networkWallet : (local ?? Self.defaultLocalWallet)
    }

    private static func validName(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= maximumNameBytes, !value.contains("\u{FFFD}") else { return nil }
        return value
    }

    /// KConfig's booleans: `true`, `on`, `yes` or a non-zero number; `false`, `off`, `no` or zero.
    private static func boolean(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "true", "on", "yes": true
        case "false", "off", "no": false
        default: Int(value).map { $0 != 0 }
        }
    }

    /// KConfig's escapes in a value: `\s` (a space), `\t`, `\n`, `\r`, `\\`; others are kept as written.
    private static func unescaped(_ value: String) -> String {
        guard value.contains("\\") else { return value }
        var result = ""
        var escaping = false
        for character in value {
            if escaping {
                switch character {
                case "s": result.append(" ")
                case "t": result.append("\t")
                case "n": result.append("\n")
                case "r": result.append("\r")
                case "\\": result.append("\\")
                default: result.append("\\\(character)")
                }
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                result.append(character)
            }
        }
        if escaping { result.append("\\") }
        return result
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
