import CPAM
import Glibc
import LoginControl
import Posix

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

    /// Room in the stash: the longest password carried and its NUL.
    static let stashCapacity = ControlRequest.maximumPasswordLength + 1

    /// Keeps a copy of `secret` (a C string of at most ``ControlRequest/maximumPasswordLength`` bytes) in the
    /// handle until the session step or the end of PAM, in secret memory (``SecretBytes``: out of core
    /// dumps, locked in memory), wiped and released by the data's cleanup.
    func stashPassword(_ secret: UnsafePointer<CChar>) -> Bool {
        let length = strlen(secret)
        guard length < Self.stashCapacity else { return false }
        // No secret memory (the address space is used up): nothing is kept, and the login goes on.
        guard var stash = try? SecretBytes(capacity: Self.stashCapacity) else { return false }
        stash.append(UnsafeRawBufferPointer(start: secret, count: length))
        // The pages are zeros after the password: it stays a C string.
        let pages = stash.handedToC()
        let stored = pam_set_data(
            pointer, Self.passwordDataName, pages,
            { _, data, _ in SecretBytes.wipeAndRelease(data, capacity: PAMHandle.stashCapacity) })
        if stored != PAM_SUCCESS {
            SecretBytes.wipeAndRelease(pages, capacity: Self.stashCapacity)
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
