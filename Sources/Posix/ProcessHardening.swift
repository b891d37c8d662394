import CLinux
import Glibc

/// What a process holding secrets does first: no core file and no dump of its memory.
package enum ProcessHardening {
    /// Sets the core file limit to 0 and makes the process not dumpable (so its own user cannot attach a
    /// debugger or read its memory through /proc either; root still can). The reason when a step fails.
    package static func forbidCoreDumps() -> String? {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        guard setrlimit(Int32(RLIMIT_CORE.rawValue), &none) == 0 else {
            return "setrlimit(RLIMIT_CORE): \(String(cString: strerror(errno)))"
        }
        guard latchkey_set_not_dumpable() == 0 else {
            return "prctl(PR_SET_DUMPABLE): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Whether the process may be dumped.
    package static var isDumpable: Bool { latchkey_is_dumpable() == 1 }
}
