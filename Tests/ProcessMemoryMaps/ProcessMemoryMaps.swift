import Glibc

/// The `VmFlags` of the mapping of this process that holds `address` (from `/proc/self/smaps`; `dd` is
/// `MADV_DONTDUMP`, `lo` locked), nil when no mapping holds it: for tests that check where secrets live.
package func mappingFlags(at address: UInt) -> [Substring]? {
    guard let file = fopen("/proc/self/smaps", "r") else { return nil }
    defer { fclose(file) }
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    var inside = false
    while getline(&line, &capacity, file) > 0, let line {
        let text = String(cString: line)
        if let dash = text.firstIndex(of: "-"), let space = text.firstIndex(of: " "), dash < space,
            let start = UInt(text[..<dash], radix: 16),
            let end = UInt(text[text.index(after: dash)..<space], radix: 16)
        {
            inside = start <= address && address < end
        } else if inside, text.hasPrefix("VmFlags:") {
            return text.dropFirst("VmFlags:".count).split(whereSeparator: { $0 == " " || $0.isNewline })
        }
    }
    return nil
}
