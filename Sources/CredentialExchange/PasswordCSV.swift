import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// Password exports in CSV (RFC 4180) from the programs people use, told apart by their header row (the column
/// sets are in docs/export-format.md, "CSV files"). Each row becomes a password item (an Internet password when
/// its URL names a host, a generic password otherwise); a TOTP column becomes an item of its own.
package enum PasswordCSV {
    /// A program's CSV export: the name ``ExchangeReading/format`` gives and the columns that tell it (in
    /// lower case; the columns may come in any order, and others may follow).
    struct Layout {
        var format: String
        var required: Set<String>
    }

    /// The layouts, most specific first.
    static let layouts: [Layout] = [
        Layout(
            format: "firefox-csv",
            required: [
                "url", "username", "password", "httprealm", "formactionorigin", "guid", "timecreated", "timelastused",
                "timepasswordchanged",
            ]),
        Layout(
            format: "bitwarden-csv",
            required: [
                "type", "name", "notes", "fields", "login_uri", "login_username", "login_password", "login_totp",
            ]
        ),
        Layout(format: "keepassxc-csv", required: ["group", "title", "username", "password", "url", "notes"]),
        Layout(format: "apple-passwords-csv", required: ["title", "url", "username", "password", "notes", "otpauth"]),
        Layout(format: "chrome-csv", required: ["name", "url", "username", "password"]),
    ]

    /// The items of a CSV password export.
    package static func decode(_ file: borrowing SecretBytes) throws(ExchangeError) -> ExchangeReading {
        try file.withUnsafeBytes { (bytes) throws(ExchangeError) in
            let records = try CSVReader.records(bytes)
            guard let header = records.first else { throw ExchangeError(.unknownFormat, "CSV file: empty") }
            let names = header.fields.map { field in
                var out: [UInt8] = []
                CSVReader.unquote(field, in: bytes) { out.append($0) }
                return String(decoding: out, as: UTF8.self).lowercased().trimmingBlanks()
            }
            guard let layout = layouts.first(where: { $0.required.isSubset(of: Set(names)) }) else {
                throw ExchangeError(
                    .unknownFormat,
                    "CSV file: the header on line \(header.line) is not a Chrome, Firefox, Bitwarden, KeePassXC or "
                        + "Apple Passwords export")
            }
            var reader = RowReader(bytes: bytes, columns: names, format: layout.format)
            for record in records.dropFirst() { try reader.read(record) }
            return ExchangeReading(items: reader.items, skipped: reader.skipped, format: layout.format)
        }
    }
}

extension String {
    /// Without blanks at either end.
    func trimmingBlanks() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}

/// Turns the rows of one CSV export into items.
private struct RowReader {
    let bytes: UnsafeRawBufferPointer
    let columns: [String]
    let format: String
    var items: [NewItem] = []
    var skipped: [SkippedCredential] = []

    init(bytes: UnsafeRawBufferPointer, columns: [String], format: String) {
        self.bytes = bytes
        self.columns = columns
        self.format = format
    }

    private func field(_ record: CSVRecord, _ column: String) -> CSVField? {
        guard let index = columns.firstIndex(of: column), index < record.fields.count else { return nil }
        return record.fields[index]
    }

    /// The text of a column that is not a secret; nil when the row has no such column or it is empty.
    private func text(_ record: CSVRecord, _ column: String) throws(ExchangeError) -> String? {
        guard let field = field(record, column) else { return nil }
        var out: [UInt8] = []
        CSVReader.unquote(field, in: bytes) { out.append($0) }
        guard let text = String(validating: out, as: UTF8.self) else {
            throw ExchangeError(.malformed, "CSV file: the \(column) column on line \(record.line) is not UTF-8")
        }
        return text.isEmpty ? nil : text
    }

    /// A secret column in secret memory; nil when the row has no such column.
    private func secret(_ record: CSVRecord, _ column: String) throws(ExchangeError) -> SecretBytes? {
        guard let field = field(record, column) else { return nil }
        var out = try secretBuffer(capacity: field.end - field.start)
        CSVReader.unquote(field, in: bytes) { out.append($0) }
        guard out.withUnsafeBytes({ UTF8Check.isValid($0) }) else {
            throw ExchangeError(.malformed, "CSV file: the \(column) column on line \(record.line) is not UTF-8")
        }
        return out
    }

    mutating func read(_ record: CSVRecord) throws(ExchangeError) {
        switch format {
        case "firefox-csv":
            let url = try text(record, "url")
            var extra: ItemAttributes = [:]
            if let realm = try text(record, "httprealm") { extra[.securityDomain] = .string(realm) }
            if let action = try text(record, "formactionorigin") {
                extra[.secretService("form-action-origin")] = .string(action)
            }
            try add(
                record, title: url.flatMap { URLParts($0)?.server } ?? url ?? "", url: url,
                username: try text(record, "username"), password: "password", notes: nil, extra: extra,
                created: try milliseconds(record, "timecreated"),
                modified: try milliseconds(record, "timepasswordchanged"))
        case "bitwarden-csv":
            let title = try text(record, "name") ?? ""
            var extra: ItemAttributes = [:]
            let collections = try text(record, "collections")
            if let folder = try text(record, "folder") ?? collections {
                extra[.secretService("group")] = .string(folder)
            }
            let type = try text(record, "type") ?? "login"
            switch type {
            case "login":
                try add(
                    record, title: title,
                    url: try text(record, "login_uri").map { String($0.split(separator: ",").first ?? "") },
                    username: try text(record, "login_username"), password: "login_password", notes: "notes",
                    extra: extra)
                try addTOTP(record, column: "login_totp", title: title, username: try text(record, "login_username"))
                try addBitwardenFields(record, title: title)
            case "note":
                try add(record, title: title, url: nil, username: nil, password: "notes", notes: nil, extra: extra)
                items[items.count - 1].attributes[.itemDescription] = .string("secure note")
                try addBitwardenFields(record, title: title)
            default:
                skipped.append(
                    SkippedCredential(
                        title: title, credentialType: type, reason: "a Bitwarden item type with no Latchkey item"))
            }
        case "keepassxc-csv":
            let title = try text(record, "title") ?? ""
            var extra: ItemAttributes = [:]
            if let group = try text(record, "group") { extra[.secretService("group")] = .string(group) }
            try add(
                record, title: title, url: try text(record, "url"), username: try text(record, "username"),
                password: "password", notes: "notes", extra: extra, created: try isoDate(record, "created"),
                modified: try isoDate(record, "last modified"))
            try addTOTP(record, column: "totp", title: title, username: try text(record, "username"))
        case "apple-passwords-csv":
            let title = try text(record, "title") ?? ""
            try add(
                record, title: title, url: try text(record, "url"), username: try text(record, "username"),
                password: "password", notes: "notes", extra: [:])
            try addTOTP(record, column: "otpauth", title: title, username: try text(record, "username"))
        default:  // chrome-csv
            try add(
                record, title: try text(record, "name") ?? "", url: try text(record, "url"),
                username: try text(record, "username"), password: "password", notes: "note", extra: [:])
        }
    }

    /// Adds the password item of a row: an Internet password when `url` names a host, else a generic password
    /// with the title as its service.
    private mutating func add(
        _ record: CSVRecord, title: String, url: String?, username: String?, password column: String,
        notes: String?, extra: ItemAttributes, created: Date? = nil, modified: Date? = nil
    ) throws(ExchangeError) {
        var attributes = extra
        attributes[.label] = .string(title)
        if let username { attributes[.account] = .string(username) }
        if let notes, let comment = try text(record, notes) { attributes[.comment] = .string(comment) }
        let secret = try secret(record, column)?.withUnsafeBytes { Data($0) }
        if let location = url.flatMap({ URLParts($0) }) {
            attributes[.server] = .string(location.server)
            if let code = location.protocolCode { attributes[.protocol] = .string(code) }
            if let port = location.port { attributes[.port] = .number(port) }
            if let path = location.path { attributes[.path] = .string(path) }
            items.append(
                NewItem(
                    .internetPassword, attributes: attributes, secret: secret, creationDate: created,
                    modificationDate: modified))
        } else {
            if let url { attributes[.secretService("url")] = .string(url) }
            attributes[.service] = .string(title)
            items.append(
                NewItem(
                    .genericPassword, attributes: attributes, secret: secret, creationDate: created,
                    modificationDate: modified))
        }
    }

    /// Adds the TOTP of a row's `column`, when it has one, as a generic password whose secret is the
    /// `otpauth://` URI (a bare base32 secret is put in one).
    private mutating func addTOTP(_ record: CSVRecord, column: String, title: String, username: String?)
        throws(ExchangeError)
    {
        guard let value = try secret(record, column), !value.isEmpty else { return }
        let isURI = value.withUnsafeBytes { $0.starts(with: Array("otpauth://".utf8)) }
        let uri: SecretBytes
        if isURI {
            uri = value
        } else {
            uri = try OTPAuthURI.make(
                secret: value, account: username, issuer: title,
                algorithm: "SHA1", digits: 6, period: 30)
        }
        items.append(TOTPItem.make(uri: uri, title: title, username: username, created: nil, modified: nil))
    }

    /// Bitwarden's `fields` column: one custom field a line, `name: value`. The CSV does not say which were
    /// hidden (a PIN, a recovery code), so each becomes a generic password of its own (service: the row's name,
    /// account: the field's), as a CXF document's concealed fields do: a value is never an attribute, which every
    /// client may read, also while the keychain is locked. Read in secret memory.
    private mutating func addBitwardenFields(_ record: CSVRecord, title: String) throws(ExchangeError) {
        guard let fields = try secret(record, "fields") else { return }
        let lines: [(name: String, value: Data)] = fields.withUnsafeBytes { raw in
            var found: [(name: String, value: Data)] = []
            for line in raw.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).trimmingBlanks()
                guard !name.isEmpty else { continue }
                var value = line[(colon + 1)...]
                while value.first == UInt8(ascii: " ") { value = value.dropFirst() }
                while value.last == UInt8(ascii: " ") || value.last == UInt8(ascii: "\r") { value = value.dropLast() }
                found.append((name, Data(value)))
            }
            return found
        }
        for (name, value) in lines {
            items.append(
                NewItem(
                    .genericPassword,
                    attributes: [.label: .string(title), .service: .string(title), .account: .string(name)],
                    secret: value))
        }
    }

    /// Firefox's times: milliseconds since 1970.
    private func milliseconds(_ record: CSVRecord, _ column: String) throws(ExchangeError) -> Date? {
        guard let text = try text(record, column) else { return nil }
        guard let value = Int64(text), StorableDates.contains(Date(timeIntervalSince1970: TimeInterval(value) / 1000))
        else {
            throw ExchangeError(.invalid, "CSV file: the \(column) column on line \(record.line) is not a time")
        }
        return Date(timeIntervalSince1970: TimeInterval(value) / 1000)
    }

    /// KeePassXC's times: ISO 8601 in UTC, `2024-01-02T03:04:05Z`.
    private func isoDate(_ record: CSVRecord, _ column: String) throws(ExchangeError) -> Date? {
        guard let text = try text(record, column) else { return nil }
        guard let date = ISODate.parse(text) else {
            throw ExchangeError(.invalid, "CSV file: the \(column) column on line \(record.line) is not a date")
        }
        return date
    }
}

/// The TOTP item both readers make: a generic password whose secret is an `otpauth://` URI.
enum TOTPItem {
    static func make(uri: borrowing SecretBytes, title: String, username: String?, created: Date?, modified: Date?)
        -> NewItem
    {
        var attributes: ItemAttributes = [
            .label: .string(title), .service: .string(title + " (TOTP)"), .itemDescription: .string("TOTP"),
        ]
        if let username { attributes[.account] = .string(username) }
        return NewItem(
            .genericPassword, attributes: attributes, secret: uri.withUnsafeBytes { Data($0) }, creationDate: created,
            modificationDate: modified)
    }
}

/// `YYYY-MM-DDTHH:MM:SS` with `Z`, an offset or nothing (read as UTC), a fraction of a second ignored.
enum ISODate {
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[from..<from + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard bytes.count >= 19, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: " "), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":"), let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
            let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
        }
        var offset = 0
        if index < bytes.count {
            if bytes[index] == UInt8(ascii: "Z"), index + 1 == bytes.count {
                offset = 0
            } else if bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"),
                bytes.count == index + 6, let hours = number(index + 1, 2), let minutes = number(index + 4, 2)
            {
                offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
            } else {
                return nil
            }
        }
        // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146097 + dayOfEra - 719468
        let seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
