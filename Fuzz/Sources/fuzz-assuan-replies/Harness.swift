// Fuzzes what a pinentry answers: the input is everything the program writes to its end of the socket pair,
// read by the real `AssuanSession` (line reading, `OK`/`ERR`/`D`/`S`/`#`/`INQUIRE` handling, percent
// decoding of `D` lines) through the conversation `Pinentry.askPassword` and `confirm` hold: the greeting,
// options, texts, then `GETPIN` (first byte even) or `CONFIRM` (odd), and `BYE`.
import FuzzSupport
import Glibc

@testable import Pinentry

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    SeedCorpus.writeIfAsked {
        // What pinentry-curses 1.2.1 (Debian 12) answers, and what the scripted pinentry of the tests answers.
        let greeting = "OK Pleased to meet you, process 4242\n"
        let oks = String(repeating: "OK\n", count: 7)
        return [
            (
                "getpin",
                Array(("\u{0}" + greeting + oks + "S PIN_REPEATED\nD p%25ss w%0Ard\nOK\nOK closing connection\n").utf8)
            ),
            ("getpin-cancel", Array(("\u{0}" + greeting + oks + "ERR 83886179 Operation cancelled <Pinentry>\n").utf8)),
            (
                "getpin-inquire",
                Array(("\u{0}" + greeting + "# comment\r\n" + oks + "INQUIRE QUALITY x\nD pw\nOK\n").utf8)
            ),
            ("confirm", Array(("\u{1}" + greeting + oks + "OK\nOK closing connection\n").utf8)),
            ("confirm-no", Array(("\u{1}" + greeting + oks + "ERR 83886194 Not confirmed <Pinentry>\n").utf8)),
        ]
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    var input = FuzzInput(start, count)
    let asksPassword = input.byte() % 2 == 0
    let output = input.rest()
    var pair: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
        fatalError("socketpair failed")
    }
    defer { close(pair[1]) }
    var offset = 0
    while offset < output.count {
        let sent = output.withUnsafeBytes { raw in
            raw.baseAddress.map { send(pair[1], $0 + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) } ?? -1
        }
        guard sent > 0 else { break }
        offset += sent
    }
    shutdown(pair[1], Int32(SHUT_WR))
    let session = AssuanSession(connectedSocket: pair[0], timeout: .seconds(2))
    converse(session, asksPassword: asksPassword)
    return 0
}

/// The conversation of `Pinentry.converse`, with what it checks of each answer.
func converse(_ session: AssuanSession, asksPassword: Bool) {
    do throws(PinentryError) {
        try session.expectGreeting()
        _ = try session.command("OPTION", raw: "ttyname=/dev/pts/1")
        _ = try session.command("OPTION", raw: "lc-ctype=C.UTF-8")
        _ = try session.command("SETTIMEOUT", raw: "60")
        for (command, text) in [
            ("SETTITLE", "Unlock"), ("SETDESC", "Unlock the login keychain\n100%"), ("SETPROMPT", "Password:"),
        ] {
            if case .error = try session.command(command, text: text) { throw PinentryError(reason: command) }
        }
        var pin: [UInt8] = []
        let reply = try session.transact(Array((asksPassword ? "GETPIN" : "CONFIRM").utf8), data: &pin)
        if case .error(let code, let text) = reply {
            _ = (code & 0xFFFF, text.count)
        }
        AssuanText.wipe(&pin)
        session.finish()
    } catch {
        session.terminate()
    }
}
