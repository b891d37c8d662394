// swift-tools-version: 5.4
// Tools version 5.4 on purpose: from 5.5 on, SwiftPM renames an executable's `main` to `<module>_main` (so tests
// can link executables) and links with `--defsym main=<module>_main`; a libFuzzer harness has no `main` of its
// own (libFuzzer's is linked in), so that link fails. The main package keeps its own tools version.
import PackageDescription

/// The libFuzzer harnesses of docs/robustness.md ("Fuzzing"). Build and run them with `scripts/fuzz`, which passes
/// `-sanitize=fuzzer,address`: without it they do not link. Each harness `@testable import`s the modules of the
/// main package's `LatchkeyFuzzSurface` product, whose `package` symbols another package cannot otherwise reach.
let harnesses = [
    "fuzz-keychain-file", "fuzz-control-frames", "fuzz-assuan-replies", "fuzz-dh-session", "fuzz-dbus-dispatch",
    "fuzz-gnome-keyring", "fuzz-key-slots", "fuzz-kwallet", "fuzz-age", "fuzz-exchange",
]

let package = Package(
    name: "LatchkeyFuzz",
    dependencies: [.package(name: "Latchkey", path: "..")],
    targets: [
        // Reading a fuzz input as fields, and writing seed corpora.
        .target(name: "FuzzSupport")
    ]
        + harnesses.map { name in
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzSupport",
                    .product(name: "LatchkeyFuzzSurface", package: "Latchkey"),
                    .product(name: "KeychainStore", package: "Latchkey"),
                ],
                swiftSettings: [.unsafeFlags(["-parse-as-library"])])
        }
)
