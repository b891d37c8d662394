import ArgumentParser
import FoundationEssentials
import Glibc
import KeySlots
import KeychainCore
import KeychainStore
import Pinentry
import Posix
import TPMSealing

/// Secrets a slot verb reads: from standard input (`--stdin`: one per line, in the order the verb asks for them),
/// else on the terminal, else through pinentry.
final class SlotSecrets {
    private var lines: [[UInt8]]?

    init(stdin: Bool) throws(KeychainError) {
        lines = stdin ? try SecretInput.linesFromStandardInput() : nil
    }

    deinit {
        guard var remaining = lines else { return }
        lines = nil
        for index in remaining.indices { wipeBytes(&remaining[index]) }
    }

    /// The next secret: a line of standard input, or asked with `prompt` (terminal) or `request` (pinentry).
    func next(prompt: String, request: PinentryRequest) throws(KeychainError) -> [UInt8] {
        if lines != nil {
            guard let line = lines?.first else {
                throw KeychainError.param("standard input holds fewer lines than this verb needs")
            }
            lines?.removeFirst()
            return line
        }
        if let typed = try SecretInput.fromTerminal(prompt: prompt) { return typed }
        let outcome: PinentryOutcome
        do throws(PinentryError) {
            outcome = try PinentryWait.fromEnvironment { (pinentry) throws(PinentryError) in
                try pinentry.askPassword(request)
            }
        } catch {
            throw KeychainError(.interactionNotAllowed, "no terminal to ask on, and \(error.description)")
        }
        guard case .password(let secret) = outcome else {
            throw KeychainError(.userCanceled, "the prompt was dismissed")
        }
        return secret.withUnsafeBytes { [UInt8]($0) }
    }

    /// A new PIN: one line of standard input, or typed twice on the terminal until both agree.
    func newPIN() throws(KeychainError) -> [UInt8] {
        if lines != nil {
            return try next(prompt: "", request: PinentryRequest(title: "", description: "", prompt: "", error: nil))
        }
        for _ in 0..<3 {
            guard var first = try SecretInput.fromTerminal(prompt: "new PIN for the tpm2 slot: "),
                var second = try SecretInput.fromTerminal(prompt: "retype the PIN: ")
            else { throw KeychainError(.interactionNotAllowed, "no terminal to ask the PIN on: use --stdin") }
            defer { wipeBytes(&second) }
            if first == second, !first.isEmpty { return first }
            wipeBytes(&first)
            StandardError.write("latchkey: the PINs are empty or do not match; try again")
        }
        throw KeychainError.param("the PINs did not match")
    }
}

/// Opens a keychain file for a slot verb and unlocks it in this process: with its password, or its recovery key
/// (`recovery`, or when it has no password slot).
func openSlotsKeychain(_ argument: String?, secrets: SlotSecrets, recovery: Bool) throws(KeychainError) -> Keychain {
    let path = KeychainPaths.resolve(argument)
    let keychain: Keychain
    do throws(KeychainError) {
        keychain = try Keychain(opening: path)
    } catch  where error.status == .noSuchKeychain {
        throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
    }
    guard keychain.parentIdentifier == nil else {
        throw KeychainError.param("\(path) opens with the login keychain's key: its slots are the login keychain's")
    }
    let hasPassword = try keychain.keySlots().slots.contains { $0.kind == .password }
    if recovery || !hasPassword {
        var text = try secrets.next(
            prompt: "recovery key for \(path): ",
            request: PinentryRequest(
                title: "Unlock keychain", description: "latchkey needs the recovery key of the keychain\n\(path)",
                prompt: "Recovery key:", error: nil))
        defer { wipeBytes(&text) }
        keychain.unlock(with: try unwrapWithRecoveryKey(keychain, text))
    } else {
        var given = try secrets.takeIfStandardInput()
        defer { wipeBytes(&given) }
        if !given.isEmpty {
            try keychain.unlock(password: given)
        } else {
            try KeychainTarget.askUntilUnlocked(path) { (password) throws(KeychainError) in
                try keychain.unlock(password: password)
            }
        }
    }
    return keychain
}

/// The keychain key from the recovery slot `text` opens; a typo or a wrong key is `errSecAuthFailed`.
func unwrapWithRecoveryKey(_ keychain: Keychain, _ text: [UInt8]) throws(KeychainError) -> UnwrappedKeychainKey {
    do throws(KeySlotError) {
        return try RecoverySlot.unwrapKey(keychain, recoveryText: text)
    } catch {
        throw error.keychainError
    }
}

extension SlotSecrets {
    /// The next line of standard input when reading it (empty otherwise: then the caller asks).
    func takeIfStandardInput() throws(KeychainError) -> [UInt8] {
        guard lines != nil else { return [] }
        let line = try next(prompt: "", request: PinentryRequest(title: "", description: "", prompt: "", error: nil))
        guard !line.isEmpty else { throw KeychainError.param("the password on standard input is empty") }
        return line
    }
}

/// The PCR list of `--pcrs`: indices 0–23 separated by commas.
func parsePCRs(_ text: String?) throws(KeychainError) -> [UInt8] {
    guard let text, !text.isEmpty else { return [] }
    var pcrs: [UInt8] = []
    for part in text.split(separator: ",", omittingEmptySubsequences: false) {
        guard let index = UInt8(String(part.filter { $0 != " " })), index < 24 else {
            throw KeychainError.param("--pcrs takes PCR indices from 0 to 23 separated by commas, not \"\(text)\"")
        }
        pcrs.append(index)
    }
    return Array(Set(pcrs)).sorted()
}

/// A slot as one line of `list-slots`.
func describe(_ slot: KeySlot) -> String {
    var words = ["\(slot.id)", slot.kind.name]
    if let sealed = TPMSlot.sealedKey(of: slot) {
        words.append(sealed.needsPIN ? "pin" : "no-pin")
        words.append(sealed.pcrs.isEmpty ? "no-pcrs" : "pcrs=" + sealed.pcrs.map(String.init).joined(separator: ","))
    }
    if let parameters = Fido2Slot.parameters(of: slot) {
        words.append(parameters.usesPIN ? "pin" : "no-pin")
        words.append("aaguid=\(parameters.aaguidText)")
        words.append("product=\"\(parameters.product)\"")
    }
    if slot.created > 0 { words.append("created=\(isoDate(slot.created))") }
    return words.joined(separator: " ")
}

/// A slot as a JSON object of `list-slots --json`.
func jsonDescription(_ slot: KeySlot) -> JSONValue {
    var object: [String: JSONValue] = ["id": .number(Int64(slot.id)), "type": .string(slot.kind.name)]
    if let sealed = TPMSlot.sealedKey(of: slot) {
        object["pin"] = .bool(sealed.needsPIN)
        object["pcrs"] = .array(sealed.pcrs.map { .number(Int64($0)) })
    }
    if let parameters = Fido2Slot.parameters(of: slot) {
        object["pin"] = .bool(parameters.usesPIN)
        object["aaguid"] = .string(parameters.aaguidText)
        object["product"] = .string(parameters.product)
    }
    object["created"] = slot.created > 0 ? .string(isoDate(slot.created)) : .null
    return .object(object)
}

/// The check as a word and, when altered, why.
func describe(_ check: KeySlotTableCheck) -> (word: String, reason: String?) {
    switch check {
    case .unverified: ("unverified", nil)
    case .verified: ("verified", nil)
    case .altered(let reason): ("altered", reason)
    }
}

private func isoDate(_ seconds: Int64) -> String {
    Date(timeIntervalSince1970: Double(seconds)).formatted(.iso8601)
}

struct AddSlot: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a key slot (tpm2, fido2 or recovery) to a keychain file.",
        usage: "latchkey add-slot <type> [<options>] [<keychain>]",
        discussion: """
            The keychain is unlocked first with its password (or, with --recovery, its recovery key).

            tpm2: a random key sealed by this machine's TPM 2.0 (LATCHKEY_TPM_TCTI, default device:/dev/tpmrm0) wraps \
            the keychain key; --pin asks for a PIN the TPM checks (with its dictionary-attack lockout), --pcrs binds \
            it to PCR values of the SHA-256 bank (7 is the usual choice; see docs/key-slots.md).

            fido2: a FIDO2 security key with the hmac-secret extension (YubiKey 5, SoloKey, Nitrokey 3…) makes a \
            credential for this keychain; its secret for a random salt wraps the keychain key. Touch the key twice \
            (once for the credential, once for its secret). --pin: the key's own PIN is part of the slot, asked at \
            enrollment and at every unlock (fixed for the slot's life). One slot per key: a key that holds one of \
            this keychain's slots already is refused. --device names the key when several are plugged in \
            (LATCHKEY_FIDO2_DEVICE names them for every command, comma-separated).

            recovery: prints a new recovery key once, on the terminal (or standard output with --stdout), and asks to \
            type it back before saving.

            With --stdin, standard input holds the password, then the PIN (tpm2: the new PIN; fido2: the key's PIN).

            Examples:
              latchkey add-slot tpm2
              latchkey add-slot tpm2 --pin --pcrs 7
              latchkey add-slot fido2 --pin
              latchkey add-slot recovery
            """)

    @Argument(help: "tpm2, fido2 or recovery.")
    var type: String

    @Flag(help: "tpm2: ask for a PIN that unsealing needs. fido2: the security key's own PIN is asked at each unlock.")
    var pin = false

    @Option(
        help: ArgumentHelp(
            "fido2: the security key to enroll (a hidraw device or unix:PATH); default the one plugged in.",
            valueName: "path"))
    var device: String?

    @Option(help: ArgumentHelp("tpm2: PCR indices to bind to, e.g. 7 or 0,2,7.", valueName: "list"))
    var pcrs: String?

    @Flag(help: "recovery: print the recovery key on standard output, with no typing back.")
    var stdout = false

    @Flag(help: "Unlock with the recovery key instead of the password.")
    var recovery = false

    @Flag(help: "Read the secrets from standard input, one per line: the password (or recovery key), then the PIN.")
    var stdin = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            guard let kind = KeySlotKind(name: type), kind != .password else {
                throw KeychainError.param("add-slot takes tpm2, fido2 or recovery, not \"\(type)\"")
            }
            guard kind == .tpm2 || pcrs == nil else { throw KeychainError.param("--pcrs is for a tpm2 slot") }
            guard kind == .tpm2 || kind == .fido2 || !pin else {
                throw KeychainError.param("--pin is for a tpm2 or fido2 slot")
            }
            guard kind == .fido2 || device == nil else { throw KeychainError.param("--device is for a fido2 slot") }
            let pcrList = try parsePCRs(pcrs)
            if kind == .recovery, !stdout, isatty(STDOUT_FILENO) == 0 {
                throw KeychainError.param(
                    "the recovery key is shown on a terminal only; give --stdout to print it on standard output")
            }
            let secrets = try SlotSecrets(stdin: stdin)
            let file = try openSlotsKeychain(keychain, secrets: secrets, recovery: recovery)
            defer { file.lock() }
            let slot: KeySlot
            switch kind {
            case .tpm2:
                var pinBytes = pin ? try secrets.newPIN() : []
                defer { wipeBytes(&pinBytes) }
                let pinSecret =
                    pin
                    ? try KeychainError.allocating { () throws(SecretMemoryError) in
                        try SharedSecret(copying: pinBytes)
                    } : nil
                do throws(KeySlotError) {
                    slot = try TPMSlot.add(to: file, pin: pinSecret, pcrs: pcrList)
                } catch {
                    throw error.keychainError
                }
            case .fido2:
                slot = try addFido2Slot(file, device: try securityKeyToEnroll(device), pin: pin, secrets: secrets)
            default:
                slot = try addRecoverySlot(file)
            }
            StandardError.write("latchkey: added slot \(describe(slot)) to \(file.path)")
        }
    }

    /// Shows a new recovery key, has it typed back on a terminal, then saves the slot.
    private func addRecoverySlot(_ file: Keychain) throws(KeychainError) -> KeySlot {
        var recoveryKey: RecoveryKey
        do throws(RecoveryKeyError) {
            recoveryKey = try RecoveryKey.generate()
        } catch {
            throw KeychainError(.internalComponent, error.description)
        }
        defer { recoveryKey.wipe() }
        var text = recoveryKey.formatted()
        defer { wipeBytes(&text) }
        if stdout {
            writeLine(STDOUT_FILENO, text)
        } else {
            writeLine(
                STDOUT_FILENO,
                Array(
                    "Recovery key for \(file.path) (shown once; write it down and keep it apart from this machine):"
                        .utf8))
            writeLine(STDOUT_FILENO, text)
            var typed = try SecretInput.fromTerminal(prompt: "type the recovery key back: ", echo: true) ?? []
            defer { wipeBytes(&typed) }
            var parsed: RecoveryKey
            do throws(RecoveryKeyError) {
                parsed = try RecoveryKey(parsing: typed)
            } catch {
                throw KeychainError.param("\(error.description); no slot was added")
            }
            defer { parsed.wipe() }
            guard parsed.secret == recoveryKey.secret else {
                throw KeychainError.param("that is not the recovery key shown; no slot was added")
            }
        }
        do throws(KeySlotError) {
            return try RecoverySlot.add(to: file, recoveryKey: recoveryKey)
        } catch {
            throw error.keychainError
        }
    }

    private func writeLine(_ fd: Int32, _ bytes: [UInt8]) {
        var line = bytes + [UInt8(ascii: "\n")]
        defer { wipeBytes(&line) }
        _ = Glibc.write(fd, &line, line.count)
    }
}

struct ListSlots: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a keychain's key slots.",
        discussion: """
            One line per slot: id, type, for tpm2 whether it needs a PIN and its PCRs, for fido2 whether it needs the \
            key's PIN and the key's AAGUID and product name. The table is read from the \
            file without unlocking, so it is marked "unverified"; with --unlock the keychain is unlocked first and the \
            table checked under its key ("verified", or "altered" with why).

            Examples:
              latchkey list-slots
              latchkey list-slots --json --unlock work
            """)

    @Flag(
        help:
            ArgumentHelp(
                "Print {\"path\", \"check\", \"reason\", \"slots\": [{\"id\", \"type\", \"pin\", \"pcrs\", \"aaguid\","
                    + " \"product\", \"created\"}]}."))
    var json = false

    @Flag(help: "Unlock the keychain (password prompt) to check the table under its key.")
    var unlock = false

    @Flag(help: "With --unlock: read the password from standard input.")
    var stdin = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let file: Keychain
            if unlock {
                file = try openSlotsKeychain(keychain, secrets: try SlotSecrets(stdin: stdin), recovery: false)
            } else {
                let path = KeychainPaths.resolve(keychain)
                do throws(KeychainError) {
                    file = try Keychain(opening: path)
                } catch  where error.status == .noSuchKeychain {
                    throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
                }
            }
            defer { file.lock() }
            let (slots, check) = try file.keySlots()
            let (word, reason) = describe(check)
            if json {
                print(
                    JSONValue.object([
                        "path": .string(file.path), "check": .string(word),
                        "reason": reason.map { .string($0) } ?? .null,
                        "slots": .array(slots.map(jsonDescription)),
                    ]).text)
                return
            }
            for slot in slots { print(describe(slot)) }
            print("table: \(word)" + (reason.map { " (\($0))" } ?? ""))
        }
    }
}

struct RemoveSlot: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a key slot from a keychain file.",
        discussion: """
            The slot is named by its id (list-slots) or its type when the keychain has one slot of that type. The \
            keychain is unlocked first (password, or --recovery). The last password or recovery slot is never removed: \
            a tpm2 slot alone dies with its TPM, a fido2 slot with its security key.

            Examples:
              latchkey remove-slot tpm2
              latchkey remove-slot 2 work
              latchkey remove-slot fido2
            """)

    @Argument(help: "The slot's id, or password, tpm2, fido2 or recovery.")
    var slot: String

    @Flag(help: "Unlock with the recovery key instead of the password.")
    var recovery = false

    @Flag(help: "Read the password (or recovery key) from standard input.")
    var stdin = false

    @Argument(help: "The keychain; the default keychain if omitted.")
    var keychain: String?

    func run() throws {
        try reportingFailures { () throws(KeychainError) in
            let path = KeychainPaths.resolve(keychain)
            let slots: [KeySlot]
            do throws(KeychainError) {
                slots = try Keychain(opening: path).keySlots().slots
            } catch  where error.status == .noSuchKeychain {
                throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
            }
            let id: UInt8
            if let number = UInt8(slot) {
                guard slots.contains(where: { $0.id == number }) else {
                    throw KeychainError.param("\(path) has no slot \(number)")
                }
                id = number
            } else if let kind = KeySlotKind(name: slot) {
                let matching = slots.filter { $0.kind == kind }
                guard matching.count == 1, let only = matching.first else {
                    throw KeychainError.param(
                        "\(path) has \(matching.count) \(kind.name) slots; name the one to remove by its id")
                }
                id = only.id
            } else {
                throw KeychainError.param(
                    "remove-slot takes a slot id or password, tpm2, fido2 or recovery, not \"\(slot)\"")
            }
            let file = try openSlotsKeychain(keychain, secrets: try SlotSecrets(stdin: stdin), recovery: recovery)
            defer { file.lock() }
            try file.removeKeySlot(id: id)
            StandardError.write("latchkey: removed slot \(id) from \(file.path)")
        }
    }
}
