import Glibc

/// What /proc says about a process, read with plain system calls (no Foundation: the PAM module asks too).
package enum ProcessStatus {
    /// Whether process `pid` is stopped: by a signal (`SIGSTOP`, state `T`) or by a debugger (state `t`), from
    /// /proc/PID/stat. False when it cannot be read (the process is gone).
    package static func isStopped(_ pid: pid_t) -> Bool {
        guard let text = contents(of: "/proc/\(pid)/stat"),
            let close = text.lastIndex(of: UInt8(ascii: ")")), text.index(close, offsetBy: 2) < text.endIndex
        else { return false }
        let state = text[text.index(close, offsetBy: 2)]
        return state == UInt8(ascii: "T") || state == UInt8(ascii: "t")
    }

    /// The pid of the process tracing this one (`TracerPid` in /proc/self/status): 0 when none, nil when
    /// /proc cannot tell.
    package static func tracerPID() -> pid_t? {
        ownStatusNumber("TracerPid").flatMap { pid_t(exactly: $0) }
    }

    /// How many threads this process runs (`Threads` in /proc/self/status), nil when /proc cannot tell.
    package static func threadCount() -> Int? {
        ownStatusNumber("Threads")
    }

    /// The number in the line `name:` of /proc/self/status.
    private static func ownStatusNumber(_ name: String) -> Int? {
        guard let text = contents(of: "/proc/self/status") else { return nil }
        let key = Array("\(name):".utf8)
        for line in text.split(separator: UInt8(ascii: "\n")) where line.starts(with: key) {
            let digits = line.dropFirst(key.count).filter { $0 != UInt8(ascii: "\t") && $0 != UInt8(ascii: " ") }
            return Int(String(decoding: digits, as: UTF8.self))
        }
        return nil
    }

    /// The first 4 KiB of a file of /proc, or nil (nothing in it, or it cannot be read).
    private static func contents(of path: String) -> [UInt8]? {
        guard let bytes = BoundedFile.read(path, limit: 4_096), !bytes.isEmpty else { return nil }
        return bytes
    }
}
