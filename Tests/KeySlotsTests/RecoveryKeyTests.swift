import KeySlots
import Testing

@Suite struct RecoveryKeyTests {
    /// A fixed key, so that the exhaustive typo checks below are deterministic.
    let fixed = RecoveryKey(
        secret: (0..<19).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) & ($0 == 18 ? 0xFC : 0xFF) })

    @Test func generatedKeysRoundTripAndDiffer() throws {
        var first = try RecoveryKey.generate()
        var second = try RecoveryKey.generate()
        defer {
            first.wipe()
            second.wipe()
        }
        #expect(first.secret != second.secret)
        #expect(first.secret.count == 19 && first.secret[18] & 0x03 == 0)
        let text = first.formatted()
        #expect(text.count == 41)
        let groups = text.split(separator: UInt8(ascii: "-"))
        #expect(groups.count == 7 && groups.allSatisfy { $0.count == 5 })
        #expect(try RecoveryKey(parsing: text).secret == first.secret)
        #expect(try RecoveryKey(parsing: second.formatted()).secret == second.secret)
    }

    @Test func parsingIgnoresCaseSeparatorsAndLookalikes() throws {
        let text = fixed.formatted()
        let upper = text.map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 }
        let spaced = text.map { $0 == UInt8(ascii: "-") ? UInt8(ascii: " ") : $0 }
        let joined = text.filter { $0 != UInt8(ascii: "-") }
        for variant in [upper, spaced, joined, [32, 32] + text + [9]] {
            #expect(try RecoveryKey(parsing: variant).secret == fixed.secret)
        }
        // o reads as 0 and i, l as 1.
        let lookalikes = text.map {
            $0 == UInt8(ascii: "0") ? UInt8(ascii: "O") : $0 == UInt8(ascii: "1") ? UInt8(ascii: "l") : $0
        }
        #expect(try RecoveryKey(parsing: lookalikes).secret == fixed.secret)
    }

    @Test func everySingleTypoIsCaught() throws {
        let text = fixed.formatted()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var tried = 0
        for position in text.indices where text[position] != UInt8(ascii: "-") {
            for replacement in alphabet where replacement != text[position] {
                var typo = text
                typo[position] = replacement
                #expect(throws: RecoveryKeyError.checkFailed) { try RecoveryKey(parsing: typo) }
                tried += 1
            }
            // Two neighbouring characters swapped.
            if position + 1 < text.count, text[position + 1] != UInt8(ascii: "-"), text[position + 1] != text[position]
            {
                var swapped = text
                swapped.swapAt(position, position + 1)
                #expect(throws: RecoveryKeyError.checkFailed) { try RecoveryKey(parsing: swapped) }
            }
        }
        #expect(tried == 35 * 31)
    }

    @Test func badInputIsNamed() {
        let text = fixed.formatted()
        #expect(throws: RecoveryKeyError.wrongLength(characters: 34, expected: 35)) {
            try RecoveryKey(parsing: Array(text.dropLast()))
        }
        #expect(throws: RecoveryKeyError.wrongLength(characters: 36, expected: 35)) {
            try RecoveryKey(parsing: text + [UInt8(ascii: "a")])
        }
        var withU = text
        withU[7] = UInt8(ascii: "u")
        #expect(throws: RecoveryKeyError.invalidCharacter(position: 7)) { try RecoveryKey(parsing: withU) }
        #expect(throws: RecoveryKeyError.invalidCharacter(position: 0)) { try RecoveryKey(parsing: Array("!".utf8)) }
    }
}
