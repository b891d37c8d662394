import Glibc
import KWalletFormat

extension KWalletrc {
    /// The names of the kwalletrc at `path`; the defaults when it cannot be read or is not a small regular
    /// file.
    static func read(path: String) -> KWalletrc {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else { return KWalletrc() }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
            status.st_size <= maximumFileBytes
        else { return KWalletrc() }
        var bytes = [UInt8](repeating: 0, count: maximumFileBytes + 1)
        var filled = 0
        while filled < bytes.count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(descriptor, buffer.baseAddress.map { $0 + filled }, buffer.count - filled)
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { break }
            filled += got
        }
        // Grown past the bound since fstat: not read.
        guard filled <= maximumFileBytes else { return KWalletrc() }
        return KWalletrc(kwalletrc: String(decoding: bytes[..<filled], as: UTF8.self))
    }

    /// `$XDG_CONFIG_HOME/kwalletrc`, else `~/.config/kwalletrc` (nil when neither variable is set).
    static func configurationPath() -> String? {
        if let base = getenv("XDG_CONFIG_HOME").map({ String(cString: $0) }), base.hasPrefix("/") {
            return base + "/kwalletrc"
        }
        if let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/") {
            return home + "/.config/kwalletrc"
        }
        return nil
    }

    /// The names of the user's kwalletrc (``configurationPath()``).
    static func current() -> KWalletrc {
        configurationPath().map(read(path:)) ?? KWalletrc()
    }

}
