import AccessControl
import CallerIdentity
import DBus
import Glibc
import KeychainCore
import Posix
import Synchronization

/// Who each D-Bus client is, asked of the bus once per connection and kept by unique name until the name
/// goes (docs/threat-model.md, "Who is asking").
///
/// A connection is identified when it appears on the bus (`NameOwnerChanged` for a new unique name), before
/// it can ask anything: the process that connected is identified, not a program it executes later in the same
/// pid. At each secret request the process is looked at again (``runsAsIdentified(_:sender:)``): one that
/// ended or executed another program since is unidentified from then on.
///
/// Without I/O on the serving thread: a new connection, or the first call from a sender the directory does not
/// know (one that connected before the daemon listened), makes the daemon send the bus
/// `GetConnectionCredentials` (with a serial of the directory's own, so that the reply is told apart among the
/// messages read) and hold that sender's calls, in order. When the bus answers,
/// `/proc` is read and the program hashed on the registry's quick worker (a thread of its own, not the worker
/// where a key derivation may take a second; the ``ProcessInspector`` and its ``FileDigester`` are used under
/// a lock as well, so that no other thread can ever race it); then the held calls are served. Other senders
/// are not held meanwhile.
final class CallerDirectory {
    /// What is known of one sender.
    enum Entry {
        /// Asked; its calls wait.
        case pending([DBusMessage])
        /// Identified.
        case identified(Caller)
        /// Could not be identified (gone, non-dumpable, another user): why.
        case unidentified(CallerIdentityError)
    }

    /// The uid the daemon serves: callers of another user are unidentified.
    let uid: uid_t
    /// Reads `/proc`, off the serving thread, one caller at a time.
    let inspector: SharedInspector
    private(set) var entries: [String: Entry] = [:]
    /// Each sender's process as the bus gave it, and its start time then (nil when it could not be read): where
    /// its prompts show is chosen from it (``PromptPlace``), identified or not.
    private(set) var processes: [String: (pid: pid_t, startTime: UInt64?)] = [:]
    /// Senders whose credentials were asked for, by the serial of the request.
    private var asked: [UInt32: String] = [:]
    private var nextSerial: UInt32 = CallerDirectory.firstSerial
    /// Takes a first look at a new connection's process on the serving thread, as soon as the bus gives its
    /// pid (``ProcessInspector/firstLook(at:)``): the identification may wait on the quick worker behind other
    /// callers' (a large executable hashed for the first time takes a second), and a process that executes a
    /// trusted program meanwhile must not be identified as that program.
    func firstLook(at pid: pid_t) -> ProcessLook? { liveness.firstLook(at: pid) }

    /// Records the process behind `sender` (``processes``), while `sender` is being identified.
    func record(_ sender: String, pid: pid_t, startTime: UInt64?) {
        guard case .pending? = entries[sender] else { return }
        processes[sender] = (pid, startTime)
    }
    /// Looks at identified callers again on the serving thread (a `stat` of the executable, an interpreter's
    /// command line, `/proc/PID/stat` without a pidfd; without the shared inspector's lock, which a hash of a
    /// large file may hold).
    private let liveness = ProcessInspector()
    /// A pidfd on each identified sender's process: whether it still runs, for the cost of a `poll`.
    private var handles: [String: ProcessHandle] = [:]
    /// The most pidfds held at once, one per identified connection (docs/robustness.md, "Bounds and quotas").
    static let heldHandles = 4_096
    /// Far above the serials libdbus gives the connection's own messages (counted from 1).
    static let firstSerial: UInt32 = 0x6000_0000

    /// A directory for the callers of `uid`.
    init(uid: uid_t = getuid()) {
        self.uid = uid
        self.inspector = SharedInspector()
    }

    /// The program behind `sender`, nil while unknown, when it could not be identified, or when its process
    /// ended or executed another program since.
    func application(of sender: String?) -> Application? {
        guard case .application(let application) = requester(of: sender) else { return nil }
        return application
    }

    /// Who `sender` is for the access rules: its program, or why it is unidentified (not known yet, its
    /// identification failed, or its process ended or executed another program since it connected).
    func requester(of sender: String?) -> Requester {
        guard let sender else { return .unidentified(.unknown) }
        switch entries[sender] {
        case .identified(let caller)?:
            // Its pid ended or now runs another program (which holds the connection it inherited), or it
            // executed another program since it connected (while a child of it keeps the connection).
            guard runsAsIdentified(caller, sender: sender) else {
                return .unidentified(.changedSinceConnecting(pid: caller.pid))
            }
            return .application(caller.application)
        case .unidentified(let error)?: return .unidentified(.failed(error))
        case .pending?, nil: return .unidentified(.unknown)
        }
    }

    /// Whether `caller`'s process still runs the program identified: its pid not ended, nor taken by another
    /// process since it was identified (another program holding the connection it inherited is not the program
    /// identified), and no other program executed in it since (a trusted program executed by the process
    /// that connected, while a child of it keeps the connection, is not the program that connected).
    func runsAsIdentified(_ caller: Caller, sender: String) -> Bool {
        guard let handle = handles[sender] else { return liveness.runsSameProgram(caller) }
        return !handle.hasExited && liveness.runsSameProgram(caller, sameProcess: true)
    }

    /// Starts identifying `name`, a unique name that has just appeared on the bus (`NameOwnerChanged` with no
    /// previous owner): the request to send the bus, unless the name is known already.
    func appeared(_ name: String, asking outbox: inout [DBusMessage]) {
        guard name.hasPrefix(":"), entries[name] == nil else { return }
        ask(name, holding: [], outbox: &outbox)
    }

    /// Holds `call` if its sender is not identified yet; the request to send the bus when this is the
    /// sender's first call. Returns whether the call was held.
    func hold(_ call: DBusMessage, asking outbox: inout [DBusMessage]) -> Bool {
        guard let sender = call.sender, sender.hasPrefix(":") else { return false }
        switch entries[sender] {
        case .identified?, .unidentified?: return false
        case .pending(let calls)?:
            entries[sender] = .pending(calls + [call])
            return true
        case nil:
            return ask(sender, holding: [call], outbox: &outbox)
        }
    }

    /// Asks the bus who `sender` is, holding `calls` meanwhile; whether the request could be made.
    @discardableResult
    private func ask(_ sender: String, holding calls: [DBusMessage], outbox: inout [DBusMessage]) -> Bool {
        guard
            let request = try? DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "GetConnectionCredentials", arguments: [.string(sender)])
        else { return false }
        let serial = nextSerial
        nextSerial = nextSerial == UInt32.max ? Self.firstSerial : nextSerial + 1
        request.assignSerial(serial)
        asked[serial] = sender
        entries[sender] = .pending(calls)
        outbox.append(request)
        return true
    }

    /// The bus's answer to a credentials request, if `message` is one: the sender it is about and its pid and
    /// uid (nil when the bus refused: the sender is gone).
    func takeAnswer(_ message: DBusMessage) -> (sender: String, credentials: (pid: pid_t, uid: uid_t)?)? {
        guard message.kind == .methodReturn || message.kind == .error, message.sender == "org.freedesktop.DBus",
            let sender = asked.removeValue(forKey: message.replySerial)
        else { return nil }
        guard message.kind == .methodReturn, case .dictionary("s", "v", let entries)? = try? message.arguments().first
        else { return (sender, nil) }
        var pid: pid_t?
        var uid: uid_t?
        for entry in entries {
            guard case .string(let key) = entry.key, case .variant(.uint32(let value)) = entry.value else { continue }
            if key == "ProcessID" { pid = pid_t(bitPattern: value) }
            if key == "UnixUserID" { uid = value }
        }
        guard let pid, let uid, pid > 0 else { return (sender, nil) }
        return (sender, (pid, uid))
    }

    /// Records what identifying `sender` gave; the calls it held, in order (none if the sender left
    /// meanwhile).
    func settle(
        _ sender: String, _ outcome: Result<Caller, CallerIdentityError>, handle: ProcessHandle? = nil
    ) -> [DBusMessage] {
        guard case .pending(let calls)? = entries[sender] else { return [] }
        switch outcome {
        case .success(let caller):
            entries[sender] = .identified(caller)
            // A client keeping many connections open must not use up the daemon's descriptors: past the bound
            // a caller is followed through `/proc/PID/stat` (its start time) instead.
            handles[sender] = handles.count < Self.heldHandles ? handle : nil
        case .failure(let error): entries[sender] = .unidentified(error)
        }
        return calls
    }

    /// Forgets `sender`, which left the bus (its held calls are dropped: nobody is there to answer).
    func forget(_ sender: String) {
        entries[sender] = nil
        handles[sender] = nil
        processes[sender] = nil
        asked = asked.filter { $0.value != sender }
    }
}

/// What identifying a caller gave: who it is, and a pidfd on its process when one could be had.
struct Identification: Sendable {
    let outcome: Result<Caller, CallerIdentityError>
    let handle: ProcessHandle?
}

/// A ``ProcessInspector`` (and the digests its ``FileDigester`` remembers) used from the threads that identify
/// callers, one at a time.
final class SharedInspector: Sendable {
    private let inspector: Mutex<ProcessInspector>
    init() { self.inspector = Mutex(ProcessInspector()) }

    /// ``ProcessInspector/identify(pid:uid:expectedUID:)`` under the lock.
    func identify(pid: pid_t, uid: uid_t, expectedUID: uid_t) -> Result<Caller, CallerIdentityError> {
        inspector.withLock { inspector in
            do throws(CallerIdentityError) {
                return .success(try inspector.identify(pid: pid, uid: uid, expectedUID: expectedUID))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Identifies the process, then takes a pidfd on it, kept only if the process it refers to has the start
    /// time identified (so that it cannot be a later process given the same pid). `firstLook`: what the
    /// process ran when the bus gave its pid (``ProcessInspector/firstLook(at:)``); a process that ran
    /// something else then, or could not be looked at, executed another program since it connected (or hid
    /// itself) and is not identified as what it runs now.
    func identifyHolding(pid: pid_t, uid: uid_t, expectedUID: uid_t, firstLook: ProcessLook?) -> Identification {
        var outcome = identify(pid: pid, uid: uid, expectedUID: expectedUID)
        if case .success(let caller) = outcome, !caller.matches(firstLook) {
            outcome = .failure(.programChanged(pid))
        }
        guard case .success(let caller) = outcome, let handle = ProcessHandle(pid: pid) else {
            return Identification(outcome: outcome, handle: nil)
        }
        let sameProcess = inspector.withLock { $0.isRunning(caller) }
        return Identification(outcome: outcome, handle: sameProcess ? handle : nil)
    }
}
