import Glibc
import Posix

/// The Debian package a file belongs to, as `dpkg -S` tells it: what an access prompt shows next to an
/// application's path, so that the person asked can tell `/usr/bin/secret-tool` (libsecret-tools) from a
/// program of unknown origin.
package enum PackageOwner {
    /// The package (or packages, comma-separated) that installed `path`; nil when dpkg knows none, is not
    /// there, or takes longer than `timeoutMilliseconds` (it is then killed). Blocking: call it off the
    /// serving thread. `path` goes to dpkg as one argument, never through a shell.
    package static func package(
        of path: String, dpkg: String = "/usr/bin/dpkg", timeoutMilliseconds: Int32 = 2_000
    ) -> String? {
        if let found = lookUp(path, dpkg: dpkg, timeoutMilliseconds: timeoutMilliseconds) { return found }
        // A merged /usr: the kernel names /usr/bin/dash where dpkg's database lists /bin/dash.
        for merged in ["/usr/bin/", "/usr/sbin/", "/usr/lib/"] where path.hasPrefix(merged) {
            return lookUp(String(path.dropFirst(4)), dpkg: dpkg, timeoutMilliseconds: timeoutMilliseconds)
        }
        return nil
    }

    /// `dpkg -S path`, bounded.
    private static func lookUp(_ path: String, dpkg: String, timeoutMilliseconds: Int32) -> String? {
        guard path.hasPrefix("/"), !path.contains("\n"),
            let output = BoundedCommand.output(
                of: dpkg, ["-S", path], environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"],
                timeoutMilliseconds: timeoutMilliseconds)
        else { return nil }
        return parse(String(decoding: output, as: UTF8.self), path: path)
    }

    /// The packages `dpkg -S` names for exactly `path` ("pkg[, pkg…]: path" lines; diversion lines skipped).
    static func parse(_ output: String, path: String) -> String? {
        for line in output.split(separator: "\n") where !line.hasPrefix("diversion ") {
            guard let separator = line.firstRange(of: ": "), line[separator.upperBound...] == path else { continue }
            let packages = line[..<separator.lowerBound]
            if !packages.isEmpty { return String(packages) }
        }
        return nil
    }
}
