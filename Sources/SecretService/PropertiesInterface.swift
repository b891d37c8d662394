import DBus
import FoundationEssentials
import KeychainCore
import KeychainStore

/// `org.freedesktop.DBus.Properties` on every object.
extension SecretService {
    func callProperties(_ message: DBusMessage, path: String, member: String) throws(DBusError) -> [DBusValue] {
        guard let object = resolve(path) else { throw SecretServiceError.noSuchObject(path) }
        let arguments = try message.arguments()
        switch member {
        case "Get":
            try expect(message, "ss")
            let name = arguments[1].text ?? ""
            guard let value = try properties(of: object, interface: arguments[0].text ?? "", only: name)[name] else {
                throw DBusError(.unknownProperty, "no property \(name) on \(path)")
            }
            return [.variant(value)]
        case "GetAll":
            try expect(message, "s")
            return [.variantDictionary(try properties(of: object, interface: arguments[0].text ?? ""))]
        case "Set":
            try expect(message, "ssv")
            try setProperty(of: object, arguments[0].text ?? "", arguments[1].text ?? "", arguments[2].unwrapped)
            return []
        default:
            throw DBusError(.unknownMethod, "no method \(member) on org.freedesktop.DBus.Properties")
        }
    }

    private func interfaceName(of object: BusObject) -> String {
        switch object {
        case .service: "org.freedesktop.Secret.Service"
        case .collection: "org.freedesktop.Secret.Collection"
        case .item: "org.freedesktop.Secret.Item"
        case .session: "org.freedesktop.Secret.Session"
        case .prompt: "org.freedesktop.Secret.Prompt"
        }
    }

    /// The properties of an object's interface (an empty interface name means
    /// all); with `only`, just that one is computed (a collection's `Items`
    /// lists every item, which `Get("Locked")` must not pay for).
    private func properties(of object: BusObject, interface: String, only: String? = nil) throws(DBusError)
        -> [String: DBusValue]
    {
        guard interface.isEmpty || interface == interfaceName(of: object) else { return [:] }
        switch object {
        case .service:
            return ["Collections": .objectPaths(collections.map(\.path))]
        case .collection(let collection):
            var values: [String: DBusValue] = [
                "Label": .string(collection.label), "Locked": .bool(collection.isLocked),
                "Created": .uint64(collection.created), "Modified": .uint64(collection.modified),
            ]
            if only == nil || only == "Items" {
                let items: [ItemReference]
                do {
                    items = try collection.itemReferences()
                } catch {
                    throw SecretServiceError.from(error)
                }
                values["Items"] = .objectPaths(items.map { ObjectPaths.item($0, in: collection.id) })
            }
            return values
        case .item(let collection, let reference):
            // A locked item's label, attributes and dates are sealed: they read as empty.
            var attributes: ItemAttributes = [:]
            if !collection.isLocked {
                do {
                    attributes = try collection.item(reference, returning: .attributes)?.attributes ?? [:]
                } catch {
                    throw SecretServiceError.from(error)
                }
            }
            var label = ""
            if case .string(let text) = attributes[.label] { label = text }
            return [
                "Locked": .bool(collection.isLocked),
                "Attributes": .stringDictionary(
                    AttributeMapping.secretServiceAttributes(attributes, of: reference.itemClass)),
                "Label": .string(label),
                "Created": .uint64(Self.unixSeconds(attributes[.creationDate])),
                "Modified": .uint64(Self.unixSeconds(attributes[.modificationDate])),
            ]
        case .session, .prompt:
            return [:]
        }
    }

    private static func unixSeconds(_ value: AttributeValue?) -> UInt64 {
        guard case .date(let date) = value else { return 0 }
        return UInt64(max(0, date.timeIntervalSince1970))
    }

    private func setProperty(of object: BusObject, _ interface: String, _ name: String, _ value: DBusValue)
        throws(DBusError)
    {
        let known = try properties(of: object, interface: interface, only: name)
        guard known[name] != nil else { throw DBusError(.unknownProperty, "no property \(name) here") }
        switch (object, name) {
        case (.collection(let collection), "Label"):
            guard case .string(let label) = value else { throw SecretServiceError.invalidArgs("Label is a string") }
            try configuration.limits.check(label: label)
            try? collection.keychain.setMetadata("label", Data(label.utf8))
            collection.label = label
            emitPropertiesChanged(collection.path, "org.freedesktop.Secret.Collection", ["Label": .string(label)])
            announceCollections("CollectionChanged", collection)
        case (.item(let collection, let reference), "Label"), (.item(let collection, let reference), "Attributes"):
            guard !collection.isLocked else { throw SecretServiceError.isLocked("\(collection.path) is locked") }
            do {
                if name == "Label" {
                    guard case .string(let label) = value else {
                        throw SecretServiceError.invalidArgs("Label is a string")
                    }
                    try configuration.limits.check(label: label)
                    try collection.update(reference, label: label)
                } else {
                    guard let pairs = value.stringPairs else {
                        throw SecretServiceError.invalidArgs("Attributes is a{ss}")
                    }
                    try configuration.limits.check(attributes: pairs)
                    try collection.update(reference, attributes: pairs)
                }
            } catch let error as KeychainError {
                throw SecretServiceError.from(error)
            } catch let error as DBusError {
                throw error
            } catch {
                throw DBusError(.failed, "\(error)")
            }
            emitPropertiesChanged(
                ObjectPaths.item(reference, in: collection.id), "org.freedesktop.Secret.Item", [name: value])
            announceItems(collection, "ItemChanged", reference)
        default:
            throw DBusError(.propertyReadOnly, "\(name) cannot be set")
        }
    }
}
