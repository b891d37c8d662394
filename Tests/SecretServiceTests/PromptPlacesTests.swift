import Foundation
import Glibc
import KeychainCore
import Pinentry
import Posix
import Testing

@testable import KeychainRegistry

/// The prompt queue is one queue per place (the desktop, each terminal): prompts of different places never
/// wait for each other, and within a place a prompt nobody answers holds the other clients' prompts for
/// ``PromptQueue/holdLimit`` at most, then the next shows beside it on the desktop (a few at most) or after it
/// on a terminal (docs/robustness.md, "Prompts in several places"). The registry's clock is a manual one, the
/// pinentry the scripted one.
@Suite struct PromptPlacesTests {
    typealias Fixture = RegistryClockTests.Fixture

    /// What became of one request.
    final class Outcome {
        var accepted: Bool?
    }

    /// Queues a yes/no question for `client` in the place `place`, its description `name` (to tell the
    /// pinentries apart in the log), bounded like an access prompt (20 s); `satisfied` says whether it was
    /// answered elsewhere, `answered` runs when its own OK is applied.
    @discardableResult
    static func ask(
        _ registry: KeychainRegistry, _ name: String, client: String?, place: String = PromptQueue.desktop,
        sharingKey: String? = nil, satisfied: @escaping () -> Bool = { false }, answered: @escaping () -> Void = {}
    ) -> Outcome {
        let outcome = Outcome()
        let request = PinentryRequest(
            title: "Test", description: name, prompt: "", okLabel: "OK", cancelLabel: "Cancel")
        var dialog = PromptDialog<Bool>(
            sharingKey: sharingKey,
            question: { pinentry, cancellation in
                switch try? pinentry.confirm(request, cancellation: cancellation) {
                case true?: .answered(true)
                // Cancel is the person's Deny, as on an access prompt.
                case false? where !cancellation.isCancelled: .declined
                default: .unanswered
                }
            },
            apply: { _ in answered() }, isSatisfied: satisfied)
        dialog.client = client.map { PromptClient(key: $0, name: $0) }
        dialog.timeLimit = .seconds(20)
        let ticket = registry.newPromptTicket()
        ticket.queueKey = place
        _ = registry.enqueuePrompt(dialog, ticket: ticket) { outcome.accepted = $0 }
        return outcome
    }

    /// The descriptions of the prompts whose pinentry got as far as `CONFIRM`, in order.
    static func confirmed(_ fixture: Fixture) -> [String] {
        let log = (try? String(contentsOfFile: fixture.pinentryLog, encoding: .utf8)) ?? ""
        var description: [Int: String] = [:]
        var shown: [String] = []
        for line in log.split(separator: "\n") {
            guard let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let pid = entry["pid"] as? Int, let command = entry["command"] as? String
            else { continue }
            if command == "SETDESC" { description[pid] = entry["argument"] as? String }
            if command == "CONFIRM" { shown.append(description[pid] ?? "?") }
        }
        return shown
    }

    /// How many answers the scripted pinentries took (so that the next pinentry takes the next one).
    static func taken(_ fixture: Fixture) -> Int {
        let position = try? String(contentsOfFile: fixture.directory + "/answers.pos", encoding: .utf8)
        return Int(position?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
    }

    /// Lets the prompts' 20 s time limits pass, then waits until the queue is empty and every pinentry reaped.
    static func endByTimeLimits(_ fixture: Fixture, _ clock: ManualClock) {
        clock.advance(by: .seconds(20))
        _ = fixture.registry.runTimers()
        fixture.deliver { fixture.registry.promptCount == 0 && !fixture.registry.hasWorkInProgress }
    }

    /// Waits (real time, `seconds` at most) until `count` pinentries asked, then a moment longer to see that no
    /// other does.
    static func settle(_ fixture: Fixture, shown count: Int, seconds: Double = 20) {
        fixture.deliver(seconds: seconds) { confirmed(fixture).count >= count && taken(fixture) >= count }
        fixture.deliver(seconds: 0.3) { false }
    }

    /// The case: client a's prompt hangs; client b's unrelated prompt shows beside it once a has shown
    /// for the hold limit (not when a's 20 s are over), and is answered while a still shows.
    @Test func aHungPromptHoldsAnotherClientsPromptForTheHoldLimitOnly() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "ok"])
        let registry = fixture.registry
        let first = Self.ask(registry, "a's question", client: "a")
        let second = Self.ask(registry, "b's question", client: "b")
        Self.settle(fixture, shown: 1)
        #expect(Self.confirmed(fixture) == ["a's question"])

        clock.advance(by: .milliseconds(2_999))
        #expect(registry.runTimers() == 1, "b's turn is a millisecond away")
        Self.settle(fixture, shown: 2, seconds: 1)
        #expect(Self.confirmed(fixture) == ["a's question"], "held for the hold limit")
        clock.advance(by: .milliseconds(1))
        _ = registry.runTimers()
        fixture.deliver { second.accepted != nil }
        #expect(Self.confirmed(fixture) == ["a's question", "b's question"])
        #expect(second.accepted == true, "b answered while a's pinentry still shows")
        #expect(first.accepted == nil)

        clock.advance(by: .seconds(17))
        _ = registry.runTimers()
        #expect(first.accepted == false, "a ends at its own time limit")
        fixture.deliver { registry.promptCount == 0 && !registry.hasWorkInProgress }
        #expect(registry.promptCount == 0)
    }

    /// An application's prompts show one at a time, but the daemon's own (unlocks, changes: asked for whichever
    /// client) are held by each other for the hold limit only, like different applications' prompts.
    @Test func theDaemonsOwnPromptsAreHeldByEachOtherForTheHoldLimitOnly() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "hang", "ok"])
        let registry = fixture.registry
        let outcomes = [
            Self.ask(registry, "a1", client: "a"), Self.ask(registry, "a2", client: "a"),
            Self.ask(registry, "unlock X", client: nil),
        ]
        let second = Self.ask(registry, "unlock Y", client: nil)
        Self.settle(fixture, shown: 1)
        clock.advance(by: .seconds(3))
        _ = registry.runTimers()
        Self.settle(fixture, shown: 2)
        clock.advance(by: .seconds(3))
        _ = registry.runTimers()
        fixture.deliver { second.accepted != nil }
        #expect(Self.confirmed(fixture) == ["a1", "unlock X", "unlock Y"], "a2 waits for a1")
        #expect(second.accepted == true)
        Self.endByTimeLimits(fixture, clock)
        #expect(outcomes.allSatisfy { $0.accepted == false })
    }

    /// Prompts of different places do not wait for each other: with the desktop's prompt hanging, a
    /// terminal's prompt and another terminal's show at once (no time passes on the registry's clock).
    @Test func promptsOfDifferentPlacesDoNotWaitForEachOther() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "ok", "ok"])
        let registry = fixture.registry
        let desktop = Self.ask(registry, "on the desktop", client: "a")
        Self.settle(fixture, shown: 1)
        let terminal = Self.ask(registry, "on terminal 1", client: "a", place: "terminal:1")
        fixture.deliver { terminal.accepted != nil }
        let other = Self.ask(registry, "on terminal 2", client: "b", place: "terminal:2")
        fixture.deliver { other.accepted != nil }
        #expect(terminal.accepted == true)
        #expect(other.accepted == true)
        #expect(desktop.accepted == nil)
        #expect(Self.confirmed(fixture) == ["on the desktop", "on terminal 1", "on terminal 2"])
        Self.endByTimeLimits(fixture, clock)
        #expect(desktop.accepted == false)
    }

    /// A terminal shows one prompt at a time: another client's prompt there waits for the hung one however long
    /// it shows, and shows once the hung one's time limit ended it.
    @Test func aTerminalShowsOnePromptAtATime() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "ok"])
        let registry = fixture.registry
        let first = Self.ask(registry, "a's question", client: "a", place: "terminal:1")
        let second = Self.ask(registry, "b's question", client: "b", place: "terminal:1")
        Self.settle(fixture, shown: 1)
        clock.advance(by: .milliseconds(19_999))
        #expect(registry.runTimers() == 1, "only a's deadline is due")
        Self.settle(fixture, shown: 2, seconds: 1)
        #expect(Self.confirmed(fixture) == ["a's question"])
        clock.advance(by: .milliseconds(1))
        _ = registry.runTimers()
        fixture.deliver { second.accepted != nil }
        #expect(first.accepted == false)
        #expect(second.accepted == true)
        #expect(Self.confirmed(fixture) == ["a's question", "b's question"])
    }

    /// On the desktop the prompts shown beside each other are capped, and a client's own prompts still show one
    /// at a time: with four clients' prompts hanging (one of them with two), three show, one per client, whatever
    /// time passes before the first time limit.
    @Test func theDesktopShowsAFewPromptsAtOnceOnePerClient() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: Array(repeating: "hang", count: 6))
        let registry = fixture.registry
        let outcomes = [
            Self.ask(registry, "a1", client: "a"), Self.ask(registry, "a2", client: "a"),
            Self.ask(registry, "b1", client: "b"), Self.ask(registry, "c1", client: "c"),
            Self.ask(registry, "d1", client: "d"),
        ]
        for step in 1...6 {
            Self.settle(fixture, shown: min(step, 3))
            clock.advance(by: .seconds(3))
            _ = registry.runTimers()
        }
        Self.settle(fixture, shown: 4, seconds: 1)
        #expect(Self.confirmed(fixture) == ["a1", "b1", "c1"])
        #expect(registry.prompts.showing.count == PromptQueue.desktopShowingLimit)
        #expect(outcomes.allSatisfy { $0.accepted == nil })
        // a1's time limit (20 s) ends it: its slot goes to d, whose turn comes before a's second prompt.
        clock.advance(by: .seconds(2))
        _ = registry.runTimers()
        fixture.deliver { registry.prompts.showing.count == 3 && Self.confirmed(fixture).count == 4 }
        #expect(Self.confirmed(fixture) == ["a1", "b1", "c1", "d1"])
        #expect(outcomes[0].accepted == false)
        // Their time limits end b1, c1 and d1; a2 shows, and its own ends it.
        clock.advance(by: .seconds(20))
        _ = registry.runTimers()
        fixture.deliver { Self.confirmed(fixture).count == 5 }
        #expect(Self.confirmed(fixture).last == "a2")
        Self.endByTimeLimits(fixture, clock)
        #expect(outcomes.allSatisfy { $0.accepted == false })
    }

    /// Deny all is about one place: after a Deny on the desktop, the question counts and denies the client's
    /// questions waiting there, not its questions showing or waiting on a terminal.
    @Test func denyAllDeniesTheClientsQuestionsOfOnePlace() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "cancel", "ok"])
        let registry = fixture.registry
        let onTerminal = Self.ask(registry, "a on terminal 1", client: "a", place: "terminal:1")
        Self.settle(fixture, shown: 1)
        let waitingOnTerminal = Self.ask(registry, "a's second on terminal 1", client: "a", place: "terminal:1")
        let first = Self.ask(registry, "a's first", client: "a")
        let second = Self.ask(registry, "a's second", client: "a")
        fixture.deliver { second.accepted != nil }
        #expect(first.accepted == false)
        #expect(second.accepted == false, "denied with the others")
        let shown = Self.confirmed(fixture)
        #expect(shown.count == 3)
        #expect(shown.last?.contains("has 1 more question waiting") == true, "the terminal's not counted")
        #expect(onTerminal.accepted == nil, "the terminal's question still shows")
        #expect(waitingOnTerminal.accepted == nil, "and the one waiting there still waits")
        clock.advance(by: .seconds(20))
        _ = registry.runTimers()
        fixture.deliver { onTerminal.accepted != nil }
        #expect(onTerminal.accepted == false)
        Self.endByTimeLimits(fixture, clock)
        #expect(waitingOnTerminal.accepted == false)
    }

    /// The same question asked in two places is asked in each (a terminal's request does not join the
    /// desktop's dialog, which its person may not see); the first answer accepted ends the other's prompt and
    /// its request is told it was accepted.
    @Test func aQuestionAnsweredInOnePlaceEndsItsPromptInAnother() throws {
        let clock = ManualClock()
        let fixture = try Fixture(clock: clock, answers: ["hang", "ok"])
        let registry = fixture.registry
        let done = Outcome()
        let desktop = Self.ask(
            registry, "unlock on the desktop", client: "", sharingKey: "unlock", satisfied: { done.accepted == true })
        Self.settle(fixture, shown: 1)
        let terminal = Self.ask(
            registry, "unlock on terminal 1", client: "", place: "terminal:1", sharingKey: "unlock",
            satisfied: { done.accepted == true }, answered: { done.accepted = true })
        fixture.deliver { desktop.accepted != nil }
        #expect(terminal.accepted == true)
        #expect(desktop.accepted == true, "ended as answered on the terminal, before its own time limit")
        #expect(Self.confirmed(fixture) == ["unlock on the desktop", "unlock on terminal 1"])
        fixture.deliver { registry.promptCount == 0 && !registry.hasWorkInProgress }
        #expect(registry.promptCount == 0, "the desktop's pinentry was ended")
    }
}
