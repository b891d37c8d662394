import AccessControl
import CallerIdentity
import KeychainCore
import KeychainRegistry
import Pinentry
import Testing

/// The access decision as a value (AccessRules): every outcome for every kind of caller, without a bus, a
/// keychain file or a prompt. Each test fails if the rule it names breaks.
struct AccessRulesTests {
    static let rules = AccessRules()
    static let digest = FileDigest([UInt8](repeating: 0xab, count: 32))!
    static let otherDigest = FileDigest([UInt8](repeating: 0xcd, count: 32))!
    static let mail = Application.executable(path: "/usr/bin/mail-client", digest: digest)
    static let script = Application.script(interpreter: "/usr/bin/python3.11", path: "/home/me/sync.py", digest: digest)
    static let flatpak = Application.flatpak(appID: "org.example.App")
    static let secretTool = Application.executable(path: "/usr/bin/secret-tool", digest: digest)
    static let gdbus = Application.executable(path: "/usr/bin/gdbus", digest: digest)
    static let python = Application.executable(path: "/usr/bin/python3.11", digest: digest)
    static let gone = UnidentifiedCaller.changedSinceConnecting(pid: 4242)

    /// How many times the rules read the item's attributes and its keychain's policy.
    final class Reads {
        var attributes = 0
        var policy = 0
    }

    /// An item labelled "Mail" in the keychain "login" trusting `trusted` (name and digest), under `policy`.
    static func item(
        _ kind: AccessKind = .read, trusting trusted: [Application] = [], digest: FileDigest? = nil,
        policy: KeychainAccessPolicy = .prompt, reads: Reads = Reads()
    ) -> AccessedItem {
        var attributes: ItemAttributes = [.label: .string("Mail")]
        let list = ItemAccess(
            trustedApplications: trusted.map {
                TrustedApplication(name: $0.name, digest: (digest ?? $0.digest)?.description)
            })
        attributes.merge(list.attributes) { $1 }
        return AccessedItem(
            kind, keychain: "login",
            attributes: { () throws(KeychainError) in
                reads.attributes += 1
                return attributes
            },
            policy: { () throws(KeychainError) in
                reads.policy += 1
                return policy
            })
    }

    static func question(_ decision: AccessDecision) -> AccessDecision.Question? {
        guard case .ask(let question) = decision else { return nil }
        return question
    }

    // MARK: Items

    @Test(arguments: [AccessKind.read, .change, .delete])
    func aTrustedApplicationIsAllowedWithoutTheKeychainPolicyBeingRead(kind: AccessKind) {
        for application in [Self.mail, Self.script, Self.flatpak] {
            let reads = Reads()
            let decision = Self.rules.decide(
                item: Self.item(kind, trusting: [application], reads: reads), caller: .application(application))
            #expect(decision == .allowed, "\(application) is on the list")
            #expect(reads.policy == 0, "a trusted use pays nothing for the policy")
        }
    }

    @Test func anUntrustedApplicationIsAskedWithAlwaysAllowToRead() throws {
        let reads = Reads()
        let decision = Self.rules.decide(
            item: Self.item(trusting: [Self.script], reads: reads), caller: .application(Self.mail))
        let question = try #require(Self.question(decision))
        #expect(
            question
                == AccessDecision.Question(
                    .read, asker: .application(Self.mail), label: "Mail", keychain: "login", changed: false,
                    offersAlways: true))
        #expect(question.warnings.isEmpty)
        #expect(reads.policy == 1, "the policy is read for an untrusted caller")
    }

    @Test func anApplicationWhoseFileChangedIsAskedAndWarned() throws {
        let decision = Self.rules.decide(
            item: Self.item(trusting: [Self.mail], digest: Self.otherDigest), caller: .application(Self.mail))
        let question = try #require(Self.question(decision))
        #expect(question.changed)
        #expect(question.offersAlways, "Always allow trusts the new file")
        #expect(question.warnings == [.changed])
    }

    @Test(arguments: [AccessKind.change, .delete])
    func aChangeOrDeletionIsAskedWithoutAlwaysAllow(kind: AccessKind) throws {
        let decision = Self.rules.decide(item: Self.item(kind), caller: .application(Self.mail))
        let question = try #require(Self.question(decision))
        #expect(question.kind == kind)
        #expect(!question.offersAlways, "trust to change would hand the secret over too")
    }

    @Test(arguments: [AccessKind.read, .change, .delete])
    func allowAllAllowsEveryCaller(kind: AccessKind) {
        for caller in [Requester.application(Self.mail), .application(Self.gdbus), .unidentified(Self.gone)] {
            #expect(Self.rules.decide(item: Self.item(kind, policy: .allowAll), caller: caller) == .allowed)
        }
    }

    @Test func anUnidentifiedCallerIsAskedAboutAsAnUnknownProgramWithoutAlwaysAllow() throws {
        let decision = Self.rules.decide(item: Self.item(), caller: .unidentified(Self.gone))
        let question = try #require(Self.question(decision))
        #expect(question.asker == .unidentified(Self.gone))
        #expect(!question.offersAlways, "there is no name to trust")
        #expect(
            question.warnings == [
                .unidentified(reason: "process 4242 ended or started another program since it connected")
            ])
        let failed = UnidentifiedCaller.failed(.otherUser(uid: 7))
        #expect(failed.description == "the process belongs to uid 7, not to this user")
    }

    @Test func aSandboxedApplicationIsAskedAboutByItsAppID() throws {
        let decision = Self.rules.decide(
            item: Self.item(trusting: [Self.mail]), caller: .application(Self.flatpak))
        let question = try #require(Self.question(decision))
        #expect(question.offersAlways, "its app id can be trusted for good")
        #expect(question.warnings.isEmpty)
    }

    @Test func aKeychainCommandIsAskedWithANoteAndMayBeAllowedForGood() throws {
        let question = try #require(
            Self.question(Self.rules.decide(item: Self.item(), caller: .application(Self.secretTool))))
        #expect(question.offersAlways, "as macOS allows security(1)")
        #expect(question.warnings == [.keychainCommand])
    }

    @Test func aToolThatRunsAnythingIsNeverOfferedAlwaysAllow() throws {
        for tool in [Self.gdbus, Self.python] {
            let question = try #require(Self.question(Self.rules.decide(item: Self.item(), caller: .application(tool))))
            #expect(!question.offersAlways, "\(tool) runs whatever its command line says")
            #expect(question.warnings == [.runsAnything])
        }
    }

    @Test func anApplicationWhoseNameNoListCanHoldIsNotOfferedAlwaysAllow() throws {
        let odd = Application.executable(path: "/tmp/a\tb", digest: Self.digest)
        let question = try #require(Self.question(Self.rules.decide(item: Self.item(), caller: .application(odd))))
        #expect(!question.offersAlways)
    }

    @Test func withoutIdentifiedCallersEveryCallerIsAllowedWithoutAnyRead() {
        let reads = Reads()
        let decision = AccessRules(identifiesCallers: false).decide(
            item: Self.item(.delete, reads: reads), caller: .unidentified(.unknown))
        #expect(decision == .allowed)
        #expect(reads.attributes == 0 && reads.policy == 0)
    }

    @Test func anItemThatCannotBeReadIsLeftToTheRequestsOwnRead() {
        let item = AccessedItem(
            .read, keychain: "login",
            attributes: { () throws(KeychainError) in throw KeychainError(.itemNotFound, "gone") },
            policy: { () throws(KeychainError) in .prompt })
        #expect(Self.rules.decide(item: item, caller: .application(Self.mail)) == .allowed)
    }

    @Test func aPolicyThatCannotBeReadCountsAsPrompt() throws {
        let item = AccessedItem(
            .read, keychain: "login", attributes: { () throws(KeychainError) in [:] },
            policy: { () throws(KeychainError) in throw KeychainError(.interactionNotAllowed, "locked") })
        #expect(Self.question(Self.rules.decide(item: item, caller: .application(Self.mail))) != nil)
    }

    // MARK: Actions

    @Test(arguments: CallerAction.allCases)
    func anUnsandboxedIdentifiedProgramMayDoEveryAction(action: CallerAction) {
        #expect(Self.rules.decide(action: action, caller: .application(Self.mail)) == .allowed)
        #expect(Self.rules.decide(action: action, caller: .application(Self.script)) == .allowed)
        #expect(
            AccessRules(identifiesCallers: false).decide(action: action, caller: .unidentified(.unknown)) == .allowed)
    }

    @Test(arguments: CallerAction.allCases.filter { $0 != .createCollection })
    func aSandboxedOrUnidentifiedCallerIsRefusedThePersonsActions(action: CallerAction) {
        let sandboxed = Self.rules.decide(action: action, caller: .application(Self.flatpak))
        #expect(sandboxed == .denied(.sandboxed(appID: "org.example.App")))
        let unknown = Self.rules.decide(action: action, caller: .unidentified(.unknown))
        #expect(unknown == .denied(.unidentified(.unknown)))
        #expect(
            AccessDecision.Refusal.sandboxed(appID: "org.example.App").explanation(of: action)
                == "a Flatpak application (org.example.App) cannot \(action.phrase)")
        #expect(
            AccessDecision.Refusal.unidentified(.unknown).explanation(of: action)
                == "the caller could not be identified: it cannot \(action.phrase)")
    }

    @Test func aSandboxedOrUnidentifiedCallerIsAskedBeforeItMakesACollection() throws {
        for caller in [Requester.application(Self.flatpak), .unidentified(Self.gone)] {
            let question = try #require(Self.question(Self.rules.decide(action: .createCollection, caller: caller)))
            #expect(question.asker == caller)
            #expect(!question.offersAlways)
        }
    }

    // MARK: What the question becomes

    @Test func theWordsOfferAlwaysAllowOnlyWhenTheRulesDo() {
        let read = AccessDecision.Question(
            .read, asker: .application(Self.flatpak), label: "Mail", keychain: "login", offersAlways: true)
        #expect(AccessDecision.Question.words(for: [read])().request.notOKLabel == "Always allow")
        var once = read
        once.offersAlways = false
        #expect(AccessDecision.Question.words(for: [once])().request.notOKLabel == nil)
        var change = once
        change.kind = .change
        var changed = change
        changed.changed = true
        changed.label = "Bank"
        let words = AccessDecision.Question.words(for: [change, changed])()
        #expect(words.request.notOKLabel == nil, "a change is allowed once at most")
        #expect(words.request.description.contains("has CHANGED"), "one item's changed file warns for the prompt")
        #expect(words.request.description.contains("wants to CHANGE “Mail”, “Bank”"))
    }

    @Test func unidentifiedCallersShareOneTurnAndApplicationsHaveTheirOwn() {
        #expect(Requester.unidentified(.unknown).promptClient == Requester.unidentified(Self.gone).promptClient)
        #expect(Requester.application(Self.mail).promptClient != Requester.application(Self.script).promptClient)
        #expect(Requester.application(Self.flatpak).promptClient.key == "application\tflatpak:org.example.App")
    }

    @Test func anItemTrustsItsCreatorUnlessTheCreatorRunsAnything() {
        #expect(ItemAccess.creatorAccess(Self.mail).trustedApplications.map(\.name) == ["/usr/bin/mail-client"])
        #expect(ItemAccess.creatorAccess(Self.gdbus).isEmpty)
        #expect(ItemAccess(trustedApplications: []).isNarrowing(ItemAccess.creatorAccess(Self.mail)))
        #expect(!ItemAccess.creatorAccess(Self.mail).isNarrowing(ItemAccess(trustedApplications: [])))
    }
}
