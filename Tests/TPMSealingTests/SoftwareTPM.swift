import Foundation
import Glibc
import TPMSealing

/// A real software TPM 2.0 (Debian's swtpm) on two free local TCP ports with its own state directory, started for
/// one test and killed by `stop()`.
final class SoftwareTPM {
    /// Where swtpm is, or nil when it is not installed (the tests are then skipped; CI installs it).
    static let executable: String? = ["/usr/bin/swtpm", "/usr/local/bin/swtpm"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Whether tests that need a software TPM can run.
    static var isAvailable: Bool { executable != nil }

    let port: UInt16
    let stateDirectory: URL
    private let process: Process

    /// The TCTI string for this TPM.
    var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// The configuration that makes `KeySealing` talk to this TPM.
    var configuration: TPMConfiguration { TPMConfiguration(tcti: tcti) }

    /// Starts a fresh TPM (new state directory: a new owner seed, so a new storage primary key).
    init() throws {
        guard let executable = Self.executable else { throw SoftwareTPMError.notInstalled }
        stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "latchkey-swtpm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true)
        for _ in 0..<20 {
            let candidate = UInt16.random(in: 20_000...60_000)
            guard Self.portIsFree(candidate), Self.portIsFree(candidate + 1) else { continue }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = [
                "socket", "--tpm2", "--server", "type=tcp,port=\(candidate),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(candidate + 1),bindaddr=127.0.0.1",
                "--tpmstate", "dir=\(stateDirectory.path)", "--flags", "not-need-init,startup-clear",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if Self.waitUntilListening(candidate, while: process) {
                self.port = candidate
                self.process = process
                return
            }
            Self.kill(process)
        }
        try? FileManager.default.removeItem(at: stateDirectory)
        throw SoftwareTPMError.couldNotStart
    }

    /// Kills swtpm and removes its state.
    func stop() {
        if process.isRunning {
            Self.kill(process)
        }
        try? FileManager.default.removeItem(at: stateDirectory)
    }

    deinit { stop() }

    /// Runs a tpm2-tools command against this TPM (through TPM2TOOLS_TCTI); throws when it fails.
    func tpm2Tool(_ name: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/\(name)")
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tcti
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SoftwareTPMError.toolFailed(name) }
    }

    /// swtpm does not leave its accept loop on SIGTERM; its state is thrown away, so SIGKILL loses nothing.
    private static func kill(_ process: Process) {
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    private static func portIsFree(_ port: UInt16) -> Bool {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { return false }
        defer { close(socketDescriptor) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func waitUntilListening(_ port: UInt16, while process: Process) -> Bool {
        for _ in 0..<200 {
            guard process.isRunning else { return false }
            let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socketDescriptor >= 0 else { return false }
            var address = loopback(port)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            close(socketDescriptor)
            if connected { return true }
            usleep(20_000)
        }
        return false
    }

    private static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

enum SoftwareTPMError: Error {
    case notInstalled
    case couldNotStart
    case toolFailed(String)
}
