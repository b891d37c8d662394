import DBus
import KeychainCore
import Posix

/// The Secret Service's error names, and the mapping of store errors onto them.
enum SecretServiceError {
    /// `org.freedesktop.Secret.Error.IsLocked`
    static func isLocked(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.Secret.Error.IsLocked", message: message)
    }

    /// `org.freedesktop.Secret.Error.NoSession`
    static func noSession(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.Secret.Error.NoSession", message: message)
    }

    /// `org.freedesktop.Secret.Error.NoSuchObject`
    static func noSuchObject(_ path: String) -> DBusError {
        DBusError(name: "org.freedesktop.Secret.Error.NoSuchObject", message: "no such object: \(path)")
    }

    /// `org.freedesktop.Secret.Error.AlreadyExists`
    static func alreadyExists(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.Secret.Error.AlreadyExists", message: message)
    }

    /// `org.freedesktop.DBus.Error.InvalidArgs`
    static func invalidArgs(_ message: String) -> DBusError {
        DBusError(.invalidArgs, message)
    }

    /// The D-Bus error a store failure becomes.
    static func from(_ error: KeychainError) -> DBusError {
        switch error.status {
        case .interactionNotAllowed: isLocked(error.reason)
        case .itemNotFound, .invalidItemReference:
            DBusError(name: "org.freedesktop.Secret.Error.NoSuchObject", message: error.reason)
        case .duplicateItem: alreadyExists(error.reason)
        case .param, .noSuchAttribute, .dataTooLarge: invalidArgs(error.reason)
        case .allocate: DBusError(.noMemory, error.reason)
        default: DBusError(.failed, error.description)
        }
    }

    /// What `make` makes in secret memory; `org.freedesktop.DBus.Error.NoMemory` when none can be had (the
    /// call fails, the daemon goes on).
    static func inSecretMemory<Made: ~Copyable>(_ make: () throws(SecretMemoryError) -> Made) throws(DBusError)
        -> Made
    {
        do {
            return try make()
        } catch {
            throw DBusError(.noMemory, error.description)
        }
    }
}
