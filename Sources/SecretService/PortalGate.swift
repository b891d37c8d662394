import CallerIdentity

/// Who may call the Secret portal's backend (`org.freedesktop.impl.portal.Secret.RetrieveSecret`): the
/// current owner of `org.freedesktop.portal.Desktop`, when it runs xdg-desktop-portal as the system
/// installed it, outside any sandbox. The application id in the call is trusted only from it: the portal
/// works it out from the application's sandbox, where anyone else would simply name another application's
/// id (docs/threat-model.md, "The Secret portal").
///
/// The owner is followed as the bus says (`GetNameOwner` at start, `NameOwnerChanged` since), with no call
/// to the bus while serving; the caller's process is identified as every caller is (``CallerDirectory``),
/// before its call is served.
package struct PortalGate {
    /// The name xdg-desktop-portal owns.
    static let portalName = "org.freedesktop.portal.Desktop"
    /// The file name of xdg-desktop-portal's executable (`/usr/libexec/xdg-desktop-portal` on Debian).
    package static let portalProgram = "xdg-desktop-portal"

    /// The file name the caller's executable must have: ``portalProgram``, but for in-process tests.
    let programName: String
    /// The unique name owning ``portalName``, as the bus last said; nil while nobody owns it.
    private(set) var owner: String?

    init(programName: String = PortalGate.portalProgram) {
        self.programName = programName
    }

    /// Records who owns `name` (nil or empty: nobody); other names are ignored.
    mutating func noteOwner(_ owner: String?, of name: String) {
        guard name == Self.portalName else { return }
        self.owner = owner.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether `sender` may call the backend, or why not. It must own ``portalName`` now, be identified, still
    /// run as the process identified, run an executable named ``programName`` and run it as only the system
    /// could have installed it, outside a sandbox (``Caller/runsSystemProgram``).
    func admission(of sender: String?, callers: CallerDirectory?) -> Admission {
        guard let sender, let owner, sender == owner else { return .refused(.notTheOwner(sender)) }
        guard let callers else { return .refused(.callersNotIdentified) }
        switch callers.entries[sender] {
        case .identified(let caller)?:
            guard callers.runsAsIdentified(caller, sender: sender) else {
                return .refused(.changedSinceConnecting(pid: caller.pid))
            }
            guard case .executable(let path, _) = caller.application,
                path.split(separator: "/").last.map(String.init) == programName
            else { return .refused(.otherProgram(caller.application, expected: programName)) }
            guard caller.runsSystemProgram else { return .refused(.notSystemProgram(path: path)) }
            return .portal
        case .unidentified(let error)?:
            return .refused(.unidentified(error))
        case .pending?, nil:
            return .refused(.notIdentified)
        }
    }

    /// Whether a caller may call the backend.
    enum Admission: Equatable {
        /// It is xdg-desktop-portal as the system installed it: answered.
        case portal
        /// It is not: refused, and why.
        case refused(Refusal)
    }

    /// Why a caller is not taken for xdg-desktop-portal.
    enum Refusal: Equatable, CustomStringConvertible {
        /// It does not own ``PortalGate/portalName`` now (nil: the call had no sender).
        case notTheOwner(String?)
        /// Callers are not identified, so the portal cannot be told apart.
        case callersNotIdentified
        /// Its process ended or executed another program since it connected.
        case changedSinceConnecting(pid: Int32)
        /// It runs another program than the one expected (the file name of xdg-desktop-portal's executable).
        case otherProgram(Application, expected: String)
        /// Its executable is not a root-owned file in root-owned directories, or it runs in a sandbox.
        case notSystemProgram(path: String)
        /// It could not be identified.
        case unidentified(CallerIdentityError)
        /// Its identification has not finished.
        case notIdentified

        /// The words of the log line and of the error.
        var description: String {
            switch self {
            case .notTheOwner(let sender):
                "only the owner of \(PortalGate.portalName) may call it, and \(sender ?? "the caller") is not"
            case .callersNotIdentified: "callers are not identified, so the portal cannot be told apart"
            case .changedSinceConnecting(let pid):
                "its process \(pid) ended or started another program since it connected"
            case .otherProgram(let application, let expected): "it runs \(application), not \(expected)"
            case .notSystemProgram(let path):
                "\(path) is not a root-owned file in root-owned directories, or runs in a sandbox"
            case .unidentified(let error): "it could not be identified (\(error))"
            case .notIdentified: "it is not identified"
            }
        }
    }
}
