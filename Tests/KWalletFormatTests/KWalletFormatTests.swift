import KWalletFormat
import Posix
import Testing

/// The bytes of a secret buffer, for comparing in tests.
private func bytes(_ secret: borrowing SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

/// What `body` makes of `array`'s bytes (lent from a secure copy: `Array.withUnsafeBytes` cannot give back a
/// noncopyable result).
private func lend(_ array: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> SecretBytes) throws -> SecretBytes {
    let copy = try SecretBytes(copying: array)
    return try copy.withUnsafeBytes { try body($0) }
}

private func secret(_ text: String) throws -> SecretBytes { try SecretBytes(copying: Array(text.utf8)) }

/// A QString as Qt writes it: a uint32 byte length, then UTF-16BE.
private func qstring(_ text: String) -> [UInt8] {
    let units = Array(text.utf16)
    return beUInt32(units.count * 2) + units.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
}

private func beUInt32(_ value: Int) -> [UInt8] {
    [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
}

@Suite struct QDataStreamTests {
    @Test func aPasswordTravelsAsOneQString() throws {
        let wire = try KWalletScheme.wireValue(stored: try secret("pässwörd 🔑"), form: .plaintext)
        #expect(bytes(wire) == qstring("pässwörd 🔑"))
        let back = try lend([UInt8](qstring("pässwörd 🔑"))) { try KWalletScheme.passwordUTF8(wire: $0) }
        #expect(bytes(back) == Array("pässwörd 🔑".utf8))
    }

    @Test func theNullStringIsTheEmptyPassword() throws {
        let back = try lend([UInt8](repeating: 0xFF, count: 4)) { try KWalletScheme.passwordUTF8(wire: $0) }
        #expect(bytes(back).isEmpty)
    }

    @Test func aPasswordMustBeExactlyOneQString() {
        let cases: [([UInt8], KWalletFormatError)] = [
            (qstring("ab") + [0], .trailingBytes("password")),
            ([0, 0, 0, 8, 0, 0x61], .tooLarge("password")),
            ([0, 0, 0, 3, 0, 0x61, 0], .badText("password")),
            ([0, 0], .truncated("password")),
            // A lone high surrogate.
            ([0, 0, 0, 2, 0xD8, 0x00], .badText("password")),
        ]
        for (wire, expected) in cases {
            #expect(throws: expected) { _ = try lend(wire) { try KWalletScheme.passwordUTF8(wire: $0) } }
        }
    }

    @Test func namesReadAsStringsAndNullAsNil() throws {
        let wire = qstring("Form Data") + [0xFF, 0xFF, 0xFF, 0xFF]
        let names = try wire.withUnsafeBytes { buffer in
            var reader = QDataStreamReader(buffer)
            return [try reader.string("folder"), try reader.string("key"), reader.isAtEnd ? "end" : "more"]
        }
        #expect(names == ["Form Data", nil, "end"])
    }

    @Test func aLengthPastTheEndIsRefusedBeforeItIsUsed() throws {
        [0x7F, 0xFF, 0xFF, 0xF0, 1, 2].withUnsafeBytes { buffer in
            var reader = QDataStreamReader(buffer)
            #expect(throws: KWalletFormatError.tooLarge("value")) { try reader.byteArray("value") }
        }
    }
}

@Suite struct KWalletMapTests {
    /// `QMap<QString,QString>{"a": "1", "b": "", "é": "x\"y"}` as Debian 12's KF5 library writes it: count,
    /// then ascending keys.
    private let wire =
        beUInt32(3) + qstring("a") + qstring("1") + qstring("b") + qstring("") + qstring("é") + qstring("x\"y")

    @Test func aWireMapBecomesSortedCompactJSON() throws {
        let json = try lend(wire) { try KWalletMap.json(ofWire: $0) }
        #expect(String(decoding: bytes(json), as: UTF8.self) == #"{"a":"1","b":"","é":"x\"y"}"#)
    }

    @Test func jsonBecomesTheWireMapQtWrites() throws {
        let json = Array(#"{ "b" : "", "é":"x\"y", "a":"\u0031"}"#.utf8)
        let encoded = try lend(json) { try KWalletMap.wire(ofJSON: $0) }
        #expect(bytes(encoded) == wire)
    }

    @Test func nullStringsInAMapBecomeEmpty() throws {
        let withNull = beUInt32(1) + qstring("user") + [0xFF, 0xFF, 0xFF, 0xFF]
        let json = try lend(withNull) { try KWalletMap.json(ofWire: $0) }
        #expect(String(decoding: bytes(json), as: UTF8.self) == #"{"user":""}"#)
    }

    @Test func controlCharactersAndUnicodeEscapesRoundTrip() throws {
        let original = beUInt32(1) + qstring("k") + qstring("line\n\ttab\u{1}😀")
        let json = try lend(original) { try KWalletMap.json(ofWire: $0) }
        #expect(String(decoding: bytes(json), as: UTF8.self) == "{\"k\":\"line\\n\\ttab\\u0001😀\"}")
        let surrogates = Array(#"{"k":"line\n\ttab\u0001\ud83d\ude00"}"#.utf8)
        let back = try lend(surrogates) { try KWalletMap.wire(ofJSON: $0) }
        #expect(bytes(back) == original)
    }

    @Test func aMapThatIsNotAnObjectOfStringsIsRefused() {
        for text in [#"{"a":1}"#, #"["a"]"#, #"{"a":"b""#, #"{"a":"b"} x"#, "{\"a\":\"\u{1}\"}", #"{"a":"\ud800"}"#] {
            #expect(throws: KWalletFormatError.self, "\(text)") {
                _ = try lend(Array(text.utf8)) { try KWalletMap.wire(ofJSON: $0) }
            }
        }
    }

    @Test func aCountLargerThanTheBytesIsRefused() {
        let lying = beUInt32(1_000_000) + qstring("a") + qstring("b")
        #expect(throws: KWalletFormatError.tooLarge("map")) {
            _ = try lend(lying) { try KWalletMap.json(ofWire: $0) }
        }
    }
}

@Suite struct KWalletSchemeTests {
    @Test func streamsAreKeptAsBase64AndReadBackWhole() throws {
        let raw: [UInt8] = [0, 1, 0, 0xFF, 0, 0x80, 0x7F]
        let kept = try lend(raw) { try KWalletScheme.storedValue(wire: $0, type: .stream) }
        #expect(KWalletStoredForm(writing: .stream) == .base64)
        #expect(String(decoding: bytes(kept), as: UTF8.self) == "AAEA/wCAfw==")
        #expect(bytes(try KWalletScheme.wireValue(stored: kept, form: .base64)) == raw)
        #expect(bytes(try KWalletScheme.wireValue(stored: try secret("AAEA/w=="), form: .base64)) == [0, 1, 0, 0xFF])
        #expect(bytes(try KWalletScheme.wireValue(stored: try secret(""), form: .base64)).isEmpty)
        #expect(bytes(try KWalletScheme.wireValue(stored: try SecretBytes(copying: raw), form: .binary)) == raw)
        #expect(throws: KWalletFormatError.badText("base64 stream")) {
            _ = try KWalletScheme.wireValue(stored: try secret("not base64!"), form: .base64)
        }
    }

    @Test func theTypeAttributeNamesTheForm() {
        #expect(KWalletStoredForm(typeAttribute: nil) == .plaintext)
        #expect(KWalletStoredForm(typeAttribute: "binary")?.entryType == .stream)
        #expect(KWalletStoredForm(typeAttribute: "password") == nil)
        #expect(KWalletStoredForm(writing: .map) == .map)
        #expect(KWalletStoredForm(writing: .unknown) == .base64)
        #expect(KWalletScheme.label(folder: "Passwords", key: "github") == "Passwords/github")
    }
}
