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

    /// Raises the soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard one, at most `ceiling` (programs
    /// the process starts inherit it, and some close every descriptor up to it): systemd gives user services
    /// 1,024 soft, 524,288 hard. The limit now, and the reason when it could not be raised.
    package static func raiseDescriptorLimit(upTo ceiling: UInt = 65_536) -> (limit: UInt, problem: String?) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            return (0, "getrlimit(RLIMIT_NOFILE): \(String(cString: strerror(errno)))")
        }
        let wanted = min(limit.rlim_max, rlim_t(ceiling))
        guard limit.rlim_cur < wanted else { return (UInt(limit.rlim_cur), nil) }
        let before = limit.rlim_cur
        limit.rlim_cur = wanted
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            return (UInt(before), "setrlimit(RLIMIT_NOFILE): \(String(cString: strerror(errno)))")
        }
        return (UInt(wanted), nil)
    }

    /// Sets the core file limit to 0 and nothing else: the process stays dumpable, so that latchkeyd can read
    /// its `/proc/PID/exe` and identify it. For the `latchkey` command, which calls ``forbidDumping()``
    /// once the daemon has identified it and before any secret enters its memory (docs/threat-model.md).
    package static func forbidCoreFiles() -> String? {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        guard setrlimit(Int32(RLIMIT_CORE.rawValue), &none) == 0 else {
            return "setrlimit(RLIMIT_CORE): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Makes the process not dumpable (`PR_SET_DUMPABLE` 0), as ``forbidCoreDumps()`` does; calling it again
    /// is harmless. The reason when it failed.
    @discardableResult
    package static func forbidDumping() -> String? {
        guard latchkey_set_not_dumpable() == 0 else {
            return "prctl(PR_SET_DUMPABLE): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Ends the process at once on a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT), as the
    /// system would: the Swift runtime's crash handler starts a backtracer, which cannot read a process
    /// that is not dumpable anyway, and then returns from the handler, so a `kill -SEGV` left the process
    /// running. With the core limit at 0 the process ends without a core file.
    package static func endOnFatalSignals() {
        for number in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT] { signal(number, SIG_DFL) }
    }

    /// Makes glibc's `free` overwrite every chunk it frees (`mallopt(M_PERTURB)`), so that what the process
    /// decrypted into ordinary heap memory (labels, attribute values, D-Bus message buffers) does not stay
    /// readable in freed memory until it is reused. Costs a `memset` of each freed chunk (docs/benchmarks.md).
    /// False when glibc refused.
    @discardableResult
    package static func overwriteFreedMemory() -> Bool {
        latchkey_perturb_freed_memory(0x5a) == 1
    }

    /// Has every thread allocate from glibc's main arena (`mallopt(M_ARENA_MAX, 1)`), before threads start.
    /// glibc otherwise gives a thread that finds the arena busy one of its own (up to eight per core), each
    /// keeping its own free chunks and top: for a daemon that serves from one thread, with a worker or two and
    /// a prompt's thread, a few hundred KiB of resident memory (docs/robustness.md, "Memory of a prompt
    /// storm") against a little waiting on the arena's lock. False when glibc refused.
    @discardableResult
    package static func allocateFromOneArena() -> Bool {
        latchkey_one_malloc_arena() == 1
    }

    /// Gives the whole pages of free heap memory back to the system (`malloc_trim(0)`): what a large
    /// request or a read of large items allocated and freed (already overwritten, ``overwriteFreedMemory()``)
    /// stops counting in the process's memory, where glibc would keep it for reuse (docs/robustness.md,
    /// "Bounds and quotas"). Walks the free chunks: for moments of quiet.
    package static func returnFreedMemory() {
        _ = latchkey_trim_heap()
    }

    /// Overwrites the calling thread's stack below the caller (256 KiB): what returned calls left in their
    /// frames (a decrypted value, an encoding built on the stack) is gone even where no later call reaches.
    package static func wipeDeadStack() {
        latchkey_wipe_dead_stack()
    }

    /// glibc settings a process holding secrets runs with: no per-thread cache of freed chunks (glibc's
    /// tcache keeps up to 7 freed chunks of each small size untouched, even under `M_PERTURB`), and every
    /// freed chunk overwritten (`perturb`).
    package static let mallocTunables = "glibc.malloc.tcache_count=0:glibc.malloc.perturb=90"

    /// Set in the environment of a process started with ``mallocTunables`` already (``mallocEnvironment``):
    /// it need not start itself again.
    package static let mallocTunedMarker = "LATCHKEY_MALLOC_TUNED"

    /// What a starter (pam_latchkey, the systemd unit) puts in latchkeyd's environment so that it starts
    /// with ``mallocTunables`` at once, saving the second start (about 15 ms).
    package static let mallocEnvironment = ["GLIBC_TUNABLES=\(mallocTunables)", "\(mallocTunedMarker)=1"]

    /// Runs this program again (same arguments, same descriptors, same process) with ``mallocTunables`` in
    /// `GLIBC_TUNABLES`, which glibc reads only when a program starts; returns once they are in effect,
    /// having taken the variable out of the environment again (children do not inherit it). The reason
    /// when it did not: the program could not be run again, or it was started by a set-user-ID program
    /// (`su`, `passwd`: glibc ignores these tunables in a secure-mode process), and goes on with
    /// `M_PERTURB` alone (``overwriteFreedMemory()``).
    package static func restartWithMallocTunables() -> String? {
        let name = "GLIBC_TUNABLES"
        let marker = mallocTunedMarker
        let current = getenv(name).map { String(cString: $0) }
        if getenv(marker) != nil {
            // Started again, or started with them by pam_latchkey or systemd: glibc has read the tunables (or
            // erased them, in secure mode). Never again.
            unsetenv(marker)
            if let current {
                let others = current.replacing(mallocTunables, with: "").split(separator: ":").joined(separator: ":")
                if others.isEmpty { unsetenv(name) } else { setenv(name, others, 1) }
            }
            return nil
        }
        guard latchkey_started_in_secure_mode() == 0 else {
            return "started in secure mode (by a set-user-ID program): glibc ignores GLIBC_TUNABLES"
        }
        let value = current.map { $0.isEmpty ? mallocTunables : $0 + ":" + mallocTunables } ?? mallocTunables
        guard setenv(name, value, 1) == 0, setenv(marker, "1", 1) == 0 else {
            return "setenv: \(String(cString: strerror(errno)))"
        }
        // By its own path (not /proc/self/exe, which would rename the process "exe").
        var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        if readlink("/proc/self/exe", &path, path.count - 1) > 0 { execv(path, CommandLine.unsafeArgv) }
        let reason = "cannot run this program again: \(String(cString: strerror(errno)))"
        unsetenv(marker)
        if let current { setenv(name, current, 1) } else { unsetenv(name) }
        return reason
    }

    /// Whether the process may be dumped.
    package static var isDumpable: Bool { latchkey_is_dumpable() == 1 }

    /// Has the kernel send SIGKILL to this process when its parent ends (`PR_SET_PDEATHSIG`): a helper the
    /// daemon started does not outlive it. The reason when it failed.
    package static func endWithParent() -> String? {
        guard latchkey_die_with_parent() == 0 else {
            return "prctl(PR_SET_PDEATHSIG): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Names the process as `ps` shows it (`/proc/PID/comm`, at most 15 bytes): a program started through
    /// `/proc/self/fd/N` is otherwise named `N`.
    package static func setProcessName(_ name: String) {
        _ = latchkey_set_process_name(name)
    }
}
