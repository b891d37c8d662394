// Fuzzes the control socket's frames where they are read: the daemon's listener (a real socket in a private
// runtime directory; the input is what one client connection sends), and the frame readers pam_latchkey and
// the daemon use on a socket pair (`ControlFrames.receiveRequest` / `receiveReply`).
//
// Input: one byte choosing the reader (0: the listener, 1: receiveRequest, 2: receiveReply), then the bytes
// the peer sends before closing its side.
import FuzzSupport
import Glibc

@testable import LoginControl
@testable import Posix

nonisolated(unsafe) var listener: ControlListener?
nonisolated(unsafe) var socketPath = ""

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        let requests: [(String, ControlRequest)] = [
            ("open-session", .openSession(password: try! SharedSecret(copying: Array("pw".utf8)))),
            ("open-session-none", .openSession(password: nil)),
            ("close-session", .closeSession(lockIfLast: true)),
            (
                "change-password",
                .changePassword(
                    old: try! SharedSecret(copying: Array("old".utf8)),
                    new: try! SharedSecret(copying: Array("new".utf8)))
            ),
            ("status", .status), ("hand-over", .handOver(password: try! SharedSecret(copying: Array("pw".utf8)))),
        ]
        var seeds: [(name: String, bytes: [UInt8])] = []
        for (name, request) in requests {
            let frame = try! request.encoded().withUnsafeBytes { [UInt8]($0) }
            seeds.append(("listener-" + name, [0] + frame))
            seeds.append(("pair-" + name, [1] + frame))
        }
        seeds.append(("reply-ok", [2] + ControlReply(.ok, "unlocked").encoded()))
        seeds.append(("reply-bad", [2] + ControlReply(.badRequest, "malformed").encoded()))
        return seeds
    }
    let runtime = scratchDirectory("control-frames")
    do {
        listener = try ControlListener(runtimeDirectory: runtime)
    } catch {
        fatalError("fuzz-control-frames: cannot listen: \(error)")
    }
    socketPath = ControlSocketPath.socket(inRuntimeDirectory: runtime)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    var input = FuzzInput(start, count)
    let reader = input.byte() % 3
    let bytes = input.rest()
    if reader == 0 {
        throughListener(bytes)
    } else {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            fatalError("socketpair failed")
        }
        defer {
            close(pair[0])
            close(pair[1])
        }
        sendAll(pair[1], bytes)
        shutdown(pair[1], Int32(SHUT_WR))
        let deadline = Deadline(millisecondsFromNow: 1000)
        if reader == 1 {
            if case .success(let request) = ControlFrames.receiveRequest(on: pair[0], deadline: deadline) {
                // What was read survives its own encoding unchanged (the frame is in secret memory).
                guard let again = try? request.encoded() else { return 0 }
                let decoded = again.withUnsafeBytes { (frame) in try? ControlRequest(body: frame.dropFirst(4)) }
                guard decoded == request else { fatalError("a request does not survive its encoding") }
            }
        } else {
            if case .success(let reply) = ControlFrames.receiveReply(on: pair[0], deadline: deadline) {
                _ = reply.encoded()
            }
        }
    }
    return 0
}

/// Connects to the listener, sends `bytes`, closes the sending side and serves until the listener answered
/// or dropped the connection.
func throughListener(_ bytes: [UInt8]) {
    guard let listener else { return }
    let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(client) }
    guard connectUnix(client, socketPath) == 0 else { fatalError("cannot connect to the listener") }
    sendAll(client, bytes)
    shutdown(client, Int32(SHUT_WR))
    for _ in 0..<8 {
        listener.serve { request, _, responder in
            listener.respond(responder, ControlReply(.ok, request.name))
        }
        var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        if poll(&entry, 1, 0) > 0 { break }
        var fds = listener.pollDescriptors
        _ = poll(&fds, nfds_t(fds.count), 20)
    }
    var buffer = [UInt8](repeating: 0, count: 4096)
    _ = recv(client, &buffer, buffer.count, Int32(MSG_DONTWAIT))
}

/// Writes all of `bytes` (the socket buffers hold far more than a fuzz input).
func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let sent = bytes.withUnsafeBytes { raw in
            raw.baseAddress.map { send(fd, $0 + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) } ?? -1
        }
        guard sent > 0 else { return }
        offset += sent
    }
}
