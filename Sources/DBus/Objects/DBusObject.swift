import Glibc

/// A kind of object served on a bus: the interfaces its type declares, once, and what each instance has
/// below it. Dispatch, argument checks, properties and introspection all come from ``interfaces``.
package protocol DBusObject: SendableMetatype {
    /// Every interface of this kind of object; start the list with ``standardInterfaces()``.
    static var interfaces: [DBusInterface<Self>] { get }
    /// The names of the nodes below this one, for introspection.
    var childNodes: [String] { get }
}

extension DBusObject {
    package var childNodes: [String] { [] }

    /// Serves `call` on this object: finds the method by interface, member and, for an overloaded name, input
    /// signature (any interface when the call names none), checks the signature, decodes the arguments and runs the handler. The reply or the
    /// error reply; nil when the handler answers later or the caller wants no reply.
    package func serve(_ call: DBusMethodCall) -> DBusMessage? {
        let outcome: Result<DBusMethodResult, DBusError>
        do throws(DBusError) {
            outcome = .success(try dispatch(call))
        } catch {
            outcome = .failure(error)
        }
        guard !call.message.expectsNoReply else { return nil }
        switch outcome {
        case .success(.deferred):
            return nil
        case .success(.reply(let values)):
            do throws(DBusError) {
                return try call.message.reply(values)
            } catch {
                return call.message.errorReply(error)
            }
        case .failure(let error):
            return call.message.errorReply(error)
        }
    }

    private func dispatch(_ call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        let named = call.message.interface
        for interface in Self.interfaces where named == nil || named == interface.name {
            guard let method = interface.method(call.member, signature: call.message.signature) else { continue }
            let overloads = interface.methods(named: call.member)
            if overloads.count > 1, !overloads.contains(where: { $0.inputSignature == call.message.signature }) {
                let accepted = overloads.map { "(\($0.inputSignature))" }.joined(separator: " or ")
                throw DBusError(.invalidArgs, "\(call.member) takes \(accepted), not (\(call.message.signature))")
            }
            let result = try method.call(self, call)
            if case .reply(let values) = result {
                let signature = values.map(\.signature).joined()
                guard signature == method.outputSignature else {
                    throw DBusError(.failed, "\(call.member) replied (\(signature)), not (\(method.outputSignature))")
                }
            }
            return result
        }
        throw DBusError(.unknownMethod, "no method \(named.map { $0 + "." } ?? "")\(call.member) on \(call.path)")
    }

    /// The properties of `interface` (every interface when empty), by name.
    func propertyValues(of interface: String) throws(DBusError) -> [String: DBusValue] {
        var values: [String: DBusValue] = [:]
        for declared in Self.interfaces where interface.isEmpty || interface == declared.name {
            for property in declared.properties { values[property.name] = try property.getter(self) }
        }
        return values
    }

    func property(_ name: String, of interface: String) throws(DBusError) -> DBusProperty<Self> {
        for declared in Self.interfaces where interface.isEmpty || interface == declared.name {
            if let property = declared.property(name) { return property }
        }
        throw DBusError(.unknownProperty, "no property \(name) here")
    }

    /// This object's introspection document.
    package var introspectionDocument: String {
        DBusIntrospection.document(Self.interfaces.map(DBusIntrospection.xml), children: childNodes)
    }

    /// `org.freedesktop.DBus.Introspectable`, `.Properties` and `.Peer`, served from ``interfaces``.
    package static func standardInterfaces() -> [DBusInterface<Self>] {
        [
            DBusInterface(
                DBusIntrospection.introspectable,
                methods: [
                    DBusMethod("Introspect", returns: [DBusArgumentDescription("xml_data", String.self)]) { object, _ in
                        .reply([.string(object.introspectionDocument)])
                    }
                ]),
            DBusInterface(
                DBusIntrospection.properties,
                methods: [
                    DBusMethod(
                        "Get", DBusInput("interface_name", String.self), DBusInput("property_name", String.self),
                        returns: [DBusArgumentDescription("value", DBusVariant.self)]
                    ) { (object, _, interface, name) throws(DBusError) in
                        .reply([.variant(try object.property(name, of: interface).getter(object))])
                    },
                    DBusMethod(
                        "GetAll", DBusInput("interface_name", String.self),
                        returns: [DBusArgumentDescription("properties", DBusPropertyList.self)]
                    ) { (object, _, interface) throws(DBusError) in
                        .reply([.variantDictionary(try object.propertyValues(of: interface))])
                    },
                    DBusMethod(
                        "Set", DBusInput("interface_name", String.self), DBusInput("property_name", String.self),
                        DBusInput("value", DBusVariant.self)
                    ) { (object, call, interface, name, value) throws(DBusError) in
                        let property = try object.property(name, of: interface)
                        guard let set = property.setter else {
                            throw DBusError(.propertyReadOnly, "\(name) cannot be set")
                        }
                        return try set(object, call, value.value)
                    },
                ],
                signals: [DBusIntrospection.propertiesChanged.declaration]),
            DBusInterface(
                DBusIntrospection.peer,
                methods: [
                    DBusMethod("Ping") { _, _ in .reply([]) },
                    DBusMethod("GetMachineId", returns: [DBusArgumentDescription("machine_uuid", String.self)]) {
                        _, _ in .reply([.string(DBusIntrospection.machineID())])
                    },
                ]),
        ]
    }
}

/// A node that is only a place in the path tree (`/`, `/org`, …): introspectable, with children.
package struct DBusNode: DBusObject {
    package static let interfaces: [DBusInterface<DBusNode>] = standardInterfaces()
    package let childNodes: [String]
    /// A node with `children` below it.
    package init(children: [String]) { childNodes = children }
}

/// Introspection documents written from interface declarations.
package enum DBusIntrospection {
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    static let properties = "org.freedesktop.DBus.Properties"
    static let peer = "org.freedesktop.DBus.Peer"
    /// `PropertiesChanged`: the interface, the properties that changed with their new values, and those
    /// that changed without a value sent (read them again).
    package static let propertiesChanged = DBusSignal(
        properties, "PropertiesChanged", DBusInput("interface_name", String.self),
        DBusInput("changed_properties", DBusPropertyList.self), DBusInput("invalidated_properties", [String].self))
    /// The interfaces every object has.
    package static let standardNames: Set<String> = [introspectable, properties, peer]

    static let header = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """

    /// A document of interface elements (as ``xml(_:)`` writes them) and child nodes.
    package static func document(_ interfaces: [String], children: [String] = []) -> String {
        header + "<node>\n" + interfaces.joined() + children.map { "  <node name=\"\($0)\"/>\n" }.joined()
            + "</node>\n"
    }

    /// One `<interface>` element.
    package static func xml<Object>(_ interface: DBusInterface<Object>) -> String {
        var text = "  <interface name=\"\(interface.name)\">\n"
        for method in interface.methods {
            let arguments =
                method.inputs.map { argument($0, direction: "in") }
                + method.outputs.map { argument($0, direction: "out") }
            text += element("method", method.name, arguments)
        }
        for property in interface.properties {
            let access = property.isWritable ? "readwrite" : "read"
            text += "    <property name=\"\(property.name)\" type=\"\(property.signature)\" access=\"\(access)\"/>\n"
        }
        for signal in interface.signals {
            text += element("signal", signal.name, signal.arguments.map { argument($0, direction: nil) })
        }
        return text + "  </interface>\n"
    }

    private static func element(_ kind: String, _ name: String, _ arguments: [String]) -> String {
        guard !arguments.isEmpty else { return "    <\(kind) name=\"\(name)\"/>\n" }
        return "    <\(kind) name=\"\(name)\">\n" + arguments.joined() + "    </\(kind)>\n"
    }

    private static func argument(_ argument: DBusArgumentDescription, direction: String?) -> String {
        let direction = direction.map { " direction=\"\($0)\"" } ?? ""
        return "      <arg name=\"\(argument.name)\" type=\"\(argument.signature)\"\(direction)/>\n"
    }

    /// This machine's D-Bus id (`/etc/machine-id`), empty when unreadable.
    static func machineID() -> String {
        guard let file = fopen("/etc/machine-id", "r") else { return "" }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return "" }
        let bytes = buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
