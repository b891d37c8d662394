import Glibc
import LoginControl
import Posix
import Testing

/// The bytes of a secret, as an array (tests only).
private func array(_ secret: borrowing SecretBytes) -> [UInt8] {
    secret.withUnsafeBytes { [UInt8]($0) }
}

private func secret(_ text: String) -> SharedSecret {
    try! SharedSecret(copying: Array(text.utf8))
}

@Suite struct ControlMessagesTests {
    static let requests: [ControlRequest] = [
        .openSession(password: secret("pw")), .openSession(password: nil), .closeSession(lockIfLast: true),
        .closeSession(lockIfLast: false), .changePassword(old: secret("old"), new: secret("new")), .status,
    ]

    @Test(arguments: requests)
    func requestsSurviveTheirEncoding(_ request: ControlRequest) throws {
        let framed = array(try request.encoded())
        let length = framed.prefix(4).reduce(0) { $0 << 8 | Int($1) }
        #expect(length == framed.count - 4)
        #expect(try ControlRequest(body: Array(framed.dropFirst(4))) == request)
        // Read in place from the frame, as the daemon does: the slice starts at index 4.
        #expect(try ControlRequest(body: framed.dropFirst(4)) == request)
    }

    @Test(arguments: requests)
    func everyTruncationIsRefusedWithoutATrap(_ request: ControlRequest) throws {
        let body = Array(array(try request.encoded()).dropFirst(4))
        for count in 0..<body.count {
            let cut = Array(body.prefix(count))
            // A request cut after a whole field can still be a valid shorter request.
            if let parsed = try? ControlRequest(body: cut) { #expect(parsed != request) }
        }
    }

    @Test func randomBodiesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let count = Int.random(in: 0..<40, using: &generator)
            var body = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if body.count >= 2, Bool.random(using: &generator) { body[0] = 1 }
            _ = try? ControlRequest(body: body)
            _ = try? ControlRequest(body: ([0, 0, 0, 0] + body).dropFirst(4))
            _ = try? ControlReply(body: body)
        }
    }

    @Test func malformedRequestsSayWhy() {
        #expect(throws: ControlProtocolError.self) { try ControlRequest(body: [2, 4]) }
        #expect(throws: ControlProtocolError.self) { try ControlRequest(body: [1, 9]) }
        #expect(throws: ControlProtocolError.self) { try ControlRequest(body: [1, 3, 0, 0, 0, 1, 65]) }
        #expect(throws: ControlProtocolError.self) { try ControlRequest(body: [1, 1, 0, 0, 0, 2, 65, 0]) }
        #expect(throws: ControlProtocolError.self) { try ControlRequest(body: [1, 2, 0, 0, 0, 1, 7]) }
        let tooLong = [1, 1, 0, 0, 0x20, 0x01] + [UInt8](repeating: 65, count: 0x2001)
        #expect(throws: ControlProtocolError.self) { try ControlRequest(body: tooLong) }
    }

    /// A request's passwords live in one buffer each, which every copy of the request shares and which is
    /// wiped when the last one goes: the daemon's loop and the unlock it starts both hold the request, and
    /// neither can leave an unwiped copy behind (binding the password to a `var` and wiping it wiped a copy).
    @Test func passwordsAreSharedNotCopiedAndWipedWithTheLastRequest() throws {
        final class Seen: @unchecked Sendable {
            var mutex = pthread_mutex_t()
            var wiped: [UInt: Bool] = [:]
        }
        let seen = Seen()
        SecretBytes.observeReleasesForTesting { pages in
            pthread_mutex_lock(&seen.mutex)
            seen.wiped[UInt(bitPattern: pages.baseAddress)] = pages.allSatisfy { $0 == 0 }
            pthread_mutex_unlock(&seen.mutex)
        }
        defer { SecretBytes.observeReleasesForTesting(nil) }
        let framed = array(try ControlRequest.handOver(password: secret("login password, 2026")).encoded())
        var request: ControlRequest? = try ControlRequest(body: framed.dropFirst(4))
        guard case .handOver(let password?) = request else {
            Issue.record("not read back as a hand-over with a password")
            return
        }
        let page = password.bytes.pageAddress
        let address = try #require(page)
        // Pages are reused: forget what an earlier secret at this address did.
        pthread_mutex_lock(&seen.mutex)
        seen.wiped[address] = nil
        pthread_mutex_unlock(&seen.mutex)
        var copies = [request, request]
        let stillHeld = password.withUnsafeBytes { Array($0) } == Array("login password, 2026".utf8)
        #expect(stillHeld)
        copies.removeAll()
        request = nil
        pthread_mutex_lock(&seen.mutex)
        let beforeLast = seen.wiped[address]
        pthread_mutex_unlock(&seen.mutex)
        #expect(beforeLast == nil)
        _ = consume password
        pthread_mutex_lock(&seen.mutex)
        let afterLast = seen.wiped[address]
        pthread_mutex_unlock(&seen.mutex)
        #expect(afterLast == true)
    }

    @Test func repliesAreBoundedAndReadBack() throws {
        let reply = ControlReply(.wrongPassword, String(repeating: "x", count: 2_000))
        let framed = reply.encoded()
        #expect(framed.count == 4 + ControlReply.maximumBodyLength)
        let read = try ControlReply(body: Array(framed.dropFirst(4)))
        #expect(read.status == .wrongPassword && read.message.count == ControlReply.maximumBodyLength - 1)
    }
}
