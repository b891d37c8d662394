/// Text that comes from outside the daemon (an item's or a keychain's label, a path, a reason), made fit for one
/// line of a pinentry prompt: a label is whatever its creator wrote, and must not add lines that read as the
/// daemon's, reverse what follows it, or push the prompt's own words out of pinentry's 1,000-byte line.
package enum PromptText {
    /// `text` on one line: control characters (C0, DEL, C1), line and paragraph separators and format characters
    /// (bidi overrides and isolates, zero-width characters, U+FEFF: Unicode's Cf) each replaced by U+FFFD, then
    /// cut (with "…") so that it takes at most `bytes` bytes on the Assuan line, where `%` and `\` take three.
    package static func field(_ text: String, bytes limit: Int = 200) -> String {
        var result = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let shown: Unicode.Scalar
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: shown = "\u{FFFD}"
            default: shown = scalar
            }
            let cost = shown == "%" || shown == "\\" ? 3 : shown.utf8.count
            guard used + cost <= limit - 3 else {
                result.append("…")
                return String(result)
            }
            used += cost
            result.append(shown)
        }
        return String(result)
    }
}
