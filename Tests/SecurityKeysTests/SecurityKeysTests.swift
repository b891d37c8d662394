import Posix
import Testing

@testable import SecurityKeys

@Suite struct SecurityKeyDeviceTests {
    @Test func aUnixDeviceNamesItsSocket() {
        #expect(SecurityKeyDevice(path: "unix:/run/x.sock").socketPath == "/run/x.sock")
        #expect(SecurityKeyDevice(path: "/dev/hidraw0").socketPath == nil)
    }
}
