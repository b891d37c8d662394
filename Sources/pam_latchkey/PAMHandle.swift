import CPAM
import Glibc

/// The PAM handle a module call was given, with the few things the module asks of it.
struct PAMHandle {
    let pointer: OpaquePointer

    /// Name under which the auth step leaves the password for the session and password steps.
    static let passwordDataName = "latchkey-login-password"

    /// A string item (`PAM_SERVICE`, `PAM_AUTHTOK`, …) as a C string owned by libpam, or nil.
    func item(_ type: Int32) -> UnsafePointer<CChar>? {
        var value: UnsafeRawPointer?
        guard pam_get_item(pointer, type, &value) == PAM_SUCCESS, let value else { return nil }
        return value.assumingMemoryBound(to: CChar.self)
    }

    /// The user being served, without prompting (the module never converses).
    var user: String? {
        item(PAM_USER).map { String(cString: $0) }
    }

    /// The PAM service name (`login`, `sshd`, `gdm-password`, …).
    var service: String {
        item(PAM_SERVICE).map { String(cString: $0) } ?? ""
    }

    /// A variable of the PAM environment.
    func environmentValue(_ name: String) -> String? {
        pam_getenv(pointer, name).map { String(cString: $0) }
    }

    /// The whole PAM environment as `NAME=value` strings.
    var environment: [String] {
        guard let list = pam_getenvlist(pointer) else { return [] }
        var entries: [String] = []
        var index = 0
        while let entry = list[index] {
            entries.append(String(cString: entry))
            free(entry)
            index += 1
        }
        free(list)
        return entries
    }

    /// Keeps a copy of `secret` (a C string) in the handle until PAM ends; the
    /// copy is zeroed before it is freed.
    func stashPassword(_ secret: UnsafePointer<CChar>) -> Bool {
        guard let copy = strdup(secret) else { return false }
        let stored = pam_set_data(
            pointer, Self.passwordDataName, copy,
            { _, data, _ in
                guard let data else { return }
                explicit_bzero(data, strlen(data.assumingMemoryBound(to: CChar.self)))
                free(data)
            })
        if stored != PAM_SUCCESS {
            explicit_bzero(copy, strlen(copy))
            free(copy)
            return false
        }
        return true
    }

    /// The password the auth step stashed, if any (owned by the handle).
    var stashedPassword: UnsafePointer<CChar>? {
        var data: UnsafeRawPointer?
        guard pam_get_data(pointer, Self.passwordDataName, &data) == PAM_SUCCESS, let data else {
            return nil
        }
        return data.assumingMemoryBound(to: CChar.self)
    }

    /// Drops the stashed password (zeroed by its cleanup) once the step that needed it is done.
    func clearStashedPassword() {
        _ = pam_set_data(pointer, Self.passwordDataName, nil, nil)
    }

    /// Logs one line through `pam_syslog` (which names the service and the module).
    func log(_ priority: Int32, _ message: String) {
        latchkey_pam_log(pointer, priority, message)
    }
}
