import Foundation
import Glibc
import Posix
import Testing

@testable import SecurityKeys

/// A `unix:` peer that answers what a test scripts: lies about lengths, cuts replies short, never answers, sends
/// garbage. What another program of the user could put at the socket `LATCHKEY_FIDO2_DEVICE` names.
final class HostileAuthenticator: @unchecked Sendable {
    enum Reply {
        /// These bytes, length header included (so they can lie about it).
        case raw([UInt8])
        /// Nothing, and the connection stays open.
        case silence
        /// The connection is closed.
        case close
    }

    let directory: URL
    var device: SecurityKeyDevice { SecurityKeyDevice(path: "unix:" + directory.appendingPathComponent("h.sock").path) }
    private let listener: Int32
    private let respond: @Sendable (UInt8, [UInt8]) -> Reply

    init(_ respond: @escaping @Sendable (UInt8, [UInt8]) -> Reply) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.respond = respond
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard var address = unixAddress(directory.appendingPathComponent("h.sock").path) else {
            throw SoftwareAuthenticatorError.couldNotStart
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listener, 4) == 0 else { throw SoftwareAuthenticatorError.couldNotStart }
        // The thread holds the descriptor and the script, not this object: deinit shuts the listener and it ends.
        Thread { [listener, respond] in Self.serve(listener, respond) }.start()
    }

    deinit {
        _ = shutdown(listener, Int32(SHUT_RDWR))  // the serving thread's accept fails, and it closes the listener
        try? FileManager.default.removeItem(at: directory)
    }

    private static func serve(_ listener: Int32, _ respond: @Sendable (UInt8, [UInt8]) -> Reply) {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else {
                close(listener)
                return
            }
            defer { close(connection) }
            reading: while let (command, payload) = readRequest(connection) {
                switch respond(command, payload) {
                case .raw(let bytes): _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) }
                case .silence: continue
                case .close: break reading
                }
            }
        }
    }

    private static func readRequest(_ connection: Int32) -> (UInt8, [UInt8])? {
        guard let header = readExactly(connection, 5) else { return nil }
        let length = Int(header[1]) << 24 | Int(header[2]) << 16 | Int(header[3]) << 8 | Int(header[4])
        guard length <= 8192, let payload = readExactly(connection, length) else { return nil }
        return (header[0], payload)
    }

    private static func readExactly(_ connection: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var read = 0
        while read < count {
            let got = bytes.withUnsafeMutableBytes { recv(connection, $0.baseAddress! + read, count - read, 0) }
            guard got > 0 else { return nil }
            read += got
        }
        return bytes
    }

    /// A reply frame: the 4-byte big-endian length and `payload`.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
            + payload
    }

    /// A correct CTAPHID INIT answer to `nonce`: channel 1, CBOR capable.
    static func initReply(_ nonce: [UInt8]) -> Reply {
        .raw(frame(nonce + [0, 0, 0, 1, 2, 5, 0, 0, 0x0D]))
    }

    /// A well-formed getInfo: FIDO_2_0, hmac-secret, a zero AAGUID.
    static let getInfo: [UInt8] =
        [0x00, 0xA3, 0x01, 0x81, 0x68] + Array("FIDO_2_0".utf8) + [0x02, 0x81, 0x6B] + Array("hmac-secret".utf8)
        + [0x03, 0x50] + [UInt8](repeating: 0, count: 16)
}

/// The seam's abuse tests: whatever the peer does, a clear error soon, no crash, no huge allocation.
@Suite struct HostileSocketTests {
    static let timeout: Duration = .milliseconds(400)

    /// Runs a probe against `peer` and returns its error and how long it took.
    func probeError(_ peer: HostileAuthenticator) -> (SecurityKeyError?, Duration) {
        let started = MonotonicClock.nanoseconds()
        var caught: SecurityKeyError?
        do {
            _ = try peer.device.probe(relyingParty: "latchkey:x", credentialID: [1, 2, 3], timeout: Self.timeout)
        } catch {
            caught = error
        }
        return (caught, .nanoseconds(MonotonicClock.nanoseconds() - started))
    }

    @Test func aPeerThatNeverAnswersTimesOut() throws {
        let peer = try HostileAuthenticator { _, _ in .silence }
        let (error, elapsed) = probeError(peer)
        #expect(error == .unreachable(device: peer.device.path, reason: "it does not answer as a FIDO2 key should"))
        #expect(elapsed < .seconds(2))
    }

    @Test func aReplyClaimingGigabytesIsRefusedWithoutReadingIt() throws {
        let peer = try HostileAuthenticator { _, _ in .raw([0xFF, 0xFF, 0xFF, 0xF0] + [UInt8](repeating: 0, count: 64))
        }
        let (error, elapsed) = probeError(peer)
        #expect(error == .unreachable(device: peer.device.path, reason: "it does not answer as a FIDO2 key should"))
        #expect(elapsed < .milliseconds(300))  // refused at the header, not after a timeout
    }

    @Test func aReplyCutShortIsAnError() throws {
        let cut = try HostileAuthenticator { _, nonce in
            .raw(Array(HostileAuthenticator.frame(nonce + [0, 0, 0, 1, 2, 5, 0, 0, 0x0D]).prefix(9)))
        }
        let (error, elapsed) = probeError(cut)
        #expect(error == .unreachable(device: cut.device.path, reason: "it does not answer as a FIDO2 key should"))
        #expect(elapsed < .seconds(2))
        let closed = try HostileAuthenticator { _, _ in .close }
        #expect(
            probeError(closed).0
                == .unreachable(device: closed.device.path, reason: "it does not answer as a FIDO2 key should"))
    }

    @Test func aWrongNonceOrGarbageInfoIsRefused() throws {
        let wrongNonce = try HostileAuthenticator { _, _ in
            HostileAuthenticator.initReply([UInt8](repeating: 7, count: 8))
        }
        #expect(
            probeError(wrongNonce).0
                == .unreachable(device: wrongNonce.device.path, reason: "it does not answer as a FIDO2 key should"))
        let garbage = try HostileAuthenticator { command, payload in
            command == 0x06
                ? HostileAuthenticator.initReply(payload)
                : .raw(HostileAuthenticator.frame([0x00, 0xBF, 0xFF, 0x13, 0x7A, 0xFF, 0xFF]))
        }
        let (error, _) = probeError(garbage)
        #expect(error == .unreachable(device: garbage.device.path, reason: "it does not answer as a FIDO2 key should"))
    }

    @Test func anOversizeOrGarbageAnswerToACommandIsAnError() throws {
        let oversize = try HostileAuthenticator { command, payload in
            switch (command, payload.first) {
            case (0x06, _): HostileAuthenticator.initReply(payload)
            case (0x10, 0x04): .raw(HostileAuthenticator.frame(HostileAuthenticator.getInfo))
            default: .raw(HostileAuthenticator.frame([0x00] + [UInt8](repeating: 0x41, count: 5000)))
            }
        }
        #expect(
            probeError(oversize).0
                == .device(operation: "asking the key for its credential", code: -2, text: "FIDO_ERR_RX"))
        let garbage = try HostileAuthenticator { command, payload in
            switch (command, payload.first) {
            case (0x06, _): HostileAuthenticator.initReply(payload)
            case (0x10, 0x04): .raw(HostileAuthenticator.frame(HostileAuthenticator.getInfo))
            default: .raw(HostileAuthenticator.frame([0x00, 0xA1, 0x01, 0x5F, 0xFF, 0x13]))
            }
        }
        #expect(
            throws: SecurityKeyError.device(
                operation: "getting the key's secret", code: -9, text: "FIDO_ERR_INTERNAL")
        ) {
            _ = try garbage.device.hmacSecret(
                relyingParty: "latchkey:x", credentialID: [1, 2, 3], salt: [UInt8](repeating: 1, count: 32),
                touchTimeout: .milliseconds(400))
        }
        #expect(
            throws: SecurityKeyError.device(
                operation: "making the credential", code: -4, text: "FIDO_ERR_RX_INVALID_CBOR")
        ) {
            _ = try garbage.device.enroll(
                relyingParty: "latchkey:x", userID: [1], userName: "a", touchTimeout: .milliseconds(400))
        }
    }
}
