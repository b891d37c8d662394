import Glibc

/// The account a session is for, from the password database.
struct UserAccount {
    let name: String
    let uid: uid_t
    let gid: gid_t
    let home: String
    let shell: String

    /// Looks `name` up with `getpwnam_r`; nil when there is no such user.
    init?(named name: String) {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        self.name = name
        uid = entry.pw_uid
        gid = entry.pw_gid
        home = entry.pw_dir.map { String(cString: $0) } ?? "/"
        shell = entry.pw_shell.map { String(cString: $0) } ?? "/bin/sh"
    }

    /// The account's groups (`getgrouplist`: its primary group and those naming it in the group database), for
    /// the daemon's process to take before it executes; nil when they cannot be had.
    func groupIDs() -> [gid_t]? {
        var count: Int32 = 32
        while count <= 65_536 {
            var groups = [gid_t](repeating: 0, count: Int(count))
            var found = count
            if getgrouplist(name, gid, &groups, &found) >= 0 { return Array(groups.prefix(Int(found))) }
            guard found > count else { return nil }
            count = found
        }
        return nil
    }

    /// The user's runtime directory: `XDG_RUNTIME_DIR` of the PAM environment, else /run/user/UID.
    func runtimeDirectory(_ handle: PAMHandle) -> String {
        handle.environmentValue("XDG_RUNTIME_DIR") ?? "/run/user/\(uid)"
    }
}
