import Foundation
import Glibc
import Pinentry
import Posix
import Testing

@testable import KeychainRegistry

/// With no display known, where a request's prompt can show depends on the systemd user manager's variables,
/// read again for the request (`systemctl --user show-environment`). A prompt is asked for by two requests of
/// its client (`Unlock`, then `Prompt`): one read serves both.
@Suite struct SystemdSessionReadTests {
    @Test func theTwoRequestsOfAPromptReadTheSystemdUserManagerOnce() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("systemd-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let asked = directory + "/asked"
        let systemctl = directory + "/systemctl"
        try """
        #!/bin/sh
        [ "$1 $2" = "--user show-environment" ] || exit 1
        echo run >> '\(asked)'
        printf 'HOME=/nowhere\\n'
        """.write(toFile: systemctl, atomically: true, encoding: .utf8)
        chmod(systemctl, 0o755)
        let clock = ManualClock()
        // A pinentry the session chooses (no `--pinentry`): prompts show where their caller is.
        let pinentry = Pinentry.fromEnvironment(["PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": directory])
        let registry = try KeychainRegistry(
            configuration: RegistryConfiguration(
                keychainDirectory: directory + "/keychains", pinentry: pinentry, kdf: .insecureForTesting,
                systemctl: systemctl, clock: clock.clock),
            loginPassword: try SecretBytes(copying: Array("systemd password".utf8)))
        defer { registry.shutDown() }
        #expect(registry.choosesPromptPlace)
        func runs() -> Int {
            ((try? String(contentsOfFile: asked, encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        // Read at start, before the first request.
        registry.settle(seconds: 10)
        #expect(runs() == 1)
        #expect(registry.displayIsKnown == false)
        // Later: a request reads again (a display may have been exported since), its prompt's second request not.
        clock.advance(by: .seconds(5))
        #expect(registry.displayIsKnown == false)
        registry.settle(seconds: 10)
        #expect(registry.displayIsKnown == false)
        registry.settle(seconds: 10)
        #expect(runs() == 2)
        // The next prompt, a few seconds on, reads again.
        clock.advance(by: .seconds(5))
        _ = registry.displayIsKnown
        registry.settle(seconds: 10)
        #expect(runs() == 3)
    }
}

extension KeychainRegistry {
    /// Delivers work done off the serving thread until none is left (at most `seconds` of real time).
    func settle(seconds: Double = 30) {
        let deadline = Date().addingTimeInterval(seconds)
        while hasWorkInProgress, Date() < deadline {
            var entry = pollfd(fd: inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            deliverCompletions()
        }
    }
}
