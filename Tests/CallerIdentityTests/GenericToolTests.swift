import Testing

@testable import CallerIdentity

/// Which applications ask for whoever runs them (docs/threat-model.md, "Generic tools").
@Suite struct GenericToolTests {
    static let digest = FileDigest(Array(repeating: 7, count: 32))!

    @Test func keychainCommandsToolsThatRunAnythingAndOrdinaryPrograms() {
        let kinds: [(Application, Application.GenericTool?)] = [
            (.executable(path: "/usr/bin/secret-tool", digest: Self.digest), .keychainCommand),
            (.executable(path: "/usr/local/bin/latchkey", digest: Self.digest), .keychainCommand),
            (
                .script(interpreter: "/usr/bin/python3.11", path: "/usr/bin/keyring", digest: Self.digest),
                .keychainCommand
            ),
            // An interpreter identified as itself runs inline code, standard input or a module.
            (.executable(path: "/usr/bin/python3.11", digest: Self.digest), .runsAnything),
            (.executable(path: "/usr/bin/dash", digest: Self.digest), .runsAnything),
            (.executable(path: "/usr/bin/perl", digest: Self.digest), .runsAnything),
            (.executable(path: "/usr/bin/gdbus", digest: Self.digest), .runsAnything),
            (.executable(path: "/usr/bin/dbus-send", digest: Self.digest), .runsAnything),
            (.executable(path: "/usr/bin/busctl", digest: Self.digest), .runsAnything),
            (.executable(path: "/usr/bin/git", digest: Self.digest), nil),
            (.script(interpreter: "/usr/bin/python3", path: "/home/me/sync.py", digest: Self.digest), nil),
            (.flatpak(appID: "org.example.App"), nil),
        ]
        for (application, kind) in kinds {
            #expect(application.genericTool == kind, "\(application)")
        }
    }
}
