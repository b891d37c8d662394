import DBus
import Foundation
import Glibc
import KeychainCore
import Testing

@testable import SecretService

/// Prompts show where the desktop session is: with the variables the session handed over, else (when neither
/// they nor the daemon's environment name a display) those of the systemd user manager. The pinentry is the
/// scripted one behaving as a graphical pinentry does without a display (it fails); `systemctl` is a stand-in
/// for the user manager, which does not run here, printing what `systemctl --user show-environment` prints.
@Suite struct SessionEnvironmentPromptTests {
    /// A daemon whose pinentry needs a display, an item trusting another program, and the path of a file the
    /// stand-in `systemctl` (printing `printed`) appends a line to each time it runs.
    static func untrustedItem(answers: [String], systemctlPrints printed: String?) throws
        -> (inproc: InProcessDaemon, session: String, path: String, asked: String)
    {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("systemctl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let asked = scratch.appendingPathComponent("asked").path
        var systemctl: String?
        if let printed {
            let script = scratch.appendingPathComponent("systemctl").path
            let body = """
                #!/bin/sh
                [ "$1 $2" = "--user show-environment" ] || exit 1
                echo "$XDG_RUNTIME_DIR" >> '\(asked)'
                printf '%s' '\(printed)'
                """
            try body.write(toFile: script, atomically: true, encoding: .utf8)
            chmod(script, 0o755)
            systemctl = script
        }
        let inproc = try InProcessDaemon(
            answers: answers, identifiesCallers: true,
            pinentryEnvironment: ["SCRIPTED_PINENTRY_NEEDS_DISPLAY": "1", "XDG_RUNTIME_DIR": scratch.path],
            systemctl: systemctl)
        let session = try CallerAccessTests.introduce(":1.7", to: inproc)
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        try AccessPromptTests.trustOnly(
            TrustedApplication(name: "/usr/bin/another-program", digest: nil), path: path, in: inproc)
        return (inproc, session, path, asked)
    }

    /// The `DISPLAY` each pinentry run was given, in order ("" when it had none).
    static func displays(in inproc: InProcessDaemon) -> [String] {
        guard let text = try? String(contentsOfFile: inproc.pinentryLog, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                entry["command"] as? String == "ENVIRONMENT", let shown = entry["argument"] as? [String: Any]
            else { return nil }
            return shown["DISPLAY"] as? String ?? ""
        }
    }

    static func timesAsked(_ asked: String) -> [String] {
        ((try? String(contentsOfFile: asked, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    static func read(_ item: (inproc: InProcessDaemon, session: String, path: String, asked: String)) throws
        -> DBusMessage?
    {
        let (_, call) = try AccessPromptTests.getSecret(item.path, session: item.session, in: item.inproc)
        return item.inproc.awaitCompletion(of: call)
    }

    @Test func withNoDisplayAnywhereTheRequestIsDenied() throws {
        let item = try Self.untrustedItem(answers: ["ok"], systemctlPrints: nil)
        #expect(try Self.read(item)?.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(Self.displays(in: item.inproc) == [""])
    }

    @Test func theSystemdUserManagersDisplayIsUsedUntilTheSessionHandsOneOver() throws {
        let item = try Self.untrustedItem(
            answers: ["ok", "ok"], systemctlPrints: "HOME=/elsewhere\nDISPLAY=:31\nXAUTHORITY=$'/odd\\\\nname'\n")
        #expect(try AccessPromptTests.secretText(Self.read(item)) == "s3cret")
        #expect(Self.displays(in: item.inproc) == [":31"])
        let runtime = try #require(item.inproc.daemon.registry.configuration.pinentry.environment["XDG_RUNTIME_DIR"])
        #expect(Self.timesAsked(item.asked) == [runtime], "asked once, with the daemon's runtime directory")

        // Handed over by the session: used, and systemd is not asked.
        try item.inproc.daemon.registry.updateSessionEnvironment(["DISPLAY": ":32"])
        #expect(try AccessPromptTests.secretText(Self.read(item)) == "s3cret")
        #expect(Self.displays(in: item.inproc) == [":31", ":32"])
        #expect(Self.timesAsked(item.asked).count == 1)
    }

    @Test func aRefusedUpdateChangesNothing() throws {
        let item = try Self.untrustedItem(answers: ["ok"], systemctlPrints: nil)
        #expect(throws: (any Error).self) {
            try item.inproc.daemon.registry.updateSessionEnvironment(["DISPLAY": ":5", "LD_PRELOAD": "/x.so"])
        }
        #expect(item.inproc.daemon.registry.sessionEnvironment.values.isEmpty)
        #expect(try Self.read(item)?.errorName == "org.freedesktop.DBus.Error.AccessDenied")
    }
}
