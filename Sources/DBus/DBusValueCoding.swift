import CDBus

/// libdbus's type codes (its `DBUS_TYPE_*` macros are casts Swift cannot import).
enum TypeCode {
    static let invalid: Int32 = 0
    static let byte: Int32 = Int32(UInt8(ascii: "y"))
    static let boolean: Int32 = Int32(UInt8(ascii: "b"))
    static let int16: Int32 = Int32(UInt8(ascii: "n"))
    static let uint16: Int32 = Int32(UInt8(ascii: "q"))
    static let int32: Int32 = Int32(UInt8(ascii: "i"))
    static let uint32: Int32 = Int32(UInt8(ascii: "u"))
    static let int64: Int32 = Int32(UInt8(ascii: "x"))
    static let uint64: Int32 = Int32(UInt8(ascii: "t"))
    static let double: Int32 = Int32(UInt8(ascii: "d"))
    static let string: Int32 = Int32(UInt8(ascii: "s"))
    static let objectPath: Int32 = Int32(UInt8(ascii: "o"))
    static let signature: Int32 = Int32(UInt8(ascii: "g"))
    static let array: Int32 = Int32(UInt8(ascii: "a"))
    static let dictEntry: Int32 = Int32(UInt8(ascii: "e"))
    static let structure: Int32 = Int32(UInt8(ascii: "r"))
    static let variant: Int32 = Int32(UInt8(ascii: "v"))
    static let unixFD: Int32 = Int32(UInt8(ascii: "h"))
}

/// Reads one value at a message iterator, recursing into containers.
enum DBusValueReader {
    static func read(_ iterator: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iterator)
        switch UInt8(truncatingIfNeeded: type) {
        case UInt8(ascii: "y"): return .byte(basic(&iterator, UInt8(0)))
        case UInt8(ascii: "b"): return .bool(basic(&iterator, UInt32(0)) != 0)
        case UInt8(ascii: "n"): return .int16(basic(&iterator, Int16(0)))
        case UInt8(ascii: "q"): return .uint16(basic(&iterator, UInt16(0)))
        case UInt8(ascii: "i"): return .int32(basic(&iterator, Int32(0)))
        case UInt8(ascii: "u"): return .uint32(basic(&iterator, UInt32(0)))
        case UInt8(ascii: "x"): return .int64(basic(&iterator, Int64(0)))
        case UInt8(ascii: "t"): return .uint64(basic(&iterator, UInt64(0)))
        case UInt8(ascii: "d"): return .double(basic(&iterator, Double(0)))
        case UInt8(ascii: "s"): return .string(text(&iterator))
        case UInt8(ascii: "o"): return .objectPath(text(&iterator))
        case UInt8(ascii: "g"): return .signature(text(&iterator))
        case UInt8(ascii: "v"):
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return .variant(try read(&inner))
        case UInt8(ascii: "r"), UInt8(ascii: "("):
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return .structure(try readAll(&inner))
        case UInt8(ascii: "a"):
            return try readArray(&iterator)
        case UInt8(ascii: "h"):
            // libdbus hands the reader a duplicate (close-on-exec) that the reader owns; -1 when the message
            // carries no descriptor at that index (a connection that cannot pass descriptors).
            var descriptor: Int32 = -1
            dbus_message_iter_get_basic(&iterator, &descriptor)
            guard descriptor >= 0 else { throw DBusError(.invalidArgs, "the file descriptor did not arrive") }
            return .unixFileDescriptor(DBusFileDescriptor(owning: descriptor))
        default:
            throw DBusError(.invalidArgs, "unexpected argument type \(type)")
        }
    }

    private static func readAll(_ iterator: inout DBusMessageIter) throws(DBusError) -> [DBusValue] {
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iterator) != TypeCode.invalid {
            values.append(try read(&iterator))
            dbus_message_iter_next(&iterator)
        }
        return values
    }

    private static func readArray(_ iterator: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let elementSignature = elementSignatureOf(&iterator)
        var inner = DBusMessageIter()
        dbus_message_iter_recurse(&iterator, &inner)
        if elementSignature == "y" {
            var pointer: UnsafeMutablePointer<UInt8>?
            var count: Int32 = 0
            if dbus_message_iter_get_arg_type(&inner) != TypeCode.invalid {
                dbus_message_iter_get_fixed_array(&inner, &pointer, &count)
            }
            guard let pointer, count > 0 else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: pointer, count: Int(count))))
        }
        if elementSignature.hasPrefix("{") {
            let inside = elementSignature.dropFirst().dropLast()
            let keySignature = String(inside.prefix(1))
            let valueSignature = String(inside.dropFirst())
            var entries: [DBusDictEntry] = []
            while dbus_message_iter_get_arg_type(&inner) == TypeCode.dictEntry {
                var entry = DBusMessageIter()
                dbus_message_iter_recurse(&inner, &entry)
                let key = try read(&entry)
                dbus_message_iter_next(&entry)
                let value = try read(&entry)
                entries.append(DBusDictEntry(key, value))
                dbus_message_iter_next(&inner)
            }
            return .dictionary(keySignature: keySignature, valueSignature: valueSignature, entries)
        }
        return .array(elementSignature: elementSignature, try readAll(&inner))
    }

    private static func elementSignatureOf(_ iterator: inout DBusMessageIter) -> String {
        guard let raw = dbus_message_iter_get_signature(&iterator) else { return "" }
        defer { dbus_free(raw) }
        return String(String(cString: raw).dropFirst())
    }

    private static func basic<T: BitwiseCopyable>(_ iterator: inout DBusMessageIter, _ initial: T) -> T {
        var value = initial
        dbus_message_iter_get_basic(&iterator, &value)
        return value
    }

    private static func text(_ iterator: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>?
        dbus_message_iter_get_basic(&iterator, &pointer)
        return pointer.map { String(cString: $0) } ?? ""
    }
}

/// Appends one value at a message iterator, opening containers as needed.
enum DBusValueWriter {
    static func write(_ value: DBusValue, to iterator: inout DBusMessageIter) throws(DBusError) {
        let ok: Bool
        switch value {
        case .byte(let v): ok = basic(&iterator, TypeCode.byte, v)
        case .bool(let v): ok = basic(&iterator, TypeCode.boolean, UInt32(v ? 1 : 0))
        case .int16(let v): ok = basic(&iterator, TypeCode.int16, v)
        case .uint16(let v): ok = basic(&iterator, TypeCode.uint16, v)
        case .int32(let v): ok = basic(&iterator, TypeCode.int32, v)
        case .uint32(let v): ok = basic(&iterator, TypeCode.uint32, v)
        case .int64(let v): ok = basic(&iterator, TypeCode.int64, v)
        case .uint64(let v): ok = basic(&iterator, TypeCode.uint64, v)
        case .double(let v): ok = basic(&iterator, TypeCode.double, v)
        case .string(let text): ok = try string(&iterator, TypeCode.string, text)
        case .objectPath(let path):
            guard DBusNames.isValidObjectPath(path) else {
                throw DBusError(.invalidArgs, "invalid object path \(path)")
            }
            ok = try string(&iterator, TypeCode.objectPath, path)
        case .signature(let signature):
            guard dbus_signature_validate(signature, nil) != 0 else {
                throw DBusError(.invalidArgs, "invalid signature \(signature)")
            }
            ok = try string(&iterator, TypeCode.signature, signature)
        case .bytes(let bytes):
            ok = try container(&iterator, TypeCode.array, "y") { (inner) throws(DBusError) in
                bytes.withUnsafeBufferPointer { buffer in
                    var base = buffer.baseAddress
                    return dbus_message_iter_append_fixed_array(&inner, TypeCode.byte, &base, Int32(buffer.count))
                        != 0
                }
            }
        case .array(let element, let items):
            ok = try container(&iterator, TypeCode.array, element) { (inner) throws(DBusError) in
                for item in items {
                    guard item.signature == element else {
                        throw DBusError(.invalidArgs, "array of \(element) holds a \(item.signature)")
                    }
                    try write(item, to: &inner)
                }
                return true
            }
        case .dictionary(let key, let valueSignature, let entries):
            ok = try container(&iterator, TypeCode.array, "{" + key + valueSignature + "}") {
                (inner) throws(DBusError) in
                for entry in entries {
                    let entryOK = try container(&inner, TypeCode.dictEntry, nil) { (pair) throws(DBusError) in
                        try write(entry.key, to: &pair)
                        try write(entry.value, to: &pair)
                        return true
                    }
                    guard entryOK else { return false }
                }
                return true
            }
        case .structure(let members):
            ok = try container(&iterator, TypeCode.structure, nil) { (inner) throws(DBusError) in
                for member in members { try write(member, to: &inner) }
                return true
            }
        case .unixFileDescriptor(let descriptor):
            // libdbus duplicates the descriptor into the message.
            ok = basic(&iterator, TypeCode.unixFD, descriptor.rawValue)
        case .variant(let inner):
            ok = try container(&iterator, TypeCode.variant, inner.signature) { (content) throws(DBusError) in
                try write(inner, to: &content)
                return true
            }
        }
        guard ok else { throw DBusError(.noMemory, "cannot append a \(value.signature) value") }
    }

    private static func basic<T: BitwiseCopyable>(_ iterator: inout DBusMessageIter, _ type: Int32, _ value: T) -> Bool
    {
        var copy = value
        return dbus_message_iter_append_basic(&iterator, type, &copy) != 0
    }

    private static func string(_ iterator: inout DBusMessageIter, _ type: Int32, _ text: String)
        throws(DBusError) -> Bool
    {
        guard !text.utf8.contains(0) else { throw DBusError(.invalidArgs, "text holds a NUL byte") }
        return text.withCString { pointer in
            var base: UnsafePointer<CChar>? = pointer
            return dbus_message_iter_append_basic(&iterator, type, &base) != 0
        }
    }

    private static func container(
        _ iterator: inout DBusMessageIter, _ type: Int32, _ signature: String?,
        _ body: (inout DBusMessageIter) throws(DBusError) -> Bool
    ) throws(DBusError) -> Bool {
        var inner = DBusMessageIter()
        let opened: Bool =
            if let signature {
                dbus_message_iter_open_container(&iterator, type, signature, &inner) != 0
            } else {
                dbus_message_iter_open_container(&iterator, type, nil, &inner) != 0
            }
        guard opened else { return false }
        do {
            guard try body(&inner) else {
                dbus_message_iter_abandon_container(&iterator, &inner)
                return false
            }
        } catch {
            dbus_message_iter_abandon_container(&iterator, &inner)
            throw error
        }
        return dbus_message_iter_close_container(&iterator, &inner) != 0
    }
}
