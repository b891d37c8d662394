// pam_latchkey: the PAM entry points. Each one returns quickly and never
// fails a login: the module talks to the user's daemon on its control socket
// (checked to be the user's, and its peer to run as the user, before anything
// is sent), or starts the daemon with an exec straight after fork; every wait
// is bounded (2 s in all, 0.3 s on a daemon seen stopped), and the session
// step does not wait for the key derivation.

import CPAM
import Glibc
import LoginControl
import Posix

/// The C type of a module argument vector (`const char **argv`).
public typealias ModuleArguments = UnsafeMutablePointer<UnsafePointer<CChar>?>?

/// All the time one PAM call may spend waiting.
private let callBudgetMilliseconds = 2_000

/// Auth: stashes the password the module before it obtained (pam_unix and
/// the like), for the session step. Never prompts, and always answers
/// `PAM_IGNORE`: it authenticates nobody, even on a line an administrator
/// wrote as `sufficient`.
@_cdecl("pam_sm_authenticate")
public func authenticate(_ pointer: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: ModuleArguments)
    -> Int32
{
    guard let (handle, options) = prepare(pointer, argc, argv) else { return PAM_IGNORE }
    guard let password = handle.item(PAM_AUTHTOK), password.pointee != 0 else {
        if options.debug { handle.log(LOG_DEBUG, "no password to keep for the session") }
        return PAM_IGNORE
    }
    guard strlen(password) <= ControlRequest.maximumPasswordLength else {
        handle.log(
            LOG_WARNING,
            "the password is longer than \(ControlRequest.maximumPasswordLength) bytes: not kept for the keychain")
        return PAM_IGNORE
    }
    guard handle.stashPassword(password) else {
        handle.log(LOG_WARNING, "cannot keep the password for the session step")
        return PAM_IGNORE
    }
    if options.debug { handle.log(LOG_DEBUG, "kept the password for the session step") }
    return PAM_IGNORE
}

/// Credentials: nothing to do.
@_cdecl("pam_sm_setcred")
public func setCredentials(_ pointer: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: ModuleArguments)
    -> Int32
{
    PAM_IGNORE
}

/// Session open: hands the stashed password to the user's daemon, which
/// unlocks (or creates) the login keychain; starts the daemon with `auto_start`.
@_cdecl("pam_sm_open_session")
public func openSession(_ pointer: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: ModuleArguments)
    -> Int32
{
    guard let (handle, options) = prepare(pointer, argc, argv), let account = account(handle) else {
        return PAM_IGNORE
    }
    let deadline = Deadline(millisecondsFromNow: callBudgetMilliseconds)
    // From the stash straight into secret memory; the request shares it, and it is wiped when this step
    // lets go of the request (the stash itself is wiped by its cleanup just below).
    let password: SharedSecret?
    do {
        password = try handle.stashedPassword.map { (stashed) throws(SecretMemoryError) in
            SharedSecret(try SecretBytes(copyingCString: stashed))
        }
    } catch {
        // The login goes on without the keychain.
        handle.clearStashedPassword()
        handle.log(LOG_WARNING, "the login keychain is not unlocked: \(error)")
        return PAM_IGNORE
    }
    // The stash has served its one use.
    handle.clearStashedPassword()
    let request = ControlRequest.handOver(password: password?.count == 0 ? nil : password)
    let socket = ControlSocketPath.socket(inRuntimeDirectory: account.runtimeDirectory(handle))
    let report: StepReport
    switch ControlClient.exchange(request, socketPath: socket, owner: account.uid, deadline: deadline) {
    case .failure(.noDaemon) where options.autoStart:
        let launcher = launcher(handle, options, account)
        let outcome = launcher.startDaemon(request, deadline: deadline)
        if case .replied(let reply) = outcome, reply.status != .ok,
            let result = handOverToServingDaemon(request, socket: socket, owner: account.uid, deadline: deadline)
        {
            report = StepReport(result, socket: socket)
        } else {
            report = launcher.report(outcome)
        }
    case let result:
        report = StepReport(result, socket: socket)
    }
    return finish(handle, options, step: "session", report)
}

/// Session close: with `lock_on_close`, tells the daemon; it locks the login
/// keychain when this was the user's last session.
@_cdecl("pam_sm_close_session")
public func closeSession(_ pointer: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: ModuleArguments)
    -> Int32
{
    guard let (handle, options) = prepare(pointer, argc, argv), options.lockOnClose, let account = account(handle)
    else { return PAM_IGNORE }
    let deadline = Deadline(millisecondsFromNow: callBudgetMilliseconds)
    let socket = ControlSocketPath.socket(inRuntimeDirectory: account.runtimeDirectory(handle))
    let result = ControlClient.exchange(
        .closeSession(lockIfLast: true), socketPath: socket, owner: account.uid, deadline: deadline)
    return finish(handle, options, step: "session close", StepReport(result, socket: socket))
}

/// Password change: on the update pass, re-wraps the login keychain from the
/// old password to the new one, through the daemon or, when none runs,
/// directly on the file. A change made by root (no old password) leaves the
/// keychain as it is; the daemon offers to re-key at the next login.
@_cdecl("pam_sm_chauthtok")
public func changeAuthenticationToken(_ pointer: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: ModuleArguments)
    -> Int32
{
    guard flags & PAM_UPDATE_AUTHTOK != 0, let (handle, options) = prepare(pointer, argc, argv),
        let account = account(handle)
    else { return PAM_IGNORE }
    guard let new = handle.item(PAM_AUTHTOK), new.pointee != 0 else { return PAM_IGNORE }
    guard let old = handle.item(PAM_OLDAUTHTOK), old.pointee != 0 else {
        handle.log(
            LOG_NOTICE,
            "password of \(account.name) set without the old one: the login keychain keeps its password;"
                + " latchkeyd offers to re-key it at the next login")
        return PAM_IGNORE
    }
    let deadline = Deadline(millisecondsFromNow: callBudgetMilliseconds)
    let socket = ControlSocketPath.socket(inRuntimeDirectory: account.runtimeDirectory(handle))
    guard strlen(old) <= ControlRequest.maximumPasswordLength, strlen(new) <= ControlRequest.maximumPasswordLength
    else {
        handle.log(
            LOG_WARNING,
            "a password is longer than \(ControlRequest.maximumPasswordLength) bytes: the login keychain is not re-keyed"
        )
        return PAM_IGNORE
    }
    let request: ControlRequest
    do {
        request = ControlRequest.changePassword(
            old: SharedSecret(try SecretBytes(copyingCString: old)),
            new: SharedSecret(try SecretBytes(copyingCString: new)))
    } catch {
        handle.log(LOG_WARNING, "the login keychain is not re-keyed: \(error)")
        return PAM_IGNORE
    }
    let report: StepReport
    switch ControlClient.exchange(request, socketPath: socket, owner: account.uid, deadline: deadline) {
    case .failure(.noDaemon):
        let launcher = launcher(handle, options, account)
        report = launcher.report(launcher.changePassword(request, deadline: deadline))
    case let result:
        report = StepReport(result, socket: socket)
    }
    return finish(handle, options, step: "password change", report)
}

/// The launcher of the user's daemon.
private func launcher(_ handle: PAMHandle, _ options: ModuleOptions, _ account: UserAccount) -> DaemonLauncher {
    DaemonLauncher(
        path: options.daemonPath,
        environment: DaemonEnvironment.entries(
            pam: handle.environment, account: account, runtimeDirectory: account.runtimeDirectory(handle)),
        account: account)
}

/// The hand-over again on the control socket, after the daemon the module started refused it: another
/// latchkeyd took the socket between the module's first look and that daemon's start (one the session bus
/// activated, which makes its socket before it claims the bus name). Tried for 250 ms at most, while no daemon
/// answers; nil when none did.
private func handOverToServingDaemon(
    _ request: ControlRequest, socket: String, owner uid: uid_t, deadline: Deadline
) -> Result<ControlReply, ControlClientError>? {
    let until = min(deadline, Deadline(millisecondsFromNow: 250))
    while true {
        let result = ControlClient.exchange(request, socketPath: socket, owner: uid, deadline: deadline)
        guard case .failure(.noDaemon) = result else { return result }
        guard !until.hasPassed else { return nil }
        usleep(10_000)
    }
}

/// The handle and options, or nil when the module should stay out (no
/// handle, or a service `only_if` leaves out).
private func prepare(_ pointer: OpaquePointer?, _ argc: Int32, _ argv: ModuleArguments) -> (PAMHandle, ModuleOptions)? {
    guard let pointer else { return nil }
    let handle = PAMHandle(pointer: pointer)
    let options = ModuleOptions(argc: argc, argv: argv)
    for argument in options.unknown { handle.log(LOG_WARNING, "unknown option \(argument) ignored") }
    guard options.applies(to: handle.service) else {
        if options.debug { handle.log(LOG_DEBUG, "not acting for service \(handle.service) (only_if)") }
        return nil
    }
    return (handle, options)
}

/// The account of `PAM_USER`, or nil (logged) when there is none.
private func account(_ handle: PAMHandle) -> UserAccount? {
    guard let name = handle.user, let account = UserAccount(named: name) else {
        handle.log(LOG_WARNING, "no such user: \(handle.user ?? "(none)")")
        return nil
    }
    return account
}

extension StepReport {
    /// The report of one exchange on the control socket at `socket`.
    init(_ result: Result<ControlReply, ControlClientError>, socket: String) {
        switch result {
        case .success(let reply):
            self.init(succeeded: reply.status == .ok, message: "latchkeyd: \(reply.message)")
        case .failure(.noDaemon):
            self = .failure("no latchkeyd answers on \(socket) (auto_start is off)")
        case .failure(.unsafe(let reason)):
            self = .failure("refused the control socket: \(reason)")
        case .failure(.timedOut):
            self = .failure("latchkeyd did not answer on \(socket) in time")
        case .failure(.stopped(let pid)):
            self = .failure("latchkeyd (pid \(pid)) on \(socket) is stopped: not waited for")
        case .failure(.failed(let reason)):
            self = .failure("control socket \(socket): \(reason)")
        }
    }
}

/// Logs the outcome (failures always, successes with `debug`); the result
/// for an `optional` line: success when done, ignore otherwise.
private func finish(_ handle: PAMHandle, _ options: ModuleOptions, step: String, _ report: StepReport) -> Int32 {
    if !report.succeeded {
        handle.log(LOG_WARNING, "\(step): \(report.message)")
        return PAM_IGNORE
    }
    if options.debug { handle.log(LOG_DEBUG, "\(step): \(report.message)") }
    return PAM_SUCCESS
}
