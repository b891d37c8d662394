import DBus

/// Bounds on what a client may send, so that no request can make the daemon
/// hold or index unbounded data. Going past one gives `InvalidArgs`.
package struct InputLimits: Sendable {
    /// Attributes in one item or search.
    package var attributeCount = 512
    /// Bytes in an attribute name.
    package var attributeNameBytes = 256
    /// Bytes in an attribute value.
    package var attributeValueBytes = 16 * 1024
    /// Bytes in a label.
    package var labelBytes = 4 * 1024
    /// Bytes in a secret.
    package var secretBytes = 1024 * 1024
    /// Objects named in one Lock, Unlock or GetSecrets call.
    package var objectCount = 100_000

    /// The defaults above.
    package init() {}

    func check(attributes: [String: String]) throws(DBusError) {
        guard attributes.count <= attributeCount else {
            throw SecretServiceError.invalidArgs("more than \(attributeCount) attributes")
        }
        for (name, value) in attributes {
            guard name.utf8.count <= attributeNameBytes else {
                throw SecretServiceError.invalidArgs("an attribute name is longer than \(attributeNameBytes) bytes")
            }
            guard value.utf8.count <= attributeValueBytes else {
                throw SecretServiceError.invalidArgs("attribute '\(name)' is longer than \(attributeValueBytes) bytes")
            }
        }
    }

    func check(label: String) throws(DBusError) {
        guard label.utf8.count <= labelBytes else {
            throw SecretServiceError.invalidArgs("the label is longer than \(labelBytes) bytes")
        }
    }

    func check(secret: TransportSecret) throws(DBusError) {
        guard secret.value.count <= secretBytes + 32 else {
            throw SecretServiceError.invalidArgs("the secret is larger than \(secretBytes) bytes")
        }
    }

    func check(objects: [String]) throws(DBusError) {
        guard objects.count <= objectCount else {
            throw SecretServiceError.invalidArgs("more than \(objectCount) objects in one call")
        }
    }
}
