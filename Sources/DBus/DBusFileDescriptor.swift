import Glibc

/// A Unix file descriptor passed in a message (`h`), owned: it is closed when the last copy of this value
/// goes (copies share the one descriptor).
///
/// Reading an `h` argument gives a duplicate of the descriptor the message carries (libdbus duplicates it
/// for the reader), so each ``DBusValue/unixFileDescriptor(_:)`` read from a message holds a descriptor of
/// its own. Writing one into a message duplicates it again: the message keeps its own copy.
package struct DBusFileDescriptor: DBusType, Hashable, Sendable, CustomStringConvertible {
    /// Closes the descriptor when the last value sharing it is released.
    private final class Owner: Sendable {
        let descriptor: Int32
        init(_ descriptor: Int32) { self.descriptor = descriptor }
        deinit { close(descriptor) }
    }

    private let owner: Owner

    /// The descriptor number; open while a copy of this value lives.
    package var rawValue: Int32 { owner.descriptor }

    /// Takes ownership of `descriptor` (closed when the last copy is released).
    package init(owning descriptor: Int32) {
        owner = Owner(descriptor)
    }

    /// Owns a close-on-exec duplicate of `descriptor`, which stays the caller's.
    ///
    /// - Throws: `Failed` when it cannot be duplicated.
    package init(duplicating descriptor: Int32) throws(DBusError) {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { throw DBusError(.failed, "cannot duplicate descriptor \(descriptor)") }
        self.init(owning: duplicate)
    }

    package static func == (left: DBusFileDescriptor, right: DBusFileDescriptor) -> Bool {
        left.owner === right.owner
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(owner)) }

    package static var dbusSignature: String { "h" }

    package init(dbusValue value: DBusValue) throws(DBusError) {
        guard case .unixFileDescriptor(let passed) = value else { throw Self.mismatch(value) }
        self = passed
    }

    package var dbusValue: DBusValue { .unixFileDescriptor(self) }

    package var description: String { "fd \(rawValue)" }
}
