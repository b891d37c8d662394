import Glibc
import Testing

@testable import CallerIdentity

/// How a caller in a container is named (docs/containers.md): from its markers and cgroup, and apart from the
/// host's program at the same path.
@Suite struct ContainerTests {
    static let digest = FileDigest(Array(repeating: 7, count: 32))!

    @Test func podmansMarkerGivesTheName() {
        let text = "engine=\"podman-4.3.1\"\nname=\"dev\"\nid=\"5d94c906\"\nimage=\"\"\nrootless=0\n"
        #expect(Container.containerEnvironmentName(text) == "dev")
        // An unprivileged container's marker is empty.
        #expect(Container.containerEnvironmentName("") == nil)
        #expect(Container.containerEnvironmentName("name=\"\"\n") == nil)
        // A tab or newline (which an access list cannot hold) and other control characters are dropped.
        #expect(Container.containerEnvironmentName("name=\"a\tb\u{1b}c\"") == "abc")
        #expect(Container.containerEnvironmentName("name=" + String(repeating: "x", count: 200))?.count == 64)
    }

    @Test func cgroupsNameTheContainerID() {
        let id = String(repeating: "2d8293798985", count: 5) + "a9a7"
        #expect(id.count == 64)
        let shapes = [
            "0::/libpod_parent/libpod-\(id)\n",
            "0::/machine.slice/libpod-\(id).scope/container\n",
            "12:pids:/system.slice/docker-\(id).scope\n",
            "3:cpu:/docker/\(id)\n",
        ]
        for text in shapes { #expect(Container.cgroupContainerID(text) == "2d8293798985", "\(text)") }
        #expect(Container.cgroupContainerID("0::/user.slice/user-1000.slice/session-2.scope\n") == nil)
        #expect(Container.cgroupContainerID("0::/libpod-1234\n") == nil)
    }

    @Test func aSnapIsNamedByTheSnapItsCgroupNames() {
        let text = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.chromium.chromium-1f2e3d.scope\n"
        #expect(Container.cgroupSnapName(text) == "chromium")
        #expect(Container.cgroupSnapName("0::/user.slice/user-1000.slice/session-2.scope\n") == nil)
        let inside = Application.inContainer(
            Container(engine: .snap, name: "chromium"),
            .executable(path: "/snap/chromium/2541/usr/lib/chromium-browser/chrome", digest: Self.digest))
        #expect(inside.name == "container:snap:chromium:/snap/chromium/2541/usr/lib/chromium-browser/chrome")
        #expect(inside.description == "/snap/chromium/2541/usr/lib/chromium-browser/chrome in snap “chromium”")
    }

    @Test func aContainersProgramIsNamedApartFromTheHostsAndKeepsItsKind() {
        let host = Application.executable(path: "/usr/bin/secret-tool", digest: Self.digest)
        let inside = Application.inContainer(Container(engine: .toolbox, name: "fedora-toolbox-40"), host)
        #expect(inside.name == "container:toolbox:fedora-toolbox-40:/usr/bin/secret-tool")
        #expect(inside.name != host.name)
        #expect(inside.description == "/usr/bin/secret-tool in toolbox container “fedora-toolbox-40”")
        #expect(inside.digest == host.digest)
        #expect(inside.genericTool == .keychainCommand)
        #expect(inside.program == host && inside.container?.name == "fedora-toolbox-40")
        #expect(host.container == nil && host.program == host)
        let chroot = Application.inContainer(Container(engine: .other, name: "/srv/root"), host)
        #expect(chroot.description == "/usr/bin/secret-tool in a container or chroot (/srv/root)")
    }

    @Test func aHostProcessIsNotInAContainer() throws {
        let inspector = ProcessInspector()
        let caller = try inspector.identify(pid: getpid(), uid: getuid(), expectedUID: getuid())
        #expect(caller.application.container == nil, "\(caller.application)")
    }
}
