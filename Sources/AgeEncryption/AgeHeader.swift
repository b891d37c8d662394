/// One recipient stanza: `-> TYPE ARG…` and its body, wrapped at 64 columns.
struct AgeStanza: Equatable {
    /// The arguments, the type first (`X25519`, `scrypt`, `ssh-ed25519`…); each is 1 or more VCHARs.
    var arguments: [String]
    /// The decoded body.
    var body: [UInt8]

    /// The stanza's type, its first argument.
    var type: String { arguments[0] }
}

/// The header of an age v1 file: its stanzas, its MAC, and where the MAC's input and the payload are.
struct AgeHeader {
    /// The version line's prefix, which every age file (of any version) starts with.
    static let intro = Array("age-encryption.org/".utf8)
    /// The line that opens a v1 file.
    static let versionLine = Array("age-encryption.org/v1\n".utf8)
    /// Columns of a stanza's body line.
    static let columns = 64

    /// The stanzas, in the order of the file.
    var stanzas: [AgeStanza]
    /// The 32-byte HMAC-SHA-256 the file carries.
    var mac: [UInt8]
    /// The MAC covers the file's bytes before this index (the header through `---`).
    var macInputEnd: Int
    /// Where the payload (its 16-byte nonce first) starts.
    var payloadStart: Int

    /// Reads the header of the binary age file `file`.
    ///
    /// - Throws: ``AgeError/Kind/malformed`` for anything the v1 grammar does not allow (and for a file that
    ///   does not start with `age-encryption.org/`), ``AgeError/Kind/unsupported`` for another version,
    ///   ``AgeError/Kind/truncated`` when the file ends inside it, ``AgeError/Kind/tooLarge`` past
    ///   ``AgeFile/maximumHeaderLength`` or ``AgeFile/maximumStanzas``.
    static func parse(_ file: [UInt8]) throws(AgeError) -> AgeHeader {
        guard file.starts(with: intro) else {
            throw AgeError(.malformed, "not an age file: it does not start with age-encryption.org/")
        }
        var position = 0
        let first = try line(in: file, at: &position)
        guard file[first].elementsEqual(versionLine.dropLast()) else {
            let version = file[first].dropFirst(intro.count)
            guard !version.isEmpty, version.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw AgeError(.malformed, "the age file's version line is malformed")
            }
            throw AgeError(
                .unsupported, "the age file is of format version \(String(decoding: version, as: UTF8.self)), not v1")
        }
        var stanzas: [AgeStanza] = []
        while true {
            let start = position
            let current = try line(in: file, at: &position)
            let text = file[current]
            if text.starts(with: Array("---".utf8)) {
                guard text.count == 4 + 43, text[text.startIndex + 3] == UInt8(ascii: " "),
                    let mac = Base64.decode(text.dropFirst(4)), mac.count == 32
                else { throw AgeError(.malformed, "the age header's MAC line is malformed") }
                guard !stanzas.isEmpty else { throw AgeError(.malformed, "the age header has no recipient stanza") }
                return AgeHeader(stanzas: stanzas, mac: mac, macInputEnd: start + 3, payloadStart: position)
            }
            guard text.starts(with: Array("-> ".utf8)) else {
                throw AgeError(.malformed, "line \(lineNumber(of: start, in: file)) of the age header is malformed")
            }
            guard stanzas.count < AgeFile.maximumStanzas else {
                throw AgeError(.tooLarge, "the age header has more than \(AgeFile.maximumStanzas) stanzas")
            }
            let arguments = text.dropFirst(3).split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
            guard arguments.allSatisfy({ !$0.isEmpty && $0.allSatisfy { (0x21...0x7E).contains($0) } }) else {
                throw AgeError(.malformed, "a stanza of the age header has malformed arguments")
            }
            var body: [UInt8] = []
            while true {
                let bodyLine = file[try line(in: file, at: &position)]
                guard bodyLine.count <= columns, let decoded = Base64.decode(bodyLine) else {
                    throw AgeError(.malformed, "a stanza body of the age header is not canonical base64")
                }
                body += decoded
                if bodyLine.count < columns { break }
            }
            stanzas.append(AgeStanza(arguments: arguments.map { String(decoding: $0, as: UTF8.self) }, body: body))
        }
    }

    /// The range of the line starting at `position` (without its LF), moving `position` past the LF.
    private static func line(in file: [UInt8], at position: inout Int) throws(AgeError) -> Range<Int> {
        let limit = min(file.count, AgeFile.maximumHeaderLength)
        guard let end = file[position..<max(position, limit)].firstIndex(of: UInt8(ascii: "\n")) else {
            if file.count > AgeFile.maximumHeaderLength {
                throw AgeError(.tooLarge, "the age header is longer than \(AgeFile.maximumHeaderLength) bytes")
            }
            throw AgeError(.truncated, "the age file ends inside its header")
        }
        defer { position = end + 1 }
        return position..<end
    }

    /// The 1-based number of the line starting at `offset`.
    private static func lineNumber(of offset: Int, in file: [UInt8]) -> Int {
        file[..<offset].count { $0 == UInt8(ascii: "\n") } + 1
    }

    /// The header of `stanzas` up to and including `---`: what the MAC covers.
    static func encode(_ stanzas: [AgeStanza]) -> [UInt8] {
        var output = versionLine
        for stanza in stanzas {
            output += Array("-> ".utf8) + Array(stanza.arguments.joined(separator: " ").utf8) + [UInt8(ascii: "\n")]
            let encoded = Base64.encode(stanza.body)
            var index = 0
            // Full lines of 64 columns, then always a shorter one (empty when the body fills its last line).
            while encoded.count - index >= columns {
                output += encoded[index..<index + columns] + [UInt8(ascii: "\n")]
                index += columns
            }
            output += encoded[index...] + [UInt8(ascii: "\n")]
        }
        return output + Array("---".utf8)
    }
}

/// The ASCII armor of age: strict PEM (RFC 7468) with the label `AGE ENCRYPTED FILE`, padded canonical base64
/// in lines of 64 columns, LF or CRLF line ends, whitespace allowed only before and after it.
enum AgeArmor {
    static let begin = Array("-----BEGIN AGE ENCRYPTED FILE-----".utf8)
    static let end = Array("-----END AGE ENCRYPTED FILE-----".utf8)

    /// Whether a byte is whitespace that may surround the armor.
    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }

    /// Whether `file` is armored: after optional whitespace it starts with the BEGIN line.
    static func isArmored(_ file: [UInt8]) -> Bool {
        file.drop(while: isSpace).starts(with: begin)
    }

    /// The binary file inside an armored one.
    ///
    /// - Throws: ``AgeError/Kind/malformed`` for anything but strict PEM, ``AgeError/Kind/truncated`` when the
    ///   END line is missing.
    static func decode(_ file: [UInt8]) throws(AgeError) -> [UInt8] {
        let trimmed = file.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
        var lines = trimmed.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        guard lines.first?.elementsEqual(begin) == true else {
            throw AgeError(.malformed, "the armored age file does not start with its BEGIN line")
        }
        guard let endIndex = lines.firstIndex(where: { $0.elementsEqual(end) }) else {
            throw AgeError(.truncated, "the armored age file has no END line: it was cut short")
        }
        guard endIndex == lines.count - 1, endIndex >= 2 else {
            throw AgeError(.malformed, "the armored age file has data after its END line, or none before it")
        }
        lines.removeFirst()
        lines.removeLast()
        var text: [UInt8] = []
        for (index, line) in lines.enumerated() {
            let isLast = index == lines.count - 1
            guard isLast ? (1...AgeHeader.columns).contains(line.count) : line.count == AgeHeader.columns else {
                throw AgeError(.malformed, "the armored age file's lines are not of 64 columns")
            }
            text += line
        }
        guard let binary = Base64.decode(text, padded: true) else {
            throw AgeError(.malformed, "the armored age file is not canonical base64")
        }
        return binary
    }

    /// `file` armored: the BEGIN line, padded base64 in lines of 64 columns, the END line, each ending in LF.
    static func encode(_ file: [UInt8]) -> [UInt8] {
        let text = Base64.encode(file, padded: true)
        var output = begin + [UInt8(ascii: "\n")]
        var index = 0
        while index < text.count {
            let next = min(index + AgeHeader.columns, text.count)
            output += text[index..<next] + [UInt8(ascii: "\n")]
            index = next
        }
        return output + end + [UInt8(ascii: "\n")]
    }
}
