import Glibc

/// Becoming another user, as a process started by root for that user does first.
package enum UserSwitch {
    /// Takes the groups, gid and uid of the account `uid` (each step checked, and getting root back must
    /// fail afterwards); the reason when a step fails, nil when done or when this process already is `uid`.
    package static func become(uid: uid_t) -> String? {
        if getuid() == uid, geteuid() == uid { return nil }
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "no account with uid \(uid)" }
        let gid = entry.pointee.pw_gid
        guard initgroups(name, gid) == 0 else { return "initgroups: \(String(cString: strerror(errno)))" }
        guard setgid(gid) == 0, setuid(uid) == 0 else {
            return "cannot switch to uid \(uid): \(String(cString: strerror(errno)))"
        }
        guard getuid() == uid, geteuid() == uid, getgid() == gid, getegid() == gid, uid == 0 || setuid(0) != 0
        else { return "dropping privileges to uid \(uid) did not hold" }
        return nil
    }
}
