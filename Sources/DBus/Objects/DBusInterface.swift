/// A method call as a handler sees it: who sent it, where and what.
package struct DBusMethodCall {
    /// The message, kept by handlers that answer later.
    package let message: DBusMessage
    /// The sender's unique bus name (empty on a peer-to-peer connection).
    package let sender: String
    /// The object path called.
    package let path: String
    /// The method name.
    package let member: String

    /// The call carried by `message`; nil when it lacks a path or a member.
    package init?(_ message: DBusMessage) {
        guard message.kind == .methodCall, let path = message.path, let member = message.member else { return nil }
        self.message = message
        self.sender = message.sender ?? ""
        self.path = path
        self.member = member
    }
}

/// What a method handler gives back.
package enum DBusMethodResult {
    /// The reply's values, in the declared output order.
    case reply([DBusValue])
    /// The handler kept the call and will answer it later (slow work runs elsewhere meanwhile).
    case deferred
}

/// The name and signature of one argument, for introspection.
package struct DBusArgumentDescription: Hashable, Sendable {
    /// The argument's name.
    package let name: String
    /// Its type signature.
    package let signature: String
    /// An argument named `name` of type `signature`.
    package init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }
    /// An argument named `name` of Swift type `type`.
    package init<Value: DBusType>(_ name: String, _ type: Value.Type) {
        self.init(name, Value.dbusSignature)
    }
}

/// One declared input of a method, or argument of a signal: its name and its Swift type.
package struct DBusInput<Value: DBusType>: Sendable {
    /// The argument's name.
    package let name: String
    /// An input named `name` of type `Value`.
    package init(_ name: String, _ type: Value.Type) { self.name = name }
}

/// A method, declared once: its name, its typed inputs and declared outputs, and its handler. Dispatch checks
/// the call's signature against the inputs and decodes them before the handler runs; introspection is
/// written from the same declaration.
package struct DBusMethod<Object>: Sendable {
    /// The method name.
    package let name: String
    /// The inputs, in order.
    package let inputs: [DBusArgumentDescription]
    /// The outputs, in order.
    package let outputs: [DBusArgumentDescription]
    private let invoke: @Sendable (Object, DBusMethodCall, [DBusValue]) throws(DBusError) -> DBusMethodResult

    /// Declares `name` with typed `inputs`, reply `outputs` and `handler`, which receives the decoded inputs.
    package init<each Input: DBusType>(
        _ name: String, _ inputs: repeat DBusInput<each Input>, returns outputs: [DBusArgumentDescription] = [],
        handler: @escaping @Sendable (Object, DBusMethodCall, repeat each Input) throws(DBusError) -> DBusMethodResult
    ) {
        var described: [DBusArgumentDescription] = []
        for input in repeat each inputs {
            described.append(DBusArgumentDescription(input.name, Self.signature(of: input)))
        }
        self.name = name
        self.inputs = described
        self.outputs = outputs
        self.invoke = { (object, call, values) throws(DBusError) in
            var reader = ArgumentReader(values: values)
            return try handler(object, call, repeat try reader.next((each Input).self))
        }
    }

    private static func signature<Value: DBusType>(of input: DBusInput<Value>) -> String { Value.dbusSignature }

    /// The signature a call must carry.
    package var inputSignature: String { inputs.map(\.signature).joined() }
    /// The signature of the reply.
    package var outputSignature: String { outputs.map(\.signature).joined() }

    /// Checks `call`'s signature, decodes its arguments and runs the handler.
    func call(_ object: Object, _ call: DBusMethodCall) throws(DBusError) -> DBusMethodResult {
        let given = call.message.signature
        guard given == inputSignature else {
            throw DBusError(.invalidArgs, "\(name) takes (\(inputSignature)), not (\(given))")
        }
        return try invoke(object, call, try call.message.arguments())
    }
}

/// Reads a call's arguments in order, each as the type its declaration names.
private struct ArgumentReader {
    let values: [DBusValue]
    var index = 0

    mutating func next<Value: DBusType>(_ type: Value.Type) throws(DBusError) -> Value {
        guard index < values.count else { throw DBusError(.invalidArgs, "too few arguments") }
        defer { index += 1 }
        return try Value(dbusValue: values[index])
    }
}

/// A property, declared once: its name, type, getter and, when writable, setter.
package struct DBusProperty<Object>: Sendable {
    /// The property name.
    package let name: String
    /// Its type signature.
    package let signature: String
    let getter: @Sendable (Object) throws(DBusError) -> DBusValue
    let setter: (@Sendable (Object, DBusMethodCall, DBusValue) throws(DBusError) -> DBusMethodResult)?

    /// A property read with `get` and, if `set` is given, written with it (after its type is checked). `set`
    /// answers `Set` as a method does: `.reply([])` at once, or `.deferred` and the reply later (a change the
    /// person is asked about first).
    package init<Value: DBusType>(
        _ name: String, _ type: Value.Type, get: @escaping @Sendable (Object) throws(DBusError) -> Value,
        set: (@Sendable (Object, DBusMethodCall, Value) throws(DBusError) -> DBusMethodResult)? = nil
    ) {
        self.name = name
        self.signature = Value.dbusSignature
        self.getter = { (object) throws(DBusError) in try get(object).dbusValue }
        if let set {
            self.setter = { (object, call, value) throws(DBusError) in
                guard value.signature == Value.dbusSignature else {
                    throw DBusError(.invalidArgs, "\(name) is \(Value.dbusSignature), not \(value.signature)")
                }
                return try set(object, call, try Value(dbusValue: value))
            }
        } else {
            self.setter = nil
        }
    }

    /// Whether clients may write it.
    package var isWritable: Bool { setter != nil }
}

/// A signal an interface sends, as introspection shows it: its interface, name and arguments. Made only by
/// ``DBusSignal``, which is how the signal is sent too.
package struct DBusSignalDeclaration: Sendable {
    /// The interface that sends it.
    package let interface: String
    /// The signal name.
    package let name: String
    /// Its arguments.
    package let arguments: [DBusArgumentDescription]
    /// The signal `name` of `interface`, carrying `arguments`.
    init(interface: String, _ name: String, _ arguments: [DBusArgumentDescription]) {
        self.interface = interface
        self.name = name
        self.arguments = arguments
    }

    /// The signature of its arguments.
    package var signature: String { arguments.map(\.signature).joined() }
}

/// An interface of a kind of object: its methods, properties and signals, declared once.
package struct DBusInterface<Object>: Sendable {
    /// The interface name.
    package let name: String
    /// The methods, in introspection order.
    package let methods: [DBusMethod<Object>]
    /// The properties, in introspection order.
    package let properties: [DBusProperty<Object>]
    /// The signals.
    package let signals: [DBusSignalDeclaration]
    /// The positions of the methods of each name: more than one when a name is overloaded (declared again with
    /// other inputs, as KWallet's `close(sb)` and `close(ibs)`).
    private let methodIndex: [String: [Int]]

    /// An interface named `name`.
    package init(
        _ name: String, methods: [DBusMethod<Object>] = [], properties: [DBusProperty<Object>] = [],
        signals: [DBusSignalDeclaration] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
        var index: [String: [Int]] = [:]
        for (position, method) in methods.enumerated() { index[method.name, default: []].append(position) }
        self.methodIndex = index
    }

    /// The method named `member` whose inputs are `signature`; when none of that name takes it, the first
    /// declared of that name (whose call then refuses the signature, naming the method); nil when no method
    /// has that name.
    package func method(_ member: String, signature: String) -> DBusMethod<Object>? {
        guard let positions = methodIndex[member], let first = positions.first else { return nil }
        let matching = positions.first { methods[$0].inputSignature == signature } ?? first
        return methods[matching]
    }

    /// Every method named `member`, in declaration order.
    package func methods(named member: String) -> [DBusMethod<Object>] {
        (methodIndex[member] ?? []).map { methods[$0] }
    }

    /// The property named `name`, if declared.
    package func property(_ name: String) -> DBusProperty<Object>? {
        properties.first { $0.name == name }
    }

    /// The signal named `name`, if declared.
    package func signal(_ name: String) -> DBusSignalDeclaration? {
        signals.first { $0.name == name }
    }
}
