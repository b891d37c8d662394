import Glibc

/// A FIDO2 security key to talk to: a hidraw device from libfido2's list of plugged-in keys, or `unix:PATH`, a
/// stream socket carrying whole CTAP commands (the test seam: docs/key-slots.md, "FIDO2: the device layer and
/// the test seam").
///
/// Every operation opens the device, does one thing and closes it; every one blocks (a touch waits for a person),
/// so callers run them off the serving thread.
package struct SecurityKeyDevice: Sendable, Hashable, CustomStringConvertible {
    /// The environment variable that names the devices to use instead of the plugged-in keys: hidraw paths or
    /// `unix:PATH` (tests: software authenticators), separated by commas (several keys "plugged in" at once), as
    /// `LATCHKEY_TPM_TCTI` names a software TPM.
    package static let environmentVariable = "LATCHKEY_FIDO2_DEVICE"

    /// The prefix of a socket device's name.
    package static let socketPrefix = "unix:"

    /// The device's name: a hidraw path (`/dev/hidraw3`) or `unix:PATH`.
    package let path: String
    /// The product name the system reports for it (from the USB descriptor), when known.
    package let productName: String?

    /// The device named `path` (a hidraw path or `unix:PATH`).
    package init(path: String, productName: String? = nil) {
        self.path = path
        self.productName = productName
    }

    /// The socket's path when the device is `unix:PATH`, else nil.
    package var socketPath: String? {
        path.hasPrefix(Self.socketPrefix) ? String(path.dropFirst(Self.socketPrefix.count)) : nil
    }

    /// The name, for messages.
    package var description: String { productName.map { "\($0) (\(path))" } ?? path }

    /// The devices `LATCHKEY_FIDO2_DEVICE` names (comma-separated) when it is set and names one, else every
    /// plugged-in FIDO2 key (libfido2's manifest, with product names). An empty list when none is plugged in.
    package static func available() throws(SecurityKeyError) -> [SecurityKeyDevice] {
        if let value = getenv(environmentVariable) {
            let named = named(by: String(cString: value))
            if !named.isEmpty { return named }
        }
        return try pluggedIn()
    }

    /// The devices a value of `LATCHKEY_FIDO2_DEVICE` names: its comma-separated names, empty ones left out.
    package static func named(by value: String) -> [SecurityKeyDevice] {
        value.split(separator: ",", omittingEmptySubsequences: true).map { SecurityKeyDevice(path: String($0)) }
    }
}

/// A credential a key made for a slot: what the slot stores and shows.
package struct EnrolledCredential: Sendable, Equatable {
    /// The credential id (non-resident: the key's wrapped private key; the key needs it back to use it).
    package let credentialID: [UInt8]
    /// The key's model identifier (16 bytes; all zero for keys that do not say), shown to tell keys apart.
    package let aaguid: [UInt8]
    /// The key's product name (USB descriptor), or the device name when none is known.
    package let productName: String
    /// Whether the credential was made with user verification (the PIN): its `hmac-secret` then needs the PIN too,
    /// and it is protected with credProtect "user verification required".
    package let userVerified: Bool

    /// A credential as a key made it.
    package init(credentialID: [UInt8], aaguid: [UInt8], productName: String, userVerified: Bool) {
        self.credentialID = credentialID
        self.aaguid = aaguid
        self.productName = productName
        self.userVerified = userVerified
    }
}

/// What a key says of itself with no touch and no PIN (getInfo): enough to leave out keys that cannot hold a slot.
package struct SecurityKeyIdentity: Sendable, Equatable {
    /// The key's model identifier (16 bytes; all zero for keys that do not say).
    package let aaguid: [UInt8]
    /// Whether the key has a PIN set (a key without one holds no slot made with a PIN).
    package let hasPIN: Bool

    /// An identity from its fields.
    package init(aaguid: [UInt8], hasPIN: Bool) {
        self.aaguid = aaguid
        self.hasPIN = hasPIN
    }
}
