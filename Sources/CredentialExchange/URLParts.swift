/// An Internet password's URL as its protocol, server, port and path, and back: the scope of a CXF item and the
/// URL column of a CSV export.
struct URLParts: Equatable {
    /// The four-character `kSecAttrProtocol` code, or the URL's scheme when no code stands for it; nil for a URL
    /// with no scheme.
    var protocolCode: String?
    var server: String
    var port: Int64?
    /// The path, nil when it is empty or `/`.
    var path: String?

    /// Apple's protocol codes and the URL schemes they stand for.
    private static let schemes: [(code: String, scheme: String)] = [
        ("htps", "https"), ("http", "http"), ("ftp ", "ftp"), ("ftps", "ftps"), ("ssh ", "ssh"), ("imap", "imap"),
        ("imps", "imaps"), ("pop3", "pop3"), ("pops", "pop3s"), ("smtp", "smtp"), ("ldap", "ldap"),
        ("ldps", "ldaps"), ("smb ", "smb"), ("teln", "telnet"), ("tels", "telnets"), ("afp ", "afp"),
        ("ipp ", "ipp"), ("nntp", "nntp"), ("ntps", "nntps"), ("irc ", "irc"), ("ircs", "ircs"),
        ("rtsp", "rtsp"), ("sox ", "socks"), ("daap", "daap"), ("eppc", "eppc"), ("cifs", "cifs"),
        ("svn ", "svn"),
    ]

    /// The URL scheme of a `kSecAttrProtocol` value: the scheme its code stands for, else the value itself when
    /// it is a scheme (a Secret Service client's `protocol` attribute, `https`), else `https`.
    static func scheme(forProtocol value: String) -> String {
        if let known = schemes.first(where: { $0.code == value }) { return known.scheme }
        let lowered = value.lowercased()
        let isScheme =
            !lowered.isEmpty
            && lowered.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
                    || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                    || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
            }
        return isScheme ? lowered : "https"
    }

    /// The parts of `url` (`scheme://user@host:port/path?query#fragment`, or a bare `host/path`); nil when it
    /// names no host.
    init?(_ url: String) {
        var rest = Substring(url).drop { $0 == " " || $0 == "\t" }
        while rest.last == " " || rest.last == "\t" { rest = rest.dropLast() }
        let separator = Array("://".utf8)
        if let start = rest.utf8.indices.first(where: { rest.utf8[$0...].starts(with: separator) }) {
            let scheme = rest[..<start].lowercased()
            protocolCode = Self.schemes.first { $0.scheme == scheme }?.code ?? (scheme.isEmpty ? nil : scheme)
            rest = rest[rest.utf8.index(start, offsetBy: 3)...]
        } else {
            protocolCode = nil
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var portText: Substring? = nil
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() }
            authority = authority[...close]
        } else if let colon = authority.lastIndex(of: ":") {
            portText = authority[authority.index(after: colon)...]
            authority = authority[..<colon]
        }
        guard !authority.isEmpty else { return nil }
        server = authority.lowercased()
        port = portText.flatMap { Int64($0) }.flatMap { (1...65535).contains($0) ? $0 : nil }
        let pathEnd = rest[authorityEnd...].firstIndex { $0 == "?" || $0 == "#" } ?? rest.endIndex
        let pathText = String(rest[authorityEnd..<pathEnd])
        path = pathText.isEmpty || pathText == "/" ? nil : pathText
    }
}
