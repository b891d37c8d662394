// A test helper: AgeFile between stdin and stdout, for Tests/Integration/test_age_interop.py (the real `age`
// against ours) until `latchkey export`/`import` reach it. Secrets never travel in argv: a passphrase is read
// from file descriptor 3, an identity from a key file.
//   age-file-tool encrypt-passphrase WORK_FACTOR [--armor]   stdin → stdout, passphrase on fd 3
//   age-file-tool encrypt RECIPIENT... [--armor]             stdin → stdout
//   age-file-tool decrypt-passphrase [MAX_WORK_FACTOR]      stdin → stdout, passphrase on fd 3
//   age-file-tool decrypt KEY_FILE                           stdin → stdout
//   age-file-tool requirement                                stdin: "passphrase", "identity", "none" or
//                                                            "unreadable: MESSAGE"
// A failure prints "age-file-tool: KIND: MESSAGE" on stderr and exits 1; bad usage exits 2.
import AgeEncryption
import Glibc
import Posix

/// Everything readable from `fd`, in secret memory.
func readAll(_ fd: Int32) -> SecretBytes {
    do {
        var bytes = try SecretBytes(capacity: 1 << 16)
        while true {
            try bytes.reserveCapacity(forAppending: 1 << 16)
            let count = try withUnsafeTemporaryAllocation(byteCount: 1 << 16, alignment: 1) { buffer in
                defer { wipeBytes(buffer) }
                let count = try Posix.read(fd, buffer.baseAddress, buffer.count)
                bytes.append(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                return count
            }
            if count == 0 { return bytes }
        }
    } catch {
        fail("cannot read file descriptor \(fd): \(error)", status: 2)
    }
}

/// Writes `bytes` to stdout whole.
func writeAll(_ bytes: UnsafeRawBufferPointer) {
    var offset = 0
    while offset < bytes.count {
        guard let written = try? Posix.write(1, bytes.baseAddress.map { $0 + offset }, bytes.count - offset) else {
            fail("cannot write to stdout", status: 2)
        }
        offset += written
    }
}

func fail(_ message: String, status: Int32 = 1) -> Never {
    let line = Array("age-file-tool: \(message)\n".utf8)
    _ = try? Posix.write(2, line, line.count)
    exit(status)
}

/// A passphrase read from fd 3, without its final newline.
func passphrase() -> SecretBytes {
    var secret = readAll(3)
    if secret.withUnsafeBytes({ $0.last }) == UInt8(ascii: "\n") { secret.truncate(to: secret.count - 1) }
    return secret
}

func run(_ arguments: [String]) throws(AgeError) {
    let armored = arguments.contains("--armor")
    let operands = arguments.dropFirst().filter { $0 != "--armor" }
    switch arguments.first {
    case "encrypt-passphrase":
        guard operands.count == 1, let workFactor = Int(operands[operands.startIndex]) else { usage() }
        let file = try AgeFile.encrypt(readAll(0), passphrase: passphrase(), workFactor: workFactor, armored: armored)
        file.withUnsafeBytes { writeAll($0) }
    case "encrypt":
        guard !operands.isEmpty else { usage() }
        var recipients: [AgeRecipient] = []
        for text in operands { recipients.append(try AgeRecipient(parsing: text)) }
        let file = try AgeFile.encrypt(readAll(0), to: recipients, armored: armored)
        file.withUnsafeBytes { writeAll($0) }
    case "decrypt-passphrase":
        let maximum = operands.first.flatMap { Int($0) } ?? 22
        let file = readAll(0).withUnsafeBytes { Array($0) }
        let plain = try AgeFile.decrypt(file, passphrase: passphrase(), maximumWorkFactor: maximum)
        plain.withUnsafeBytes { writeAll($0) }
    case "decrypt":
        guard operands.count == 1 else { usage() }
        let fd = open(operands[operands.startIndex], O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { fail("cannot open the key file", status: 2) }
        let identities = try AgeIdentities(parsingKeyFile: readAll(fd))
        close(fd)
        let file = readAll(0).withUnsafeBytes { Array($0) }
        let plain = try AgeFile.decrypt(file, identities: identities)
        plain.withUnsafeBytes { writeAll($0) }
    case "requirement":
        switch AgeFile.requirement(of: readAll(0).withUnsafeBytes { Array($0) }) {
        case .passphrase: print("passphrase")
        case .identity: print("identity")
        case .unreadable(let error): print("unreadable: \(error)")
        case nil: print("none")
        }
    default:
        usage()
    }
}

func usage() -> Never {
    fail("usage: encrypt-passphrase N | encrypt RECIPIENT… | decrypt-passphrase [MAX] | decrypt KEY_FILE", status: 2)
}

do throws(AgeError) {
    try run(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail("\(error.kind): \(error.message)")
}
