import AccessControl
import DBus
import Foundation
import Glibc
import Posix
import Testing

@testable import SecretService

/// What the access check adds to a secret lookup once the caller is cached (docs/benchmarks.md, "Access
/// check"): not a test of speed (nothing is asserted about time), a benchmark run on demand with
/// `LATCHKEY_BENCH=1 swift test --filter AccessCheckBenchmark`; it prints its figures.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["LATCHKEY_BENCH"] != nil))
struct AccessCheckBenchmark {
    static let rounds = 5
    static let calls = 2_000

    /// `GetSecret` served in-process by a daemon that identifies callers (the caller, this process, made the
    /// item: the check runs and passes) and by one that does not (no check); and the check alone.
    @Test func getSecretWithAndWithoutTheAccessCheck() throws {
        let checked = try InProcessDaemon(identifiesCallers: true)
        let checkedSession = try CallerAccessTests.introduce(":1.7", to: checked)
        let checkedPath = try checked.createItem(
            session: checkedSession, attributes: ["service": "bench"], secret: "s3cret")
        let unchecked = try InProcessDaemon(identifiesCallers: false)
        let uncheckedSession = try unchecked.openPlainSession()
        let uncheckedPath = try unchecked.createItem(
            session: uncheckedSession, attributes: ["service": "bench"], secret: "s3cret")
        guard case .item(let held, let reference)? = checked.daemon.resolve(checkedPath) else {
            Issue.record("no item")
            return
        }
        let target = SecretServiceDaemon.SecretTarget(held: held, reference: reference)
        #expect(checked.daemon.decide(.read, target, caller: ":1.7") == .allowed, "the creator is trusted")

        let checkedCall = try checked.message(
            checkedPath, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(checkedSession)])
        let uncheckedCall = try unchecked.message(
            uncheckedPath, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(uncheckedSession)])
        /// One call's time in µs.
        func once(_ inproc: InProcessDaemon, _ message: DBusMessage) -> Double {
            let start = MonotonicClock.nanoseconds()
            let sent = inproc.daemon.handle(message)
            let elapsed = MonotonicClock.nanoseconds() - start
            precondition(sent.first?.kind == .methodReturn)
            return Double(elapsed) / 1_000
        }
        let attributes = try #require(try held.item(reference, returning: .attributes)?.attributes)
        let read = SecretServiceDaemon.SecretTarget(held: held, reference: reference, attributes: attributes)
        func checkAlone() -> Double {
            let start = MonotonicClock.nanoseconds()
            for _ in 0..<Self.calls { precondition(checked.daemon.decide(.read, read, caller: ":1.7") == .allowed) }
            return Double(MonotonicClock.nanoseconds() - start) / Double(Self.calls) / 1_000
        }
        guard case .identified(let caller)? = checked.daemon.callers?.entries[":1.7"],
            let callers = checked.daemon.callers
        else {
            Issue.record("not identified")
            return
        }
        func parts() -> (liveness: Double, attributes: Double) {
            var start = MonotonicClock.nanoseconds()
            for _ in 0..<Self.calls { precondition(callers.runsAsIdentified(caller, sender: ":1.7")) }
            let liveness = Double(MonotonicClock.nanoseconds() - start) / Double(Self.calls) / 1_000
            start = MonotonicClock.nanoseconds()
            for _ in 0..<Self.calls { precondition((try? held.item(reference, returning: .attributes)) != nil) }
            return (liveness, Double(MonotonicClock.nanoseconds() - start) / Double(Self.calls) / 1_000)
        }
        let measured = parts()
        print(
            "the re-check of the caller (pidfd poll, stat of /proc/PID/exe) \(measured.liveness) µs, the item's attributes read \(measured.attributes) µs"
        )
        // Calls alternate between the two daemons, so that the machine's load falls on both alike.
        var with: [Double] = []
        var without: [Double] = []
        var differences: [Double] = []
        for _ in 0..<Self.calls * Self.rounds {
            let checkedTime = once(checked, checkedCall)
            let uncheckedTime = once(unchecked, uncheckedCall)
            with.append(checkedTime)
            without.append(uncheckedTime)
            differences.append(checkedTime - uncheckedTime)
        }
        var alone: [Double] = []
        for _ in 0..<Self.rounds { alone.append(checkAlone()) }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        func format(_ value: Double) -> String { String(format: "%.1f", value) }
        print("GetSecret with the check, µs per call, median of \(with.count): \(format(median(with)))")
        print("GetSecret without the check, µs per call, median of \(without.count): \(format(median(without)))")
        print("median of the paired differences (with − without): \(format(median(differences))) µs")
        print(
            "the check alone (attributes already read, as GetSecret has them), µs per call, rounds of \(Self.calls):"
                + " \(alone.map(format).joined(separator: " ")); median \(format(median(alone)))")
    }
}
