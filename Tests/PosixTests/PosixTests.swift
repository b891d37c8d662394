import Glibc
import Posix
import Testing

@Suite struct PosixTests {
    @Test func deadlinesCountDown() {
        let soon = Deadline(millisecondsFromNow: 50)
        let later = Deadline(millisecondsFromNow: 60_000)
        #expect(soon < later)
        #expect(!later.hasPassed)
        #expect(later.remainingMilliseconds > 59_000)
        #expect(Deadline(millisecondsFromNow: -1).hasPassed)
        #expect(Deadline(millisecondsFromNow: -1).remainingMilliseconds == 0)
    }

    @Test func wipingZeroesInPlace() {
        var bytes: [UInt8] = Array("secret".utf8)
        wipeBytes(&bytes)
        #expect(bytes == [0, 0, 0, 0, 0, 0])
    }

    @Test func errorsCarryErrno() throws {
        var byte: UInt8 = 0
        #expect(throws: SystemError("read", errno: EBADF)) { try Posix.read(-1, &byte, 1) }
        #expect(SystemError("read", errno: EBADF).description == "read: Bad file descriptor")
    }

    @Test func wakePipesDoNotBlockAndCloseOnExec() throws {
        let (readEnd, writeEnd) = try makeWakePipe()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        var byte: UInt8 = 0
        #expect(throws: SystemError("read", errno: EAGAIN)) { try Posix.read(readEnd, &byte, 1) }
        #expect(fcntl(readEnd, F_GETFD) & FD_CLOEXEC != 0)
        try Posix.writeAll(writeEnd, [7])
        #expect(try Posix.read(readEnd, &byte, 1) == 1 && byte == 7)
    }

    /// A read interrupted by a signal (a handler installed without SA_RESTART) is retried, not reported.
    @Test func interruptedReadsAreRetried() throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        action.sa_flags = 0
        var previous = sigaction()
        sigaction(SIGUSR2, &action, &previous)
        defer { sigaction(SIGUSR2, &previous, nil) }
        let reader = pthread_self()
        let writeEnd = fds[1]
        runDetached {
            usleep(100_000)
            pthread_kill(reader, SIGUSR2)
            usleep(100_000)
            var byte: UInt8 = 42
            _ = write(writeEnd, &byte, 1)
        }
        var byte: UInt8 = 0
        #expect(try Posix.read(fds[0], &byte, 1) == 1)
        #expect(byte == 42)
    }
}
