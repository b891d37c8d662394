import Glibc
import Posix
import Testing

@Suite struct ProcessStatusTests {
    @Test func aStoppedProcessIsSeenStoppedUntilContinued() throws {
        let child = try Posix.spawn("/bin/sleep", ["30"], environment: [], input: nil, output: nil)
        defer {
            kill(child, SIGKILL)
            _ = try? Posix.waitpid(child)
        }
        #expect(!ProcessStatus.isStopped(child))
        kill(child, SIGSTOP)
        #expect((try? Posix.waitpid(child, options: WUNTRACED))?.pid == child)
        #expect(ProcessStatus.isStopped(child))
        kill(child, SIGCONT)
        #expect((try? Posix.waitpid(child, options: WCONTINUED))?.pid == child)
        #expect(!ProcessStatus.isStopped(child))
    }

    @Test func aProcessThatIsGoneIsNotStopped() throws {
        let child = try Posix.spawn("/bin/true", [], environment: [], input: nil, output: nil)
        _ = try Posix.waitpid(child)
        #expect(!ProcessStatus.isStopped(child))
    }

    @Test func noDebuggerIsAttachedToTheTests() {
        #expect(ProcessStatus.tracerPID() == 0)
    }
}
