import Glibc

extension Posix {
    /// Starts `executable` (a path: no `PATH` search, no shell) with `arguments` after its name and exactly
    /// `environment` (`NAME=value` entries). Its standard input and output are `input` and `output` (nil:
    /// `/dev/null`), its standard error `/dev/null`; it starts with the default action for the signals a
    /// daemon or a command may ignore or block, and none blocked. Its `argv[0]` is `name`, else `executable`.
    /// `third`, when given, is its descriptor 3 (a terminal a prompt shows on). The child's pid; the caller
    /// reaps it.
    package static func spawn(
        _ executable: String, _ arguments: [String], environment: [String], input: Int32?, output: Int32?,
        name: String? = nil, third: Int32? = nil
    ) throws(SystemError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, given, mode) in [(Int32(0), input, O_RDONLY), (Int32(1), output, O_WRONLY)] {
            if let given {
                posix_spawn_file_actions_adddup2(&actions, given, descriptor)
            } else {
                posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", mode, 0)
            }
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        if let third { posix_spawn_file_actions_adddup2(&actions, third, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&signals, signal) }
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([name ?? executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        // ETXTBSY: the program file is still open for writing somewhere, often only for the moment another
        // thread's child holds a descriptor it inherited before exec closed it; asked again for up to 200 ms.
        var status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        for _ in 0..<20 where status == ETXTBSY {
            usleep(10_000)
            status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        }
        guard status == 0 else { throw SystemError("posix_spawn", errno: status) }
        return child
    }
}
