// swift-tools-version: 6.2
import PackageDescription

/// The package's own directory, for linker inputs that must be given by path.
let packageDirectory = String(#filePath.dropLast("/Package.swift".count))

/// `scripts/test` sets LATCHKEY_WARNINGS_AS_ERRORS=1: every warning fails the build, except in the
/// verbatim Apple samples (SecurityTests), which carry the warnings Apple's text has.
let warningsAsErrors = Context.environment["LATCHKEY_WARNINGS_AS_ERRORS"] == "1"

/// How latchkeyd is linked, to keep its resident memory small (docs/robustness.md, "Memory of a prompt storm"):
/// with lld (shipped with the Swift toolchain), its relative relocations packed (`DT_RELR`: 8 KiB where gold
/// wrote 1 MiB of `Elf64_Rela` that the loader reads at every start), and the functions it runs put first in
/// its text, in the order of packaging/latchkeyd.order (`scripts/hot-functions` writes it), so that the pages
/// of code it runs are few and together rather than spread over the 11 MiB of the statically linked runtime.
let daemonLinkFlags = [
    "-use-ld=lld",
    "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
    "-Xlinker", "--symbol-ordering-file=\(packageDirectory)/packaging/latchkeyd.order",
    "-Xlinker", "--no-warn-symbol-ordering",
]

let package = Package(
    name: "Latchkey",
    products: [
        .library(name: "Security", targets: ["Security"]),
        .library(name: "KeychainStore", targets: ["KeychainStore"]),
        .executable(name: "latchkey-bench", targets: ["latchkey-bench"]),
        .executable(name: "latchkeyd", targets: ["latchkeyd"]),
        .executable(name: "latchkey", targets: ["latchkey"]),
        // Installed as pam_latchkey.so; build it with `swift build -c release --product pam_latchkey`.
        .library(name: "pam_latchkey", type: .dynamic, targets: ["pam_latchkey"]),
        // Not an API: the modules the Fuzz/ package's libFuzzer harnesses import (`@testable`, to reach their
        // `package` symbols). Nothing builds it unless asked; see docs/robustness.md.
        .library(
            name: "LatchkeyFuzzSurface",
            targets: [
                "SecretService", "KeychainRegistry", "GnomeKeyringImport", "KWalletImport", "Pinentry", "LoginControl",
                "AgeEncryption", "CredentialExchange", "KeySlots",
            ]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CDBus", pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(
            name: "CPAM", pkgConfig: "pam",
            providers: [.apt(["libpam0g-dev"])]),
        // tpm2-tss: ESAPI (sessions, sealing), the TCTI loader, marshalling (MU) and error texts (RC).
        .systemLibrary(
            name: "CTSS2", pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]),
        // libfido2: FIDO2 security keys (CTAP2 over hidraw, or whole commands over the unix: test seam).
        .systemLibrary(
            name: "CFIDO2", pkgConfig: "libfido2",
            providers: [.apt(["libfido2-dev"])]),
        .target(name: "KeychainCore"),
        // Glibc only: deadlines, EINTR-safe calls, errno-carrying errors, wiping, threads.
        // prctl for Posix (variadic in C); no library to link.
        .systemLibrary(name: "CLinux"),
        .target(name: "Posix", dependencies: ["CLinux"]),
        .target(name: "LoginControl", dependencies: ["Posix"]),
        // The PAM module: Glibc and libpam only, the Swift stdlib linked in,
        // only pam_sm_* exported, never unloaded (libpam dlcloses modules).
        .target(
            name: "pam_latchkey",
            dependencies: ["CPAM", "LoginControl", "Posix"],
            exclude: ["exports.map"],
            swiftSettings: [
                .unsafeFlags([
                    "-Xfrontend", "-disable-implicit-concurrency-module-import",
                    "-Xfrontend", "-disable-implicit-string-processing-module-import",
                ])
            ],
            linkerSettings: [
                .unsafeFlags([
                    "-static-stdlib",
                    "-Xlinker", "--version-script=\(packageDirectory)/Sources/pam_latchkey/exports.map",
                    "-Xlinker", "-z", "-Xlinker", "nodelete",
                    "-Xlinker", "-z", "-Xlinker", "now",
                ])
            ]),
        .target(name: "KeychainStore", dependencies: ["KeychainCore", "CSQLite", "COpenSSL", "Posix"]),
        // Reads gnome-keyring's keyring files and writes them into a keychain.
        .target(name: "GnomeKeyringImport", dependencies: ["KeychainCore", "KeychainStore", "COpenSSL", "Posix"]),
        // KWallet's values with no bus and no file in them: QDataStream, the entry scheme, map and stream forms.
        .target(name: "KWalletFormat", dependencies: ["COpenSSL", "Posix"]),
        // The age file format v1 (passphrase and X25519 recipients, binary and armored) over OpenSSL: exports' container.
        .target(name: "AgeEncryption", dependencies: ["COpenSSL", "Posix"]),
        // Export and import of keychains: the CXF file of a keychain's items, age-encrypted, and a file's items added
        // in one transaction (the daemon's Keychain1 Export/Import and the latchkey command on a file alike).
        .target(
            name: "KeychainExchange",
            dependencies: [
                "AgeEncryption", "CredentialExchange", "Keychain1", "KeychainCore", "KeychainStore", "Posix",
            ]),
        // Reads KWallet's .kwl wallet files and writes them into a keychain; the import at login.
        .target(
            name: "KWalletImport",
            dependencies: ["KWalletFormat", "GnomeKeyringImport", "KeychainCore", "KeychainStore", "COpenSSL", "Posix"]),
        // The Credential Exchange Format (CXF 1.0 JSON) and the password CSV exports of other programs, with no
        // I/O: a keychain's items to a document in secret memory and back.
        .target(name: "CredentialExchange", dependencies: ["KeychainCore", "KeychainStore", "Posix"]),
        .target(
            name: "KeychainClient", dependencies: ["KeychainCore", "KeychainStore", "Keychain1", "DBus", "Posix"]),
        .target(name: "Security", dependencies: ["KeychainCore", "KeychainStore", "KeychainClient", "CallerIdentity"]),
        .target(name: "DBus", dependencies: ["CDBus"]),
        // The daemon's keychains with no bus in them: the Secret Service and the control socket are adapters over it.
        .target(
            name: "KeychainRegistry",
            dependencies: [
                "KeychainCore", "KeychainStore", "GnomeKeyringImport", "KWalletImport", "Pinentry", "Posix", "KeySlots",
                "TPMSealing", "LoginControl", "Fingerprint", "SecurityKeys",
            ]),
        // Keychain1's names and encoding, and the session key exchange and cipher (daemon and client).
        .target(name: "Keychain1", dependencies: ["KeychainCore", "DBus", "COpenSSL", "Posix"]),
        .target(name: "Pinentry", dependencies: ["Posix"]),
        // Seals a 32-byte key to the machine's TPM 2.0 (optional PIN and PCR policy) and unseals it.
        .target(name: "TPMSealing", dependencies: ["CTSS2", "COpenSSL", "Posix"]),
        // Talking to FIDO2 security keys through libfido2: enumeration, a credential with hmac-secret, its
        // output, the touch-free probe; and the unix:PATH seam that carries CTAP commands over a socket. No keychain.
        .target(name: "SecurityKeys", dependencies: ["CFIDO2", "Posix"]),
        // Key slots that unlock a keychain without its password: tpm2 (through TPMSealing), fido2 (through
        // SecurityKeys) and the recovery key.
        .target(
            name: "KeySlots",
            dependencies: ["KeychainCore", "KeychainStore", "TPMSealing", "SecurityKeys", "COpenSSL", "Posix"]),
        // Who is calling: a process's program (executable, interpreter and script, Flatpak app id) from /proc.
        .target(name: "CallerIdentity", dependencies: ["COpenSSL", "Posix"]),
        // Fingerprint checks for biometry-protected items (kSecAccessControlBiometry*): the reader as a protocol.
        .target(name: "Fingerprint", dependencies: ["DBus", "COpenSSL", "Posix"]),
        // Whether a caller may use an item, or do what is the person's to decide: the access decision as a value
        // (allowed, ask, denied), bus-free, for every face of the daemon.
        .target(
            name: "AccessControl",
            dependencies: ["KeychainCore", "KeychainStore", "KeychainRegistry", "CallerIdentity"]),
        .target(
            name: "SecretService",
            dependencies: [
                "KeychainCore", "KeychainStore", "KeychainRegistry", "Keychain1", "DBus", "Posix",
                "COpenSSL", "CallerIdentity", "AccessControl", "KWalletFormat", "KeychainExchange", "AgeEncryption",
                "CredentialExchange",
            ]),
        // latchkeyd's serving loop (poll, termination signals) and its watches of logind and the screen saver,
        // over the bus face and the control socket: SecretService does no I/O of its own.
        .target(
            name: "DaemonLoop",
            dependencies: ["SecretService", "KeychainRegistry", "KeychainCore", "DBus", "LoginControl", "Posix"]),
        // latchkeyd's first act at image start, before Swift's runtime: not dumpable, no core
        // (docs/threat-model.md, "scrypt in a helper process").
        .target(name: "CStartHardening"),
        .executableTarget(
            name: "latchkeyd",
            dependencies: [
                "CStartHardening",
                "DaemonLoop", "SecretService", "KeychainRegistry", "KeychainStore", "KeychainCore",
                "GnomeKeyringImport", "KWalletImport",
                "LoginControl", "Pinentry", "Posix", "DBus", "TPMSealing", "KeySlots", "Fingerprint",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: [.unsafeFlags(daemonLinkFlags)]),
        .executableTarget(
            name: "latchkey",
            dependencies: [
                "KeychainClient", "Keychain1", "KeychainStore", "KeychainCore", "Pinentry", "Posix",
                "GnomeKeyringImport", "KWalletImport", "CallerIdentity", "KeySlots", "TPMSealing",
                "KeychainExchange", "AgeEncryption", "CredentialExchange", "SecurityKeys",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(
            name: "latchkey-bench",
            dependencies: [
                "KeychainStore", "KeychainCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(name: "latchkey-example", dependencies: ["Security"]),
        .executableTarget(
            name: "tpm-seal-bench", dependencies: ["TPMSealing", "KeySlots", "KeychainStore", "Posix"],
            path: "Benchmarks/TPMSealBench"),
        .executableTarget(name: "secitem-client", dependencies: ["Security"], path: "Tests/SecItemClient"),
        // Drives FprintdFingerprints for the fprintd tests (Tests/Integration/test_fingerprint.py).
        .executableTarget(
            name: "fingerprint-check", dependencies: ["Fingerprint"], path: "Tests/FingerprintCheck"),
        // AgeFile between stdin and stdout, for the interoperability tests with the real age (test_age_interop.py).
        .executableTarget(name: "age-file-tool", dependencies: ["AgeEncryption", "Posix"], path: "Tests/AgeFileTool"),
        .executableTarget(
            name: "keychain-writer", dependencies: ["KeychainStore", "KeychainCore"],
            path: "Tests/KeychainWriter"),
        // Where this process's pages are mapped and how (`/proc/self/smaps`), for the tests of secret memory.
        .target(name: "ProcessMemoryMaps", path: "Tests/ProcessMemoryMaps"),
        .testTarget(name: "KeychainCoreTests", dependencies: ["KeychainCore"]),
        .testTarget(
            name: "KeychainStoreTests",
            dependencies: [
                "KeychainStore", "KeychainCore", "CSQLite", "keychain-writer", "ProcessMemoryMaps", "Posix",
            ],
            exclude: ["Fixtures"]),
        .testTarget(name: "SecurityTests", dependencies: ["Security", "CallerIdentity"]),
        .testTarget(name: "DBusTests", dependencies: ["DBus"]),
        .testTarget(name: "FingerprintTests", dependencies: ["Fingerprint"]),
        .testTarget(name: "PinentryTests", dependencies: ["Pinentry", "Posix"]),
        .testTarget(name: "LoginControlTests", dependencies: ["LoginControl", "Posix"]),
        .testTarget(
            name: "SecretServiceTests",
            dependencies: [
                "SecretService", "KeychainRegistry", "KeychainStore", "KeychainCore", "Keychain1", "DBus", "Pinentry",
                "Posix", "CallerIdentity", "ProcessMemoryMaps", "AccessControl", "KWalletFormat", "Fingerprint",
            ]),
        .testTarget(
            name: "DaemonLoopTests",
            dependencies: [
                "DaemonLoop", "SecretService", "KeychainRegistry", "KeychainStore", "KeychainCore", "DBus", "Pinentry",
                "Posix",
            ]),
        .testTarget(name: "PosixTests", dependencies: ["Posix", "ProcessMemoryMaps"]),
        .testTarget(name: "TPMSealingTests", dependencies: ["TPMSealing", "Posix"]),
        .testTarget(name: "SecurityKeysTests", dependencies: ["SecurityKeys", "Posix"]),
        .testTarget(
            name: "KeySlotsTests",
            dependencies: ["KeySlots", "KeychainStore", "KeychainCore", "TPMSealing", "Posix", "CSQLite"]),
        .testTarget(name: "CallerIdentityTests", dependencies: ["CallerIdentity"]),
        .testTarget(
            name: "AccessControlTests",
            dependencies: [
                "AccessControl", "KeychainRegistry", "KeychainStore", "KeychainCore", "CallerIdentity", "Pinentry",
            ]),
        .testTarget(
            name: "GnomeKeyringImportTests",
            dependencies: ["GnomeKeyringImport", "KeychainStore", "KeychainCore"],
            exclude: ["Fixtures"]),
        .testTarget(name: "KWalletFormatTests", dependencies: ["KWalletFormat", "Posix"]),
        .testTarget(
            name: "AgeEncryptionTests", dependencies: ["AgeEncryption", "COpenSSL", "Posix"]),
        .testTarget(
            name: "CredentialExchangeTests",
            dependencies: ["CredentialExchange", "KeychainStore", "KeychainCore", "Posix"]),
        .testTarget(
            name: "KWalletImportTests",
            dependencies: ["KWalletImport", "KWalletFormat", "KeychainStore", "KeychainCore", "COpenSSL", "Posix"],
            exclude: ["Fixtures"]),
    ]
)

for target in package.targets where warningsAsErrors && target.type != .system && target.name != "SecurityTests" {
    target.swiftSettings = (target.swiftSettings ?? []) + [.treatAllWarnings(as: .error)]
}

// A release build puts each function in a section of its own, so that the link drops the ones nothing calls
// (SwiftPM links with --gc-sections) and can place the ones latchkeyd runs together (`daemonLinkFlags`).
for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .unsafeFlags(["-Xfrontend", "-function-sections"], .when(configuration: .release))
        ]
}
