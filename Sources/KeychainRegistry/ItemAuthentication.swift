import Fingerprint
import Glibc
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import Synchronization

/// How the person's confirmation for a read of items with an access control ended (docs/secitem-semantics.md,
/// "Enforced access control").
package enum ItemAuthenticationOutcome: Sendable, Equatable {
    /// Every item's constraints were met.
    case confirmed
    /// They were not: the status a `SecItem` caller gets (`errSecUserCanceled` for a Refuse,
    /// `errSecAuthFailed` for wrong passwords or a constraint that cannot be met here,
    /// `errSecInteractionNotAllowed` when nobody could be asked) and why, in one line.
    case refused(KeychainStatus, String)
}

/// What one read asks the person for: the constraints of each item, the words of the prompt.
package struct ItemAuthenticationRequest {
    /// The items' constraints, one per item asked about.
    package let constraints: [AccessConstraints]
    /// The items' labels, as the prompt names them.
    package let labels: [String]
    /// The keychain of the items (whose password confirms; the login keychain's unless it has its own).
    package let keychain: HeldKeychain
    /// Who asks, as the prompt names it (the application, or an unidentified caller).
    package let who: String
    /// The caller's reason (`kSecUseOperationPrompt`), shown as its words.
    package let reason: String?
    /// Whose turn the prompt takes in the queue.
    package let client: PromptClient?
    /// The items among them with a password of their own (`applicationPassword`), each asked for its password
    /// once the other constraints were met; their secrets opened for this read go into ``opened``.
    package var ownPasswords: [OwnPasswordRead] = []
    /// The secrets of ``ownPasswords`` opened for this read, by their index there.
    package let opened = OpenedItemSecrets()

    /// A request to confirm the read of items with `constraints` (and `labels`) of `keychain` by `who`.
    package init(
        constraints: [AccessConstraints], labels: [String], keychain: HeldKeychain, who: String, reason: String?,
        client: PromptClient?
    ) {
        self.constraints = constraints
        self.labels = labels
        self.keychain = keychain
        self.who = who
        self.reason = reason
        self.client = client
    }
}

extension KeychainRegistry {
    /// Now, in nanoseconds on the registry's clock (``RegistryClock``).
    package var now: Int64 { configuration.clock.nanoseconds() }

    /// How long a confirmation holds for the same caller (its bus connection) and the same item: reads of that
    /// item by that connection within it are not asked again, as an `LAContext` with
    /// `touchIDAuthenticationAllowableReuseDuration` set. Short: long enough for a program that reads an item
    /// twice in a row (a search, then the data), too short to be worth a program's waiting for.
    package static let confirmationReuse: Duration = .seconds(10)

    /// Asks the person to meet the constraints of `request`'s items before their secrets are handed over: a
    /// finger on the reader for the biometry flags, the keychain password for `userPresence` and
    /// `devicePasscode` (typed into the prompt of the request's place, three tries, each wrong one counted
    /// under the wrong-password limit), `.or` and `.and` combined as Apple does. The fingerprint reader is
    /// asked on a thread of its own (fprintd is a bus away). `completion` runs on the serving thread; the
    /// ticket (nil when no prompt was queued) is withdrawn when the client leaves.
    package func confirmRead(
        _ request: ItemAuthenticationRequest, ticket: @escaping (PromptTicket) -> Void = { _ in },
        completion finished: @escaping (ItemAuthenticationOutcome) -> Void
    ) {
        // The place of the request, kept for what is asked after the fingerprint stage (the password of `.or`)
        // and after the password (the items' own passwords), when the request is no longer being served.
        let placeOfRequest = promptPlaceOfRequest
        // The items' own passwords, once the other constraints were met (ItemPasswords.swift).
        let completion = { [self] (outcome: ItemAuthenticationOutcome) in
            guard case .confirmed = outcome, !request.ownPasswords.isEmpty else { return finished(outcome) }
            servingFrom(placeOfRequest) { askItemPasswords(request, ticket: ticket, completion: finished) }
        }
        let plans = request.constraints.map(\.factors)
        let wantsFingers = plans.contains { plan in
            plan.needed.contains { if case .fingerprint = $0 { true } else { false } }
        }
        let needPassword = { [self] (ok: Bool) in
            guard ok else { return }
            servingFrom(placeOfRequest) { ticket(askPasswordToRead(request, completion: completion)) }
        }
        guard wantsFingers else {
            // No finger asked for: the password (or a constraint no machine here meets).
            switch Self.decideWithoutFingers(plans) {
            case .met: completion(.confirmed)
            case .password: needPassword(true)
            case .refused(let why): completion(.refused(.authFailed, why))
            }
            return
        }
        let reader = configuration.fingerprints
        Self.log(
            "\(PromptText.field(request.who)) reads \(request.labels.count) item(s) that ask for a fingerprint:"
                + " asking fprintd (up to \(Self.fingerprintTimeoutSeconds) s for a finger)")
        let notice = FingerprintNotice(
            request, place: choosesPromptPlace ? placeOfRequest?() : nil, seconds: Self.fingerprintTimeoutSeconds)
        offLoop(
            onOwnThread: true,
            {
                Self.fingerprintStage(
                    plans, reader: reader, user: Self.userName(), touchRequested: { notice.tell() })
            },
            then: { (decision: FactorDecision) in
                switch decision {
                case .met: completion(.confirmed)
                case .password: needPassword(true)
                case .refused(let why):
                    Self.log("the read of \(request.labels.count) item(s) is refused: \(why)")
                    completion(.refused(.authFailed, why))
                }
            })
    }

    /// Runs `body` with `place` as the place of the request being served, unless a request is being served now.
    private func servingFrom(_ place: (() -> PromptPlace?)?, _ body: () -> Void) {
        let outer = promptPlaceOfRequest
        if outer == nil { promptPlaceOfRequest = place }
        defer { if outer == nil { promptPlaceOfRequest = nil } }
        body()
    }

    /// How long a read waits for the person's finger on the reader (fprintd's whole check: claim, verify, release).
    package static let fingerprintTimeoutSeconds = 20

    /// What is left to do after the factors that need no prompt were looked at.
    enum FactorDecision: Sendable, Equatable {
        /// Every item's constraints are met.
        case met
        /// The keychain password is still to be typed.
        case password
        /// A constraint cannot be met: why.
        case refused(String)
    }

    /// The decision for items none of which asks for a finger.
    static func decideWithoutFingers(_ plans: [(needed: [AccessConstraints.Factor], anyOne: Bool)]) -> FactorDecision {
        decide(plans) { _ in .unavailable("no finger was asked for") }
    }

    /// Checks the fingers (on its own thread): the enrolled fingers' digest, then one verify when some item can
    /// take a finger; then the decision.
    static func fingerprintStage(
        _ plans: [(needed: [AccessConstraints.Factor], anyOne: Bool)], reader: any FingerprintChecking, user: String,
        touchRequested: @escaping @Sendable () -> Void = {}
    ) -> FactorDecision {
        let enrolled = reader.enrolledFingersDigest(user: user)
        func usable(_ digest: [UInt8]?) -> FingerCheck {
            guard let enrolled else { return .unavailable("no fingerprint reader, or no finger enrolled") }
            if let digest, digest != enrolled {
                return .unavailable("the enrolled fingers changed since the item's access control was set")
            }
            return .usable
        }
        var verdict: FingerprintVerdict?
        return decide(plans) { digest in
            let check = usable(digest)
            guard case .usable = check else { return check }
            if verdict == nil {
                let answer = reader.verify(
                    user: user, timeoutSeconds: Double(fingerprintTimeoutSeconds), touchRequested: touchRequested)
                verdict = answer
                switch answer {
                case .matched: log("the fingerprint check matched")
                case .notMatched: log("the fingerprint check did not match")
                case .unavailable(let reason): log("no fingerprint check: \(reason)")
                }
            }
            switch verdict {
            case .matched?: return .matched
            case .notMatched?: return .unavailable("the finger did not match")
            case .unavailable(let reason)?: return .unavailable(reason)
            case nil: return .unavailable("no fingerprint check")
            }
        }
    }

    /// What a finger factor came to.
    enum FingerCheck {
        case usable, matched
        case unavailable(String)
    }

    /// Combines every item's factors: `.or` met by any one (a finger that matched, else the password when it is
    /// one of them), otherwise every one (Apple's default for several constraints, and `.and`). `finger` checks a
    /// finger factor (its recorded digest) and answers `.matched` or why not.
    private static func decide(
        _ plans: [(needed: [AccessConstraints.Factor], anyOne: Bool)], finger: ([UInt8]?) -> FingerCheck
    ) -> FactorDecision {
        var password = false
        for plan in plans where !plan.needed.isEmpty {
            var why: [String] = []
            var metByFinger = false
            var hasPassword = false
            for factor in plan.needed {
                switch factor {
                case .password: hasPassword = true
                case .companion: why.append("there is no paired watch or companion device on Linux")
                case .fingerprint(let digest):
                    switch finger(digest) {
                    case .matched, .usable: metByFinger = true
                    case .unavailable(let reason): why.append(reason)
                    }
                }
            }
            if plan.anyOne {
                if metByFinger { continue }
                guard hasPassword else { return .refused(why.first ?? "no constraint can be met") }
                password = true
            } else {
                if let reason = why.first { return .refused(reason) }
                if hasPassword { password = true }
            }
        }
        return password ? .password : .met
    }

    /// The user's login name, for the fingerprint reader.
    package static func userName() -> String {
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "" }
        return String(cString: name)
    }

    /// The prompt's description: who asks for which items, the caller's reason marked as its own words, and
    /// what to type. Every field is one line of ``PromptText/field(_:bytes:)`` (the reason cut to 160 bytes).
    static func confirmationText(_ request: ItemAuthenticationRequest, whose: String) -> String {
        var text =
            "\(PromptText.field(request.who))\nwants the secret of \(AccessQuestion.itemList(request.labels))"
            + "\nin the keychain “\(PromptText.field(request.keychain.label, bytes: 100))”,"
            + " which asks for your confirmation at each read."
        if let reason = request.reason, !reason.isEmpty {
            let words = PromptText.field(reason, bytes: 160)
            text += "\n\nThe application says (its own words, not Latchkey's): “\(words)”"
        }
        return text + "\n\nType \(whose) to allow this read, or cancel."
    }

    /// The password prompt of ``confirmRead(_:ticket:completion:)``.
    private func askPasswordToRead(
        _ request: ItemAuthenticationRequest, completion: @escaping (ItemAuthenticationOutcome) -> Void
    ) -> PromptTicket {
        guard let check = terminalPasswordCheck(for: request.keychain) else {
            completion(.refused(.authFailed, "there is no keychain password to confirm with"))
            return newPromptTicket()
        }
        let prompt = PinentryRequest(
            title: "Keychain Access: confirm", description: Self.confirmationText(request, whose: check.whose),
            prompt: "Password:", okLabel: "Allow", cancelLabel: "Refuse")
        let record = ConfirmationRecord()
        var dialog = PromptDialog<Void>(
            sharingKey: nil, tries: 3, retryMessage: "The password was not correct. Try again.",
            ask: Self.recordedAsk(prompt, record, asking: "the confirmation of a read"),
            attempt: { typed in check.check(typed) }, apply: { _ in }, isSatisfied: { false })
        dialog.bound(for: request.client, recording: record)
        return enqueuePrompt(dialog) { accepted in
            guard !accepted else { return completion(.confirmed) }
            completion(record.outcome)
        }
    }

    /// The `ask` of a password dialog of a read: `prompt` with the error shown, within the access prompts' bound;
    /// `record` notes a password typed, or why nobody could be asked (said in the log, `asking` naming what).
    static func recordedAsk(_ prompt: PinentryRequest, _ record: ConfirmationRecord, asking: String)
        -> @Sendable (Pinentry, String?, PinentryCancellation) -> [SharedSecret]?
    {
        { pinentry, error, cancellation in
            let bounded = pinentry.bounded(to: Self.accessPromptTimeout)
            var asked = prompt
            asked.error = error
            do throws(PinentryError) {
                switch try bounded.askPassword(asked, cancellation: cancellation) {
                case .password(let typed):
                    record.note(.typed)
                    return [typed]
                case .cancelled: return nil
                }
            } catch {
                record.note(.failed(error.description))
                Self.log("no way to ask for \(asking): \(error.description); refused")
                return nil
            }
        }
    }
}

extension PromptDialog {
    /// Asked for `client`, within the access prompts' time bound; `record` notes the bound passing or a prompt
    /// that could not be shown (nobody could be asked).
    mutating func bound(for client: PromptClient?, recording record: ConfirmationRecord) {
        self.client = client
        timeLimit = KeychainRegistry.accessPromptTimeout
        expire = { record.note(.failed(KeychainRegistry.unansweredWithin(KeychainRegistry.accessPromptTimeout))) }
        ended = { ending in
            if case .cannotShow(let error) = ending { record.note(.failed(error.description)) }
        }
    }
}

/// What happened in a confirmation's prompt, for the status of a refusal (filled in on the prompt's thread).
final class ConfirmationRecord: Sendable {
    private let state = Mutex<(typed: Bool, failure: String?)>((false, nil))

    func note(_ event: TerminalAnswerNote) {
        state.withLock { state in
            switch event {
            case .typed: state.typed = true
            case .failed(let reason): if state.failure == nil { state.failure = reason }
            case .cancelled: break
            }
        }
    }

    /// Why the prompt ended unconfirmed: no way to ask, wrong passwords, or a Refuse.
    var outcome: ItemAuthenticationOutcome {
        state.withLock { state in
            if let failure = state.failure, !state.typed {
                return .refused(.interactionNotAllowed, "nobody could be asked for the confirmation (\(failure))")
            }
            if state.typed { return .refused(.authFailed, "the password was not confirmed") }
            return .refused(.userCanceled, "the person refused")
        }
    }
}
