import KeychainCore
import Testing

@Suite struct ItemAccessTests {
    let git = TrustedApplication(name: "/usr/bin/git", digest: String(repeating: "a", count: 64))
    let notes = TrustedApplication(name: "flatpak:org.example.Notes", digest: nil)

    @Test func aListRoundTripsThroughTheItemsAttributes() {
        let access = ItemAccess(anyApplication: false, trustedApplications: [git, notes])
        let attributes = access.attributes
        #expect(
            attributes[ItemAccess.trustedApplicationsKey]
                == .string("/usr/bin/git\t\(git.digest ?? "")\nflatpak:org.example.Notes"))
        #expect(attributes[ItemAccess.anyApplicationKey] == .string("0"))
        #expect(ItemAccess(attributes: attributes) == access)
        #expect(ItemAccess(attributes: [:]).isEmpty)
        #expect(ItemAccess(attributes: [ItemAccess.anyApplicationKey: .string("1")]).anyApplication)
    }

    @Test func theVerdictTellsTrustedChangedAndUnknownApart() {
        let access = ItemAccess(trustedApplications: [git, notes])
        #expect(access.verdict(forApplication: "/usr/bin/git", digest: git.digest) == .trusted)
        #expect(access.verdict(forApplication: "/usr/bin/git", digest: String(repeating: "b", count: 64)) == .changed)
        #expect(access.verdict(forApplication: "/usr/bin/curl", digest: git.digest) == .unknown)
        #expect(access.verdict(forApplication: "flatpak:org.example.Notes", digest: nil) == .trusted)
        #expect(ItemAccess(anyApplication: true).verdict(forApplication: "/usr/bin/curl", digest: nil) == .trusted)
        // An entry kept before digests were: the path, whatever its bytes.
        let legacy = ItemAccess(attributes: [ItemAccess.trustedApplicationsKey: .string("/usr/bin/rsync")])
        #expect(legacy.verdict(forApplication: "/usr/bin/rsync", digest: git.digest) == .trusted)
    }

    @Test func trustingAgainReplacesAndRemovingTakesOff() {
        var access = ItemAccess(trustedApplications: [git, notes, git])
        #expect(access.trustedApplications == [notes, git])
        let upgraded = TrustedApplication(name: git.name, digest: String(repeating: "c", count: 64))
        access.trust(upgraded)
        #expect(access.trustedApplications == [notes, upgraded])
        #expect(access.verdict(forApplication: git.name, digest: upgraded.digest) == .trusted)
        let removed = access.remove(applicationNamed: notes.name)
        let removedAgain = access.remove(applicationNamed: notes.name)
        #expect(removed && !removedAgain)
        #expect(access.trustedApplications == [upgraded])
        #expect(
            !TrustedApplication.isStorable("a\tb") && !TrustedApplication.isStorable("")
                && TrustedApplication.isStorable("/a b"))
    }
}
