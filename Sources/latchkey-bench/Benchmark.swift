import ArgumentParser
import Foundation
import KeychainCore
import KeychainStore

@main
struct Benchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latchkey-bench",
        abstract: "Measures the keychain store in-process and writes the figures to docs/benchmarks.md.",
        discussion: """
            Build in release mode: swift run -c release latchkey-bench
            Each size N fills a fresh keychain with N generic passwords, then times 1,000
            adds, primary-key lookups (returning the secret), updates and deletes.
            """)

    @Option(help: "Item counts to measure, comma-separated.")
    var sizes: String = "1000,10000,100000"

    @Option(help: "Operations timed per measurement.")
    var samples: Int = 1000

    @Option(help: "Markdown file whose store section is replaced with the results ('-' for none).")
    var output: String = "docs/benchmarks.md"

    @Flag(
        help: """
            Measure only reads of AfterFirstUnlock items while the keychain is locked against the same reads \
            while it is unlocked (issue 27), and write that section.
            """)
    var accessibility = false

    @Option(
        help: """
            Measure only `latchkey export` of a keychain of this many items (time and peak memory of the \
            command, on the file, to a passphrase and unencrypted) and print the rows (docs/benchmarks.md).
            """)
    var export: Int?

    mutating func run() throws {
        if let export {
            for row in try ExportBenchmark.run(items: export) { print(row) }
            return
        }
        if accessibility {
            try runAccessibility()
            return
        }
        let counts = sizes.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "latchkey-bench-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        var rows: [String] = []
        for count in counts {
            let path = directory.appendingPathComponent("bench-\(count).keychain-db").path
            let result = try measureStore(path: path, items: count)
            rows.append(result)
            print(result)
        }
        let unlock = try measureUnlock(path: directory.appendingPathComponent("kdf.keychain-db").path)
        print(unlock)
        if output != "-" { try write(rows: rows, unlock: unlock) }
    }

    private func measureStore(path: String, items: Int) throws -> String {
        let keychain = try Keychain.create(at: path, password: "bench", kdf: .insecureForTesting)
        let fill = max(0, items - samples)
        for index in 0..<fill { try add(keychain, index) }
        let adds = try time(samples) { try add(keychain, fill + $0) }
        let total = fill + samples
        var generator = SystemRandomNumberGenerator()
        let picks = (0..<samples).map { _ in Int.random(in: 0..<total, using: &generator) }
        let lookups = try time(samples) { index in
            let found = try keychain.items(matching: query(picks[index], returning: .data))
            guard found.count == 1 else { throw KeychainError(.itemNotFound, "lookup missed") }
        }
        let updates = try time(samples) { index in
            try keychain.update(
                matching: query(picks[index]), with: ItemChanges(secret: Data("changed-\(index)".utf8)))
        }
        let deletes = try time(samples) { index in
            try keychain.delete(matching: query(total - 1 - index))
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        return "| \(items) | \(adds) | \(lookups) | \(updates) | \(deletes) | \(size / 1024) |"
    }

    /// Reads of AfterFirstUnlock items by primary key, returning the secret, in a keychain of `items` items
    /// (half WhenUnlocked, half AfterFirstUnlock): while unlocked, then while locked (the class key kept), in
    /// alternating rounds so that the machine's load falls on both alike.
    private func runAccessibility() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-bench-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var rows: [String] = []
        for count in sizes.split(separator: ",").compactMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) {
            let path = directory.appendingPathComponent("classes-\(count).keychain-db").path
            let keychain = try Keychain.create(at: path, password: "bench")
            var batch: [NewItem] = []
            for index in 0..<count {
                var attributes: ItemAttributes = [
                    .account: .string("user\(index)@example.com"), .service: .string("bench.example.com"),
                    .label: .string("Benchmark item \(index)"),
                ]
                if index % 2 == 1 { attributes[.accessible] = .string(Accessibility.afterFirstUnlock.rawValue) }
                batch.append(NewItem(.genericPassword, attributes: attributes, secret: Data("password-\(index)".utf8)))
            }
            try keychain.add(batch)
            var generator = SystemRandomNumberGenerator()
            let picks = (0..<samples).map { _ in Int.random(in: 0..<max(1, count / 2), using: &generator) * 2 + 1 }
            func read(_ index: Int) throws {
                let found = try keychain.items(matching: query(picks[index], returning: .data))
                guard found.count == 1 else { throw KeychainError(.itemNotFound, "lookup missed") }
            }
            var unlocked: [UInt64] = []
            var locked: [UInt64] = []
            for _ in 0..<5 {
                try keychain.unlock(password: "bench")
                unlocked += try nanoseconds(samples / 5, read)
                keychain.lock()
                locked += try nanoseconds(samples / 5, read)
            }
            let row = "| \(count) | \(Self.percentiles(unlocked)) | \(Self.percentiles(locked)) |"
            rows.append(row)
            print(row)
        }
        guard output != "-" else { return }
        let section = """
            <!-- class-benchmark:begin -->
            Measured \(ISO8601DateFormatter().string(from: Date()).prefix(10)) on \(Self.machine()) with
            `swift run -c release latchkey-bench --accessibility` (\(samples) reads per cell, in five alternating
            rounds unlocked / locked; times in microseconds, p50 / p99; a read is a primary-key lookup of an
            AfterFirstUnlock generic password returning its secret; half of the items are WhenUnlocked).

            | items | read while unlocked | read while locked |
            |---:|---:|---:|
            \(rows.joined(separator: "\n"))
            <!-- class-benchmark:end -->
            """
        try replaceSection("class-benchmark", with: section, heading: "## Reads of AfterFirstUnlock items while locked")
    }

    /// The time of each of `count` runs of `body`, in nanoseconds.
    private func nanoseconds(_ count: Int, _ body: (Int) throws -> Void) throws -> [UInt64] {
        var samples: [UInt64] = []
        samples.reserveCapacity(count)
        for index in 0..<count {
            let start = DispatchTime.now().uptimeNanoseconds
            try body(index)
            samples.append(DispatchTime.now().uptimeNanoseconds - start)
        }
        return samples
    }

    /// "p50 / p99" of `samples` (nanoseconds) in microseconds, written with `format` (one decimal by default).
    private static func percentiles(_ samples: [UInt64], format: String = "%.1f / %.1f") -> String {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return "–" }
        let p50 = Double(sorted[sorted.count / 2]) / 1000
        let p99 = Double(sorted[min(sorted.count - 1, sorted.count * 99 / 100)]) / 1000
        return String(format: format, p50, p99)
    }

    private func measureUnlock(path: String) throws -> String {
        let keychain = try Keychain.create(at: path, password: "bench")
        keychain.lock()
        var seconds: [Double] = []
        for _ in 0..<3 {
            let start = DispatchTime.now().uptimeNanoseconds
            try keychain.unlock(password: "bench")
            seconds.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            keychain.lock()
        }
        let parameters = keychain.kdfParameters ?? .production
        return String(
            format: "%@ (%llu MiB), median %.3f s over 3", parameters.description,
            parameters.memoryBytes >> 20, seconds.sorted()[1])
    }

    private func add(_ keychain: Keychain, _ index: Int) throws {
        try keychain.add(
            .genericPassword,
            attributes: [
                .account: .string("user\(index)@example.com"), .service: .string("bench.example.com"),
                .label: .string("Benchmark item \(index)"),
            ],
            secret: Data("password-\(index)".utf8))
    }

    private func query(_ index: Int, returning: ReturnOptions = []) -> ItemQuery {
        ItemQuery(
            .genericPassword,
            attributes: [.account: .string("user\(index)@example.com"), .service: .string("bench.example.com")],
            returning: returning)
    }

    /// Runs `body` `count` times and gives "p50 / p99 µs".
    private func time(_ count: Int, _ body: (Int) throws -> Void) throws -> String {
        Self.percentiles(try nanoseconds(count, body), format: "%.0f / %.0f")
    }

    private func write(rows: [String], unlock: String) throws {
        let machine = Self.machine()
        let date = ISO8601DateFormatter().string(from: Date()).prefix(10)
        let section = """
            <!-- store-benchmark:begin -->
            Measured \(date) on \(machine) with `swift run -c release latchkey-bench`
            (\(samples) timed operations per cell; times in microseconds, p50 / p99; generic
            passwords with account, service and label; lookup by primary key returning the secret).

            | items | add | lookup | update | delete | file KiB |
            |---:|---:|---:|---:|---:|---:|
            \(rows.joined(separator: "\n"))

            Password unlock: \(unlock).
            <!-- store-benchmark:end -->
            """
        try replaceSection("store-benchmark", with: section, heading: nil)
    }

    /// Puts `section` in place of the one between `<!-- NAME:begin -->` and `<!-- NAME:end -->` of ``output``,
    /// or at its end (under `heading`, when given) when it has none.
    private func replaceSection(_ name: String, with section: String, heading: String?) throws {
        var text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? "# Benchmarks\n\n"
        if let start = text.range(of: "<!-- \(name):begin -->"), let end = text.range(of: "<!-- \(name):end -->") {
            text.replaceSubrange(start.lowerBound..<end.upperBound, with: section)
        } else {
            text += "\n" + (heading.map { $0 + "\n\n" } ?? "") + section + "\n"
        }
        try text.write(toFile: output, atomically: true, encoding: .utf8)
        print("wrote \(output)")
    }

    private static func machine() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let memory = ProcessInfo.processInfo.physicalMemory >> 30
        return "\(model), \(cores) cores, \(memory) GiB"
    }
}
