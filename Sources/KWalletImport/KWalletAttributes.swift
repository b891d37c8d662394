import FoundationEssentials
import GnomeKeyringImport

/// What kwalletd5's own Secret Service kept for its items beside a wallet, in `NAME_attributes.json`
/// (`kwalletfreedesktopattributes.cpp`, v5.103.0): a JSON object whose members named `folder/key` are objects
/// with `attributes` (an object of strings), `$fdo_mime_type`, `$fdo_created` and `$fdo_modified` (Unix seconds
/// as decimal text). Nothing in it is secret. Members of any other shape are ignored, as kwalletd ignores them.
package struct KWalletAttributes: Sendable, Equatable {
    /// One Secret Service item's record.
    package struct Item: Sendable, Equatable {
        /// Its Secret Service attributes.
        package var attributes: [String: String]
        /// Its secret's content type (kwalletd5 serves `application/octet-stream` when none was kept).
        package var contentType: String?
        /// When it was made and last changed, as Unix seconds.
        package var created: UInt64?
        /// When it was last changed, as Unix seconds.
        package var modified: UInt64?
    }

    /// The folder kwalletd5's Secret Service uses for an item whose label has no `/` (`FDO_SECRETS_DEFAULT_DIR`).
    package static let defaultFolder = "Secret Service"
    /// The largest attributes file read.
    package static let maximumSize = 16 << 20

    /// The items by entry location, `folder/key`.
    package var items: [String: Item] = [:]

    /// No items.
    package init() {}

    /// The items of the JSON `bytes`; anything that is not a JSON object gives none.
    package init(json bytes: [UInt8]) {
        guard let root = try? JSONDecoder().decode([String: Member].self, from: Data(bytes)) else { return }
        for (location, member) in root {
            guard case .item(let item) = member, location.contains("/") else { continue }
            items[location] = item
        }
    }

    /// The attributes file beside the wallet `file`, read as a bounded regular file; none when it is missing,
    /// not a regular file or does not parse.
    package init(besides file: KWalletFile) {
        guard let read = try? KeyringFile.readRegularFile(file.attributesPath, atMost: Self.maximumSize) else {
            self.init()
            return
        }
        self.init(json: read.bytes)
    }

    /// The record of the entry `folder`/`key`, if kwalletd5's Secret Service made it.
    package func item(folder: String, key: String) -> Item? { items[folder + "/" + key] }

    /// The label kwalletd5's Secret Service showed for the entry `folder`/`key` (`FdoUniqueLabel`): the key without
    /// a `__N_` copy number, after `folder/` unless the folder is ``defaultFolder``.
    package static func label(folder: String, key: String) -> String {
        // `(^.*)__(\d+)_$`: the copy number kwalletd5 appends to a label used twice.
        var name = Substring(key)
        if name.hasSuffix("_") {
            let body = name.dropLast()
            let digits = body.reversed().prefix { $0.isASCII && $0.isNumber }
            let rest = body.dropLast(digits.count)
            if !digits.isEmpty, rest.hasSuffix("__") { name = rest.dropLast(2) }
        }
        return folder == defaultFolder ? String(name) : folder + "/" + name
    }

    /// A member of the file: an item's object, or anything else.
    private enum Member: Decodable {
        case item(Item)
        case other

        private struct Name: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        /// A string member, or nil for any other JSON value.
        private struct Text: Decodable {
            var value: String?
            init(from decoder: any Decoder) throws { value = try? decoder.singleValueContainer().decode(String.self) }
        }

        init(from decoder: any Decoder) throws {
            guard let object = try? decoder.container(keyedBy: Name.self) else {
                self = .other
                return
            }
            var item = Item(attributes: [:])
            if let attributes = try? object.decode([String: Text].self, forKey: Name(stringValue: "attributes")) {
                item.attributes = attributes.compactMapValues(\.value)
            }
            func text(_ name: String) -> String? {
                (try? object.decode(Text.self, forKey: Name(stringValue: name)))?.value
            }
            item.contentType = text("$fdo_mime_type")
            item.created = text("$fdo_created").flatMap { UInt64($0) }
            item.modified = text("$fdo_modified").flatMap { UInt64($0) }
            self = .item(item)
        }
    }
}
