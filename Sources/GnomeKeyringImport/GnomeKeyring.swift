import FoundationEssentials

/// One gnome-keyring keyring as read from its file: what an import carries into a keychain.
package struct GnomeKeyring: Sendable, Equatable {
    /// The two on-disk formats gnome-keyring writes, and libsecret's own.
    package enum Format: String, Sendable, Equatable {
        /// Binary format version 0, encrypted with the keyring password.
        case binary
        /// The plain-text key file gnome-keyring writes for a keyring whose password is empty.
        case plainText = "plain-text"
        /// libsecret's file backend, format version 1 (Flatpak apps' `keyrings/default.keyring`).
        case libsecretFile = "libsecret-file"
    }

    /// The file it was read from.
    package var path: String
    /// Which format the file is in.
    package var format: Format
    /// The keyring's display name (`Login` for login.keyring).
    package var name: String
    /// When the keyring was made, as Unix seconds.
    package var created: UInt64
    /// When the keyring last changed, as Unix seconds.
    package var modified: UInt64
    /// Its items, in file order.
    package var items: [GnomeKeyringItem]
}

/// One item of a gnome-keyring keyring, with the attributes gnome-keyring shows for it over the Secret Service.
package struct GnomeKeyringItem: Sendable, Equatable {
    /// The item's number in the keyring (its Secret Service object path ends with it).
    package var id: UInt32
    /// The label (gnome-keyring's display name).
    package var label: String
    /// Its attributes as text, `xdg:schema` included: a number attribute of the old API is its
    /// decimal text; an item without `xdg:schema` gets the schema its item type stands for, as
    /// gnome-keyring shows it.
    package var attributes: [String: String]
    /// The secret's bytes.
    package var secret: [UInt8]
    /// The secret's content type; gnome-keyring's files keep none (it serves every secret as
    /// `text/plain`), so this is always nil for them.
    package var contentType: String?
    /// When the item was made, as Unix seconds.
    package var created: UInt64
    /// When the item last changed, as Unix seconds.
    package var modified: UInt64
}

/// Why a keyring file cannot be read. Every case names the file.
package struct GnomeKeyringError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    package enum Kind: Sendable, Equatable {
        /// The file cannot be opened or read (an `errno` description).
        case unreadable(String)
        /// The file is neither a binary nor a plain-text keyring.
        case notAKeyring
        /// A binary keyring of a version, cipher or hash this reader does not know.
        case unsupportedVersion(major: UInt8, minor: UInt8, crypto: UInt8, hash: UInt8)
        /// The file ends inside a field.
        case truncated(String)
        /// A field holds a value the format does not allow.
        case corrupt(String)
        /// The password does not open the keyring (the decrypted block's check fails).
        case wrongPassword
        /// The file is larger than a keyring can reasonably be.
        case tooLarge(Int)
    }

    /// The keyring file.
    package var path: String
    /// What went wrong.
    package var kind: Kind

    /// An error about `path`.
    package init(_ path: String, _ kind: Kind) {
        self.path = path
        self.kind = kind
    }

    /// One line: the file and what is wrong with it.
    package var description: String {
        switch kind {
        case .unreadable(let reason): "\(path): cannot read it: \(reason)"
        case .notAKeyring: "\(path): not a gnome-keyring keyring file"
        case .unsupportedVersion(let major, let minor, let crypto, let hash):
            "\(path): keyring format \(major).\(minor) with cipher \(crypto) and hash \(hash) is not supported"
        case .truncated(let what): "\(path): the file is truncated (it ends inside \(what))"
        case .corrupt(let what): "\(path): the file is damaged (\(what))"
        case .wrongPassword: "\(path): wrong password"
        case .tooLarge(let size): "\(path): \(size) bytes is too large for a keyring file"
        }
    }
}
