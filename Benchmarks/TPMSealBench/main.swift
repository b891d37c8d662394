// Times sealing and unsealing a 32-byte key against the TPM named by LATCHKEY_TPM_TCTI (or /dev/tpmrm0).
// Run through Benchmarks/tpm_seal_bench.py, which starts a software TPM for it.
import Glibc
import KeySlots
import KeychainStore
import Posix
import TPMSealing

let samples = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 50 : 50
let sealing = KeySealing()
let key = try SecretBytes(copying: [UInt8](repeating: 0x5A, count: 32))
let pin = try SecretBytes(copying: Array("4711".utf8))

func milliseconds(_ body: () throws -> Void) rethrows -> Double {
    var begin = timespec()
    clock_gettime(CLOCK_MONOTONIC, &begin)
    try body()
    var end = timespec()
    clock_gettime(CLOCK_MONOTONIC, &end)
    return Double(end.tv_sec - begin.tv_sec) * 1000 + Double(end.tv_nsec - begin.tv_nsec) / 1_000_000
}

func tenths(_ value: Double) -> String {
    let rounded = Int((value * 10).rounded())
    return "\(rounded / 10).\(rounded % 10)"
}

func percentiles(_ values: [Double]) -> String {
    let sorted = values.sorted()
    let p50 = sorted[sorted.count / 2]
    let p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
    return "\(tenths(p50)) / \(tenths(p99))"
}

print("| variant | seal ms (p50 / p99) | unseal ms (p50 / p99) |")
print("|---|---:|---:|")
for (name, usesPIN, pcrs) in [("no PIN", false, [UInt8]()), ("PIN", true, []), ("PIN + PCR 7", true, [7])] {
    var seals: [Double] = []
    var unseals: [Double] = []
    for _ in 0..<samples {
        var sealed: SealedKey?
        seals.append(
            try milliseconds {
                sealed =
                    usesPIN ? try sealing.seal(key: key, pin: pin, pcrs: pcrs) : try sealing.seal(key: key, pcrs: pcrs)
            })
        guard let sealed else { continue }
        unseals.append(
            try milliseconds {
                _ = usesPIN ? try sealing.unseal(sealed, pin: pin) : try sealing.unseal(sealed)
            })
    }
    print("| \(name) | \(percentiles(seals)) | \(percentiles(unseals)) |")
}

// Unlocking a keychain file: its password slot (scrypt) against its tpm2 slot (unseal, then the slot's wrap).
var template = Array("/tmp/latchkey-slot-bench-XXXXXX".utf8CString)
guard let directory = mkdtemp(&template).map({ String(cString: $0) }) else { fatalError("mkdtemp failed") }
let path = directory + "/bench.keychain-db"
let password = Array("benchmark password".utf8)
let keychain = try Keychain.create(at: path, password: password)
_ = try TPMSlot.add(to: keychain, pin: nil, pcrs: [], sealing: sealing)
let slotPIN = try SharedSecret(copying: Array("4711".utf8))
_ = try TPMSlot.add(to: keychain, pin: slotPIN, pcrs: [], sealing: sealing)
let passwordSamples = min(samples, 20)
var byPassword: [Double] = []
var byTPM: [Double] = []
var byTPMWithPIN: [Double] = []
for _ in 0..<passwordSamples { byPassword.append(try milliseconds { _ = try keychain.unwrapKey(password: password) }) }
for _ in 0..<samples {
    byTPM.append(try milliseconds { _ = try TPMSlot.unwrapKey(keychain, pin: nil, sealing: sealing) })
    byTPMWithPIN.append(try milliseconds { _ = try TPMSlot.unwrapKey(keychain, pin: slotPIN, sealing: sealing) })
}
print("")
print("| unlock of a keychain file by | ms (p50 / p99) | samples |")
print("|---|---:|---:|")
print("| password slot (scrypt N=2^16, r=8, p=2) | \(percentiles(byPassword)) | \(passwordSamples) |")
print("| tpm2 slot, no PIN | \(percentiles(byTPM)) | \(samples) |")
print("| tpm2 slot, PIN | \(percentiles(byTPMWithPIN)) | \(samples) |")
Keychain.removeFiles(at: path)
rmdir(directory)
