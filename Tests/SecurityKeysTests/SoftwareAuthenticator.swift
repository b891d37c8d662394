import Foundation
import Glibc
import Posix
import SecurityKeys

/// Tests/Support/soft-fido2, the software CTAP2 authenticator, on a unix socket of its own: one security key for a
/// test. Its state file (master key, AAGUID, PIN) makes it the same key after a restart; another state file is
/// another key.
final class SoftwareAuthenticator {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Support/soft-fido2").standardized.path

    let directory: URL
    var socketPath: String { directory.appendingPathComponent("key.sock").path }
    var statePath: String { directory.appendingPathComponent("state.json").path }
    var controlPath: String { directory.appendingPathComponent("control.json").path }
    /// The device name that reaches it.
    var device: SecurityKeyDevice { SecurityKeyDevice(path: "unix:" + socketPath) }
    private var process: Process?
    private var insertion = 0
    private var control: [String: Any] = [:]

    /// Starts a new key (a new state file) with `arguments` (e.g. `--set-pin`, `--pin-protocols 1`).
    init(_ arguments: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("soft-fido2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try start(arguments)
    }

    /// Starts the authenticator on the current state file with `arguments` (a restart is a re-insertion).
    func start(_ arguments: [String] = []) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments =
            [Self.script, "--socket", socketPath, "--state", statePath, "--control", controlPath] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        self.process = process
        // It prints "ready" once it listens.
        let line = output.fileHandleForReading.readData(ofLength: 6)
        guard String(decoding: line, as: UTF8.self).hasPrefix("ready") else {
            throw SoftwareAuthenticatorError.couldNotStart
        }
    }

    /// Stops it (the key is unplugged); its state file stays.
    func stop() {
        guard let process, process.isRunning else { return }
        // SIGKILL: it saves its state at every change, and a test's blocked signal mask may be inherited.
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Restarts it with `arguments` on the same state file.
    func restart(_ arguments: [String] = []) throws {
        stop()
        try start(arguments)
    }

    /// Whether the key is touched when asked (false: it answers USER_ACTION_TIMEOUT after `noTouchDelay` seconds).
    func setTouch(_ touched: Bool, noTouchDelay: Double = 0.05, touchDelay: Double = 0) throws {
        control["touch"] = touched
        control["no_touch_delay"] = noTouchDelay
        control["touch_delay"] = touchDelay
        try writeControl()
    }

    /// The key unplugged and plugged in again, without a restart (it forgets its wrong PINs in a row).
    func reinsert() throws {
        insertion += 1
        control["insertion"] = insertion
        try writeControl()
    }

    private func writeControl() throws {
        let data = try JSONSerialization.data(withJSONObject: control)
        try data.write(to: URL(fileURLWithPath: controlPath), options: .atomic)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

enum SoftwareAuthenticatorError: Error {
    case couldNotStart
}
