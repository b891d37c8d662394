import CallerIdentity
import DBus
import Foundation
import Glibc
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import Pinentry
import Testing

@testable import SecretService

/// A caller the item does not trust is handed its secret only after the person allowed it through pinentry
/// (docs/threat-model.md, "Access lists"); the reply waits meanwhile, and other clients are served.
@Suite struct AccessPromptTests {
    static let itemInterface = "org.freedesktop.Secret.Item"

    /// A daemon identifying callers, a client ":1.7" (this test process) with a plain session, and an item
    /// that trusts only another program: the daemon, the session and the item's path.
    static func untrustedItem(answers: [String], label: String = "mail password") throws
        -> (inproc: InProcessDaemon, session: String, path: String)
    {
        let inproc = try InProcessDaemon(answers: answers, identifiesCallers: true)
        let session = try CallerAccessTests.introduce(":1.7", to: inproc)
        let path = try inproc.createItem(
            session: session, attributes: ["service": label], secret: "s3cret", label: label)
        try trustOnly(TrustedApplication(name: "/usr/bin/another-program", digest: nil), path: path, in: inproc)
        return (inproc, session, path)
    }

    /// Replaces the access list of the item at `path` with `application` alone.
    static func trustOnly(_ application: TrustedApplication, path: String, in inproc: InProcessDaemon) throws {
        guard case .item(let held, let reference)? = inproc.daemon.resolve(path) else {
            Issue.record("no item at \(path)")
            return
        }
        let query = ItemQuery(reference.itemClass, synchronizable: .any, references: [reference])
        let access = ItemAccess(trustedApplications: [application])
        try held.keychain.update(matching: query, with: ItemChanges(attributes: access.attributes))
    }

    /// `GetSecret` of `path` by `sender`: the reply now, or (nil) deferred, with the call.
    static func getSecret(_ path: String, session: String, sender: String = ":1.7", in inproc: InProcessDaemon)
        throws -> (reply: DBusMessage?, call: DBusMessage)
    {
        try inproc.send(path, itemInterface, "GetSecret", [.objectPath(session)], sender: sender)
    }

    /// The secret a `GetSecret` reply carries, as text.
    static func secretText(_ reply: DBusMessage?) throws -> String? {
        guard let reply, reply.kind == .methodReturn, case .structure(let fields)? = try reply.arguments().first,
            fields.count == 4, case .bytes(let value) = fields[2]
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// Waits (at most 30 s) for the replies to `calls`, delivering completed work; the replies, in the order of
    /// `calls` (nil: none came).
    static func awaitReplies(to calls: [DBusMessage], in inproc: InProcessDaemon) -> [DBusMessage?] {
        var replies: [UInt32: DBusMessage] = [:]
        let deadline = Date().addingTimeInterval(30)
        while replies.count < calls.count, Date() < deadline {
            var entry = pollfd(fd: inproc.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 100)
            for message in inproc.daemon.deliverCompletions() where message.kind != .signal {
                replies[message.replySerial] = message
            }
        }
        return calls.map { replies[$0.serial] }
    }

    /// The arguments the pinentry was sent with `command`, in order.
    static func arguments(of command: String, in inproc: InProcessDaemon) -> [String] {
        guard let text = try? String(contentsOfFile: inproc.pinentryLog, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                entry["command"] as? String == command
            else { return nil }
            return entry["argument"] as? String
        }
    }

    /// Deny, then Deny all: a confirmation of the same application's waiting among its questions is answered
    /// too, as its own Cancel would be (`errSecUserCanceled`), not as if nobody could be asked
    /// (`errSecInteractionNotAllowed`, before).
    @Test func denyAllAnswersTheApplicationsWaitingConfirmationAsDeclined() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["wait 1 cancel", "confirm"])
        let (now, read) = try Self.getSecret(path, session: session, in: inproc)
        #expect(now == nil)
        let (waiting, change) = try inproc.send(
            AccessPolicyChangeTests.login, Keychain1Interface.interface, "SetAccessPolicy", [.string("allow-all")],
            sender: ":1.7")
        #expect(waiting == nil, "the confirmation waits behind the access prompt")
        let replies = Self.awaitReplies(to: [read, change], in: inproc)
        #expect(replies[0]?.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(AccessPolicyChangeTests.errorStatus(replies[1]) == .userCanceled)
        #expect(Self.arguments(of: "SETOK", in: inproc).last == "Deny it too")
        #expect(Self.arguments(of: "CONFIRM", in: inproc).count == 2, "the confirmation itself never showed")
        #expect(try AccessPolicyChangeTests.status(inproc).accessPolicy == .prompt)
    }

    @Test func theCreatorReadsWithoutBeingAsked() throws {
        let inproc = try InProcessDaemon(identifiesCallers: true)
        let session = try CallerAccessTests.introduce(":1.7", to: inproc)
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        let (reply, _) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(reply) == "s3cret")
        #expect(Self.arguments(of: "CONFIRM", in: inproc).isEmpty)
    }

    @Test func denyIsAnAccessDeniedErrorAndThePromptNamesTheApplicationAndTheItem() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["cancel"])
        let (now, call) = try Self.getSecret(path, session: session, in: inproc)
        #expect(now == nil, "the reply waits for the prompt")
        let reply = try #require(inproc.awaitCompletion(of: call))
        #expect(reply.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        let description = try #require(Self.arguments(of: "SETDESC", in: inproc).first)
        #expect(description.contains(try CallerAccessTests.thisProcess().name))
        #expect(description.contains("mail password"))
        #expect(Self.arguments(of: "SETOK", in: inproc) == ["Allow once"])
        #expect(Self.arguments(of: "SETNOTOK", in: inproc) == ["Always allow"])
        #expect(Self.arguments(of: "SETCANCEL", in: inproc) == ["Deny"])
        // Nothing was added to the list.
        #expect(try CallerAccessTests.access(of: path, in: inproc).trustedApplications.count == 1)
    }

    @Test func allowOnceHandsTheSecretOverOnceAndAsksAgainNextTime() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["ok", "cancel"])
        let (_, call) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(inproc.awaitCompletion(of: call)) == "s3cret")
        #expect(try CallerAccessTests.access(of: path, in: inproc).trustedApplications.count == 1)
        let (now, again) = try Self.getSecret(path, session: session, in: inproc)
        #expect(now == nil)
        #expect(inproc.awaitCompletion(of: again)?.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(Self.arguments(of: "CONFIRM", in: inproc).count == 2)
    }

    @Test func alwaysAllowAddsTheApplicationToTheItemsList() throws {
        // The third button, then the explicit confirmation that follows it.
        let (inproc, session, path) = try Self.untrustedItem(answers: ["notok", "ok"])
        let (_, call) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(inproc.awaitCompletion(of: call)) == "s3cret")
        let access = try CallerAccessTests.access(of: path, in: inproc)
        #expect(access.trustedApplications.contains(try CallerAccessTests.thisProcess()))
        let (now, _) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(now) == "s3cret", "trusted now: answered at once")
        #expect(Self.arguments(of: "CONFIRM", in: inproc).count == 2)
    }

    /// GPG_ERR_NOT_CONFIRMED is the third button's answer and pinentry's catch-all: by itself it is Deny.
    @Test func notConfirmedWithoutTheConfirmationIsDeny() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["deny", "cancel"])
        let (_, call) = try Self.getSecret(path, session: session, in: inproc)
        #expect(inproc.awaitCompletion(of: call)?.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(
            try !CallerAccessTests.access(of: path, in: inproc).trustedApplications.contains(
                try CallerAccessTests.thisProcess()))
    }

    /// The description: warnings first, each field on one line with control and format characters replaced and
    /// its length bounded, the whole within pinentry's 1,000-byte line whatever the label.
    @Test func theDescriptionKeepsItsWarningFirstAndItsFieldsOnOneLineEach() throws {
        let head = "Bank\nAlways allow is safe\u{202E}exe.txt\u{2066}\u{200B}\u{0085}\u{2028}%"
        let label = head + String(repeating: "€", count: (4096 - head.utf8.count) / 3)
        let question = AccessQuestion(
            .read, who: "/usr/bin/tool\n(package trusted)", warnings: [.changed, .keychainCommand], labels: [label],
            keychain: "Login", offersAlways: true)
        let description = question.request.description
        let lines = description.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0].contains("CHANGED") && lines[1].contains("any program can run"))
        #expect(lines.count == 6, "two warnings, a blank line, who, the item, the keychain")
        #expect(lines[3].hasPrefix("/usr/bin/tool\u{FFFD}(package trusted)"))
        #expect(lines[4].hasPrefix("wants the secret of “Bank\u{FFFD}Always allow is safe\u{FFFD}exe.txt"))
        #expect(lines[4].hasSuffix("…”"))
        #expect(!description.unicodeScalars.contains { $0.properties.generalCategory == .format })
        #expect(!description.unicodeScalars.contains { $0.value >= 0x80 && $0.value < 0xA0 })
        let escaped = description.utf8.count + 2 * description.utf8.filter { $0 < 0x20 || $0 == 0x25 }.count
        #expect("SETDESC ".utf8.count + escaped < 1000)
        #expect(PromptText.field(String(repeating: "%", count: 300)).count == 66, "65 escaped % and …")
        // The question that gives Always allow repeats the warnings first.
        let always = try #require(question.request.followUp?.question)
        #expect(always.hasPrefix(lines[0] + "\n" + lines[1] + "\n\nAllow /usr/bin/tool"))
    }

    /// A change or deletion of many items names five of them, each bounded and on no line of its own, and says
    /// CHANGE or DELETE; the warnings still come first and the whole stays within pinentry's line; no Always
    /// allow is offered for a write.
    @Test(arguments: [AccessKind.change, .delete])
    func aBulkWriteQuestionKeepsItsWarningsAndItsBound(kind: AccessKind) {
        let label = "Mail\n\u{202E}" + String(repeating: "x", count: 4096)
        let question = AccessQuestion(
            kind, who: String(repeating: "/very/long/path", count: 100), warnings: [.changed, .runsAnything],
            labels: Array(repeating: label, count: 40), keychain: String(repeating: "k", count: 500),
            offersAlways: true)
        let description = question.request.description
        let lines = description.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0].contains("CHANGED") && lines[1].contains("any program can run"))
        #expect(lines[4].contains(kind.verb) && lines[4].contains("and 35 more items"))
        #expect(!description.unicodeScalars.contains { $0.properties.generalCategory == .format })
        let escaped = description.utf8.count + 2 * description.utf8.filter { $0 < 0x20 || $0 == 0x25 }.count
        #expect("SETDESC ".utf8.count + escaped < 1000)
        #expect(question.request.notOKLabel == nil && question.request.followUp == nil)
    }

    /// pinentry-gnome3's gcr prompt shows two buttons: Always allow is asked as a second question after Allow….
    @Test(arguments: [(["ok", "ok"], true), (["ok", "cancel"], false)])
    func alwaysAllowThroughAPinentryWithTwoButtons(answers: [String], always: Bool) throws {
        let inproc = try InProcessDaemon(
            answers: answers, identifiesCallers: true, pinentryEnvironment: ["SCRIPTED_PINENTRY_FLAVOR": "gnome3"])
        let session = try CallerAccessTests.introduce(":1.7", to: inproc)
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        try Self.trustOnly(TrustedApplication(name: "/usr/bin/another-program", digest: nil), path: path, in: inproc)
        let (_, call) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(inproc.awaitCompletion(of: call)) == "s3cret")
        let me = try CallerAccessTests.thisProcess()
        #expect(try CallerAccessTests.access(of: path, in: inproc).trustedApplications.contains(me) == always)
        let second = try #require(Self.arguments(of: "SETDESC", in: inproc).last)
        #expect(second.contains("every time") && second.contains(me.name) && second.contains("item"))
    }

    @Test func aChangedExecutableIsAskedAgainAndToldSo() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["ok"])
        let me = try CallerAccessTests.thisProcess()
        try Self.trustOnly(
            TrustedApplication(name: me.name, digest: String(repeating: "0", count: 64)), path: path, in: inproc)
        let (now, call) = try Self.getSecret(path, session: session, in: inproc)
        #expect(now == nil)
        #expect(try Self.secretText(inproc.awaitCompletion(of: call)) == "s3cret")
        #expect(Self.arguments(of: "SETDESC", in: inproc).first?.contains("CHANGED") == true)
    }

    @Test func allowAllAsksNothing() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: [])
        try #require(inproc.daemon.registry.login).keychain.setAccessPolicy(.allowAll)
        let (now, _) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(now) == "s3cret")
        #expect(Self.arguments(of: "CONFIRM", in: inproc).isEmpty)
    }

    @Test func withoutCallerIdentificationNothingIsAsked() throws {
        let inproc = try InProcessDaemon(answers: [], identifiesCallers: false)
        let session = try inproc.openPlainSession()
        let path = try inproc.createItem(session: session, attributes: ["service": "mail"], secret: "s3cret")
        try Self.trustOnly(TrustedApplication(name: "/usr/bin/another-program", digest: nil), path: path, in: inproc)
        let (now, _) = try Self.getSecret(path, session: session, in: inproc)
        #expect(try Self.secretText(now) == "s3cret")
    }

    @Test func anUnidentifiedCallerIsAskedAboutAndCannotBeTrustedForever() throws {
        let (inproc, _, path) = try Self.untrustedItem(answers: ["ok"])
        let session = try CallerAccessTests.introduce(":1.9", to: inproc, pid: 0)
        let (now, call) = try Self.getSecret(path, session: session, sender: ":1.9", in: inproc)
        #expect(now == nil)
        #expect(try Self.secretText(inproc.awaitCompletion(of: call)) == "s3cret")
        #expect(Self.arguments(of: "SETDESC", in: inproc).first?.contains("could not identify") == true)
        #expect(Self.arguments(of: "SETNOTOK", in: inproc).isEmpty, "no Always allow for a program without a name")
    }

    @Test func noWayToAskDeniesWithAClearError() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["exit"])
        let (_, call) = try Self.getSecret(path, session: session, in: inproc)
        let reply = try #require(inproc.awaitCompletion(of: call))
        #expect(reply.errorName == "org.freedesktop.DBus.Error.AccessDenied")
        let message = try reply.arguments().first?.text ?? ""
        #expect(message.contains("no way to ask"))
    }

    @Test func requestsOfTheSameApplicationForTheSameItemShareOnePrompt() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["ok", "cancel"])
        let other = try CallerAccessTests.introduce(":1.8", to: inproc)
        let (first, firstCall) = try Self.getSecret(path, session: session, in: inproc)
        let (second, secondCall) = try Self.getSecret(path, session: other, sender: ":1.8", in: inproc)
        #expect(first == nil && second == nil)
        let replies = Self.awaitReplies(to: [firstCall, secondCall], in: inproc)
        #expect(try replies.map(Self.secretText) == ["s3cret", "s3cret"])
        #expect(Self.arguments(of: "CONFIRM", in: inproc).count == 1)
    }

    @Test func aClientThatLeavesWithdrawsItsPromptAndOthersAreStillAsked() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["hang", "ok"])
        let other = try CallerAccessTests.introduce(":1.9", to: inproc, pid: 0)
        let (_, firstCall) = try Self.getSecret(path, session: session, in: inproc)
        let (_, otherCall) = try Self.getSecret(path, session: other, sender: ":1.9", in: inproc)
        #expect(inproc.daemon.registry.promptCount == 2, "an unidentified caller does not share another's prompt")
        // Once the first pinentry shows (and hangs), its client leaves.
        let deadline = Date().addingTimeInterval(20)
        while Self.arguments(of: "CONFIRM", in: inproc).isEmpty, Date() < deadline { usleep(20_000) }
        try inproc.leave(":1.7")
        // The hanging pinentry is ended (withdrawn: no reply for the client that left, where a prompt left to
        // time out would answer it); then the other client's prompt shows and is answered.
        var replies: [UInt32: DBusMessage] = [:]
        let giveUp = Date().addingTimeInterval(40)
        while replies[otherCall.serial] == nil, Date() < giveUp {
            var entry = pollfd(fd: inproc.daemon.registry.inbox.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 100)
            for message in inproc.daemon.deliverCompletions() where message.kind != .signal {
                replies[message.replySerial] = message
            }
        }
        #expect(try Self.secretText(replies[otherCall.serial]) == "s3cret")
        #expect(replies[firstCall.serial] == nil, "the prompt of the client that left was withdrawn, not answered")
        #expect(inproc.daemon.registry.promptCount == 0)
        #expect(inproc.daemon.accessTickets.isEmpty)
    }

    @Test func getSecretsAsksOncePerUntrustedItemAndLeavesDeniedOnesOut() throws {
        let (inproc, session, path) = try Self.untrustedItem(answers: ["ok", "cancel"], label: "first")
        let second = try inproc.createItem(
            session: session, attributes: ["service": "second"], secret: "other", label: "second")
        try Self.trustOnly(TrustedApplication(name: "/usr/bin/another-program", digest: nil), path: second, in: inproc)
        let (now, call) = try inproc.send(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "GetSecrets",
            [.objectPaths([path, second]), .objectPath(session)])
        #expect(now == nil)
        let reply = try #require(inproc.awaitCompletion(of: call))
        guard case .dictionary(_, _, let entries)? = try reply.arguments().first else {
            Issue.record("GetSecrets replies a{o(oayays)}: \(reply.errorName ?? "")")
            return
        }
        #expect(entries.map(\.key) == [.objectPath(path)])
        #expect(Self.arguments(of: "CONFIRM", in: inproc).count == 2)
    }

    @Test func keychain1SearchForDataIsAskedAboutAndADenyIsUserCanceled() throws {
        let (inproc, _, _) = try Self.untrustedItem(answers: ["cancel", "ok"])
        let query = Keychain1Interface.encode(
            ItemQuery(.genericPassword, attributes: [.service: .string("mail password")], returning: [.data]))
        let search: () throws -> (DBusMessage?, DBusMessage) = {
            try inproc.send(
                Keychain1Interface.path(collection: "login"), Keychain1Interface.interface, "Search", [query])
        }
        let (now, call) = try search()
        #expect(now == nil)
        let denied = try #require(inproc.awaitCompletion(of: call))
        #expect(denied.errorName == Keychain1Interface.statusError)
        #expect(try denied.arguments().first?.text?.hasPrefix("-128 ") == true, "errSecUserCanceled")
        let (_, again) = try search()
        #expect(inproc.awaitCompletion(of: again)?.kind == .methodReturn)
        // Without the data, nothing is asked.
        let attributesOnly = Keychain1Interface.encode(
            ItemQuery(.genericPassword, attributes: [.service: .string("mail password")], returning: [.attributes]))
        let (listing, _) = try inproc.send(
            Keychain1Interface.path(collection: "login"), Keychain1Interface.interface, "Search", [attributesOnly])
        #expect(listing?.kind == .methodReturn)
        #expect(Self.arguments(of: "CONFIRM", in: inproc).count == 2)
    }

    @Test func aClientWhosePidNowRunsAnotherProcessIsNotTrusted() throws {
        let inproc = try InProcessDaemon(answers: ["cancel"], identifiesCallers: true)
        var child: pid_t = 0
        let arguments = [strdup("/bin/sleep"), strdup("60"), nil]
        defer { for pointer in arguments { free(pointer) } }
        try #require(posix_spawn(&child, "/bin/sleep", nil, nil, arguments, environ) == 0)
        var reaped = false
        defer {
            if !reaped {
                kill(child, SIGKILL)
                waitpid(child, nil, 0)
            }
        }
        // The client is the child: the item it creates trusts /bin/sleep, and it reads it without a prompt.
        let session = try CallerAccessTests.introduce(":1.30", to: inproc, pid: child)
        let path = try inproc.createItem(
            session: session, attributes: ["service": "x"], secret: "s3cret", sender: ":1.30")
        #expect(
            try Self.secretText(Self.getSecret(path, session: session, sender: ":1.30", in: inproc).reply) == "s3cret")
        // Its process ends (its pid free for another program) while the connection stays: not trusted.
        kill(child, SIGKILL)
        waitpid(child, nil, 0)
        reaped = true
        let (now, call) = try Self.getSecret(path, session: session, sender: ":1.30", in: inproc)
        #expect(now == nil)
        #expect(inproc.awaitCompletion(of: call)?.errorName == "org.freedesktop.DBus.Error.AccessDenied")
    }
}
