import CallerIdentity
import KeychainCore

extension ItemAccess {
    /// The access list of an item `application` creates: that application, fingerprinted; none when it is a
    /// tool that runs whatever its command line says (inline code, a general D-Bus client), which any program
    /// can run (docs/threat-model.md, "Generic tools").
    package static func creatorAccess(_ application: Application) -> ItemAccess {
        guard application.genericTool != .runsAnything else { return ItemAccess(trustedApplications: []) }
        return ItemAccess(trustedApplications: [
            TrustedApplication(name: application.name, digest: application.digest?.description)
        ])
    }

    /// Whether every application this list trusts, the other trusts too (and any application only if the
    /// other does): a change from `other` to this list only takes trust away.
    package func isNarrowing(_ other: ItemAccess) -> Bool {
        (!anyApplication || other.anyApplication) && trustedApplications.allSatisfy(other.trustedApplications.contains)
    }
}
