/// Reads the plain-text keyrings gnome-keyring writes when a keyring's password is empty: a GLib
/// key file whose first group is `[keyring]` (display-name, ctime, mtime, lock settings), one
/// group per item named by its id (item-type, display-name, secret or binary-secret in hex, ctime,
/// mtime), and groups `<id>:attribute<n>` (name, type `string` or `uint32`, value) and
/// `<id>:acl<n>` (ignored).
enum PlainTextKeyring {
    /// Whether `bytes` look like a plain-text keyring: text whose first group is `[keyring]`.
    static func matches(_ bytes: [UInt8]) -> Bool {
        guard let text = String(validating: bytes, as: UTF8.self) else { return false }
        return (try? KeyFile.parse(text, path: "")).map { $0.groups.first?.name == "keyring" } ?? false
    }

    /// The keyring in `bytes` (the file at `path`).
    static func read(_ bytes: [UInt8], path: String) throws(GnomeKeyringError) -> GnomeKeyring {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw GnomeKeyringError(path, .notAKeyring)
        }
        let file = try KeyFile.parse(text, path: path)
        guard let header = file.groups.first, header.name == "keyring" else {
            throw GnomeKeyringError(path, .notAKeyring)
        }
        var items: [GnomeKeyringItem] = []
        for group in file.groups.dropFirst() where !group.name.contains(":") && group.name != "keyring" {
            guard let id = UInt32(group.name) else {
                throw GnomeKeyringError(path, .corrupt("item group [\(group.name)] is not a number"))
            }
            var attributes: [String: String] = [:]
            let prefix = group.name + ":attribute"
            for attributeGroup in file.groups where attributeGroup.name.hasPrefix(prefix) {
                guard let name = attributeGroup["name"] else { continue }
                if attributeGroup["type"] == "uint32" {
                    // gnome-keyring keeps the low 32 bits of the number; an unparsable value drops the attribute.
                    guard let value = attributeGroup["value"].flatMap({ UInt64($0) }) else { continue }
                    attributes[name] = String(UInt32(truncatingIfNeeded: value))
                } else {
                    attributes[name] = attributeGroup["value"] ?? ""
                }
            }
            if attributes[ItemType.schemaAttribute] == nil {
                let type = group["item-type"].flatMap { Int32($0) }.map { UInt32(bitPattern: $0) } ?? 0
                attributes[ItemType.schemaAttribute] = ItemType.schema(type)
            }
            let secret: [UInt8]
            if let text = group["secret"] {
                secret = Array(text.utf8)
            } else if let hex = group["binary-secret"] {
                guard let decoded = decodeHex(hex) else {
                    throw GnomeKeyringError(path, .corrupt("item \(id) has a binary secret that is not hex"))
                }
                secret = decoded
            } else {
                secret = []
            }
            items.append(
                GnomeKeyringItem(
                    id: id, label: group["display-name"] ?? "", attributes: attributes, secret: secret,
                    contentType: nil, created: group["ctime"].flatMap { UInt64($0) } ?? 0,
                    modified: group["mtime"].flatMap { UInt64($0) } ?? 0))
        }
        return GnomeKeyring(
            path: path, format: .plainText, name: header["display-name"] ?? "",
            created: header["ctime"].flatMap { UInt64($0) } ?? 0,
            modified: header["mtime"].flatMap { UInt64($0) } ?? 0, items: items)
    }

    /// Hex digits, either case, two per byte.
    static func decodeHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The subset of GLib's key-file syntax gnome-keyring writes: `[group]` lines, `key=value`
/// lines (spaces around `=` ignored, values unescaped: `\s` `\n` `\t` `\r` `\\`), comments and
/// blank lines; secrets are raw (see ``rawKeys``). A repeated group adds to the first; a repeated
/// key keeps the last value; keys with a locale (`key[de]`) are ignored.
struct KeyFile {
    /// One group: its name and its keys in order.
    struct Group {
        /// The name between the brackets.
        var name: String
        /// The keys and their unescaped values.
        var values: [String: String] = [:]

        /// The value of `key`.
        subscript(key: String) -> String? { values[key] }
    }

    /// The groups in the order they first appear.
    var groups: [Group] = []

    /// Keys whose values gnome-keyring writes raw (`g_key_file_set_value`: not escaped, so a
    /// multi-line secret spills over the following lines and leading spaces are not protected).
    /// Their values are read verbatim, from just after `=` to the line before the item's next key
    /// (`mtime=`, which gnome-keyring always writes next).
    static let rawKeys: Set<Substring> = ["secret"]

    /// Parses `text` (the file at `path`, for errors).
    static func parse(_ text: String, path: String) throws(GnomeKeyringError) -> KeyFile {
        var file = KeyFile()
        var positions: [String: Int] = [:]
        var current: Int?
        // Split on the byte: "\r\n" is one Character, so a split on Characters would miss it.
        let lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            Substring($0)
        }
        var index = 0
        while index < lines.count {
            let number = index + 1
            let raw = lines[index]
            index += 1
            var line = raw
            if line.last == "\r" { line = line.dropLast() }
            line = line.drop { $0 == " " || $0 == "\t" }
            if line.isEmpty || line.first == "#" { continue }
            if line.first == "[" {
                guard line.last == "]", line.count >= 3 else {
                    throw GnomeKeyringError(path, .corrupt("line \(number) is not a group header"))
                }
                let name = String(line.dropFirst().dropLast())
                if let existing = positions[name] {
                    current = existing
                } else {
                    positions[name] = file.groups.count
                    current = file.groups.count
                    file.groups.append(Group(name: name))
                }
                continue
            }
            guard let equals = line.firstIndex(of: "="), let group = current else {
                throw GnomeKeyringError(path, .corrupt("line \(number) is neither a group nor a key"))
            }
            var key = line[..<equals]
            while key.last == " " || key.last == "\t" { key = key.dropLast() }
            if key.isEmpty { throw GnomeKeyringError(path, .corrupt("line \(number) has an empty key")) }
            if key.contains("[") { continue }
            if rawKeys.contains(key) {
                // Verbatim: everything after "=" on this line (a final CR included), then whole lines
                // up to the next "mtime=" line, when there is one.
                var value = String(raw[raw.index(after: raw.firstIndex(of: "=") ?? raw.startIndex)...])
                if let end = lines[index...].firstIndex(where: { $0.hasPrefix("mtime=") }) {
                    for continuation in lines[index..<end] { value += "\n" + continuation }
                    index = end
                }
                file.groups[group].values[String(key)] = value
                continue
            }
            let value = line[line.index(after: equals)...].drop { $0 == " " || $0 == "\t" }
            guard let unescaped = unescape(value) else {
                throw GnomeKeyringError(path, .corrupt("line \(number) has an invalid escape"))
            }
            file.groups[group].values[String(key)] = unescaped
        }
        return file
    }

    /// A value with GLib's escapes undone; nil for an unknown escape or a trailing backslash.
    private static func unescape(_ value: Substring) -> String? {
        guard value.contains("\\") else { return String(value) }
        var result = ""
        var escaping = false
        for character in value {
            if escaping {
                switch character {
                case "s": result.append(" ")
                case "n": result.append("\n")
                case "t": result.append("\t")
                case "r": result.append("\r")
                case "\\": result.append("\\")
                default: return nil
                }
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                result.append(character)
            }
        }
        return escaping ? nil : result
    }
}
