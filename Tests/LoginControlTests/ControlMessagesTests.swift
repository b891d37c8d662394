import LoginControl
import Testing

@Suite struct ControlMessagesTests {
    static let requests: [ControlRequest] = [
        .openSession(password: Array("pw".utf8)), .openSession(password: nil), .closeSession(lockIfLast: true),
        .closeSession(lockIfLast: false), .changePassword(old: Array("old".utf8), new: Array("new".utf8)), .status,
    ]

    @Test(arguments: requests)
    func requestsSurviveTheirEncoding(_ request: ControlRequest) throws {
        let framed = request.encoded()
        let length = framed.prefix(4).reduce(0) { $0 << 8 | Int($1) }
        #expect(length == framed.count - 4)
        #expect(try ControlRequest(body: Array(framed.dropFirst(4))) == request)
        // Read in place from the frame, as the daemon does: the slice starts at index 4.
        #expect(try ControlRequest(body: framed.dropFirst(4)) == request)
    }

    @Test(arguments: requests)
    func everyTruncationIsRefusedWithoutATrap(_ request: ControlRequest) {
        let body = Array(request.encoded().dropFirst(4))
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

    @Test func wipeZeroesThePasswords() {
        var request = ControlRequest.changePassword(old: Array("old".utf8), new: Array("new".utf8))
        request.wipe()
        #expect(request == .changePassword(old: [0, 0, 0], new: [0, 0, 0]))
    }

    @Test func repliesAreBoundedAndReadBack() throws {
        let reply = ControlReply(.wrongPassword, String(repeating: "x", count: 2_000))
        let framed = reply.encoded()
        #expect(framed.count == 4 + ControlReply.maximumBodyLength)
        let read = try ControlReply(body: Array(framed.dropFirst(4)))
        #expect(read.status == .wrongPassword && read.message.count == ControlReply.maximumBodyLength - 1)
    }
}
