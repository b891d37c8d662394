import Glibc

/// The container a caller runs in, as the daemon tells it from the host: a process whose root directory is not
/// the daemon's (podman, docker, toolbox, distrobox, a chroot), or whose executable's path names another file
/// on the host than the one it runs (a mount namespace of its own). Its paths are the container's, not the
/// host's: `/usr/bin/secret-tool` inside is another file than the host's `/usr/bin/secret-tool`, and the host's
/// package database says nothing of it (docs/containers.md).
///
/// What names it comes from files inside the container (`/run/.containerenv`, `/.dockerenv`,
/// `/run/.toolboxenv`) and from the process's cgroup, all of which the container's user can write: it tells
/// one container of the user from another and from the host, not a container from a hostile program of the
/// same user.
package struct Container: Hashable, Sendable, CustomStringConvertible {
    /// What runs it, as its markers say.
    package enum Engine: String, Hashable, Sendable {
        /// podman, which writes `/run/.containerenv` (distrobox on podman too).
        case podman
        /// toolbox, which adds `/run/.toolboxenv` to podman's marker.
        case toolbox
        /// docker, which writes `/.dockerenv`.
        case docker
        /// A snap's confinement (its root is its base snap's), named by the snap its cgroup names
        /// (`snap.chromium.chromium-….scope`).
        case snap
        /// Another root with no marker: a chroot, bubblewrap, another engine.
        case other
    }

    /// What runs it.
    package let engine: Engine
    /// Its name: `name=` of podman's `/run/.containerenv` (written for a `--privileged` container, which
    /// toolbox and distrobox containers are), else the first 12 digits of the container id in its cgroup
    /// (`libpod-ID`, `docker-ID`, `/docker/ID`), else its mount namespace (`mnt-4026532177`), or for a chroot in
    /// the daemon's mount namespace its directory.
    package let name: String

    /// A container run by `engine` named `name`.
    package init(engine: Engine, name: String) {
        self.engine = engine
        self.name = name
    }

    /// How a prompt names it: `podman container “dev”`, `a container or chroot (mnt-4026532177)`.
    package var description: String {
        switch engine {
        case .other: "a container or chroot (\(name))"
        case .snap: "snap “\(name)”"
        default: "\(engine.rawValue) container “\(name)”"
        }
    }

    /// What an access list names it by (with its program's name after it): `container:podman:dev`.
    package var key: String { "container:\(engine.rawValue):\(name)" }

    /// The `name=` value of a `/run/.containerenv` file's text (`name="dev"`), nil when it has none.
    static func containerEnvironmentName(_ text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("name=") {
            var value = line.dropFirst("name=".count)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            return sanitized(value)
        }
        return nil
    }

    /// The container id a `/proc/PID/cgroup` text names (`…/libpod-ID.scope`, `…/docker-ID.scope`, `/docker/ID`,
    /// `/libpod_parent/libpod-ID`), cut to its first 12 digits as `podman ps` shows it; nil when none.
    static func cgroupContainerID(_ text: String) -> String? {
        for line in text.split(separator: "\n") {
            for part in line.split(separator: "/") {
                var part = part
                if part.hasSuffix(".scope") { part = part.dropLast(".scope".count) }
                for prefix in ["libpod-", "docker-", "crio-", ""] where part.hasPrefix(prefix) {
                    let id = part.dropFirst(prefix.count)
                    if id.count == 64, id.allSatisfy(\.isHexDigit) { return String(id.prefix(12)) }
                }
            }
        }
        return nil
    }

    /// The snap a `/proc/PID/cgroup` text names (`…/snap.chromium.chromium-1f2e….scope`: `chromium`), nil when
    /// none.
    static func cgroupSnapName(_ text: String) -> String? {
        for line in text.split(separator: "\n") {
            for part in line.split(separator: "/") where part.hasPrefix("snap.") {
                let rest = part.dropFirst("snap.".count)
                guard let dot = rest.firstIndex(of: "."), let name = sanitized(rest[..<dot]) else { continue }
                return name
            }
        }
        return nil
    }

    /// A name as shown and stored: printable characters only (no tab or newline, which an access list cannot
    /// hold), at most 64 of them; nil when nothing is left.
    static func sanitized(_ text: Substring) -> String? {
        let kept = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }))
        let name = String(kept.prefix(64))
        return name.isEmpty ? nil : name
    }
}
