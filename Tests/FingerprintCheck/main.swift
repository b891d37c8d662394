// A test helper: FprintdFingerprints against the fprintd on $DBUS_SYSTEM_BUS_ADDRESS, for
// Tests/Integration/test_fingerprint.py.
//   fingerprint-check digest USER            the enrolled fingers' digest in hex, or "none"
//   fingerprint-check verify USER SECONDS    "touch" once fprintd waits for a finger, then the verdict:
//                                            "matched", "not-matched" or "unavailable: REASON"
//   fingerprint-check present                "yes" when fprintd is on the bus or can be started there, else "no"
import Fingerprint
import Glibc

/// Prints a line and flushes it at once: the test reads "touch" while this process waits.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch (arguments.first, arguments.count) {
case ("digest", 2):
    let digest = FprintdFingerprints().enrolledFingersDigest(user: arguments[1])
    say(digest.map { $0.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() } ?? "none")
case ("verify", 3):
    guard let seconds = Double(arguments[2]) else { exit(2) }
    let reader = FprintdFingerprints(touchRequested: { say("touch") })
    switch reader.verify(user: arguments[1], timeoutSeconds: seconds) {
    case .matched: say("matched")
    case .notMatched: say("not-matched")
    case .unavailable(let reason): say("unavailable: \(reason)")
    }
case ("present", 1):
    say(FprintdFingerprints.serviceIsPresent() ? "yes" : "no")
default:
    say("usage: fingerprint-check digest USER | verify USER SECONDS | present")
    exit(2)
}
