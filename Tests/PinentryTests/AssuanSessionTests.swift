import Glibc
import Testing

@testable import Pinentry

/// `AssuanSession(connectedSocket:timeout:)`, which the Assuan fuzz harness (Fuzz/) drives: the conversation
/// over a socket the caller connected, the peer played by the test.
@Suite struct AssuanSessionTests {
    /// Both ends of a socket pair; the session gets `ours`, the test writes and reads `theirs`.
    private static func socketPair() throws -> (ours: Int32, theirs: Int32) {
        var pair: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        return (pair[0], pair[1])
    }

    private static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// What the session sent, as text, once it has closed its end.
    private static func readAll(_ fd: Int32) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Replies are read as a pinentry writes them: status lines' keywords kept, comment lines skipped, `D` lines percent-decoded
    /// and joined, `ERR` with its code and text; `BYE` ends it and closes the socket.
    @Test func readsRepliesFromTheConnectedPeer() throws {
        let (ours, theirs) = try Self.socketPair()
        defer { close(theirs) }
        Self.write(theirs, "OK Pleased to meet you\nS PIN_REPEATED\n# comment\r\nD a%25b\nD %0Ac\nOK\n")
        Self.write(theirs, "ERR 83886179 Operation cancelled <Pinentry>\nOK closing connection\n")
        let session = AssuanSession(connectedSocket: ours, timeout: .seconds(5))
        try session.expectGreeting()
        var pin: [UInt8] = []
        #expect(try session.transact(Array("GETPIN".utf8), data: &pin) == .ok)
        #expect(pin == Array("a%b\nc".utf8))
        // Status keywords are kept for the command they answered (a new password's `S PIN_REPEATED`).
        #expect(session.statusKeywords == ["PIN_REPEATED"])
        #expect(
            try session.command("CONFIRM", raw: "") == .error(code: 83_886_179, text: "Operation cancelled <Pinentry>"))
        #expect(session.statusKeywords.isEmpty)
        session.finish()
        #expect(Self.readAll(theirs) == "GETPIN\nCONFIRM \nBYE\n")
    }

    /// A peer that stops sending mid-line is an error, not a hang.
    @Test func peerClosingIsAnError() throws {
        let (ours, theirs) = try Self.socketPair()
        defer { close(theirs) }
        Self.write(theirs, "OK hello\nD partial")
        shutdown(theirs, Int32(SHUT_WR))
        let session = AssuanSession(connectedSocket: ours, timeout: .seconds(5))
        try session.expectGreeting()
        var pin: [UInt8] = []
        #expect(throws: PinentryError(reason: "the program closed the connection or exited")) {
            try session.transact(Array("GETPIN".utf8), data: &pin)
        }
        session.terminate()
    }
}
