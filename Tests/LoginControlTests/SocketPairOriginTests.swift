import Glibc
import LoginControl
import Testing

/// How latchkeyd tells the request on its standard input for pam_latchkey's: a socket pair root made.
@Suite struct SocketPairOriginTests {
    @Test func aSocketPairIsRootsOnlyWhenRootMadeIt() {
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { for end in ends { close(end) } }
        #expect(isSocketPairMadeByRoot(ends[0]) == (getuid() == 0))
        #expect(isSocketPairMadeByRoot(ends[1]) == (getuid() == 0))
    }

    @Test func aPipeAFileAndADatagramPairAreNot() {
        var pipeEnds: [Int32] = [-1, -1]
        #expect(pipe(&pipeEnds) == 0)
        defer { for end in pipeEnds { close(end) } }
        #expect(!isSocketPairMadeByRoot(pipeEnds[0]))
        let file = open("/dev/null", O_RDONLY)
        defer { close(file) }
        #expect(!isSocketPairMadeByRoot(file))
        var datagrams: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &datagrams) == 0)
        defer { for end in datagrams { close(end) } }
        #expect(!isSocketPairMadeByRoot(datagrams[0]))
    }

    @Test func aConnectionToANamedSocketIsNotEvenFromRoot() throws {
        let path = "/tmp/latchkey-origin-\(getpid())"
        unlink(path)
        defer { unlink(path) }
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = UnixSocketAddress(path)
        #expect(address.apply(listener, bind) == 0 && listen(listener, 1) == 0)
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        let connected = address.apply(client, connect)
        #expect(connected == 0)
        // The peer's credentials are this process's (root, in CI), but the peer has an address.
        #expect(!isSocketPairMadeByRoot(client))
    }
}
