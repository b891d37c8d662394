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

    /// Nil when `sender` may call the backend; otherwise why not. It must own ``portalName`` now, be
    /// identified, still run as the process identified, run an executable named ``programName`` and run it
    /// as only the system could have installed it, outside a sandbox (``Caller/runsSystemProgram``).
    func refusal(of sender: String?, callers: CallerDirectory?) -> String? {
        guard let sender, let owner, sender == owner else {
            return "only the owner of \(Self.portalName) may call it, and \(sender ?? "the caller") is not"
        }
        guard let callers else { return "callers are not identified, so the portal cannot be told apart" }
        switch callers.entries[sender] {
        case .identified(let caller)?:
            guard callers.runsAsIdentified(caller, sender: sender) else {
                return "its process \(caller.pid) ended or started another program since it connected"
            }
            guard case .executable(let path, _) = caller.application,
                path.split(separator: "/").last.map(String.init) == programName
            else { return "it runs \(caller.application), not \(programName)" }
            guard caller.runsSystemProgram else {
                return "\(path) is not a root-owned file in root-owned directories, or runs in a sandbox"
            }
            return nil
        case .unidentified(let reason)?:
            return "it could not be identified (\(reason))"
        case .pending?, nil:
            return "it is not identified"
        }
    }
}
