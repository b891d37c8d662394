import CDBus

/// A D-Bus error: its name (e.g. `org.freedesktop.DBus.Error.InvalidArgs`) and a message.
package struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error name.
    package let name: String
    /// A one-line explanation.
    package let message: String

    /// An error with a well-known name.
    package init(_ name: Name, _ message: String) {
        self.name = name.rawValue
        self.message = message
    }

    /// An error with any name.
    package init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    /// `name: message`.
    package var description: String { "\(name): \(message)" }

    /// Error names this project uses.
    package struct Name: RawRepresentable, Hashable, Sendable {
        /// The dotted name.
        package let rawValue: String
        /// Wraps a dotted name.
        package init(rawValue: String) { self.rawValue = rawValue }

        /// Arguments of the wrong type or value.
        package static let invalidArgs = Name(rawValue: "org.freedesktop.DBus.Error.InvalidArgs")
        /// The call failed.
        package static let failed = Name(rawValue: "org.freedesktop.DBus.Error.Failed")
        /// Out of memory.
        package static let noMemory = Name(rawValue: "org.freedesktop.DBus.Error.NoMemory")
        /// The method does not exist.
        package static let unknownMethod = Name(rawValue: "org.freedesktop.DBus.Error.UnknownMethod")
        /// The object does not exist.
        package static let unknownObject = Name(rawValue: "org.freedesktop.DBus.Error.UnknownObject")
        /// The interface does not exist.
        package static let unknownInterface = Name(rawValue: "org.freedesktop.DBus.Error.UnknownInterface")
        /// The property does not exist.
        package static let unknownProperty = Name(rawValue: "org.freedesktop.DBus.Error.UnknownProperty")
        /// The property cannot be written.
        package static let propertyReadOnly = Name(rawValue: "org.freedesktop.DBus.Error.PropertyReadOnly")
        /// The operation is not supported.
        package static let notSupported = Name(rawValue: "org.freedesktop.DBus.Error.NotSupported")
        /// The caller may not do this.
        package static let accessDenied = Name(rawValue: "org.freedesktop.DBus.Error.AccessDenied")
        /// No reply came in time.
        package static let noReply = Name(rawValue: "org.freedesktop.DBus.Error.NoReply")
        /// A bound on what one may hold or make was reached (too many collections, items or bytes).
        package static let limitsExceeded = Name(rawValue: "org.freedesktop.DBus.Error.LimitsExceeded")
        /// The connection is closed.
        package static let disconnected = Name(rawValue: "org.freedesktop.DBus.Error.Disconnected")
    }

    /// Takes the error out of a libdbus `DBusError` and frees it.
    static func consume(_ error: inout CDBus.DBusError, fallback: String) -> DBusError {
        defer { dbus_error_free(&error) }
        guard dbus_error_is_set(&error) != 0 else { return DBusError(.failed, fallback) }
        return DBusError(
            name: error.name.map { String(cString: $0) } ?? Name.failed.rawValue,
            message: error.message.map { String(cString: $0) } ?? fallback)
    }
}

/// Checks of names and paths, by libdbus's own rules.
package enum DBusNames {
    /// Whether `path` is a valid object path.
    package static func isValidObjectPath(_ path: String) -> Bool {
        dbus_validate_path(path, nil) != 0
    }

    /// Whether `name` is a valid bus name.
    package static func isValidBusName(_ name: String) -> Bool {
        dbus_validate_bus_name(name, nil) != 0
    }

    /// Turns any text into a valid object-path element: ASCII letters and
    /// digits stay, every other byte becomes `_` and two hex digits (`_` itself
    /// becomes `_5f`), and an empty text becomes `_`.
    package static func pathElement(_ text: String) -> String {
        guard !text.isEmpty else { return "_" }
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "_" + String(byte, radix: 16).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
